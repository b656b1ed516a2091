-- kbstore schema v1. Plain tables and FTS5 only: everything here is readable
-- from the sqlite3 shell without extensions. The vec0 table `vectors` is
-- created at `kbstore init` (its dimension comes from the chosen embedder).

-- Key/value settings; values are JSON. Holds the embedder fingerprint
-- ('embedder') and the fusion defaults ('fusion').
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL CHECK (json_valid(value))
);

CREATE TABLE documents (
    id           INTEGER PRIMARY KEY,
    path         TEXT NOT NULL UNIQUE,            -- e.g. 'projects/picobot.md'
    topic        TEXT NOT NULL,                   -- self|user|projects|domains|journal|skills|...
    doc_type     TEXT NOT NULL CHECK (doc_type IN ('entry', 'skill', 'journal')),
    title        TEXT NOT NULL,
    tags         TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags) AND json_type(tags) = 'array'),
    body         TEXT NOT NULL,
    created      TEXT,                            -- ISO 8601
    updated      TEXT,                            -- ISO 8601; journal recency decay uses it
    content_hash TEXT NOT NULL                    -- sha256 of the stored fields
);
CREATE INDEX documents_topic ON documents (topic);

-- One row per (document, tag), lower-cased, so tag lookups are exact and indexed.
CREATE TABLE document_tags (
    tag    TEXT NOT NULL,
    doc_id INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    PRIMARY KEY (tag, doc_id)
) WITHOUT ROWID;
CREATE INDEX document_tags_doc ON document_tags (doc_id);

CREATE TRIGGER documents_tags_ai AFTER INSERT ON documents BEGIN
    INSERT OR IGNORE INTO document_tags (tag, doc_id)
        SELECT lower(trim(value)), new.id FROM json_each(new.tags) WHERE trim(value) <> '';
END;
CREATE TRIGGER documents_tags_au AFTER UPDATE OF tags ON documents BEGIN
    DELETE FROM document_tags WHERE doc_id = old.id;
    INSERT OR IGNORE INTO document_tags (tag, doc_id)
        SELECT lower(trim(value)), new.id FROM json_each(new.tags) WHERE trim(value) <> '';
END;

-- Full-text index over title/tags/body, external content = documents.
CREATE VIRTUAL TABLE documents_fts USING fts5(
    title, tags, body,
    content = 'documents', content_rowid = 'id',
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

-- Title words without stemming, for the frontmatter retriever's exact
-- title-word overlap (small: titles are short, so its lookups are cheap).
CREATE VIRTUAL TABLE titles_fts USING fts5(
    title,
    content = 'documents', content_rowid = 'id',
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

-- HyPE: LLM-written questions each document answers. Question `position`
-- (1..31) also names its vector: vector_id = doc_id * 32 + position.
CREATE TABLE hype_questions (
    doc_id   INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    position INTEGER NOT NULL CHECK (position BETWEEN 1 AND 31),
    question TEXT NOT NULL,
    PRIMARY KEY (doc_id, position)
) WITHOUT ROWID;

-- Full-precision vectors (float32 blobs) for exact cosine rescoring. The vec0
-- table `vectors` holds their sign bits for a fast KNN prefilter; the float
-- copy lives here because writing floats into vec0 chunks is ~4x slower and
-- the KNN never reads them. vector_id = doc_id * 32 + slot (0 = document).
CREATE TABLE vector_data (
    vector_id INTEGER PRIMARY KEY,
    doc_id    INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    embedding BLOB NOT NULL
);
CREATE INDEX vector_data_doc ON vector_data (doc_id);

-- What derived data each document has, from which content and which model.
-- kind: 'doc_vector' | 'hype_questions' | 'hype_vectors'
-- status: 'ok' | 'pending' (to be (re)made, e.g. after an LLM failure)
CREATE TABLE derived (
    doc_id       INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    kind         TEXT NOT NULL CHECK (kind IN ('doc_vector', 'hype_questions', 'hype_vectors')),
    content_hash TEXT NOT NULL,       -- hash of the input this was made from
    model        TEXT NOT NULL,       -- embedder fingerprint id or LLM model name
    status       TEXT NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'pending')),
    error        TEXT,                -- last failure, for `kbstore status` / doctor
    made_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (doc_id, kind)
) WITHOUT ROWID;
CREATE INDEX derived_pending ON derived (kind, status);
