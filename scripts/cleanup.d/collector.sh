#!/usr/bin/env bash
# Collector suite leftovers: its namespace and veth pairs.
ip link del p4rcc1 2>/dev/null || true
ip link del p4rcc2 2>/dev/null || true
ip netns del p4rcolc 2>/dev/null || true
