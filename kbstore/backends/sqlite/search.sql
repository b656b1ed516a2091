-- kbstore hybrid search: three retrievers fused in ONE statement.
--
-- Retrievers (each yields doc_id, rank 1..n, raw score):
--   fm   frontmatter: exact tag matches (document_tags), then exact (unstemmed)
--        title-word overlap (titles_fts)
--   fts  FTS5 BM25 over title/tags/body (weights :w_title > :w_tags > :w_body)
--   vec  vector KNN over document AND HyPE vectors: a sign-bit prefilter per
--        kind (so one document's many HyPE vectors cannot crowd out others),
--        exact cosine rescoring, best vector per document
-- Fusion (:fusion):
--   'rrf'    sum of :w_x / (:k_rrf + rank_x)            (default; k, weights: kbstore/query.py)
--   'convex' sum of :w_x * min-max-normalised score_x
-- then x document-type boost (:boost_skill / :boost_journal / :boost_entry)
-- and x journal recency decay exp(-ln 2 * age_days / :half_life_days) from
-- `updated`, age measured at :now (:half_life_days NULL: no decay).
-- Optional :min_similarity drops hits that are neither a frontmatter match
-- nor that close to the query vector.
--
-- Run it from the sqlite3 shell (see README): `kbstore search --shell` writes
-- a script that .loads sqlite-vec, sets every parameter and runs this file.
-- :qvec may be a JSON array ('[0.1, ...]') or a float32 blob; NULL skips vec.
-- :fts_query / :title_query are FTS5 expressions built from escaped terms
-- (see kbstore/backends/sqlite/search.py); NULL skips them. :tag_terms is a JSON array.

WITH
fm_tag AS (
    SELECT doc_id, count(*) AS hits
    FROM document_tags
    WHERE tag IN (SELECT value FROM json_each(:tag_terms))
    GROUP BY doc_id
),
fm_title AS (
    SELECT rowid AS doc_id, -rank AS title_score
    FROM titles_fts
    WHERE :title_query IS NOT NULL AND titles_fts MATCH :title_query
    ORDER BY rank
    LIMIT :fm_limit
),
fm_ranked AS (
    -- weight: an exact tag match is curated metadata (1.0); a title-only
    -- overlap is a weak signal (:w_fm_title, see search.py DEFAULTS).
    SELECT doc_id, score,
           row_number() OVER (ORDER BY tag_hits DESC, title_score DESC, doc_id) AS rank,
           CASE WHEN tag_hits > 0 THEN 1.0 ELSE :w_fm_title END AS weight
    FROM (
        SELECT doc_id, max(tag_hits) AS tag_hits, max(title_score) AS title_score,
               max(tag_hits) + max(title_score) AS score
        FROM (
            SELECT doc_id, hits AS tag_hits, 0.0 AS title_score FROM fm_tag
            UNION ALL
            SELECT doc_id, 0 AS tag_hits, title_score FROM fm_title
        )
        WHERE :topic IS NULL OR doc_id IN (SELECT id FROM documents WHERE topic = :topic)
        GROUP BY doc_id
    )
    ORDER BY rank
    LIMIT :fm_limit
),
fts_ranked AS (
    SELECT doc_id, score, row_number() OVER (ORDER BY score DESC, doc_id) AS rank
    FROM (
        SELECT rowid AS doc_id, -bm25(documents_fts, :w_title, :w_tags, :w_body) AS score
        FROM documents_fts
        WHERE :fts_query IS NOT NULL AND documents_fts MATCH :fts_query
          AND (:topic IS NULL OR rowid IN (SELECT id FROM documents WHERE topic = :topic))
        ORDER BY bm25(documents_fts, :w_title, :w_tags, :w_body)
        LIMIT :fts_limit
    )
),
-- KNN on sign bits (hamming), separately in the 'doc' and 'hype' partitions
-- of vec0, so a document's many HyPE vectors cannot crowd out other
-- documents. The topic filter is a vec0 metadata constraint: it runs inside
-- the KNN, which therefore still returns k rows of that topic.
vec_doc AS MATERIALIZED (
    SELECT vector_id, doc_id FROM vectors
    WHERE embedding_bits MATCH vec_quantize_binary(vec_f32(:qvec)) AND k = :vec_k_doc
      AND kind = 'doc'
      AND topic >= coalesce(:topic, '') AND topic <= coalesce(:topic, char(1114111))
),
vec_hype AS MATERIALIZED (
    SELECT vector_id, doc_id FROM vectors
    WHERE embedding_bits MATCH vec_quantize_binary(vec_f32(:qvec)) AND k = :vec_k_hype
      AND kind = 'hype'
      AND topic >= coalesce(:topic, '') AND topic <= coalesce(:topic, char(1114111))
),
-- Exact cosine for the candidates, from the float32 copy.
vec_scored AS (
    SELECT c.doc_id, c.vector_id,
           1.0 - vec_distance_cosine(v.embedding, vec_f32(:qvec)) AS similarity
    FROM (SELECT * FROM vec_doc UNION ALL SELECT * FROM vec_hype) AS c
    JOIN vector_data AS v ON v.vector_id = c.vector_id
),
vec_ranked AS (
    SELECT doc_id, vector_id, similarity AS score,
           row_number() OVER (ORDER BY similarity DESC, doc_id) AS rank
    FROM (
        SELECT doc_id, vector_id, similarity,
               row_number() OVER (PARTITION BY doc_id ORDER BY similarity DESC) AS nth
        FROM vec_scored
    )
    WHERE nth = 1
    ORDER BY rank
    LIMIT :vec_limit
),
fused AS (
    SELECT doc_id,
           max(fm_rank) AS fm_rank, max(fm_norm) AS fm_norm, max(fm_weight) AS fm_weight,
           max(fts_rank) AS fts_rank, max(fts_score) AS fts_score, max(fts_norm) AS fts_norm,
           max(vec_rank) AS vec_rank, max(vec_score) AS vec_score, max(vec_norm) AS vec_norm,
           max(vector_id) AS vector_id
    FROM (
        SELECT doc_id, rank AS fm_rank,
               coalesce((score - min(score) OVER ()) / nullif(max(score) OVER () - min(score) OVER (), 0), 1.0) AS fm_norm,
               weight AS fm_weight,
               NULL AS fts_rank, NULL AS fts_score, NULL AS fts_norm,
               NULL AS vec_rank, NULL AS vec_score, NULL AS vec_norm, NULL AS vector_id
        FROM fm_ranked
        UNION ALL
        SELECT doc_id, NULL, NULL, NULL, rank, score,
               coalesce((score - min(score) OVER ()) / nullif(max(score) OVER () - min(score) OVER (), 0), 1.0),
               NULL, NULL, NULL, NULL
        FROM fts_ranked
        UNION ALL
        SELECT doc_id, NULL, NULL, NULL, NULL, NULL, NULL, rank, score,
               coalesce((score - min(score) OVER ()) / nullif(max(score) OVER () - min(score) OVER (), 0), 1.0),
               vector_id
        FROM vec_ranked
    )
    GROUP BY doc_id
),
scored AS (
    SELECT f.*, d.path, d.title, d.tags, d.topic, d.doc_type, d.updated, d.body,
           coalesce(:w_fm * f.fm_weight / (:k_rrf + f.fm_rank), 0.0) AS rrf_fm,
           coalesce(:w_fts / (:k_rrf + f.fts_rank), 0.0) AS rrf_fts,
           coalesce(:w_vec / (:k_rrf + f.vec_rank), 0.0) AS rrf_vec,
           coalesce(:w_fm * f.fm_weight * f.fm_norm, 0.0) + coalesce(:w_fts * f.fts_norm, 0.0)
               + coalesce(:w_vec * f.vec_norm, 0.0) AS convex,
           CASE d.doc_type WHEN 'skill' THEN :boost_skill
                           WHEN 'journal' THEN :boost_journal
                           ELSE :boost_entry END AS boost,
           CASE WHEN d.doc_type = 'journal' AND julianday(d.updated) IS NOT NULL
                     AND :half_life_days IS NOT NULL
                THEN exp(-ln(2.0) * max(julianday(:now) - julianday(d.updated), 0.0)
                         / :half_life_days)
                ELSE 1.0 END AS decay
    FROM fused AS f JOIN documents AS d ON d.id = f.doc_id
)
SELECT s.doc_id, s.path, s.title, s.tags, s.topic, s.doc_type, s.updated, s.body,
       (CASE :fusion WHEN 'convex' THEN s.convex ELSE s.rrf_fm + s.rrf_fts + s.rrf_vec END)
           * s.boost * s.decay AS score,
       s.fm_rank, s.fm_weight, s.fts_rank, s.vec_rank, s.fts_score, s.vec_score,
       s.rrf_fm, s.rrf_fts, s.rrf_vec, s.convex, s.boost, s.decay,
       CASE WHEN s.vector_id % 32 = 0 THEN 'doc' ELSE 'hype' END AS matched_kind,
       q.question AS matched_question
FROM scored AS s
LEFT JOIN hype_questions AS q
       ON q.doc_id = s.doc_id AND q.position = s.vector_id % 32
WHERE :min_similarity IS NULL OR s.fm_rank IS NOT NULL OR s.vec_score >= :min_similarity
ORDER BY score DESC, s.doc_id
LIMIT :limit;
