-- kbstore hybrid search on PostgreSQL: the ranked lists and the fusion of
-- kbstore/backends/sqlite/search.sql (the SQLite statement), in ONE statement.
--
-- Ranked lists (each yields doc_id, rank 1..n, raw score):
--   fm    frontmatter: exact tag matches (document_tags), weighted by the share
--         of the query's words the matched tags cover (tag_terms maps each
--         candidate string to that share), then titles sharing at least two
--         distinct query words (one for a one-word query), unstemmed, ranked
--         by BM25 over titles (title_postings), at weight w_fm_title
--   fts   BM25 over title/tags/body with column weights w_title > w_tags >
--         w_body: the formula of SQLite's FTS5 bm25() (k1 = 1.2, b = 0.75,
--         IDF ln((N - df + 0.5) / (df + 0.5)) floored at 1e-6, a repeated query
--         word counted again), from fts_postings / fts_totals. PostgreSQL's
--         ts_rank has no IDF and no length normalisation, so it is not used.
--   vec   pgvector HNSW KNN (cosine) over document vectors (slot 0) AND chunk
--         vectors (slots >= 32, long documents, see kbstore/chunks.py), best
--         vector per document
--   hype  HNSW KNN over HyPE question vectors (slots 1..31); a document scores
--         the mean similarity of its hype_top best questions
--   hype_fts  BM25 over each document's HyPE questions (question_postings /
--         question_totals, the same formula, one column)
--   date  journal entries created or updated inside a date range of the query
--         (date_ranges), in the order of their text/vector evidence
-- One partial HNSW index per kind, so one document's many chunk or question
-- vectors cannot crowd out others; the topic filter runs inside the index
-- scan (hnsw.iterative_scan), so a filtered KNN still returns k rows.
--
-- Fusion (fusion = 'rrf' | 'convex') exactly as in the SQLite statement:
--   rrf     relevance = sum of w_x * weight_x / (k_rrf + rank_x)  (weight_x is
--           1 except fm's)
--   convex  relevance = sum of w_x * min-max-normalised score_x
-- then two bounded factors: the document-type boost and, for journal
-- entries, recency 1 - recency_weight * (1 - 2^(-age_days / half_life_days))
-- from `updated`, age at `now` (half_life_days empty: off). A "latest"
-- question (latest = true): the dated journal hits among the latest_top best by
-- relevance x boost, at least latest_ratio x the best and at least
-- latest_topical x the best BM25 of the topical words, and not below
-- min_similarity unless theirs is the best topical BM25, come first, newest
-- first. min_similarity (the confidence floor): when no hit's best vector
-- (document, chunk or question) is that similar to the query, nothing is
-- returned; otherwise hits below it stay only if they match query words
-- (fts or hype_fts). No query vector: no floor.
--
-- Parameters are psql variables, every one passed as text (kbstore passes
-- the same strings as bind parameters); an empty string means "none" for
-- topic, qvec, min_similarity, half_life_days and now (now = the current
-- time). Each hit's body comes back too (for its snippet). From psql:
--   \i kbstore/backends/postgres/search_defaults.psql   -- every default
--   SET search_path = kbstore_default, public;          -- the knowledge base
--   \set fts_terms '["hybrid", "search"]'
--   \set title_terms '["hybrid", "search"]'
--   \set tag_terms '{"hybrid": 0.5, "search": 0.5, "hybrid-search": 1, "hybrid search": 1}'
--   \set date_ranges '[["2026-03-01", "2026-04-01"]]'   -- or '[]'
--   \set latest false
--   \set qvec '[0.01, -0.2, ...]'      -- or '' to skip the vector lists
--   \i kbstore/backends/postgres/search.sql
-- fts_terms: the query's words (kbstore drops very common English words),
-- repeats kept; title_terms: distinct words, at most 12; tag_terms: strings
-- that count as an exact tag (words, adjacent pairs, the whole query) with
-- their share of the query; date_ranges: half-open [start, end) ISO days.
-- The statement stems and tokenises the words itself, as the documents were.
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
question_corpus AS MATERIALIZED (
    SELECT coalesce(sum(docs), 0)::float8 AS n,
           greatest(coalesce(sum(tokens)::float8 / nullif(sum(docs), 0), 1.0), 1.0) AS avg_len
    FROM question_totals
),
fm_tag AS (
    SELECT t.doc_id, least(1.0, sum(q.share::float8)) AS coverage
    FROM document_tags AS t
    JOIN jsonb_each_text(coalesce(nullif(:'tag_terms', '')::jsonb, '{}')) AS q(tag, share)
      ON t.tag = q.tag
    GROUP BY t.doc_id
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
    SELECT doc_id, coverage + title_score AS score, weight,
           row_number() OVER (ORDER BY weight DESC, title_score DESC, doc_id) AS rank
    FROM (
        SELECT doc_id, coverage, title_score,
               greatest(coverage, in_title * (:'w_fm_title')::float8) AS weight
        FROM (
            SELECT doc_id, max(coverage) AS coverage, max(title_score) AS title_score,
                   max(in_title) AS in_title
            FROM (
                SELECT doc_id, coverage, 0.0::float8 AS title_score, 0 AS in_title FROM fm_tag
                UNION ALL
                SELECT doc_id, 0.0::float8, title_score, 1 FROM fm_title
            ) AS both_kinds
            WHERE nullif(:'topic', '') IS NULL
               OR doc_id IN (SELECT id FROM documents WHERE topic = :'topic')
            GROUP BY doc_id
        ) AS matched
    ) AS weighted
    ORDER BY rank
    LIMIT (:'fm_limit')::integer
),
fts_hits AS MATERIALIZED (
    SELECT p.doc_id, p.term, q.qtf::float8 AS qtf, p.doc_len::float8 AS doc_len,
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
-- runs one index scan per kind, never one per joined row. Each predicate
-- on slot is the one of its partial HNSW index.
vec_doc_ann AS MATERIALIZED (
    SELECT doc_id, slot, embedding <=> nullif(:'qvec', '')::vector AS distance
    FROM vectors
    WHERE slot = 0 AND nullif(:'qvec', '') IS NOT NULL
      AND (nullif(:'topic', '') IS NULL OR topic = :'topic')
    ORDER BY embedding <=> nullif(:'qvec', '')::vector
    LIMIT (:'vec_k_doc')::integer
),
vec_chunk_ann AS MATERIALIZED (
    SELECT doc_id, slot, embedding <=> nullif(:'qvec', '')::vector AS distance
    FROM vectors
    WHERE slot >= 32 AND nullif(:'qvec', '') IS NOT NULL
      AND (nullif(:'topic', '') IS NULL OR topic = :'topic')
    ORDER BY embedding <=> nullif(:'qvec', '')::vector
    LIMIT (:'vec_k_chunk')::integer
),
vec_hype_ann AS MATERIALIZED (
    SELECT doc_id, slot, embedding <=> nullif(:'qvec', '')::vector AS distance
    FROM vectors
    WHERE slot BETWEEN 1 AND 31 AND nullif(:'qvec', '') IS NOT NULL
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
    SELECT * FROM vec_chunk_ann
    UNION
    (SELECT doc_id, slot, embedding <=> nullif(:'qvec', '')::vector AS distance
     FROM vectors
     WHERE slot >= 32 AND nullif(:'qvec', '') IS NOT NULL
       AND (nullif(:'topic', '') IS NULL OR topic = :'topic')
       AND (SELECT count(*) FROM vec_chunk_ann) < (:'vec_k_chunk')::integer
     ORDER BY (embedding <=> nullif(:'qvec', '')::vector) + 0
     LIMIT (:'vec_k_chunk')::integer)
),
hype_candidates AS MATERIALIZED (
    SELECT doc_id FROM vec_hype_ann
    UNION
    (SELECT doc_id
     FROM vectors
     WHERE slot BETWEEN 1 AND 31 AND nullif(:'qvec', '') IS NOT NULL
       AND (nullif(:'topic', '') IS NULL OR topic = :'topic')
       AND (SELECT count(*) FROM vec_hype_ann) < (:'vec_k_hype')::integer
     ORDER BY (embedding <=> nullif(:'qvec', '')::vector) + 0
     LIMIT (:'vec_k_hype')::integer)
),
vec_ranked AS (
    -- best vector (document or chunk) per document
    SELECT doc_id, slot, CASE WHEN slot = 0 THEN 'doc' ELSE 'chunk' END AS kind,
           1.0 - distance AS score,
           row_number() OVER (ORDER BY distance, doc_id) AS rank
    FROM (
        SELECT DISTINCT ON (doc_id) doc_id, slot, distance
        FROM vec_candidates
        ORDER BY doc_id, distance, slot
    ) AS best
    ORDER BY rank
    LIMIT (:'vec_limit')::integer
),
-- HyPE: every question of the documents the KNN found, scored exactly; a
-- document scores the mean of its hype_top best questions (several matching
-- questions count more than one stray match).
-- The candidates' questions first (MATERIALIZED): joined to vectors by its
-- key, only their vectors are read; joining vectors to the candidates
-- directly let the planner hash every question vector (~115 ms at 6k).
hype_rows AS MATERIALIZED (
    SELECT q.doc_id, q.position FROM hype_questions AS q
    WHERE q.doc_id IN (SELECT doc_id FROM hype_candidates)
),
hype_scored AS (
    SELECT h.doc_id, h.position,
           1.0 - (v.embedding <=> nullif(:'qvec', '')::vector) AS similarity,
           row_number() OVER (PARTITION BY h.doc_id
                              ORDER BY v.embedding <=> nullif(:'qvec', '')::vector,
                                       h.position) AS nth
    FROM hype_rows AS h
    JOIN vectors AS v ON v.doc_id = h.doc_id AND v.slot = h.position
),
hype_ranked AS (
    SELECT doc_id, avg(similarity) AS score, max(similarity) AS best,
           max(CASE WHEN nth = 1 THEN position END) AS position,
           row_number() OVER (ORDER BY avg(similarity) DESC, doc_id) AS rank
    FROM hype_scored
    WHERE nth <= (:'hype_top')::integer
    GROUP BY doc_id
    ORDER BY rank
    LIMIT (:'vec_limit')::integer
),
-- HyPE questions as text: BM25 over each document's questions.
hype_fts_hits AS MATERIALIZED (
    SELECT p.doc_id, q.qtf::float8 AS qtf, p.tf::float8 AS tf, p.q_len::float8 AS q_len,
           (count(*) OVER (PARTITION BY p.term))::float8 AS df
    FROM fts_query AS q JOIN question_postings AS p ON p.term = q.term
),
hype_fts_ranked AS (
    SELECT doc_id, score, row_number() OVER (ORDER BY score DESC, doc_id) AS rank
    FROM (
        SELECT h.doc_id,
               sum(h.qtf * greatest(ln((c.n - h.df + 0.5) / (h.df + 0.5)), 1e-6)
                   * h.tf * 2.2 / (h.tf + 1.2 * (0.25 + 0.75 * h.q_len / c.avg_len))) AS score
        FROM hype_fts_hits AS h CROSS JOIN question_corpus AS c
        WHERE nullif(:'topic', '') IS NULL
           OR h.doc_id IN (SELECT id FROM documents WHERE topic = :'topic')
        GROUP BY h.doc_id
        ORDER BY score DESC, h.doc_id
        LIMIT (:'fts_limit')::integer
    ) AS top
),
-- Documents dated inside a range the query names (ISO text compared
-- bytewise, as SQLite compares it: two index range scans).
date_range AS (
    SELECT r.value ->> 0 AS start_day, r.value ->> 1 AS end_day
    FROM jsonb_array_elements(coalesce(nullif(:'date_ranges', '')::jsonb, '[]')) AS r(value)
),
date_hits AS (
    SELECT d.id AS doc_id FROM date_range AS r
    JOIN documents AS d ON d.updated COLLATE "C" >= r.start_day
                       AND d.updated COLLATE "C" < r.end_day
    WHERE (nullif(:'topic', '') IS NULL OR d.topic = :'topic') AND d.doc_type = 'journal'
    UNION
    SELECT d.id FROM date_range AS r
    JOIN documents AS d ON d.created COLLATE "C" >= r.start_day
                       AND d.created COLLATE "C" < r.end_day
    WHERE (nullif(:'topic', '') IS NULL OR d.topic = :'topic') AND d.doc_type = 'journal'
),
date_ranked AS (
    SELECT h.doc_id, 1.0::float8 AS score,
           row_number() OVER (ORDER BY coalesce(1.0 / ((:'k_rrf')::float8 + f.rank), 0.0)
                                       + coalesce(1.0 / ((:'k_rrf')::float8 + v.rank), 0.0)
                                       + coalesce(1.0 / ((:'k_rrf')::float8 + y.rank), 0.0) DESC,
                                       d.updated COLLATE "C" DESC NULLS LAST, h.doc_id) AS rank
    FROM date_hits AS h
    JOIN documents AS d ON d.id = h.doc_id
    LEFT JOIN fts_ranked AS f ON f.doc_id = h.doc_id
    LEFT JOIN vec_ranked AS v ON v.doc_id = h.doc_id
    LEFT JOIN hype_ranked AS y ON y.doc_id = h.doc_id
    ORDER BY rank
    LIMIT (:'date_limit')::integer
),
lists AS (
    -- one row per (list, document); weight: fm's weight, hype's best question
    -- similarity; slot: vec's best vector, hype's best question position
    SELECT 'fm' AS list, doc_id, rank, score, weight::float8 AS weight,
           NULL::integer AS slot, NULL::text AS kind
        FROM fm_ranked
    UNION ALL SELECT 'fts', doc_id, rank, score, 1.0, NULL, NULL FROM fts_ranked
    UNION ALL SELECT 'vec', doc_id, rank, score, 1.0, slot, kind FROM vec_ranked
    UNION ALL SELECT 'hype', doc_id, rank, score, best, position, 'hype' FROM hype_ranked
    UNION ALL SELECT 'hype_fts', doc_id, rank, score, 1.0, NULL, NULL FROM hype_fts_ranked
    UNION ALL SELECT 'date', doc_id, rank, score, 1.0, NULL, NULL FROM date_ranked
),
normed AS (
    -- min-max normalised score per list (for 'convex'; a one-valued list is 1)
    SELECT *, coalesce((score - min(score) OVER w)
                       / nullif(max(score) OVER w - min(score) OVER w, 0), 1.0) AS norm
    FROM lists
    WINDOW w AS (PARTITION BY list)
),
fused AS (
    SELECT doc_id,
           max(rank) FILTER (WHERE list = 'fm') AS fm_rank,
           max(weight) FILTER (WHERE list = 'fm') AS fm_weight,
           max(norm) FILTER (WHERE list = 'fm') AS fm_norm,
           max(rank) FILTER (WHERE list = 'fts') AS fts_rank,
           max(score) FILTER (WHERE list = 'fts') AS fts_score,
           max(norm) FILTER (WHERE list = 'fts') AS fts_norm,
           max(rank) FILTER (WHERE list = 'vec') AS vec_rank,
           max(score) FILTER (WHERE list = 'vec') AS vec_score,
           max(norm) FILTER (WHERE list = 'vec') AS vec_norm,
           max(slot) FILTER (WHERE list = 'vec') AS vec_slot,
           max(kind) FILTER (WHERE list = 'vec') AS vec_kind,
           max(rank) FILTER (WHERE list = 'hype') AS hype_rank,
           max(score) FILTER (WHERE list = 'hype') AS hype_score,
           max(weight) FILTER (WHERE list = 'hype') AS hype_best,
           max(norm) FILTER (WHERE list = 'hype') AS hype_norm,
           max(slot) FILTER (WHERE list = 'hype') AS hype_position,
           max(rank) FILTER (WHERE list = 'hype_fts') AS hype_fts_rank,
           max(norm) FILTER (WHERE list = 'hype_fts') AS hype_fts_norm,
           max(rank) FILTER (WHERE list = 'date') AS date_rank
    FROM normed
    GROUP BY doc_id
),
-- Text-vector agreement (see the SQLite statement): the text lists (fts, fm)
-- weigh min(1, agreement / agreement_ratio)^2, agreement = mean similarity
-- of the agreement_top best fts hits (best document or chunk vector) / the
-- vec list's best similarity, but never less than (s1 - s2) / s1 of the top
-- two fts scores. agreement_ratio 0, no query vector or no fts hit: 1.
-- vec_gap: the vector rank 1's standout, (s1 - s2) / (1 - s2), s2 (at
-- least 0) the best similarity of any other document (vec rank 2 or another document's best
-- HyPE question; 0 when s2 >= s1, with no other hit or s1 <= 0); its RRF
-- term weighs 1 + vec_standout x vec_gap (RRF only).
text_sims AS (
    SELECT f.score AS fts_score,
           coalesce(v.score,
                    (SELECT max(1.0 - (x.embedding <=> nullif(:'qvec', '')::vector))
                     FROM vectors AS x
                     WHERE x.doc_id = f.doc_id AND (x.slot = 0 OR x.slot >= 32))) AS similarity
    FROM fts_ranked AS f LEFT JOIN vec_ranked AS v ON v.doc_id = f.doc_id
    WHERE f.rank <= (:'agreement_top')::integer AND (:'agreement_ratio')::float8 > 0
      AND nullif(:'qvec', '') IS NOT NULL
),
text_agreement AS MATERIALIZED (
    SELECT CASE WHEN a.mean IS NULL OR a.best IS NULL THEN 1.0::float8
                ELSE greatest(least(1.0, greatest(0.0, a.mean) / a.best
                                         / (:'agreement_ratio')::float8) ^ 2,
                              a.standout) END AS text_weight,
           coalesce(a.vec_gap, 0.0)::float8 AS vec_gap
    FROM (SELECT (SELECT avg(similarity) FROM text_sims) AS mean,
                 (SELECT CASE WHEN v.s1 > 0 AND v.s2 IS NOT NULL AND v.s2 < 1
                              THEN greatest(v.s1 - greatest(v.s2, 0.0), 0.0) / (1.0 - greatest(v.s2, 0.0)) END
                  FROM (SELECT (SELECT score FROM vec_ranked WHERE rank = 1) AS s1,
                               (SELECT max(s) FROM (
                                    SELECT score AS s FROM vec_ranked WHERE rank = 2
                                    UNION ALL
                                    SELECT best FROM hype_ranked
                                    WHERE doc_id IS DISTINCT FROM
                                          (SELECT doc_id FROM vec_ranked WHERE rank = 1))
                                    AS o) AS s2) AS v)
                     AS vec_gap,
                 (SELECT max(score) FROM vec_ranked WHERE score > 0) AS best,
                 (SELECT CASE WHEN count(*) > 1 THEN (max(score) - min(score)) / max(score)
                              ELSE 1.0 END
                  FROM fts_ranked WHERE rank <= 2 AND score > 0) AS standout) AS a
),
-- The floor needs every hit's best similarity: hits found by neither vector
-- list get it from all their stored vectors (only when a floor is set).
floor_similarity AS (
    SELECT v.doc_id, max(1.0 - (v.embedding <=> nullif(:'qvec', '')::vector)) AS similarity
    FROM vectors AS v
    WHERE nullif(:'min_similarity', '') IS NOT NULL AND nullif(:'qvec', '') IS NOT NULL
      AND v.doc_id IN (SELECT doc_id FROM fused WHERE vec_score IS NULL AND hype_best IS NULL)
    GROUP BY v.doc_id
),
scored AS (
    SELECT f.*, d.path, d.title, d.tags, d.topic, d.doc_type, d.created, d.updated, d.body,
           t.text_weight, t.vec_gap,
           greatest(coalesce(f.vec_score, -1.0), coalesce(f.hype_best, -1.0),
                    coalesce(s.similarity, -1.0)) AS similarity,
           coalesce((:'w_fm')::float8 * t.text_weight * f.fm_weight
                    / ((:'k_rrf')::float8 + f.fm_rank), 0.0) AS rrf_fm,
           coalesce((:'w_fts')::float8 * t.text_weight / ((:'k_rrf')::float8 + f.fts_rank), 0.0)
               AS rrf_fts,
           coalesce((:'w_vec')::float8
                    * CASE WHEN f.vec_rank = 1 THEN 1.0 + (:'vec_standout')::float8 * t.vec_gap
                           ELSE 1.0 END
                    / ((:'k_rrf')::float8 + f.vec_rank), 0.0) AS rrf_vec,
           CASE WHEN f.vec_rank = 1
                THEN (:'w_vec')::float8 * (:'vec_standout')::float8 * t.vec_gap
                     / ((:'k_rrf')::float8 + 1.0)
                ELSE 0.0 END AS standout_bonus,
           coalesce((:'w_hype')::float8 / ((:'k_rrf')::float8 + f.hype_rank), 0.0) AS rrf_hype,
           coalesce((:'w_hype_fts')::float8 / ((:'k_rrf')::float8 + f.hype_fts_rank), 0.0)
               AS rrf_hype_fts,
           coalesce((:'w_date')::float8 / ((:'k_rrf')::float8 + f.date_rank), 0.0) AS rrf_date,
           coalesce((:'w_fm')::float8 * t.text_weight * f.fm_weight * f.fm_norm, 0.0)
               + coalesce((:'w_fts')::float8 * t.text_weight * f.fts_norm, 0.0)
               + coalesce((:'w_vec')::float8 * f.vec_norm, 0.0)
               + coalesce((:'w_hype')::float8 * f.hype_norm, 0.0)
               + coalesce((:'w_hype_fts')::float8 * f.hype_fts_norm, 0.0)
               + CASE WHEN f.date_rank IS NOT NULL THEN (:'w_date')::float8 ELSE 0.0 END
               AS convex,
           CASE d.doc_type WHEN 'skill' THEN (:'boost_skill')::float8
                           WHEN 'journal' THEN (:'boost_journal')::float8
                           ELSE (:'boost_entry')::float8 END AS boost,
           CASE WHEN d.doc_type = 'journal' AND d.updated_at IS NOT NULL
                     AND nullif(:'half_life_days', '') IS NOT NULL
                THEN 1.0 - (:'recency_weight')::float8 * (1.0 - exp(-ln(2.0)
                         * greatest(extract(epoch FROM
                             coalesce(nullif(:'now', '')::timestamptz, now()) - d.updated_at)::float8
                             / 86400.0, 0.0) / nullif(:'half_life_days', '')::float8))
                ELSE 1.0 END AS recency
    FROM fused AS f
    JOIN documents AS d ON d.id = f.doc_id
    LEFT JOIN floor_similarity AS s ON s.doc_id = f.doc_id
    CROSS JOIN text_agreement AS t
),
kept AS (
    SELECT *, evidence * recency AS relevance
    FROM (SELECT *, (CASE :'fusion' WHEN 'convex' THEN convex
                                    ELSE rrf_fm + rrf_fts + rrf_vec + rrf_hype + rrf_hype_fts
                                         + rrf_date END)
                        * boost AS evidence,
                 -- without the vector standout's share: what a "latest"
                 -- question picks its eligible entries by (latest below)
                 (CASE :'fusion' WHEN 'convex' THEN convex
                                 ELSE rrf_fm + rrf_fts + rrf_vec - standout_bonus + rrf_hype
                                      + rrf_hype_fts + rrf_date END)
                        * boost AS latest_evidence,
                 max(similarity) OVER () AS best_similarity
          FROM scored) AS all_hits
    WHERE nullif(:'min_similarity', '') IS NULL OR nullif(:'qvec', '') IS NULL
       OR similarity >= nullif(:'min_similarity', '')::float8
       OR ((fts_rank IS NOT NULL OR hype_fts_rank IS NOT NULL)
           AND best_similarity >= nullif(:'min_similarity', '')::float8)
),
-- A "latest" question's topical words (topical_terms: its fts_terms without
-- the cue words): their BM25 per entry, as fts_ranked scores (see the SQLite
-- statement), from fts_hits (their words are among the query's: the same
-- postings, tf and df). Empty: no topical test.
topical_query AS (
    SELECT x.lexeme AS term, count(*) AS qtf
    FROM jsonb_array_elements_text(coalesce(nullif(:'topical_terms', '')::jsonb, '[]')) AS q(word),
         unnest(to_tsvector('english', q.word)) AS x
    WHERE (:'latest')::boolean
    GROUP BY x.lexeme
),
topical AS MATERIALIZED (
    SELECT h.doc_id,
           sum(t.qtf * greatest(ln((c.n - h.df + 0.5) / (h.df + 0.5)), 1e-6)
               * h.tf * 2.2 / (h.tf + 1.2 * (0.25 + 0.75 * h.doc_len / c.avg_len))) AS score
    FROM topical_query AS t JOIN fts_hits AS h ON h.term = t.term CROSS JOIN corpus AS c
    WHERE nullif(:'topic', '') IS NULL
       OR h.doc_id IN (SELECT id FROM documents WHERE topic = :'topic')
    GROUP BY h.doc_id
),
latest AS (
    -- eligible: dated, among the latest_top best by evidence and close to
    -- the best (recency left out: being new must not make an entry relevant);
    -- journal entries only (an entry's `updated` is its last edit, not an event)
    SELECT *, CASE WHEN (:'latest')::boolean AND latest_evidence > 0 AND doc_type = 'journal'
                        AND coalesce(updated, created) IS NOT NULL
                        AND evidence_rank <= (:'latest_top')::integer
                        AND latest_evidence
                            >= (:'latest_ratio')::float8 * max(latest_evidence) OVER ()
                        -- on topic (no test when no entry scores above 0)
                        AND (coalesce((SELECT max(score) FROM topical), 0.0) <= 0.0
                             OR coalesce(topical_score, 0.0)
                                >= (:'latest_topical')::float8
                                   * (SELECT max(score) FROM topical))
                        -- above the confidence floor, unless its words are the
                        -- best on the topic (a hit kept below the floor for
                        -- stray words is not promoted by its date)
                        AND (nullif(:'min_similarity', '') IS NULL OR nullif(:'qvec', '') IS NULL
                             OR similarity >= nullif(:'min_similarity', '')::float8
                             OR coalesce(topical_score, 0.0)
                                >= greatest(coalesce((SELECT max(score) FROM topical), 0.0), 1e-300))
                   THEN 1 ELSE 0 END AS in_latest,
           max(relevance) OVER () AS best
    FROM (SELECT k.*, t.score AS topical_score,
                 row_number() OVER (ORDER BY k.latest_evidence DESC, k.doc_id) AS evidence_rank
          FROM kept AS k LEFT JOIN topical AS t ON t.doc_id = k.doc_id) AS ranked
),
final AS (
    SELECT *,
           CASE WHEN in_latest = 1 THEN row_number() OVER (
                    PARTITION BY in_latest
                    ORDER BY coalesce(updated, created) COLLATE "C" DESC, doc_id)
           END AS latest_rank,
           sum(in_latest) OVER () AS n_latest
    FROM latest
)
SELECT s.doc_id, s.path, s.title, s.tags, s.topic, s.doc_type, s.updated, s.body,
       CASE WHEN s.in_latest = 1
            THEN s.best * (2.0 - (s.latest_rank - 1.0) / s.n_latest)
            ELSE s.relevance END AS score,
       s.relevance, s.similarity,
       s.fm_rank, s.fm_weight, s.fts_rank, s.vec_rank, s.hype_rank, s.hype_fts_rank,
       s.date_rank, s.fts_score, s.vec_score, s.hype_score,
       s.rrf_fm, s.rrf_fts, s.rrf_vec, s.rrf_hype, s.rrf_hype_fts, s.rrf_date, s.convex,
       s.boost, s.recency, s.text_weight, s.vec_gap,
       s.latest_rank,
       s.vec_kind AS matched_kind, c.start_char AS chunk_start, c.end_char AS chunk_end,
       q.question AS matched_question
FROM final AS s
LEFT JOIN document_chunks AS c ON s.vec_slot >= 32
      AND c.doc_id = s.doc_id AND c.position = s.vec_slot - 32
LEFT JOIN hype_questions AS q ON q.doc_id = s.doc_id AND q.position = s.hype_position
ORDER BY score DESC, s.doc_id
LIMIT (:'limit')::integer;
