"""Benchmarks for kbstore."""
