#!/usr/bin/env bash
# Lint every language; `make lint` runs the same script.
exec scripts/lint.sh
