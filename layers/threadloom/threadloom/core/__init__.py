"""Session semantics that do not depend on where data is stored."""
