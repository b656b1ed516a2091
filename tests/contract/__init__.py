"""The backend contract suite: public API only, run against every backend."""
