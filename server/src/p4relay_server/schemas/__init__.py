"""Pydantic schemas: the wire format of the API (ingest, queries, auth)."""
