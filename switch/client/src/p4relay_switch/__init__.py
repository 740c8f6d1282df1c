"""p4relay-switch."""
