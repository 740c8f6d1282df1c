"""p4relay-server."""
