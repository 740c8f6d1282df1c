"""HTTP API: routers under /api/v1, dependencies, the application factory."""
