"""Baselines that kbstore is benchmarked against (e.g. the seed design in ``seed``)."""
