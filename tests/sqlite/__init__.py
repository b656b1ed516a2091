"""Tests of the SQLite backend's own storage: schema, migrations, vec0, the file."""
