"""Command-line interface: thin wrappers around the library. Nothing imports this package."""
