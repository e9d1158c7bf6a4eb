"""Provider protocols and the built-in providers that are not tied to one storage backend."""
