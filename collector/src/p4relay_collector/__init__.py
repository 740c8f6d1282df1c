"""p4relay's switch telemetry collector: polls switches over BfRt, derives per-port
queue samples and congestion episodes, and sends them to the server's ingest API."""
