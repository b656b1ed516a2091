"""Schema v5: every float copy in vector_data carries its sign bits, which
search.sql scans through three partial indexes instead of vec0's KNN on
small and medium files. The bits must be exactly vec0's (the same
candidates up to ties), written by every write path, filled in by the
migration for an older file, checked and rewritten by doctor."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite import migrations as sqlite_migrations
from kbstore.backends.sqlite import search as sqlite_search
from kbstore.backends.sqlite.vectors import CHUNK_BASE
from kbstore.doctor import diagnose, fix

from .util import SLOTS, connect_file, raw

NOW = "2026-01-01T00:00:00+00:00"


def _expected_bits(blob: bytes) -> bytes:
    """An implementation of vec_quantize_binary independent of kbstore's."""
    return np.packbits(np.frombuffer(blob, np.float32) > 0, bitorder="little").tobytes()


def _bits_rows(conn) -> list[tuple[int, bytes, bytes | None, bytes | None]]:  # type: ignore[no-untyped-def]
    """(vector_id, floats, bits, sqlite-vec's quantization of the floats) of
    every float copy (64-d; no quantization for a damaged one)."""
    return [(int(v), bytes(e), None if b is None else bytes(b), None if q is None else bytes(q))
            for v, e, b, q in conn.execute(
                "SELECT vector_id, embedding, bits, CASE WHEN length(embedding) = 256 THEN "
                "vec_quantize_binary(embedding) END FROM vector_data ORDER BY vector_id")]


def _kind_rows(conn, index: str) -> set[int]:  # type: ignore[no-untyped-def]
    where = {"vector_bits_doc": "vector_id < 1125899906842624 AND vector_id % 32 = 0",
             "vector_bits_hype": "vector_id < 1125899906842624 AND vector_id % 32 > 0",
             "vector_bits_chunk": "vector_id >= 1125899906842624"}[index]
    return {int(r[0]) for r in conn.execute(
        f"SELECT vector_id FROM vector_data INDEXED BY {index} WHERE {where} "
        "AND bits IS NOT NULL")}


def test_every_written_vector_carries_vec0s_sign_bits(sample_db_with_questions: Path) -> None:
    with KnowledgeStore.open(sample_db_with_questions, FakeEmbedder(64), hype=False) as store:
        conn = raw(store)
        rows = _bits_rows(conn)
        assert len(rows) > 20 and any(v % SLOTS for v, *_ in rows)  # documents and questions
        for vid, emb, bits, quantized in rows:
            assert bits == quantized == _expected_bits(emb), vid
        vec0 = {int(v): bytes(b) for v, b in conn.execute(
            "SELECT vector_id, embedding_bits FROM vectors")}
        assert vec0 == {vid: bits for vid, _, bits, _ in rows}
        # each kind's index holds exactly that kind's rows
        assert _kind_rows(conn, "vector_bits_doc") == {v for v, *_ in rows
                                                       if v < CHUNK_BASE and v % SLOTS == 0}
        assert _kind_rows(conn, "vector_bits_hype") == {v for v, *_ in rows
                                                        if v < CHUNK_BASE and v % SLOTS}
        assert _kind_rows(conn, "vector_bits_chunk") == {v for v, *_ in rows if v >= CHUNK_BASE}
        assert _kind_rows(conn, "vector_bits_chunk")  # the sample has long documents
        # an edited document's new vectors get new bits
        path = conn.execute("SELECT path FROM documents ORDER BY id LIMIT 1").fetchone()[0]
        doc = store.get(path)
        assert doc is not None
        store.upsert(doc.path, title=doc.title, body=doc.body + "\n\nA new paragraph on kilns.",
                     tags=doc.tags)
        for vid, emb, bits, _ in _bits_rows(conn):
            assert bits == _expected_bits(emb), vid


def _make_v4_file(path: Path, workspace: Path) -> None:
    """A v5 file taken back to v4 as v4's kbstore left it: no bits column,
    no bits indexes, migration 0005 not applied."""
    with KnowledgeStore.open(path, FakeEmbedder(64), hype=False) as store:
        store.import_directory(workspace)
    conn = connect_file(path)
    try:
        for index in ("vector_bits_doc", "vector_bits_hype", "vector_bits_chunk"):
            conn.execute(f"DROP INDEX {index}")
        conn.execute("ALTER TABLE vector_data DROP COLUMN bits")
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = '0005_sign_bits_index'")
        conn.execute("PRAGMA user_version = 4")
        conn.commit()
    finally:
        conn.close()
    assert sqlite_migrations.state(connect_file(path, mode="read")).version == 4


def test_the_migration_fills_the_bits_of_an_older_file(tmp_path: Path,
                                                       sample_workspace: Path) -> None:
    db = tmp_path / "kb.sqlite"
    _make_v4_file(db, sample_workspace)
    # read-only, the v4 file searches with vec0 alone and stays as it is
    with KnowledgeStore.open(db, read_only=True) as store:
        assert store.search("picobot deployment", limit=3)
        assert store.status()["schema_version"] == 4
    conn = connect_file(db)
    try:
        assert "bits" not in [r[1] for r in conn.execute("PRAGMA table_info(vector_data)")]
        # a damaged float copy (wrong size) must not stop the migration
        damaged = conn.execute("SELECT max(vector_id) FROM vector_data").fetchone()[0]
        conn.execute("UPDATE vector_data SET embedding = x'00000000' WHERE vector_id = ?",
                     (damaged,))
        conn.commit()
    finally:
        conn.close()
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=False) as store:
        assert store.status()["schema_version"] == 5
        rows = _bits_rows(raw(store))
        assert len(rows) > 5
        for vid, emb, bits, _ in rows:
            assert bits == (None if vid == damaged else _expected_bits(emb)), vid
        indexed = set().union(*(_kind_rows(raw(store), i) for i in (
            "vector_bits_doc", "vector_bits_hype", "vector_bits_chunk")))
        assert indexed == {vid for vid, *_ in rows} - {damaged}
        report = fix(store)  # doctor re-embeds the damaged vector, with its bits
        assert report.ok, [c.to_dict() for c in report.problems]
        for vid, emb, bits, _ in _bits_rows(raw(store)):
            assert bits == _expected_bits(emb), vid
        assert store.search("picobot deployment", limit=3)


def test_a_file_without_the_indexes_runs_the_statement_without_their_scans() -> None:
    full, old = sqlite_search.statement(True), sqlite_search.statement(False)
    assert full == sqlite_search.search_sql()
    assert full.count("-- [bits index]") == full.count("-- [/bits index]") == 3
    code = re.sub(r"--[^\n]*", "", old)  # without the comments, which name the indexes
    assert "vec_bit(" in full and "vec_bit(" not in code and "vector_bits" not in code
    assert "bits IS NOT NULL" not in code and ":plain_docs" in code
    # each bits section: the SQL scan's arm and the arm of the ids ranked in numpy
    assert old.count("UNION ALL") == full.count("UNION ALL") - 6


def test_doctor_finds_and_rewrites_missing_or_wrong_bits(sample_db_with_questions: Path) -> None:
    with KnowledgeStore.open(sample_db_with_questions, FakeEmbedder(64), hype=False) as store:
        conn = raw(store)
        ids = [r[0] for r in conn.execute("SELECT id FROM documents ORDER BY id LIMIT 2")]
        conn.execute("UPDATE vector_data SET bits = zeroblob(8) WHERE vector_id = ?",
                     (ids[0] * SLOTS,))
        conn.execute("UPDATE vector_data SET bits = NULL WHERE vector_id = ?",
                     (ids[1] * SLOTS + 1,))
        conn.commit()
        check = {c.name: c for c in diagnose(store).checks}["vector_bits"]
        assert check.count == 2 and check.sample == sorted(ids) and check.problem
        report = fix(store)
        assert any("sign bits of 2 vector(s)" in a for a in report.fixed), report.fixed
        assert report.ok, [c.to_dict() for c in report.problems]
        for vid, emb, bits, _ in _bits_rows(conn):
            assert bits == _expected_bits(emb), vid


def _candidates(store: KnowledgeStore, query_vector: np.ndarray, **settings: object) -> list[int]:
    """The document list's KNN candidates (vec_doc) of search.sql as shipped."""
    request, _ = store._request("zzqx", None, 10, False, query_vector, NOW, dict(settings))
    params = sqlite_search.compile_params(request, 64)
    head = sqlite_search.search_sql().split("\nvec_chunk AS MATERIALIZED (")[0].rstrip()
    sql = head.rstrip(",") + "\nSELECT vector_id FROM vec_doc ORDER BY similarity DESC, vector_id"
    return [int(r[0]) for r in raw(store).execute(sql, params)]


def test_the_scan_reads_the_bits_indexes_and_ranks_by_hamming(sample_db_with_questions: Path
                                                               ) -> None:
    """Below the bound the candidates come from vector_data's bits (vec0
    emptied: the same list), ranked by (hamming distance, vector_id); at a
    bound of 0 they come from vec0 (bits nulled: the same list)."""
    rng = np.random.default_rng(3)
    with KnowledgeStore.open(sample_db_with_questions, FakeEmbedder(64), hype=False) as store:
        conn = raw(store)
        floats = {int(v): np.frombuffer(e, np.float32) for v, e in conn.execute(
            "SELECT vector_id, embedding FROM vector_data WHERE vector_id % 32 = 0 "
            "AND vector_id < ?", (CHUNK_BASE,))}
        for _ in range(5):
            q = rng.standard_normal(64).astype(np.float32)
            qbits = np.packbits(q > 0, bitorder="little")
            hamming = {v: int(np.unpackbits(np.bitwise_xor(
                np.packbits(f > 0, bitorder="little"), qbits)).sum()) for v, f in floats.items()}
            want = sorted(hamming, key=lambda v: (hamming[v], v))[:3]
            got = _candidates(store, q, vec_plan="bits", vec_k_doc=3)
            assert sorted(got) == sorted(want)
        q = rng.standard_normal(64).astype(np.float32)
        plain = _candidates(store, q, vec_plan="bits", vec_k_doc=4)
        conn.execute("SAVEPOINT s")
        conn.execute("DELETE FROM vectors")
        assert _candidates(store, q, vec_plan="bits", vec_k_doc=4) == plain
        conn.execute("ROLLBACK TO s")
        conn.execute("UPDATE vector_data SET bits = NULL")
        assert _candidates(store, q, vec_plan="bits", vec_k_doc=4) == []
        original = sqlite_search.PLAIN_BITS_DOCS
        try:
            sqlite_search.PLAIN_BITS_DOCS = 0  # vec0's KNN: it never reads the bits column
            assert len(_candidates(store, q, vec_plan="bits", vec_k_doc=4)) == 4
        finally:
            sqlite_search.PLAIN_BITS_DOCS = original
        conn.execute("ROLLBACK TO s")
        conn.execute("RELEASE s")
