"""The production backend: PostgreSQL through pg8000 (directly or behind RDS Proxy)."""
