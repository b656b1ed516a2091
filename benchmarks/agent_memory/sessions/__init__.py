"""The dated multi-session memory set (README.md); build.py writes the data files."""
