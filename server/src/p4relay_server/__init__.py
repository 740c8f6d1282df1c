"""p4relay-server: session audit, telemetry, MOS and live feed."""

__version__ = "0.1.0"
