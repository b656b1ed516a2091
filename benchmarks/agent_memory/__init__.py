"""Retrieval benchmarks on agent memory: datasets in FORMAT.md, one harness (run.py)."""
