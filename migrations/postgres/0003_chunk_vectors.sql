-- kbstore PostgreSQL schema v3: chunk vectors for documents longer than the
-- embedder's window, and HyPE questions searchable as text (the SQLite
-- schema's 0003_chunk_vectors.sql, in PostgreSQL terms).
--
-- 1. Chunk vectors live in `vectors` at slots 32 + n (chunk n, at most 1024
--    per document, kbstore/chunks.py); document_chunks holds each chunk's
--    character span of the body. A third partial HNSW index (slot >= 32)
--    keeps chunk vectors out of the document and question KNNs, as SQLite's
--    vec0 partition 'chunk' does.
-- 2. question_postings / question_totals: BM25 statistics over each
--    document's HyPE questions (SQLite: the questions_fts FTS5 table), kept
--    by a statement trigger on hype_questions, the way fts_postings follow
--    documents.
-- 3. Indexes on created / updated for date queries (ISO text, compared
--    bytewise as SQLite compares it).
-- 4. derived accepts the kind 'chunk_vectors'.
-- Existing documents get chunk vectors from their next write or
-- `kbstore doctor --fix`; until then they are found as before.

ALTER TABLE vectors DROP CONSTRAINT vectors_slot_check;
ALTER TABLE vectors ADD CONSTRAINT vectors_slot_check CHECK (slot BETWEEN 0 AND 1055);

CREATE TABLE document_chunks (
    doc_id     bigint NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    position   smallint NOT NULL CHECK (position BETWEEN 0 AND 1023),  -- vector slot 32 + position
    start_char integer NOT NULL,                  -- span of documents.body
    end_char   integer NOT NULL,
    PRIMARY KEY (doc_id, position)
);

ALTER TABLE derived DROP CONSTRAINT derived_kind_check;
ALTER TABLE derived ADD CONSTRAINT derived_kind_check
    CHECK (kind IN ('doc_vector', 'hype_questions', 'hype_vectors', 'chunk_vectors'));

CREATE INDEX documents_created ON documents (created COLLATE "C");
CREATE INDEX documents_updated ON documents (updated COLLATE "C");

-- One posting per (lexeme, document) over the document's questions as one
-- text, with the text's length in lexeme positions (the BM25 of
-- fts_postings, one column).
CREATE TABLE question_postings (
    term   text COLLATE "C" NOT NULL,
    doc_id bigint NOT NULL,
    tf     integer NOT NULL,
    q_len  integer NOT NULL,
    PRIMARY KEY (term, doc_id) INCLUDE (tf, q_len)
);
CREATE INDEX question_postings_doc ON question_postings (doc_id);
CREATE TABLE question_totals (
    shard  smallint PRIMARY KEY CHECK (shard BETWEEN 0 AND 15),
    docs   bigint NOT NULL,
    tokens bigint NOT NULL
);

-- A document's questions as one tsvector (tokenised as documents.fts is).
CREATE FUNCTION questions_vector(doc bigint) RETURNS tsvector
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT to_tsvector('english'::regconfig,
                       regexp_replace(string_agg(question, E'\n' ORDER BY position),
                                      '[!-/:-@\[-`{-~]+', ' ', 'g'))
    FROM hype_questions WHERE doc_id = doc
$$;

-- Re-index the questions of these documents from hype_questions as it is now.
CREATE FUNCTION questions_index(ids bigint[]) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF cardinality(ids) IS NULL OR cardinality(ids) = 0 THEN
        RETURN;
    END IF;
    WITH gone AS (
        DELETE FROM question_postings WHERE doc_id = ANY(ids) RETURNING doc_id, q_len
    ), lengths AS (
        SELECT DISTINCT doc_id, q_len FROM gone
    )
    INSERT INTO question_totals AS t (shard, docs, tokens)
    SELECT mod(pg_backend_pid(), 16), -count(*), -coalesce(sum(q_len), 0) FROM lengths
    ON CONFLICT (shard) DO UPDATE
        SET docs = t.docs + excluded.docs, tokens = t.tokens + excluded.tokens;
    WITH lexemes AS MATERIALIZED (
        SELECT g.id, x.lexeme, cardinality(x.positions) AS tf
        FROM (SELECT DISTINCT q.doc_id AS id FROM hype_questions AS q
              WHERE q.doc_id = ANY(ids)) AS g,
             unnest(questions_vector(g.id)) AS x
    ), lengths AS MATERIALIZED (
        SELECT id, sum(tf) AS q_len FROM lexemes GROUP BY id
    ), added AS (
        INSERT INTO question_postings (term, doc_id, tf, q_len)
        SELECT l.lexeme, l.id, l.tf, n.q_len FROM lexemes AS l JOIN lengths AS n ON n.id = l.id
    )
    INSERT INTO question_totals AS t (shard, docs, tokens)
    SELECT mod(pg_backend_pid(), 16), count(*), coalesce(sum(q_len), 0) FROM lengths
    ON CONFLICT (shard) DO UPDATE
        SET docs = t.docs + excluded.docs, tokens = t.tokens + excluded.tokens;
END $$;

CREATE FUNCTION hype_questions_fts_sync() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM questions_index(array_agg(DISTINCT n.doc_id)) FROM new_rows n;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM questions_index(array_agg(DISTINCT o.doc_id)) FROM old_rows o;
    ELSE
        PERFORM questions_index(array_agg(DISTINCT u.doc_id))
        FROM (SELECT doc_id FROM old_rows UNION SELECT doc_id FROM new_rows) AS u;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER hype_questions_fts_insert AFTER INSERT ON hype_questions
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hype_questions_fts_sync();
CREATE TRIGGER hype_questions_fts_delete AFTER DELETE ON hype_questions
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hype_questions_fts_sync();
CREATE TRIGGER hype_questions_fts_update AFTER UPDATE ON hype_questions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hype_questions_fts_sync();

-- Questions stored before this migration.
SELECT questions_index(array_agg(DISTINCT doc_id)) FROM hype_questions;

-- Three HNSW indexes now: documents, questions, chunks.
DROP FUNCTION set_vector_dimension(integer);
CREATE FUNCTION set_vector_dimension(dim integer) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    kb_schema text := current_schema();
BEGIN
    IF dim IS NULL OR dim < 1 OR dim > 2000 THEN
        RAISE EXCEPTION 'vector dimension must be 1..2000 (HNSW limit), got %', dim;
    END IF;
    EXECUTE format('DROP INDEX IF EXISTS %I.vectors_doc_hnsw, %I.vectors_hype_hnsw, '
                   '%I.vectors_chunk_hnsw', kb_schema, kb_schema, kb_schema);
    DELETE FROM vectors;
    DELETE FROM document_chunks;
    EXECUTE format('ALTER TABLE %I.vectors ALTER COLUMN embedding TYPE vector(%s)',
                   kb_schema, dim);
    EXECUTE format('CREATE INDEX vectors_doc_hnsw ON %I.vectors USING hnsw '
                   '(embedding vector_cosine_ops) WHERE slot = 0', kb_schema);
    EXECUTE format('CREATE INDEX vectors_hype_hnsw ON %I.vectors USING hnsw '
                   '(embedding vector_cosine_ops) WHERE slot BETWEEN 1 AND 31', kb_schema);
    EXECUTE format('CREATE INDEX vectors_chunk_hnsw ON %I.vectors USING hnsw '
                   '(embedding vector_cosine_ops) WHERE slot >= 32', kb_schema);
END $$;

-- A knowledge base that already has a dimension: the question index gets
-- its new predicate and the chunk index is added.
DO $$
BEGIN
    IF to_regclass('vectors_doc_hnsw') IS NOT NULL THEN
        DROP INDEX IF EXISTS vectors_hype_hnsw;
        EXECUTE 'CREATE INDEX vectors_hype_hnsw ON vectors USING hnsw '
                '(embedding vector_cosine_ops) WHERE slot BETWEEN 1 AND 31';
        EXECUTE 'CREATE INDEX vectors_chunk_hnsw ON vectors USING hnsw '
                '(embedding vector_cosine_ops) WHERE slot >= 32';
    END IF;
END $$;
