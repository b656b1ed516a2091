-- kbstore PostgreSQL schema v2: documents.extra keeps its key order.
--
-- jsonb stores an object's keys sorted (by length, then bytes); a skill's
-- frontmatter (name, description, ...) must come back in the order it was
-- written so an export reproduces the file. json keeps the text as given
-- (and, unlike jsonb, accepts every string the SQLite backend accepts).
ALTER TABLE documents DROP CONSTRAINT documents_extra_check;
ALTER TABLE documents ALTER COLUMN extra DROP DEFAULT;
ALTER TABLE documents ALTER COLUMN extra TYPE json USING extra::json;
ALTER TABLE documents ALTER COLUMN extra SET DEFAULT '{}';
ALTER TABLE documents ADD CONSTRAINT documents_extra_check CHECK (json_typeof(extra) = 'object');
