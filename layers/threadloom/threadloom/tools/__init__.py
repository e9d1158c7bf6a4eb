"""Tools offered to an LLM: context-block tools and cross-session search."""
