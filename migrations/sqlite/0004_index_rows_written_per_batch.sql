-- kbstore schema v4 (SQLite): a new document's index rows and a document's
-- question text are written by the backend, once per document and batched
-- (kbstore/backends/sqlite/pending.py), instead of by per-row triggers.
--
-- 1. hype_questions no longer has triggers. They rebuilt a document's
--    questions_fts row (group_concat of all its questions) after EACH
--    question row: six deletes and six inserts of a growing text per
--    document, the largest cost of an import (2.3 ms per document). The
--    backend now deletes the row when it replaces a document's questions
--    and writes it once, in the same transaction.
-- 2. documents has no AFTER INSERT triggers: a trigger's program per row
--    cost ~3x the same FTS5 inserts made with one executemany per batch.
--    The backend writes documents_fts, titles_fts and document_tags rows
--    for new documents with the same values the triggers used. The UPDATE
--    and DELETE triggers stay: an edit or delete in the sqlite3 shell still
--    keeps the indexes right.
-- Rows written by the old triggers are kept as they are: they hold what the
-- backend writes now (questions joined by a newline in position order).
-- A document inserted, or a question edited, by hand in the sqlite3 shell
-- is no longer indexed on its own: `kbstore doctor` reports it
-- (documents_missing_fts, tag_rows, questions_fts_text) and --fix rebuilds it.

DROP TRIGGER hype_questions_fts_ai;
DROP TRIGGER hype_questions_fts_ad;
DROP TRIGGER hype_questions_fts_au;
DROP TRIGGER documents_fts_ai;
DROP TRIGGER titles_fts_ai;
DROP TRIGGER documents_tags_ai;
