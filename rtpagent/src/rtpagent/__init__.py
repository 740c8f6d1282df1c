"""p4relay-rtpagent."""
