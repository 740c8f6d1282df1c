"""p4relay-scenarios."""
