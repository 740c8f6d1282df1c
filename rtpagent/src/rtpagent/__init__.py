"""p4relay-rtpagent: RTPProxy control-protocol proxy that offloads calls to the switch."""

__version__ = "0.1.0"
