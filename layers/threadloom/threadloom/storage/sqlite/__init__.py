"""The embedded default backend: one SQLite file (or ``:memory:``) with FTS5."""
