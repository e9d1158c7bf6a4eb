"""Storage backends. The tree logic is written once (``tree.py``); each backend supplies a connection and its SQL."""
