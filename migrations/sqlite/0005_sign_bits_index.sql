-- kbstore schema v5 (SQLite): each vector's sign bits next to its float32
-- copy, in three small covering indexes the search scans instead of vec0's
-- KNN on small and medium files.
--
-- vec0's KNN costs about k x 4096 (its chunk size) comparisons per chunk
-- whatever the chunk holds, while a scan of a plain index costs one hamming
-- distance per vector: at 1,000 documents the KNN over 6,000 question
-- vectors took ~2 ms of CPU and a scan of this index ~1 ms, the document
-- KNN ~2.4 ms and its scan ~0.4 ms (benchmarks/results/speed_small_2.md).
-- search.sql scans these indexes while the file holds at most a bound of
-- documents (PLAIN_BITS_DOCS in kbstore/backends/sqlite/search.py) and uses
-- vec0 above it; vec0 is written as before.
--
-- bits = vec_quantize_binary(embedding): bit i (LSB first in each byte) set
-- when component i is > 0, the bytes vec0 holds. Written with the float
-- copy by the one write path (kbstore/backends/sqlite/vectors.py); existing
-- rows are filled when this migration runs (kbstore/backends/sqlite/
-- migrations.py: SQL alone cannot tell a float blob of the file's
-- dimension from a damaged one). A row without bits (NULL: a hand edit, a
-- damaged vector) is in no index, so no scan sees it; `kbstore doctor`
-- reports it (vector_bits) and --fix writes it. The partial indexes split
-- the rows by kind, as vec0's partition key does (ids: vectors.py):
-- document vectors doc_id * 32, questions doc_id * 32 + 1..31, chunks from
-- 2^50 up. Each entry holds doc_id too: a topic filter reads it there.

ALTER TABLE vector_data ADD COLUMN bits BLOB;

CREATE INDEX vector_bits_doc ON vector_data (doc_id, bits)
    WHERE vector_id < 1125899906842624 AND vector_id % 32 = 0 AND bits IS NOT NULL;
CREATE INDEX vector_bits_hype ON vector_data (doc_id, bits)
    WHERE vector_id < 1125899906842624 AND vector_id % 32 > 0 AND bits IS NOT NULL;
CREATE INDEX vector_bits_chunk ON vector_data (doc_id, bits)
    WHERE vector_id >= 1125899906842624 AND bits IS NOT NULL;
