-- kbstore schema v2 (SQLite).
--
-- 1. Document ids are never reused (AUTOINCREMENT). Vector ids are derived
--    from document ids (vector_id = doc_id * 32 + slot); with reuse, a
--    document deleted by hand in the sqlite3 shell (where foreign keys are
--    off and vec0 is not loaded) left rows that blocked the next insert.
-- 2. `extra`: frontmatter keys kbstore does not interpret (a skill's name
--    and description...), so an export writes the file back as it was.
-- 3. The FTS tables are declared content="documents" (double quotes):
--    sqlite-utils' detect_fts() and Datasette only recognise that form.
-- 4. Deleting a document removes its plain-table rows by trigger too, so a
--    delete in the sqlite3 shell (foreign keys off) leaves no orphans there.
-- The runner applies this with foreign keys off (a table rebuild) and runs
-- PRAGMA foreign_key_check before committing.

CREATE TABLE documents_v2 (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    path         TEXT NOT NULL UNIQUE,            -- e.g. 'projects/picobot.md'
    topic        TEXT NOT NULL,                   -- self|user|projects|domains|journal|skills|...
    doc_type     TEXT NOT NULL CHECK (doc_type IN ('entry', 'skill', 'journal')),
    title        TEXT NOT NULL,
    tags         TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags) AND json_type(tags) = 'array'),
    body         TEXT NOT NULL,
    created      TEXT,                            -- ISO 8601
    updated      TEXT,                            -- ISO 8601; journal recency uses it
    content_hash TEXT NOT NULL,                   -- sha256 of the stored fields
    extra        TEXT NOT NULL DEFAULT '{}'
                 CHECK (json_valid(extra) AND json_type(extra) = 'object')
);
INSERT INTO documents_v2 (id, path, topic, doc_type, title, tags, body, created, updated,
                          content_hash)
    SELECT id, path, topic, doc_type, title, tags, body, created, updated, content_hash
    FROM documents;
DROP TABLE documents_fts;
DROP TABLE titles_fts;
DROP TABLE documents;
ALTER TABLE documents_v2 RENAME TO documents;
CREATE INDEX documents_topic ON documents (topic);
CREATE INDEX documents_updated ON documents (updated);

-- Never hand out an id that rows of a deleted document may still carry.
DELETE FROM sqlite_sequence WHERE name = 'documents';
INSERT INTO sqlite_sequence (name, seq) SELECT 'documents', coalesce(max(m), 0) FROM (
    SELECT max(id) AS m FROM documents
    UNION ALL SELECT max(doc_id) FROM vector_data
    UNION ALL SELECT max(doc_id) FROM hype_questions
    UNION ALL SELECT max(doc_id) FROM derived
    UNION ALL SELECT max(doc_id) FROM document_tags);

-- Rows of documents deleted with foreign keys off (the sqlite3 shell) are
-- orphans; the foreign key check below would refuse them. (Orphan vec0 rows
-- need the extension: `kbstore doctor --fix` removes those.)
DELETE FROM document_tags WHERE doc_id NOT IN (SELECT id FROM documents);
DELETE FROM hype_questions WHERE doc_id NOT IN (SELECT id FROM documents);
DELETE FROM derived WHERE doc_id NOT IN (SELECT id FROM documents);
DELETE FROM vector_data WHERE doc_id NOT IN (SELECT id FROM documents);

CREATE TRIGGER documents_tags_ai AFTER INSERT ON documents BEGIN
    INSERT OR IGNORE INTO document_tags (tag, doc_id)
        SELECT lower(trim(value)), new.id FROM json_each(new.tags) WHERE trim(value) <> '';
END;
CREATE TRIGGER documents_tags_au AFTER UPDATE OF tags ON documents BEGIN
    DELETE FROM document_tags WHERE doc_id = old.id;
    INSERT OR IGNORE INTO document_tags (tag, doc_id)
        SELECT lower(trim(value)), new.id FROM json_each(new.tags) WHERE trim(value) <> '';
END;
CREATE TRIGGER documents_rows_ad AFTER DELETE ON documents BEGIN
    DELETE FROM document_tags WHERE doc_id = old.id;
    DELETE FROM hype_questions WHERE doc_id = old.id;
    DELETE FROM derived WHERE doc_id = old.id;
    DELETE FROM vector_data WHERE doc_id = old.id;
END;

CREATE VIRTUAL TABLE documents_fts USING fts5(
    title, tags, body,
    content="documents", content_rowid="id",
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER documents_fts_ai AFTER INSERT ON documents BEGIN
    INSERT INTO documents_fts (rowid, title, tags, body)
        VALUES (new.id, new.title, new.tags, new.body);
END;
CREATE TRIGGER documents_fts_ad AFTER DELETE ON documents BEGIN
    INSERT INTO documents_fts (documents_fts, rowid, title, tags, body)
        VALUES ('delete', old.id, old.title, old.tags, old.body);
END;
CREATE TRIGGER documents_fts_au AFTER UPDATE OF title, tags, body ON documents BEGIN
    INSERT INTO documents_fts (documents_fts, rowid, title, tags, body)
        VALUES ('delete', old.id, old.title, old.tags, old.body);
    INSERT INTO documents_fts (rowid, title, tags, body)
        VALUES (new.id, new.title, new.tags, new.body);
END;
INSERT INTO documents_fts (documents_fts) VALUES ('rebuild');

CREATE VIRTUAL TABLE titles_fts USING fts5(
    title,
    content="documents", content_rowid="id",
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER titles_fts_ai AFTER INSERT ON documents BEGIN
    INSERT INTO titles_fts (rowid, title) VALUES (new.id, new.title);
END;
CREATE TRIGGER titles_fts_ad AFTER DELETE ON documents BEGIN
    INSERT INTO titles_fts (titles_fts, rowid, title) VALUES ('delete', old.id, old.title);
END;
CREATE TRIGGER titles_fts_au AFTER UPDATE OF title ON documents BEGIN
    INSERT INTO titles_fts (titles_fts, rowid, title) VALUES ('delete', old.id, old.title);
    INSERT INTO titles_fts (rowid, title) VALUES (new.id, new.title);
END;
INSERT INTO titles_fts (titles_fts) VALUES ('rebuild');
