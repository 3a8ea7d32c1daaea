"""The package version (pyproject.toml holds the same string; tests/test_package.py checks it)."""

__version__ = "0.1.0"
