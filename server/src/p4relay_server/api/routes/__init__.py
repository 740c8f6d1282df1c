"""Routers of /api/v1, one module per resource."""
