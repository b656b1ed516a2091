-- kbstore PostgreSQL schema v4: full-text case folding by kbstore, not by
-- the database's locale.
--
-- to_tsvector lower-cases with the database's LC_CTYPE: under "C" it folds
-- ASCII only ('ÉCOLE' stays 'École', the query 'école' never meets it), and
-- under C.UTF-8 there is no final sigma ('ΚΌΣΜΟΣ' -> 'κόσμοσ', the query
-- 'κόσμος' misses). SQLite's unicode61 tokenizer folds case itself. Now the
-- backend folds the text it feeds to to_tsvector with one Python rule
-- (kbstore.model.fts_fold), the rule it applies to the query's words, so the
-- server's lower-casing finds nothing left to change:
--
-- 1. documents.fts is a plain column the backend writes (it was generated
--    from the raw text), and documents.title_fts holds the title's unstemmed
--    words (title_postings; it was title_vector(title) at index time).
-- 2. hype_questions.folded: the question as folded text (questions_vector
--    reads it; a row inserted in psql without it falls back to the question).
-- 3. An edit in psql (no kbstore.folded setting in the transaction) still
--    gets both vectors, made from the raw text by the server's rule as
--    before; doctor reports such rows (fts_fold) and --fix folds them.
--
-- The runner (kbstore/backends/postgres/migrate.py) then rewrites every
-- document's vectors and every question's folded text with the Python rule in
-- the same transaction; the statement triggers re-index the postings.

ALTER TABLE documents ALTER COLUMN fts DROP EXPRESSION;
ALTER TABLE documents ADD COLUMN title_fts tsvector;
UPDATE documents SET title_fts = title_vector(title);  -- what title_postings hold now
ALTER TABLE hype_questions ADD COLUMN folded text;

-- title > tags > body as tsvector weights A > B > C. ASCII punctuation
-- becomes a space first, so words split where SQLite's unicode61 (and
-- kbstore's query tokeniser) split them. (The expression of schema v1.)
CREATE FUNCTION document_vector(title text, tags text, body text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
    SELECT setweight(to_tsvector('english'::regconfig,
                     regexp_replace(title, '[!-/:-@\[-`{-~]+', ' ', 'g')), 'A')
        || setweight(to_tsvector('english'::regconfig,
                     regexp_replace(tags, '[!-/:-@\[-`{-~]+', ' ', 'g')), 'B')
        || setweight(to_tsvector('english'::regconfig,
                     regexp_replace(body, '[!-/:-@\[-`{-~]+', ' ', 'g')), 'C')
$$;

-- Edits made outside kbstore: the vectors from the raw text.
CREATE FUNCTION documents_fts_text() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('kbstore.folded', true) IS DISTINCT FROM 'on' THEN
        NEW.fts := document_vector(NEW.title, NEW.tags::text, NEW.body);
        NEW.title_fts := title_vector(NEW.title);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER documents_fts_from_raw_text BEFORE INSERT OR UPDATE OF title, tags, body ON documents
    FOR EACH ROW EXECUTE FUNCTION documents_fts_text();

-- The postings of schema v1, from the stored title words.
DROP FUNCTION fts_index(bigint[], tsvector[], text[], integer);
CREATE FUNCTION fts_index(ids bigint[], vecs tsvector[], titles tsvector[], sign integer)
RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF cardinality(ids) IS NULL OR cardinality(ids) = 0 THEN
        RETURN;
    END IF;
    IF sign < 0 THEN
        -- Lengths come back from the deleted postings (one per document).
        WITH gone AS (
            DELETE FROM fts_postings AS p
            USING unnest(ids, vecs) AS g(id, fts), unnest(g.fts) AS x
            WHERE p.term = x.lexeme AND p.doc_id = g.id
            RETURNING p.doc_id, p.doc_len
        ), gone_titles AS (
            DELETE FROM title_postings AS p
            USING unnest(ids, titles) AS g(id, title), unnest(g.title) AS x
            WHERE p.term = x.lexeme AND p.doc_id = g.id
            RETURNING p.doc_id, p.title_len
        )
        INSERT INTO fts_totals AS t (shard, docs, tokens, title_tokens)
        SELECT mod(pg_backend_pid(), 16), -cardinality(ids),
               -coalesce((SELECT sum(doc_len) FROM (SELECT DISTINCT doc_id, doc_len FROM gone) AS d), 0),
               -coalesce((SELECT sum(title_len) FROM (SELECT DISTINCT doc_id, title_len FROM gone_titles) AS d), 0)
        ON CONFLICT (shard) DO UPDATE
            SET docs = t.docs + excluded.docs, tokens = t.tokens + excluded.tokens,
                title_tokens = t.title_tokens + excluded.title_tokens;
    ELSE
        WITH lexemes AS MATERIALIZED (
            SELECT g.id, x.lexeme, cardinality(x.positions) AS tf,
                   cardinality(array_positions(x.weights, 'A')) AS tf_title,
                   cardinality(array_positions(x.weights, 'B')) AS tf_tags
            FROM unnest(ids, vecs) AS g(id, fts), unnest(g.fts) AS x
        ), lengths AS MATERIALIZED (
            SELECT id, sum(tf) AS doc_len FROM lexemes GROUP BY id
        ), words AS MATERIALIZED (
            SELECT g.id, x.lexeme, cardinality(x.positions) AS tf
            FROM unnest(ids, titles) AS g(id, title), unnest(g.title) AS x
        ), title_lengths AS MATERIALIZED (
            SELECT id, sum(tf) AS title_len FROM words GROUP BY id
        ), added AS (
            INSERT INTO fts_postings (term, doc_id, tf_title, tf_tags, tf_body, doc_len)
            SELECT l.lexeme, l.id, l.tf_title, l.tf_tags, l.tf - l.tf_title - l.tf_tags, n.doc_len
            FROM lexemes AS l JOIN lengths AS n ON n.id = l.id
        ), added_titles AS (
            INSERT INTO title_postings (term, doc_id, tf, title_len)
            SELECT w.lexeme, w.id, w.tf, n.title_len
            FROM words AS w JOIN title_lengths AS n ON n.id = w.id
        )
        INSERT INTO fts_totals AS t (shard, docs, tokens, title_tokens)
        SELECT mod(pg_backend_pid(), 16), cardinality(ids),
               coalesce((SELECT sum(doc_len) FROM lengths), 0),
               coalesce((SELECT sum(title_len) FROM title_lengths), 0)
        ON CONFLICT (shard) DO UPDATE
            SET docs = t.docs + excluded.docs, tokens = t.tokens + excluded.tokens,
                title_tokens = t.title_tokens + excluded.title_tokens;
    END IF;
END $$;

CREATE OR REPLACE FUNCTION documents_fts_sync() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM fts_index(array_agg(n.id), array_agg(n.fts), array_agg(n.title_fts), 1)
        FROM new_rows n;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM fts_index(array_agg(o.id), array_agg(o.fts), array_agg(o.title_fts), -1)
        FROM old_rows o;
    ELSE  -- UPDATE: only documents whose indexed text changed
        PERFORM fts_index(array_agg(o.id), array_agg(o.fts), array_agg(o.title_fts), -1)
        FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE n.fts IS DISTINCT FROM o.fts OR n.title_fts IS DISTINCT FROM o.title_fts;
        PERFORM fts_index(array_agg(n.id), array_agg(n.fts), array_agg(n.title_fts), 1)
        FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE n.fts IS DISTINCT FROM o.fts OR n.title_fts IS DISTINCT FROM o.title_fts;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION questions_vector(doc bigint) RETURNS tsvector
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT to_tsvector('english'::regconfig,
                       regexp_replace(string_agg(coalesce(folded, question), E'\n'
                                                 ORDER BY position),
                                      '[!-/:-@\[-`{-~]+', ' ', 'g'))
    FROM hype_questions WHERE doc_id = doc
$$;
