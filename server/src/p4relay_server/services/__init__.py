"""Database-side logic behind the API routes."""
