"""PostgreSQL + pgvector storage for kbstore: one knowledge base per schema
(``kbstore_<name>``), migrations in ``migrations/postgres/``, hybrid search as
one statement in ``search.sql`` (see DESIGN.md)."""
