#!/usr/bin/env bash
# Server suite leftovers: the collector test's namespace and veth pairs.
ip link del p4rsc1 2>/dev/null || true
ip link del p4rsc2 2>/dev/null || true
ip netns del p4rsrvc 2>/dev/null || true
