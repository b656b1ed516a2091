-- kbstore schema v3 (SQLite): chunk vectors for documents longer than the
-- embedder's window, and HyPE questions searchable as text.
--
-- 1. document_chunks: a long document's overlapping chunks (character spans
--    of its body); each has one vector, vec0 partition kind = 'chunk'.
--    vector_id of chunk n: 2^50 + doc_id * 1024 + n (document and question
--    vectors keep doc_id * 32 + slot, so ids of existing files stay valid;
--    kbstore/backends/sqlite/vectors.py owns the encoding).
-- 2. questions_fts: each document's HyPE questions as one text, for the
--    search's hype_fts list (BM25 over the questions a document answers).
--    Kept in step with hype_questions by triggers; rowid = doc_id.
-- 3. An index on documents.created for date queries.
-- 4. derived accepts the kind 'chunk_vectors' (its CHECK constraint is part
--    of the table, so the table is rebuilt).
-- Existing documents get their chunk vectors from the next import, upsert or
-- `kbstore doctor --fix` / refresh: until then they are found as before.

CREATE TABLE document_chunks (
    doc_id     INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL CHECK (position BETWEEN 0 AND 1023),
    vector_id  INTEGER NOT NULL UNIQUE,
    start_char INTEGER NOT NULL,                  -- span of documents.body
    end_char   INTEGER NOT NULL,
    PRIMARY KEY (doc_id, position)
) WITHOUT ROWID;

CREATE VIRTUAL TABLE questions_fts USING fts5(
    questions,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO questions_fts (rowid, questions)
    SELECT doc_id, group_concat(question, char(10)) FROM hype_questions GROUP BY doc_id;
CREATE TRIGGER hype_questions_fts_ai AFTER INSERT ON hype_questions BEGIN
    DELETE FROM questions_fts WHERE rowid = new.doc_id;
    INSERT INTO questions_fts (rowid, questions)
        SELECT new.doc_id, group_concat(question, char(10)) FROM hype_questions
        WHERE doc_id = new.doc_id;
END;
CREATE TRIGGER hype_questions_fts_ad AFTER DELETE ON hype_questions BEGIN
    DELETE FROM questions_fts WHERE rowid = old.doc_id;
    INSERT INTO questions_fts (rowid, questions)
        SELECT old.doc_id, group_concat(question, char(10)) FROM hype_questions
        WHERE doc_id = old.doc_id HAVING count(*) > 0;
END;
CREATE TRIGGER hype_questions_fts_au AFTER UPDATE ON hype_questions BEGIN
    DELETE FROM questions_fts WHERE rowid IN (old.doc_id, new.doc_id);
    INSERT INTO questions_fts (rowid, questions)
        SELECT doc_id, group_concat(question, char(10)) FROM hype_questions
        WHERE doc_id IN (old.doc_id, new.doc_id) GROUP BY doc_id;
END;

-- Date queries ("in March", "last week") match created as well as updated.
CREATE INDEX documents_created ON documents (created);

-- The delete trigger names `derived`: drop it while that table is rebuilt.
DROP TRIGGER documents_rows_ad;

CREATE TABLE derived_v3 (
    doc_id       INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    kind         TEXT NOT NULL CHECK (kind IN ('doc_vector', 'hype_questions', 'hype_vectors',
                                               'chunk_vectors')),
    content_hash TEXT NOT NULL,       -- hash of the input this was made from
    model        TEXT NOT NULL,       -- embedder fingerprint id or LLM model name
    status       TEXT NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'pending')),
    error        TEXT,                -- last failure, for `kbstore status` / doctor
    made_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (doc_id, kind)
) WITHOUT ROWID;
INSERT INTO derived_v3 (doc_id, kind, content_hash, model, status, error, made_at)
    SELECT doc_id, kind, content_hash, model, status, error, made_at FROM derived;
DROP TABLE derived;
ALTER TABLE derived_v3 RENAME TO derived;
CREATE INDEX derived_pending ON derived (kind, status);

CREATE TRIGGER documents_rows_ad AFTER DELETE ON documents BEGIN
    DELETE FROM document_tags WHERE doc_id = old.id;
    DELETE FROM hype_questions WHERE doc_id = old.id;
    DELETE FROM document_chunks WHERE doc_id = old.id;
    DELETE FROM questions_fts WHERE rowid = old.id;
    DELETE FROM derived WHERE doc_id = old.id;
    DELETE FROM vector_data WHERE doc_id = old.id;
END;
