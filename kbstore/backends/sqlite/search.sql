-- kbstore hybrid search: five ranked lists fused in ONE statement.
--
-- Ranked lists (each yields doc_id, rank 1..n, a raw score):
--   fm    frontmatter: exact tag matches (document_tags), weighted by the share
--         of the query's words the matched tags cover (:tag_terms maps each
--         candidate string to that share), then exact (unstemmed) title-word
--         overlap (titles_fts: at least two of the words) at weight :w_fm_title
--   fts   FTS5 BM25 over title/tags/body (weights :w_title > :w_tags > :w_body)
--   vec   vector KNN over document AND chunk vectors (chunks: long documents,
--         see kbstore/chunks.py), best vector per document
--   hype  vector KNN over HyPE question vectors; a document scores the mean
--         similarity of its :hype_top best questions
--   hype_fts  BM25 over each document's HyPE questions (questions_fts)
--   date  journal entries created or updated inside a date range of the query
--         (:date_ranges, from "on 16 June 2023", "in March", "last week"...),
--         in the order of their text/vector evidence
-- Each KNN: a sign-bit prefilter within one kind of vector ('doc' | 'chunk'
-- | 'hype'), so one document's many chunk or question vectors cannot crowd
-- out others, then exact cosine from the float32 copy (vector_data). The
-- sign bits are ranked by a scan of vector_data's bits indexes while the
-- file holds at most :plain_docs documents, else by vec0's KNN (one
-- partition per kind); see vec_plan.
-- Every read of a float32 copy first checks it is a BLOB of :vec_bytes
-- (4 x the store's dimension): a copy damaged by hand (wrong size, text,
-- a number) drops out of the vector lists instead of failing the whole
-- statement; `kbstore doctor` names it (invalid_vectors), --fix re-embeds.
-- Vector plan (:vec_plan), per kind: 'bits' = that KNN; 'exact' = the top
-- k by exact cosine over that kind's float32 copies instead; 'auto' = exact
-- while the file holds at most :exact_ratio x k vectors of the kind. vec0's
-- KNN costs about k x 4096 (its chunk size) comparisons per chunk, however
-- few vectors a chunk holds; a scan costs one cosine per vector: on a small
-- file the scan is cheaper (benchmarks/speed.py measures both plans).
--
-- Fusion (:fusion):
--   'rrf'    relevance = sum of :w_x * weight_x / (:k_rrf + rank_x)   (default;
--            weight_x is 1 except fm's; :w_hype_fts weighs hype_fts)
--   'convex' relevance = sum of :w_x * min-max-normalised score_x
-- Then two BOUNDED factors, so neither can override clear evidence:
--   boost    document type: :boost_skill / :boost_journal / :boost_entry
--   recency  journal entries only: 1 - :recency_weight * (1 - 2^(-age/:half_life_days)),
--            age from `updated` at :now; never below 1 - :recency_weight
--            (:half_life_days NULL: off, factor 1)
-- score = relevance * boost * recency, except for a "latest" question
-- (:latest = 1: "last time", "most recent", ...): the dated journal hits among
-- the :latest_top best by relevance * boost (without the vector rank 1's
-- standout: it must not make the others ineligible) whose relevance * boost is at least
-- :latest_ratio x the best and whose BM25 on the question's topical words
-- (:topical_query) is at least :latest_topical x the best, and whose
-- similarity is not below :min_similarity unless their topical BM25 is the
-- best, come first, newest
-- first (by updated, else created); their score is
-- best * (2 - (latest_rank - 1) / n_latest).
-- :min_similarity (the confidence floor): when no hit's best vector --
-- document, chunk or question -- is that similar to the query, the query is
-- out of the knowledge base and nothing is returned; otherwise hits below it
-- are kept only if they also match query words (fts or hype_fts). No query
-- vector: no floor.
--
-- Vector ids (owned by kbstore/backends/sqlite/vectors.py): a document's
-- vector and its questions are doc_id * 32 + slot (question position = slot,
-- used by hype_scored);
-- chunk vectors are listed by id in document_chunks.
--
-- Every LIMIT reads its parameter through (SELECT :x): SQLite plans with the
-- value of a bare LIMIT parameter and so re-prepares the statement each time
-- it is bound -- for this statement, its whole compile on every search.
--
-- Run it from the sqlite3 shell (see README): `kbstore search --shell` writes
-- a script that .loads sqlite-vec, sets every parameter and runs this file.
-- :qvec may be a JSON array ('[0.1, ...]') or a float32 blob; :has_vector 0
-- and k = 0 skip the vector side. :fts_query / :title_query are FTS5
-- OR expressions of escaped terms, :title_words a JSON array of the same
-- quoted title terms (see kbstore/backends/sqlite/search.py); NULL skips them. :tag_terms is a JSON object, :date_ranges a JSON array of
-- ["YYYY-MM-DD", "YYYY-MM-DD"] half-open day ranges.

WITH
fm_tag AS (
    SELECT t.doc_id, min(1.0, sum(q.value)) AS coverage
    FROM document_tags AS t JOIN json_each(:tag_terms) AS q ON t.tag = q.key
    GROUP BY t.doc_id
),
-- Titles sharing at least two of the query's words (one for a one-word
-- query), scored as FTS5 scores an OR of word pairs: phrase by phrase, so a
-- title holding m of the words matches m - 1 pairs per word and scores
-- (m - 1) x the BM25 of the OR of the words (x 1 for one word). One MATCH
-- per word counts m: n + 1 index lookups instead of n(n - 1)/2 AND pairs.
fm_title_words AS (
    SELECT f.rowid AS doc_id, count(*) AS words
    FROM json_each(:title_words) AS w
    JOIN titles_fts AS f ON titles_fts MATCH w.value
    WHERE :title_query IS NOT NULL
    GROUP BY f.rowid
    HAVING count(*) >= min(2, json_array_length(:title_words))
),
fm_title AS (
    SELECT w.doc_id, max(w.words - 1, 1) * -t.rank AS title_score
    FROM fm_title_words AS w
    JOIN (SELECT rowid, rank FROM titles_fts
          WHERE :title_query IS NOT NULL AND titles_fts MATCH :title_query) AS t
      ON t.rowid = w.doc_id
    ORDER BY title_score DESC, w.doc_id
    LIMIT (SELECT :fm_limit)
),
fm_ranked AS (
    SELECT doc_id, coverage + title_score AS score, weight,
           row_number() OVER (ORDER BY weight DESC, title_score DESC, doc_id) AS rank
    FROM (
        SELECT doc_id, coverage, title_score,
               max(coverage, in_title * :w_fm_title) AS weight
        FROM (
            SELECT doc_id, max(coverage) AS coverage, max(title_score) AS title_score,
                   max(in_title) AS in_title
            FROM (
                SELECT doc_id, coverage, 0.0 AS title_score, 0 AS in_title FROM fm_tag
                UNION ALL
                SELECT doc_id, 0.0, title_score, 1 FROM fm_title
            )
            WHERE :topic IS NULL OR doc_id IN (SELECT id FROM documents WHERE topic = :topic)
            GROUP BY doc_id
        )
    )
    ORDER BY rank
    LIMIT (SELECT :fm_limit)
),
-- FTS5 scores every row an OR query matches with BM25 (no top-k pruning),
-- and about half the documents match a typical query's OR. Scored exactly,
-- with fewer rows (max-score pruning): a term's BM25 share is below
-- idf x (k1 + 1) = 2.2 idf whatever its frequency, so a document holding only
-- the query's common terms C scores below :bound = sum of their 2.2 idf. The
-- rows holding a rarer term are scored first (with the whole query: the same
-- BM25 as before); when :fts_limit of them score above the bound, no row of
-- C alone can enter the list and none is scored. Otherwise the other rows are
-- scored too (each row once), so the list is the unpruned one in every case.
-- C: the most common terms whose bounds add up to at most :fts_prune x the
-- largest term's; no pruning below :fts_prune_rows indexed rows, where the
-- term counts cost more than it saves (speed choices only, measured in
-- benchmarks/fts_cost.py; see FTS_PRUNE in search.py).
fts_words AS MATERIALIZED (
    -- df: rows holding the quoted term (what BM25's idf counts); N: indexed rows
    SELECT term, df,
           2.2 * max(ln(max(n - df, 0) + 0.5) - ln(df + 0.5), 1e-6) * phrases AS bound
    FROM (SELECT w.value AS term, count(*) AS phrases,
                 (SELECT count(*) FROM documents_fts WHERE documents_fts MATCH w.value) AS df,
                 (SELECT count(*) FROM documents_fts_docsize) AS n
          FROM json_each(:fts_words) AS w
          WHERE :fts_query IS NOT NULL AND :fts_prune > 0
            AND (SELECT count(*) FROM documents_fts_docsize) >= :fts_prune_rows
          GROUP BY w.value)
),
fts_split AS MATERIALIZED (
    SELECT group_concat(CASE WHEN NOT common THEN term END, ' OR ') AS rare_query,
           -- a margin for the rounding of two ways to sum the same floats
           coalesce(sum(CASE WHEN common THEN bound END), 0.0) * (1 + 1e-9) + 1e-12 AS bound,
           coalesce(max(common), 0) AS pruned
    FROM (SELECT term, bound,
                 sum(bound) OVER (ORDER BY df DESC, term ROWS UNBOUNDED PRECEDING)
                     <= :fts_prune * (SELECT max(bound) FROM fts_words) AS common
          FROM fts_words)
),
-- Each FTS list orders by its selected score (-bm25), not by a second
-- bm25() call: SQLite would compute that one again for every matched row.
-- Each gate below is a one-row CTE CROSS JOINed before documents_fts: a
-- condition on it is tested before FTS5 is asked to run its MATCH at all.
fts_rare AS MATERIALIZED (
    SELECT documents_fts.rowid AS doc_id
    FROM fts_split AS s CROSS JOIN documents_fts
    WHERE s.pruned AND documents_fts MATCH s.rare_query
),
fts_rare_top AS MATERIALIZED (
    SELECT documents_fts.rowid AS doc_id,
           -bm25(documents_fts, :w_title, :w_tags, :w_body) AS score
    FROM fts_split AS s CROSS JOIN documents_fts
    WHERE s.pruned AND documents_fts MATCH :fts_query
      AND +documents_fts.rowid IN (SELECT doc_id FROM fts_rare)
      AND (:topic IS NULL OR documents_fts.rowid IN (SELECT id FROM documents
                                                     WHERE topic = :topic))
    ORDER BY score DESC, doc_id
    LIMIT (SELECT :fts_limit)
),
fts_gate AS MATERIALIZED (
    -- decided: :fts_limit rows holding a rarer term all score above the bound
    SELECT (SELECT pruned FROM fts_split) AS pruned,
           coalesce(count(*) >= :fts_limit AND min(score) > (SELECT bound FROM fts_split), 0)
               AS decided
    FROM fts_rare_top
),
fts_rest AS (
    -- unpruned: every matched row; pruned, undecided: the rows not scored yet
    SELECT documents_fts.rowid AS doc_id,
           -bm25(documents_fts, :w_title, :w_tags, :w_body) AS score
    FROM fts_gate AS g CROSS JOIN documents_fts
    WHERE :fts_query IS NOT NULL AND NOT g.decided AND documents_fts MATCH :fts_query
      AND (NOT g.pruned OR +documents_fts.rowid NOT IN (SELECT doc_id FROM fts_rare))
      AND (:topic IS NULL OR documents_fts.rowid IN (SELECT id FROM documents
                                                     WHERE topic = :topic))
    ORDER BY score DESC, doc_id
    LIMIT (SELECT :fts_limit)
),
fts_ranked AS (
    -- ties at the limit: the lowest rowids, as FTS5's rowid order gave them
    SELECT doc_id, score, row_number() OVER (ORDER BY score DESC, doc_id) AS rank
    FROM (SELECT doc_id, score FROM fts_rare_top UNION ALL SELECT doc_id, score FROM fts_rest
          ORDER BY score DESC, doc_id
          LIMIT (SELECT :fts_limit))
),
vec_plan AS MATERIALIZED (
    -- per kind: 1 = exact scan, 0 = sign bits; 'auto' counts each kind's
    -- rows only up to the bound (an index scan of at most that many entries).
    -- plain: the sign bits are scanned in the bits indexes of vector_data
    -- while the file holds at most :plain_docs documents (0: never), else
    -- vec0's KNN ranks them (the same bits; ties at the k-th distance are
    -- broken by vector_id in a scan, by vec0's chunk order in its KNN)
    SELECT CASE :vec_plan WHEN 'exact' THEN 1 WHEN 'bits' THEN 0
           ELSE docs_n.n <= :exact_ratio * :vec_k_doc END AS doc,
           CASE :vec_plan WHEN 'exact' THEN 1 WHEN 'bits' THEN 0
           ELSE (SELECT count(*) FROM (SELECT 1 FROM document_chunks
                                       LIMIT :exact_ratio * :vec_k_chunk + 1))
                <= :exact_ratio * :vec_k_chunk END AS chunk,
           CASE :vec_plan WHEN 'exact' THEN 1 WHEN 'bits' THEN 0
           ELSE questions_n.n <= :exact_ratio * :vec_k_hype END AS hype,
           docs_n.n <= :plain_docs AS plain,
           -- the sign bits' question candidates: more of them in a larger store
           CASE WHEN questions_n.n > :hype_oversample_rows THEN :hype_oversample_large
                ELSE :hype_oversample END AS hype_oversample
    -- count(*) of a whole table walks its pages, not its rows: the
    -- documents' (a small index) costs ~10 us at 50k documents; the
    -- questions' is cheaper than counting up to the bound row by row while
    -- the file is small (10k documents: 0.03 vs 0.7 ms), dearer above
    FROM (SELECT count(*) AS n FROM documents) AS docs_n
    CROSS JOIN (SELECT CASE WHEN (SELECT count(*) FROM documents) <= 10000
                            THEN (SELECT count(*) FROM hype_questions)
                            ELSE (SELECT count(*) FROM (
                                      SELECT 1 FROM hype_questions
                                      LIMIT max(:exact_ratio * :vec_k_hype,
                                                :hype_oversample_rows) + 1)) END AS n)
               AS questions_n
),
-- KNN on sign bits (hamming), one kind each (k = 0 when that kind is
-- scanned exactly), then exact cosine for those candidates from the
-- float32 copy (vector_data); or the exact plan's top k of that kind, its
-- cosine computed once in the scan: float32 vectors reached from documents
-- / document_chunks / hype_questions (document vector doc_id * 32, question
-- doc_id * 32 + position).
-- The sign bits of a small or medium file (plain, see vec_plan) are ranked
-- by a scan of one partial covering index of vector_data per kind
-- (vector_bits_doc / _hype / _chunk, schema v5): one hamming distance per
-- vector, the topic filter a lookup of each row's document. vec0's KNN
-- costs about k comparisons per stored vector (k x 4096 per chunk), so at
-- these k the scan was cheaper at every size measured, 1k to 100k
-- documents (benchmarks/results/speed_small_2.md).
-- Above, vec0: each KNN is two vec0 scans, one of them k = 0: without a
-- topic, no metadata constraint at all; with one, `topic = :topic` (a vec0
-- metadata constraint: it runs inside the KNN, which therefore still
-- returns k rows of that topic). vec0 0.1.9 compares a TEXT
-- metadata value of 12 or more bytes by reading it from its shadow table, a
-- lookup per row for a range (the former `topic >= '' AND topic <= max`
-- without a topic: 60k questions of a 20-byte topic, KNN 207 ms vs 16 ms
-- unconstrained); equality reads only rows of the same length and prefix.
-- Each arm that a plan leaves out is switched off by its LIMIT (0 stops it
-- before its first row): a scalar subquery in a WHERE is tested on every
-- row (the exact question scan with the plan off cost 7.5 ms at 50k).
-- Each scan of a bits index is one UNION ALL arm between "[bits index]"
-- marks: a file of schema v3/v4 read as it is (no bits column) runs the
-- statement without them (kbstore/backends/sqlite/search.py).
-- :bits_doc / :bits_hype / :bits_chunk (JSON arrays of vector ids, or NULL):
-- the same ranking of the sign bits, done by kbstore in numpy on a copy of
-- the bits held in memory while the file is unchanged (bits_scan.py); when
-- one is given its arm replaces that kind's scan and vec0 KNN. The sqlite3
-- shell passes NULL: the statement scans itself, with the same candidates.
vec_doc AS MATERIALIZED (
    SELECT c.vector_id, v.doc_id,
           1.0 - vec_distance_cosine(v.embedding, vec_f32(:qvec)) AS similarity
    FROM (SELECT vector_id FROM vectors
          WHERE embedding_bits MATCH vec_quantize_binary(vec_f32(:qvec))
            AND k = CASE WHEN (SELECT doc OR plain FROM vec_plan) OR :topic IS NOT NULL
                           OR :bits_doc IS NOT NULL THEN 0
                         ELSE :vec_k_doc END
            AND kind = 'doc'
          UNION ALL
          SELECT vector_id FROM vectors
          WHERE embedding_bits MATCH vec_quantize_binary(vec_f32(:qvec))
            AND k = CASE WHEN (SELECT doc OR plain FROM vec_plan) OR :topic IS NULL THEN 0
                         ELSE :vec_k_doc END
            AND kind = 'doc' AND topic = :topic
          -- [bits index]
          UNION ALL
          SELECT vector_id FROM (
              SELECT vector_id FROM vector_data INDEXED BY vector_bits_doc
              WHERE vector_id < 1125899906842624 AND vector_id % 32 = 0 AND bits IS NOT NULL
                AND :has_vector
                AND (:topic IS NULL OR doc_id IN (SELECT id FROM documents WHERE topic = :topic))
              ORDER BY vec_distance_hamming(vec_bit(bits), vec_quantize_binary(vec_f32(:qvec))),
                       vector_id
              LIMIT (SELECT CASE WHEN plain AND NOT doc AND :bits_doc IS NULL THEN :vec_k_doc
                                 ELSE 0 END
                     FROM vec_plan))
          UNION ALL
          SELECT value FROM (
              SELECT value FROM json_each(:bits_doc) WHERE :topic IS NULL ORDER BY key
              LIMIT (SELECT CASE WHEN NOT doc THEN :vec_k_doc ELSE 0 END FROM vec_plan))
          -- [/bits index]
         ) AS c
    JOIN vector_data AS v ON v.vector_id = c.vector_id
      AND typeof(v.embedding) = 'blob' AND length(v.embedding) = :vec_bytes
    UNION ALL
    SELECT * FROM (
        -- exact: the top :vec_limit documents are the top :vec_limit of any larger k
        SELECT vector_id, doc_id, similarity FROM (
            SELECT v.vector_id, v.doc_id,
                   1.0 - vec_distance_cosine(v.embedding, vec_f32(:qvec)) AS similarity
            FROM documents AS d JOIN vector_data AS v ON v.vector_id = d.id * 32
            WHERE typeof(v.embedding) = 'blob' AND length(v.embedding) = :vec_bytes
              AND :has_vector AND (:topic IS NULL OR d.topic = :topic))
        ORDER BY similarity DESC, vector_id
        LIMIT (SELECT CASE WHEN doc THEN min(:vec_k_doc, :vec_limit) ELSE 0 END FROM vec_plan))
),
vec_chunk AS MATERIALIZED (
    SELECT c.vector_id, v.doc_id,
           1.0 - vec_distance_cosine(v.embedding, vec_f32(:qvec)) AS similarity
    FROM (SELECT vector_id FROM vectors
          WHERE embedding_bits MATCH vec_quantize_binary(vec_f32(:qvec))
            AND k = CASE WHEN (SELECT chunk OR plain FROM vec_plan) OR :topic IS NOT NULL
                           OR :bits_chunk IS NOT NULL THEN 0
                         ELSE :vec_k_chunk END
            AND kind = 'chunk'
          UNION ALL
          SELECT vector_id FROM vectors
          WHERE embedding_bits MATCH vec_quantize_binary(vec_f32(:qvec))
            AND k = CASE WHEN (SELECT chunk OR plain FROM vec_plan) OR :topic IS NULL THEN 0
                         ELSE :vec_k_chunk END
            AND kind = 'chunk' AND topic = :topic
          -- [bits index]
          UNION ALL
          SELECT vector_id FROM (
              SELECT vector_id FROM vector_data INDEXED BY vector_bits_chunk
              WHERE vector_id >= 1125899906842624 AND bits IS NOT NULL
                AND :has_vector
                AND (:topic IS NULL OR doc_id IN (SELECT id FROM documents WHERE topic = :topic))
              ORDER BY vec_distance_hamming(vec_bit(bits), vec_quantize_binary(vec_f32(:qvec))),
                       vector_id
              LIMIT (SELECT CASE WHEN plain AND NOT chunk AND :bits_chunk IS NULL THEN :vec_k_chunk
                                 ELSE 0 END
                     FROM vec_plan))
          UNION ALL
          SELECT value FROM (
              SELECT value FROM json_each(:bits_chunk) WHERE :topic IS NULL ORDER BY key
              LIMIT (SELECT CASE WHEN NOT chunk THEN :vec_k_chunk ELSE 0 END FROM vec_plan))
          -- [/bits index]
         ) AS c
    JOIN vector_data AS v ON v.vector_id = c.vector_id
      AND typeof(v.embedding) = 'blob' AND length(v.embedding) = :vec_bytes
    UNION ALL
    SELECT * FROM (
        SELECT vector_id, doc_id, similarity FROM (
            SELECT v.vector_id, v.doc_id,
                   1.0 - vec_distance_cosine(v.embedding, vec_f32(:qvec)) AS similarity
            FROM document_chunks AS c JOIN vector_data AS v ON v.vector_id = c.vector_id
            WHERE typeof(v.embedding) = 'blob' AND length(v.embedding) = :vec_bytes
              AND :has_vector AND (:topic IS NULL
                                   OR c.doc_id IN (SELECT id FROM documents WHERE topic = :topic)))
        ORDER BY similarity DESC, vector_id
        LIMIT (SELECT CASE WHEN chunk THEN :vec_k_chunk ELSE 0 END FROM vec_plan))
),
vec_hype AS MATERIALIZED (
    -- bits: hype_oversample x k candidates (vec_plan), the best k of them by exact
    -- cosine (the sign bits rank many of the exact top k just below k)
    SELECT * FROM (
        SELECT c.vector_id, v.doc_id
        FROM (SELECT vector_id FROM vectors
              WHERE embedding_bits MATCH vec_quantize_binary(vec_f32(:qvec))
                AND k = CASE WHEN (SELECT hype OR plain FROM vec_plan) OR :topic IS NOT NULL
                               OR :bits_hype IS NOT NULL THEN 0
                             ELSE CAST(min(4096, :vec_k_hype * (SELECT hype_oversample FROM vec_plan))
                                      AS INTEGER) END
                AND kind = 'hype'
              UNION ALL
              SELECT vector_id FROM vectors
              WHERE embedding_bits MATCH vec_quantize_binary(vec_f32(:qvec))
                AND k = CASE WHEN (SELECT hype OR plain FROM vec_plan) OR :topic IS NULL THEN 0
                             ELSE CAST(min(4096, :vec_k_hype * (SELECT hype_oversample FROM vec_plan))
                                      AS INTEGER) END
                AND kind = 'hype' AND topic = :topic
              -- [bits index]
              UNION ALL
              SELECT vector_id FROM (
                  SELECT vector_id FROM vector_data INDEXED BY vector_bits_hype
                  WHERE vector_id < 1125899906842624 AND vector_id % 32 > 0 AND bits IS NOT NULL
                    AND :has_vector
                    AND (:topic IS NULL
                         OR doc_id IN (SELECT id FROM documents WHERE topic = :topic))
                  ORDER BY vec_distance_hamming(vec_bit(bits), vec_quantize_binary(vec_f32(:qvec))),
                           vector_id
                  LIMIT (SELECT CASE WHEN plain AND NOT hype AND :bits_hype IS NULL
                                     THEN CAST(min(4096, :vec_k_hype * hype_oversample) AS INTEGER)
                                     ELSE 0 END
                         FROM vec_plan))
              UNION ALL
              SELECT value FROM (
                  SELECT value FROM json_each(:bits_hype) WHERE :topic IS NULL ORDER BY key
                  LIMIT (SELECT CASE WHEN NOT hype
                                     THEN CAST(min(4096, :vec_k_hype * hype_oversample) AS INTEGER)
                                     ELSE 0 END
                         FROM vec_plan))
              -- [/bits index]
             ) AS c
        JOIN vector_data AS v ON v.vector_id = c.vector_id
          AND typeof(v.embedding) = 'blob' AND length(v.embedding) = :vec_bytes
        ORDER BY vec_distance_cosine(v.embedding, vec_f32(:qvec)), c.vector_id
        LIMIT (SELECT :vec_k_hype))
    UNION ALL
    SELECT * FROM (
        SELECT v.vector_id, v.doc_id
        FROM hype_questions AS q JOIN vector_data AS v ON v.vector_id = q.doc_id * 32 + q.position
        WHERE typeof(v.embedding) = 'blob' AND length(v.embedding) = :vec_bytes AND :has_vector
          AND (:topic IS NULL OR q.doc_id IN (SELECT id FROM documents WHERE topic = :topic))
        ORDER BY vec_distance_cosine(v.embedding, vec_f32(:qvec)), v.vector_id
        LIMIT (SELECT CASE WHEN hype THEN :vec_k_hype ELSE 0 END FROM vec_plan))
),
vec_ranked AS (
    -- best vector (document or chunk) per document
    SELECT doc_id, vector_id, kind, similarity AS score,
           row_number() OVER (ORDER BY similarity DESC, doc_id) AS rank
    FROM (
        SELECT doc_id, vector_id, kind, similarity,
               row_number() OVER (PARTITION BY doc_id ORDER BY similarity DESC, vector_id) AS nth
        FROM (SELECT vector_id, doc_id, 'doc' AS kind, similarity FROM vec_doc
              UNION ALL SELECT vector_id, doc_id, 'chunk', similarity FROM vec_chunk)
    )
    WHERE nth = 1
    ORDER BY rank
    LIMIT (SELECT :vec_limit)
),
-- HyPE: every question of the documents the KNN found, scored exactly (one
-- cosine each); a document scores the mean of its :hype_top best questions
-- (several matching questions count more than one stray match).
hype_scored AS (
    SELECT doc_id, position, similarity,
           row_number() OVER (PARTITION BY doc_id ORDER BY similarity DESC, position) AS nth
    FROM (
        SELECT q.doc_id, q.position,
               1.0 - vec_distance_cosine(v.embedding, vec_f32(:qvec)) AS similarity
        FROM hype_questions AS q
        JOIN vector_data AS v ON v.vector_id = q.doc_id * 32 + q.position
        WHERE typeof(v.embedding) = 'blob' AND length(v.embedding) = :vec_bytes
          AND q.doc_id IN (SELECT doc_id FROM vec_hype))
),
hype_ranked AS (
    SELECT doc_id, avg(similarity) AS score, max(similarity) AS best,
           max(CASE WHEN nth = 1 THEN position END) AS position,
           row_number() OVER (ORDER BY avg(similarity) DESC, doc_id) AS rank
    FROM hype_scored
    WHERE nth <= :hype_top
    GROUP BY doc_id
    ORDER BY rank
    LIMIT (SELECT :vec_limit)
),
-- HyPE questions as text: BM25 over each document's questions.
hype_fts_ranked AS (
    SELECT doc_id, score, row_number() OVER (ORDER BY score DESC, doc_id) AS rank
    FROM (
        SELECT rowid AS doc_id, -bm25(questions_fts) AS score
        FROM questions_fts
        WHERE :fts_query IS NOT NULL AND questions_fts MATCH :fts_query
          AND (:topic IS NULL OR rowid IN (SELECT id FROM documents WHERE topic = :topic))
        ORDER BY score DESC, doc_id
        LIMIT (SELECT :fts_limit)
    )
),
-- Journal entries dated inside a range the query names (ISO strings compare
-- in date order; two index range scans, created and updated). Journals only:
-- their date is the date of what they record, while a reference entry's
-- dates are its edits ("what will the rent be from January" is not about
-- entries edited in January).
date_hits AS (
    SELECT d.id AS doc_id FROM json_each(:date_ranges) AS r
    JOIN documents AS d ON d.updated >= json_extract(r.value, '$[0]')
                       AND d.updated < json_extract(r.value, '$[1]')
    WHERE (:topic IS NULL OR d.topic = :topic) AND d.doc_type = 'journal'
    UNION
    SELECT d.id FROM json_each(:date_ranges) AS r
    JOIN documents AS d ON d.created >= json_extract(r.value, '$[0]')
                       AND d.created < json_extract(r.value, '$[1]')
    WHERE (:topic IS NULL OR d.topic = :topic) AND d.doc_type = 'journal'
),
date_ranked AS (
    SELECT h.doc_id, 1.0 AS score,
           row_number() OVER (ORDER BY coalesce(1.0 / (:k_rrf + f.rank), 0.0)
                                       + coalesce(1.0 / (:k_rrf + v.rank), 0.0)
                                       + coalesce(1.0 / (:k_rrf + y.rank), 0.0) DESC,
                                       d.updated DESC, h.doc_id) AS rank
    FROM date_hits AS h
    JOIN documents AS d ON d.id = h.doc_id
    LEFT JOIN fts_ranked AS f ON f.doc_id = h.doc_id
    LEFT JOIN vec_ranked AS v ON v.doc_id = h.doc_id
    LEFT JOIN hype_ranked AS y ON y.doc_id = h.doc_id
    ORDER BY rank
    LIMIT (SELECT :date_limit)
),
-- One row per document any list found, each list's columns by a lookup of
-- that list (its rank, score, weight and, for 'convex', its min-max
-- normalised score: a one-valued list is 1). The former pivot, 19
-- max(CASE list ...) aggregates over the union of the lists, cost ~10% of a
-- search at 1k-5k documents; these lookups give the same values.
fused_ids AS (
    SELECT doc_id FROM fm_ranked UNION SELECT doc_id FROM fts_ranked
    UNION SELECT doc_id FROM vec_ranked UNION SELECT doc_id FROM hype_ranked
    UNION SELECT doc_id FROM hype_fts_ranked UNION SELECT doc_id FROM date_ranked
),
list_range AS MATERIALIZED (
    SELECT (SELECT min(score) FROM fm_ranked) AS fm_lo, (SELECT max(score) FROM fm_ranked) AS fm_hi,
           (SELECT min(score) FROM fts_ranked) AS fts_lo,
           (SELECT max(score) FROM fts_ranked) AS fts_hi,
           (SELECT min(score) FROM vec_ranked) AS vec_lo,
           (SELECT max(score) FROM vec_ranked) AS vec_hi,
           (SELECT min(score) FROM hype_ranked) AS hype_lo,
           (SELECT max(score) FROM hype_ranked) AS hype_hi,
           (SELECT min(score) FROM hype_fts_ranked) AS hype_fts_lo,
           (SELECT max(score) FROM hype_fts_ranked) AS hype_fts_hi
),
fused AS (
    SELECT i.doc_id,
           fm.rank AS fm_rank, fm.weight AS fm_weight,
           CASE WHEN fm.doc_id IS NOT NULL THEN coalesce((fm.score - r.fm_lo)
                / nullif(r.fm_hi - r.fm_lo, 0), 1.0) END AS fm_norm,
           ft.rank AS fts_rank, ft.score AS fts_score,
           CASE WHEN ft.doc_id IS NOT NULL THEN coalesce((ft.score - r.fts_lo)
                / nullif(r.fts_hi - r.fts_lo, 0), 1.0) END AS fts_norm,
           v.rank AS vec_rank, v.score AS vec_score,
           CASE WHEN v.doc_id IS NOT NULL THEN coalesce((v.score - r.vec_lo)
                / nullif(r.vec_hi - r.vec_lo, 0), 1.0) END AS vec_norm,
           v.vector_id AS vec_vector_id, v.kind AS vec_kind,
           h.rank AS hype_rank, h.score AS hype_score, h.best AS hype_best,
           CASE WHEN h.doc_id IS NOT NULL THEN coalesce((h.score - r.hype_lo)
                / nullif(r.hype_hi - r.hype_lo, 0), 1.0) END AS hype_norm,
           h.position AS hype_position,
           hf.rank AS hype_fts_rank,
           CASE WHEN hf.doc_id IS NOT NULL THEN coalesce((hf.score - r.hype_fts_lo)
                / nullif(r.hype_fts_hi - r.hype_fts_lo, 0), 1.0) END AS hype_fts_norm,
           dt.rank AS date_rank
    FROM fused_ids AS i
    CROSS JOIN list_range AS r
    LEFT JOIN fm_ranked AS fm ON fm.doc_id = i.doc_id
    LEFT JOIN fts_ranked AS ft ON ft.doc_id = i.doc_id
    LEFT JOIN vec_ranked AS v ON v.doc_id = i.doc_id
    LEFT JOIN hype_ranked AS h ON h.doc_id = i.doc_id
    LEFT JOIN hype_fts_ranked AS hf ON hf.doc_id = i.doc_id
    LEFT JOIN date_ranked AS dt ON dt.doc_id = i.doc_id
),
-- Text-vector agreement: a query-adaptive weight for the text lists (fts,
-- fm). When the full-text list's top hits only share stray words with the
-- query (a paraphrase: the answer shares no word with it), their vectors are
-- far from it while the best vector hit is close. agreement = mean
-- similarity of the :agreement_top best fts hits (their best document or
-- chunk vector) / the best similarity of the vec list; the text lists weigh
-- min(1, agreement / :agreement_ratio)^2, but never less than how far the
-- top fts score stands above the second, (s1 - s2) / s1 (an identifier or
-- error code: its rare words put one hit far ahead although no vector is
-- near it). :agreement_ratio 0, no query vector or no fts hit: weight 1.
-- Its vector-side counterpart, the standout of the vector list's rank 1:
-- vec_gap = (s1 - s2) / (1 - s2), s1 its similarity, s2 (at least 0) the
-- best similarity of any other document: the vec list's rank 2 or another
-- document's best HyPE question (0..1; 0 when s2 >= s1, with no other
-- vector hit or s1 <= 0): the share of the room above the next document
-- that the rank 1 takes, so a faint best match among near-zero ones (0.08
-- against 0) counts little; a question of another document as close to
-- the query means the vector evidence does not single this one out. The
-- vector rank 1's RRF
-- term is multiplied by 1 + :vec_standout x vec_gap: a document whose
-- cosine stands clearly above every other one (a paraphrase sharing no word
-- with the query: 0.42 against 0.31 next) is not outvoted by hits ranked
-- ~2nd in both lists on stray words; among near-ties (gap ~0) RRF is
-- unchanged. RRF only ('convex' reads the scores themselves).
text_sims AS (
    SELECT f.score AS fts_score,
           coalesce(v.score,
                    (SELECT max(1.0 - vec_distance_cosine(x.embedding, vec_f32(:qvec)))
                     FROM vector_data AS x
                     WHERE x.doc_id = f.doc_id
                       AND typeof(x.embedding) = 'blob' AND length(x.embedding) = :vec_bytes
                       AND (x.vector_id = f.doc_id * 32 OR x.vector_id IN
                            (SELECT c.vector_id FROM document_chunks AS c
                             WHERE c.doc_id = f.doc_id)))) AS similarity
    FROM fts_ranked AS f LEFT JOIN vec_ranked AS v ON v.doc_id = f.doc_id
    WHERE f.rank <= :agreement_top AND :agreement_ratio > 0 AND :has_vector
),
text_agreement AS MATERIALIZED (
    SELECT CASE WHEN a.mean IS NULL OR a.best IS NULL THEN 1.0
                ELSE max(min(1.0, max(0.0, a.mean) / a.best / :agreement_ratio)
                         * min(1.0, max(0.0, a.mean) / a.best / :agreement_ratio), a.standout)
           END AS text_weight,
           coalesce(a.vec_gap, 0.0) AS vec_gap
    FROM (SELECT (SELECT avg(similarity) FROM text_sims) AS mean,
                 (SELECT CASE WHEN v.s1 > 0 AND v.s2 IS NOT NULL AND v.s2 < 1
                              THEN max(v.s1 - max(v.s2, 0.0), 0.0) / (1.0 - max(v.s2, 0.0)) END
                  FROM (SELECT (SELECT score FROM vec_ranked WHERE rank = 1) AS s1,
                               (SELECT max(s) FROM (
                                    SELECT score AS s FROM vec_ranked WHERE rank = 2
                                    UNION ALL
                                    SELECT best FROM hype_ranked
                                    WHERE doc_id IS NOT (SELECT doc_id FROM vec_ranked
                                                         WHERE rank = 1))) AS s2) AS v)
                     AS vec_gap,
                 (SELECT max(score) FROM vec_ranked WHERE score > 0) AS best,
                 (SELECT CASE WHEN count(*) > 1 THEN (max(score) - min(score)) / max(score)
                              ELSE 1.0 END
                  FROM fts_ranked WHERE rank <= 2 AND score > 0) AS standout) AS a
),
-- The best similarity of either vector list (-2: none).
list_best AS MATERIALIZED (
    SELECT coalesce(max(s), -2.0) AS best
    FROM (SELECT max(score) AS s FROM vec_ranked UNION ALL SELECT max(best) FROM hype_ranked)
),
-- The floor (kept below) needs the similarity of each hit found by neither
-- vector list: from all its stored vectors, only when a floor is set. A hit
-- that matches query words (fts or hype_fts) is kept whatever its own
-- similarity once any hit reaches the floor, which a vector list's best
-- shows without computing anything: then only hits without such words are
-- computed here, and a text hit's own similarity only where it is read:
-- in the "latest" test (latest) and for the rows returned. It reads the
-- lists, not fused: fused read once is coded once (compiling: -22 ms).
floor_similarity AS (
    SELECT v.doc_id, max(1.0 - vec_distance_cosine(v.embedding, vec_f32(:qvec))) AS similarity
    FROM vector_data AS v
    WHERE :min_similarity IS NOT NULL AND :has_vector
      AND typeof(v.embedding) = 'blob' AND length(v.embedding) = :vec_bytes
      AND v.doc_id IN (SELECT doc_id FROM fused_ids
                       WHERE doc_id NOT IN (SELECT doc_id FROM vec_ranked)
                         AND doc_id NOT IN (SELECT doc_id FROM hype_ranked)
                         AND ((doc_id NOT IN (SELECT doc_id FROM fts_ranked)
                               AND doc_id NOT IN (SELECT doc_id FROM hype_fts_ranked))
                              OR (SELECT best FROM list_best) < :min_similarity))
    GROUP BY v.doc_id
),
-- One narrow row per hit (no document text: that is read for the returned
-- rows only), each factor computed once.
scored AS MATERIALIZED (
    -- the columns read below (kept, latest, the output's explain fields):
    -- each one is copied into every materialized row
    SELECT doc_id, doc_type, dated, similarity, similarity_unknown, recency, boost,
           fm_rank, fm_weight, fts_rank, vec_rank, hype_rank, hype_fts_rank, date_rank,
           fts_score, vec_score, hype_score, vec_kind, vec_vector_id, hype_position,
           text_weight, vec_gap, rrf_fm, rrf_fts, rrf_vec, rrf_hype, rrf_hype_fts, rrf_date,
           convex,
           (CASE :fusion WHEN 'convex' THEN convex
                            ELSE rrf_fm + rrf_fts + rrf_vec + rrf_hype + rrf_hype_fts + rrf_date
               END) * boost AS evidence,
           (CASE :fusion WHEN 'convex' THEN convex
                         ELSE rrf_fm + rrf_fts + rrf_vec - standout_bonus + rrf_hype
                              + rrf_hype_fts + rrf_date
            END) * boost AS latest_evidence
    FROM (
        SELECT f.*, d.doc_type, coalesce(d.updated, d.created) AS dated, d.updated,
               t.text_weight, t.vec_gap,
               max(coalesce(f.vec_score, -1.0), coalesce(f.hype_best, -1.0),
                   coalesce(s.similarity, -1.0)) AS similarity,
               (f.vec_score IS NULL AND f.hype_best IS NULL AND s.similarity IS NULL)
                   AS similarity_unknown,
               coalesce(:w_fm * t.text_weight * f.fm_weight / (:k_rrf + f.fm_rank), 0.0)
                   AS rrf_fm,
               coalesce(:w_fts * t.text_weight / (:k_rrf + f.fts_rank), 0.0) AS rrf_fts,
               coalesce(:w_vec * CASE WHEN f.vec_rank = 1 THEN 1.0 + :vec_standout * t.vec_gap
                                      ELSE 1.0 END / (:k_rrf + f.vec_rank), 0.0) AS rrf_vec,
               -- the standout's share of rrf_vec: left out where a "latest"
               -- question picks its eligible entries (latest below)
               CASE WHEN f.vec_rank = 1 THEN :w_vec * :vec_standout * t.vec_gap / (:k_rrf + 1)
                    ELSE 0.0 END AS standout_bonus,
               coalesce(:w_hype / (:k_rrf + f.hype_rank), 0.0) AS rrf_hype,
               coalesce(:w_hype_fts / (:k_rrf + f.hype_fts_rank), 0.0) AS rrf_hype_fts,
               coalesce(:w_date / (:k_rrf + f.date_rank), 0.0) AS rrf_date,
               coalesce(:w_fm * t.text_weight * f.fm_weight * f.fm_norm, 0.0)
                   + coalesce(:w_fts * t.text_weight * f.fts_norm, 0.0)
                   + coalesce(:w_vec * f.vec_norm, 0.0) + coalesce(:w_hype * f.hype_norm, 0.0)
                   + coalesce(:w_hype_fts * f.hype_fts_norm, 0.0)
                   + CASE WHEN f.date_rank IS NOT NULL THEN :w_date ELSE 0.0 END AS convex,
               CASE d.doc_type WHEN 'skill' THEN :boost_skill
                               WHEN 'journal' THEN :boost_journal
                               ELSE :boost_entry END AS boost,
               CASE WHEN d.doc_type = 'journal' AND julianday(d.updated) IS NOT NULL
                         AND :half_life_days IS NOT NULL
                    THEN 1.0 - :recency_weight * (1.0 - exp(-ln(2.0)
                             * max(julianday(:now) - julianday(d.updated), 0.0) / :half_life_days))
                    ELSE 1.0 END AS recency
        FROM fused AS f
        -- CROSS JOIN: the hits first, then each one's document by primary key
        -- (left to itself, SQLite flattened fused here and planned a scan of
        -- every document with an automatic index on the hits: +60 ms at 100k)
        CROSS JOIN documents AS d ON d.id = f.doc_id
        LEFT JOIN floor_similarity AS s ON s.doc_id = f.doc_id
        CROSS JOIN text_agreement AS t
    )
),
kept AS MATERIALIZED (
    SELECT doc_id, doc_type, dated, evidence, latest_evidence, evidence * recency AS relevance,
           similarity, similarity_unknown,
           max(evidence * recency) OVER () AS best_relevance,
           max(latest_evidence) OVER () AS best_latest_evidence
    -- only the columns read here: a window copies every column of every row
    FROM (SELECT doc_id, doc_type, dated, evidence, latest_evidence, recency, similarity,
                 similarity_unknown, fts_rank, hype_fts_rank,
                 max(similarity) OVER () AS best_similarity
          FROM scored) AS s
    WHERE :min_similarity IS NULL OR NOT :has_vector OR similarity >= :min_similarity
       OR ((fts_rank IS NOT NULL OR hype_fts_rank IS NOT NULL)
           AND best_similarity >= :min_similarity)
),
-- A "latest" question's topical words (:topical_query, its full-text words
-- without the cue words "latest", "currently", ...): their BM25 per entry.
-- Names most entries hold weigh ~0 (FTS5's idf floor), so an entry that
-- only mentions the person scores ~0. NULL query: no topical test.
topical AS MATERIALIZED (
    SELECT rowid AS doc_id, -bm25(documents_fts, :w_title, :w_tags, :w_body) AS score
    FROM documents_fts
    WHERE :latest AND :topical_query IS NOT NULL AND documents_fts MATCH :topical_query
      AND (:topic IS NULL OR rowid IN (SELECT id FROM documents WHERE topic = :topic))
),
latest AS (
    -- eligible: dated, among the :latest_top best by evidence and close to
    -- the best (recency left out: being new must not make an entry
    -- relevant; the top few only, so the newest entries cannot push the
    -- evidence out of the first results when all scores are close).
    -- Journal entries only: their date is the date of what they record; a
    -- reference entry's `updated` is its last edit (an overview touched
    -- yesterday is not the latest event), so entries keep their evidence order.
    -- On topic: its topical BM25 is at least :latest_topical x the best
    -- (no test when no entry scores above 0 on the topical words).
    -- Above the confidence floor, unless its topical BM25 is the best: a hit
    -- kept below :min_similarity for stray words (see kept) is not promoted
    -- to the top by its date; one whose words are the best on the topic is.
    SELECT doc_id, row_number() OVER (ORDER BY dated DESC, doc_id) AS latest_rank,
           count(*) OVER () AS n_latest
    FROM (SELECT doc_id, doc_type, dated, latest_evidence AS evidence, similarity,
                 similarity_unknown, best_latest_evidence FROM kept
          WHERE :latest
          ORDER BY latest_evidence DESC, doc_id
          LIMIT (SELECT :latest_top)) AS k
    WHERE evidence > 0 AND dated IS NOT NULL AND doc_type = 'journal'
      AND evidence >= :latest_ratio * best_latest_evidence
      AND (:min_similarity IS NULL OR NOT :has_vector OR similarity >= :min_similarity
           OR (similarity_unknown
               AND (SELECT max(1.0 - vec_distance_cosine(x.embedding, vec_f32(:qvec)))
                    FROM vector_data AS x
                    WHERE x.doc_id = k.doc_id
                      AND typeof(x.embedding) = 'blob' AND length(x.embedding) = :vec_bytes)
                   >= :min_similarity)
           OR coalesce((SELECT score FROM topical AS t WHERE t.doc_id = k.doc_id), 0.0)
              >= max(coalesce((SELECT max(score) FROM topical), 0.0), 1e-300))
      AND (coalesce((SELECT max(score) FROM topical), 0.0) <= 0.0
           OR coalesce((SELECT score FROM topical AS t WHERE t.doc_id = k.doc_id), 0.0)
              >= :latest_topical * (SELECT max(score) FROM topical))
),
final AS (
    SELECT k.doc_id, k.relevance, l.latest_rank,
           CASE WHEN l.latest_rank IS NOT NULL
                THEN k.best_relevance * (2.0 - (l.latest_rank - 1.0) / l.n_latest)
                ELSE k.relevance END AS score
    FROM kept AS k
    LEFT JOIN latest AS l ON l.doc_id = k.doc_id
    ORDER BY score DESC, k.doc_id
    LIMIT (SELECT :limit)
)
SELECT s.doc_id, d.path, d.title, d.tags, d.topic, d.doc_type, d.updated, d.body,
       f.score, f.relevance,
       -- a text hit's own similarity, where floor_similarity left it out
       CASE WHEN s.similarity_unknown AND :min_similarity IS NOT NULL AND :has_vector
            THEN coalesce((SELECT max(1.0 - vec_distance_cosine(x.embedding, vec_f32(:qvec)))
                           FROM vector_data AS x
                           WHERE x.doc_id = f.doc_id
                             AND typeof(x.embedding) = 'blob' AND length(x.embedding) = :vec_bytes),
                          s.similarity)
            ELSE s.similarity END AS similarity,
       s.fm_rank, s.fm_weight, s.fts_rank, s.vec_rank, s.hype_rank, s.hype_fts_rank,
       s.date_rank, s.fts_score, s.vec_score, s.hype_score,
       s.rrf_fm, s.rrf_fts, s.rrf_vec, s.rrf_hype, s.rrf_hype_fts, s.rrf_date, s.convex,
       s.boost, s.recency, s.text_weight, s.vec_gap,
       f.latest_rank,
       s.vec_kind AS matched_kind, c.start_char AS chunk_start, c.end_char AS chunk_end,
       q.question AS matched_question
FROM final AS f
JOIN scored AS s ON s.doc_id = f.doc_id
JOIN documents AS d ON d.id = f.doc_id
LEFT JOIN document_chunks AS c ON c.vector_id = s.vec_vector_id
LEFT JOIN hype_questions AS q ON q.doc_id = s.doc_id AND q.position = s.hype_position
ORDER BY f.score DESC, f.doc_id;
