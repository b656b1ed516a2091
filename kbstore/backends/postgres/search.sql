-- kbstore hybrid search on PostgreSQL: the retrievers and the fusion of
-- kbstore/backends/sqlite/search.sql (the SQLite statement), in ONE statement.
--
-- Retrievers (each yields doc_id, rank 1..n, raw score):
--   fm   frontmatter: exact tag matches (document_tags), then titles sharing
--        at least two distinct query words (one for a one-word query),
--        unstemmed, ranked by BM25 over titles (title_postings)
--   fts  BM25 over title/tags/body with column weights w_title > w_tags >
--        w_body: the formula of SQLite's FTS5 bm25() (k1 = 1.2, b = 0.75,
--        IDF ln((N - df + 0.5) / (df + 0.5)) floored at 1e-6, a repeated query
--        word counted again), from fts_postings / fts_totals. PostgreSQL's
--        ts_rank has no IDF and no length normalisation, so it is not used.
--   vec  pgvector HNSW KNN (cosine) over document vectors (slot 0) and HyPE
--        question vectors (slots 1..31), one partial index per kind so a
--        document's many questions cannot crowd out other documents; best
--        vector per document. The topic filter runs inside the index scan
--        (hnsw.iterative_scan), so a filtered KNN still returns k rows.
-- Fusion (fusion = 'rrf' | 'convex') exactly as in the SQLite statement:
--   rrf     sum of w_x / (k_rrf + rank_x)  (title-only frontmatter hits
--           weigh w_fm_title, tag matches 1.0, times w_fm)
--   convex  sum of w_x * min-max-normalised score_x
-- then x document-type boost and x journal recency decay
-- exp(-ln 2 * age_days / half_life_days) from `updated`, age at `now`
-- (half_life_days empty: no decay).
-- min_similarity (optional) drops hits that are neither a frontmatter match
-- nor that close to the query vector.
--
-- Parameters are psql variables, every one passed as text (kbstore passes
-- the same strings as bind parameters); an empty string means "none" for
-- topic, qvec, min_similarity, half_life_days and now (now = the current
-- time). Each hit's body comes back too (for its snippet). From psql:
--   \i kbstore/backends/postgres/search_defaults.psql   -- every default
--   SET search_path = kbstore_default, public;          -- the knowledge base
--   \set fts_terms '["hybrid", "search"]'
--   \set title_terms '["hybrid", "search"]'
--   \set tag_terms '["hybrid", "search", "hybrid-search", "hybrid search"]'
--   \set qvec '[0.01, -0.2, ...]'      -- or '' to skip the vector retriever
--   \i kbstore/backends/postgres/search.sql
-- fts_terms: the query's words (kbstore drops very common English words),
-- repeats kept; title_terms: distinct words, at most 12; tag_terms: strings
-- that count as an exact tag (words, adjacent pairs, the whole query). The
-- statement stems and tokenises them itself, as the documents were.
-- The HNSW scan settings are session settings, set before the statement:
--   SET hnsw.ef_search = 100; SET hnsw.iterative_scan = relaxed_order;

WITH
-- Query lexemes with their multiplicity, stemmed like documents.fts.
fts_query AS (
    SELECT x.lexeme AS term, count(*) AS qtf
    FROM jsonb_array_elements_text(coalesce(nullif(:'fts_terms', '')::jsonb, '[]')) AS q(word),
         unnest(to_tsvector('english', q.word)) AS x
    GROUP BY x.lexeme
),
title_query AS (
    SELECT DISTINCT x.lexeme AS term
    FROM jsonb_array_elements_text(coalesce(nullif(:'title_terms', '')::jsonb, '[]')) AS q(word),
         unnest(to_tsvector('simple', q.word)) AS x
),
-- N and average lengths, summed over the totals' shards.
corpus AS MATERIALIZED (
    SELECT coalesce(sum(docs), 0)::float8 AS n,
           greatest(coalesce(sum(tokens)::float8 / nullif(sum(docs), 0), 1.0), 1.0) AS avg_len,
           greatest(coalesce(sum(title_tokens)::float8 / nullif(sum(docs), 0), 1.0), 1.0)
               AS avg_title_len
    FROM fts_totals
),
fm_tag AS (
    SELECT doc_id, count(*) AS hits
    FROM document_tags
    WHERE tag IN (SELECT jsonb_array_elements_text(
                      coalesce(nullif(:'tag_terms', '')::jsonb, '[]')))
    GROUP BY doc_id
),
-- Document frequencies come from the same posting rows the scores read.
-- Everything is float8 from here: a decimal literal is numeric in
-- PostgreSQL, and numeric arithmetic per posting row costs ~10x.
title_hits AS MATERIALIZED (
    SELECT p.doc_id, p.tf::float8 AS tf, p.title_len::float8 AS title_len,
           (count(*) OVER (PARTITION BY p.term))::float8 AS df
    FROM title_query AS q JOIN title_postings AS p ON p.term = q.term
),
fm_title AS (
    -- FTS5 scores an OR of word pairs phrase by phrase: a title matching m
    -- of the words matches m - 1 pairs per word, so its BM25 is (m - 1) x
    -- the per-word sum (x 1 for a one-word query).
    SELECT h.doc_id,
           greatest(count(*) - 1, 1) * sum(
               greatest(ln((c.n - h.df + 0.5) / (h.df + 0.5)), 1e-6)
               * h.tf * 2.2 / (h.tf + 1.2 * (0.25 + 0.75 * h.title_len / c.avg_title_len))
           ) AS title_score
    FROM title_hits AS h CROSS JOIN corpus AS c
    GROUP BY h.doc_id
    HAVING count(*) >= least(2, (SELECT count(*) FROM title_query))
),
fm_ranked AS (
    SELECT doc_id, score,
           row_number() OVER (ORDER BY tag_hits DESC, title_score DESC, doc_id) AS rank,
           CASE WHEN tag_hits > 0 THEN 1.0 ELSE (:'w_fm_title')::float8 END AS weight
    FROM (
        SELECT doc_id, max(tag_hits) AS tag_hits, max(title_score) AS title_score,
               max(tag_hits) + max(title_score) AS score
        FROM (
            SELECT doc_id, hits AS tag_hits, 0.0::float8 AS title_score FROM fm_tag
            UNION ALL
            SELECT doc_id, 0 AS tag_hits, title_score FROM fm_title
        ) AS both_kinds
        WHERE nullif(:'topic', '') IS NULL
           OR doc_id IN (SELECT id FROM documents WHERE topic = :'topic')
        GROUP BY doc_id
    ) AS matched
    ORDER BY rank
    LIMIT (:'fm_limit')::integer
),
fts_hits AS MATERIALIZED (
    SELECT p.doc_id, q.qtf::float8 AS qtf, p.doc_len::float8 AS doc_len,
           (:'w_title')::float8 * p.tf_title + (:'w_tags')::float8 * p.tf_tags
               + (:'w_body')::float8 * p.tf_body AS tf,
           (count(*) OVER (PARTITION BY p.term))::float8 AS df
    FROM fts_query AS q JOIN fts_postings AS p ON p.term = q.term
),
fts_ranked AS (
    SELECT doc_id, score, row_number() OVER (ORDER BY score DESC, doc_id) AS rank
    FROM (
        SELECT h.doc_id,
               sum(h.qtf * greatest(ln((c.n - h.df + 0.5) / (h.df + 0.5)), 1e-6)
                   * h.tf * 2.2 / (h.tf + 1.2 * (0.25 + 0.75 * h.doc_len / c.avg_len))) AS score
        FROM fts_hits AS h CROSS JOIN corpus AS c
        WHERE nullif(:'topic', '') IS NULL
           OR h.doc_id IN (SELECT id FROM documents WHERE topic = :'topic')
        GROUP BY h.doc_id
        ORDER BY score DESC, h.doc_id
        LIMIT (:'fts_limit')::integer
    ) AS top
),
-- KNN per kind; each stays MATERIALIZED with its own LIMIT so the planner
-- runs one index scan per kind, never one per joined row.
vec_doc_ann AS MATERIALIZED (
    SELECT doc_id, slot, embedding <=> nullif(:'qvec', '')::vector AS distance
    FROM vectors
    WHERE slot = 0 AND nullif(:'qvec', '') IS NOT NULL
      AND (nullif(:'topic', '') IS NULL OR topic = :'topic')
    ORDER BY embedding <=> nullif(:'qvec', '')::vector
    LIMIT (:'vec_k_doc')::integer
),
vec_hype_ann AS MATERIALIZED (
    SELECT doc_id, slot, embedding <=> nullif(:'qvec', '')::vector AS distance
    FROM vectors
    WHERE slot > 0 AND nullif(:'qvec', '') IS NOT NULL
      AND (nullif(:'topic', '') IS NULL OR topic = :'topic')
    ORDER BY embedding <=> nullif(:'qvec', '')::vector
    LIMIT (:'vec_k_hype')::integer
),
-- The guarantee that a filter never makes the KNN short: an iterative HNSW
-- scan gives up after hnsw.max_scan_tuples, so when an index scan came back
-- with fewer than k rows, the same KNN runs again exactly (distance + 0
-- cannot use the index). The branch is a one-time filter: it costs nothing
-- when the index scan was full.
vec_candidates AS MATERIALIZED (
    SELECT * FROM vec_doc_ann
    UNION
    (SELECT doc_id, slot, embedding <=> nullif(:'qvec', '')::vector AS distance
     FROM vectors
     WHERE slot = 0 AND nullif(:'qvec', '') IS NOT NULL
       AND (nullif(:'topic', '') IS NULL OR topic = :'topic')
       AND (SELECT count(*) FROM vec_doc_ann) < (:'vec_k_doc')::integer
     ORDER BY (embedding <=> nullif(:'qvec', '')::vector) + 0
     LIMIT (:'vec_k_doc')::integer)
    UNION
    SELECT * FROM vec_hype_ann
    UNION
    (SELECT doc_id, slot, embedding <=> nullif(:'qvec', '')::vector AS distance
     FROM vectors
     WHERE slot > 0 AND nullif(:'qvec', '') IS NOT NULL
       AND (nullif(:'topic', '') IS NULL OR topic = :'topic')
       AND (SELECT count(*) FROM vec_hype_ann) < (:'vec_k_hype')::integer
     ORDER BY (embedding <=> nullif(:'qvec', '')::vector) + 0
     LIMIT (:'vec_k_hype')::integer)
),
vec_ranked AS (
    SELECT doc_id, slot, 1.0 - distance AS score,
           row_number() OVER (ORDER BY distance, doc_id) AS rank
    FROM (
        SELECT DISTINCT ON (doc_id) doc_id, slot, distance
        FROM vec_candidates
        ORDER BY doc_id, distance, slot
    ) AS best
    ORDER BY rank
    LIMIT (:'vec_limit')::integer
),
fused AS (
    SELECT doc_id,
           max(fm_rank) AS fm_rank, max(fm_norm) AS fm_norm, max(fm_weight) AS fm_weight,
           max(fts_rank) AS fts_rank, max(fts_score) AS fts_score, max(fts_norm) AS fts_norm,
           max(vec_rank) AS vec_rank, max(vec_score) AS vec_score, max(vec_norm) AS vec_norm,
           max(slot) AS slot
    FROM (
        SELECT doc_id, rank AS fm_rank,
               coalesce((score - min(score) OVER ()) / nullif(max(score) OVER () - min(score) OVER (), 0), 1.0) AS fm_norm,
               weight AS fm_weight,
               NULL::bigint AS fts_rank, NULL::float8 AS fts_score, NULL::float8 AS fts_norm,
               NULL::bigint AS vec_rank, NULL::float8 AS vec_score, NULL::float8 AS vec_norm,
               NULL::smallint AS slot
        FROM fm_ranked
        UNION ALL
        SELECT doc_id, NULL, NULL, NULL, rank, score,
               coalesce((score - min(score) OVER ()) / nullif(max(score) OVER () - min(score) OVER (), 0), 1.0),
               NULL, NULL, NULL, NULL
        FROM fts_ranked
        UNION ALL
        SELECT doc_id, NULL, NULL, NULL, NULL, NULL, NULL, rank, score,
               coalesce((score - min(score) OVER ()) / nullif(max(score) OVER () - min(score) OVER (), 0), 1.0),
               slot
        FROM vec_ranked
    ) AS lists
    GROUP BY doc_id
),
scored AS (
    SELECT f.*, d.path, d.title, d.tags, d.topic, d.doc_type, d.updated, d.body,
           coalesce((:'w_fm')::float8 * f.fm_weight / ((:'k_rrf')::float8 + f.fm_rank), 0.0) AS rrf_fm,
           coalesce((:'w_fts')::float8 / ((:'k_rrf')::float8 + f.fts_rank), 0.0) AS rrf_fts,
           coalesce((:'w_vec')::float8 / ((:'k_rrf')::float8 + f.vec_rank), 0.0) AS rrf_vec,
           coalesce((:'w_fm')::float8 * f.fm_weight * f.fm_norm, 0.0)
               + coalesce((:'w_fts')::float8 * f.fts_norm, 0.0)
               + coalesce((:'w_vec')::float8 * f.vec_norm, 0.0) AS convex,
           CASE d.doc_type WHEN 'skill' THEN (:'boost_skill')::float8
                           WHEN 'journal' THEN (:'boost_journal')::float8
                           ELSE (:'boost_entry')::float8 END AS boost,
           CASE WHEN d.doc_type = 'journal' AND d.updated_at IS NOT NULL
                     AND nullif(:'half_life_days', '') IS NOT NULL
                THEN exp(-ln(2.0) * greatest(extract(epoch FROM
                         coalesce(nullif(:'now', '')::timestamptz, now()) - d.updated_at)::float8
                         / 86400.0, 0.0) / nullif(:'half_life_days', '')::float8)
                ELSE 1.0 END AS decay
    FROM fused AS f JOIN documents AS d ON d.id = f.doc_id
)
SELECT s.doc_id, s.path, s.title, s.tags, s.topic, s.doc_type, s.updated, s.body,
       (CASE :'fusion' WHEN 'convex' THEN s.convex ELSE s.rrf_fm + s.rrf_fts + s.rrf_vec END)
           * s.boost * s.decay AS score,
       s.fm_rank, s.fm_weight, s.fts_rank, s.vec_rank, s.fts_score, s.vec_score,
       s.rrf_fm, s.rrf_fts, s.rrf_vec, s.convex, s.boost, s.decay,
       CASE WHEN s.slot = 0 THEN 'doc' ELSE 'hype' END AS matched_kind,
       q.question AS matched_question
FROM scored AS s
LEFT JOIN hype_questions AS q ON q.doc_id = s.doc_id AND q.position = s.slot
WHERE nullif(:'min_similarity', '') IS NULL OR s.fm_rank IS NOT NULL
   OR s.vec_score >= nullif(:'min_similarity', '')::float8
ORDER BY score DESC, s.doc_id
LIMIT (:'limit')::integer;
