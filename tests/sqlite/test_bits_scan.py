"""The sign-bit scan in numpy (kbstore/backends/sqlite/bits_scan.py): a file
searched again unchanged ranks its sign bits from a copy in memory instead of
search.sql's scan. It must hand the statement exactly the candidates the SQL
scan finds (ties by vector_id included), and never a stale copy: after any
write -- this connection's, another connection's, another process's -- the
next search sees the file as it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kbstore import Document, FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite import bits_scan
from kbstore.backends.sqlite.bits_scan import _top, columns

from .util import raw

NOW = "2026-01-01T00:00:00+00:00"
QUERIES = ("picobot deployment", "how do I write a skill", "python testing tips",
           "what did I do last week", "user preferences", "sqlite search ranking",
           "river valley notes", "a long report on topic 7")
# Shallow KNNs, the bit plan forced: the candidates are decided by the sign
# bits and their ties (64-d vectors: 8-byte bits, many equal distances).
SHALLOW = {"vec_plan": "bits", "vec_k_doc": 3, "vec_k_hype": 4, "vec_k_chunk": 2}
DEEP = {"vec_k_doc": 4096, "vec_k_hype": 4096, "vec_k_chunk": 4096}
WORDS = ("river valley stone bridge lantern harbor meadow orchard copper signal "
         "winter market ledger garden compass").split()


def _docs(n: int, start: int = 0) -> list[Document]:
    out = []
    for i in range(start, start + n):
        words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(40 if i % 5 else 400)]
        out.append(Document(path=f"notes/n{i:03d}.md", title=f"Note {i} on topic {i % 9}",
                            body=" ".join(words), tags=[f"t{i % 4}"],
                            topic="notes" if i % 2 else "other"))
    return out


@pytest.fixture
def kb(tmp_path: Path, fake_llm) -> KnowledgeStore:  # type: ignore[no-untyped-def]
    fake_llm.answer = lambda prompt: ("What does this note say?\nWhich place is it about?\n"
                                      f"Why does it matter {len(prompt) % 11}?")
    store = KnowledgeStore.open(tmp_path / "kb.sqlite", FakeEmbedder(64), hype=True)
    store.upsert_many(_docs(60))
    return store


def _scan(store: KnowledgeStore) -> bits_scan.BitsScan:
    return store.backend.bits_scan  # type: ignore[attr-defined,no-any-return]


def _rows(store: KnowledgeStore, query: str, **settings: object) -> list[tuple]:
    return [(h.path, h.score, tuple(sorted(h.explain["ranks"].items())))
            for h in store.search(query, limit=30, now=NOW, explain=True, **settings)]


def test_the_copy_gives_the_sql_scans_rows_for_every_query(kb: KnowledgeStore) -> None:
    conn = raw(kb)
    counts = {kind: conn.execute(f"SELECT count(*) FROM vector_data INDEXED BY {index} "
                                 f"WHERE {where}").fetchone()[0]
              for kind, (index, where) in bits_scan._KINDS.items()}
    assert min(counts.values()) > 10, counts  # every kind is there to be scanned
    for settings in (SHALLOW, {}, {"vec_k_doc": 1, "vec_k_hype": 1, "vec_k_chunk": 1,
                                   "vec_plan": "bits", "fusion": "convex"}):
        fresh = KnowledgeStore.open(kb.location, FakeEmbedder(64), hype=False)
        try:
            scan = _scan(fresh)
            limit, scan.max_bytes = scan.max_bytes, 0  # no copy: search.sql scans
            sql = [_rows(fresh, q, **settings) for q in QUERIES]
            assert scan.reads == 0
            scan.max_bytes = limit
            numpy = [_rows(fresh, q, **settings) for q in QUERIES]
            assert scan.reads == 1  # read once, at the second search
            assert numpy == sql
            assert any(sql)
        finally:
            fresh.close()


def test_a_topic_or_a_too_large_store_keeps_the_sql_scan(kb: KnowledgeStore) -> None:
    scan = _scan(kb)
    before = [_rows(kb, q, topic="notes", **SHALLOW) for q in QUERIES]
    assert scan.reads == 0 and any(before)
    scan.max_bytes = 100  # far below this store's bits
    for q in QUERIES:
        _rows(kb, q, **SHALLOW)
    assert scan.reads == 0


def _vector_only(query_word: str) -> dict[str, object]:
    return {"w_fm": 0.0, "w_fts": 0.0, "w_hype_fts": 0.0, "w_date": 0.0, "w_hype": 0.0,
            "min_similarity": None, "vec_plan": "bits", "vec_k_doc": 1, "vec_k_hype": 1,
            "vec_k_chunk": 1}


def _warm(store: KnowledgeStore) -> None:
    for _ in range(2):
        store.search("warm up", limit=1, now=NOW)
    assert _scan(store).reads >= 1


def test_a_write_on_this_connection_is_seen_by_the_next_search(kb: KnowledgeStore) -> None:
    _warm(kb)
    query = "zebra quartz harmonica"
    assert [h.path for h in kb.search(query, limit=1, now=NOW, **_vector_only(query))] != \
        ["new/zebra.md"]
    kb.upsert("new/zebra.md", title="zq", body=query)  # embeds to the query's own vector
    assert [h.path for h in kb.search(query, limit=1, now=NOW, **_vector_only(query))] == \
        ["new/zebra.md"]
    kb.delete("new/zebra.md")
    hits = kb.search(query, limit=3, now=NOW, **_vector_only(query))
    assert hits and "new/zebra.md" not in [h.path for h in hits]


def test_writes_by_another_connection_and_another_process_are_seen(
        kb: KnowledgeStore) -> None:
    _warm(kb)
    query = "walrus obsidian kazoo"
    other = KnowledgeStore.open(kb.location, FakeEmbedder(64), hype=False)
    try:
        other.upsert("new/walrus.md", title="wok", body=query)
    finally:
        other.close()
    assert [h.path for h in kb.search(query, limit=1, now=NOW, **_vector_only(query))] == \
        ["new/walrus.md"]
    _warm(kb)
    reads = _scan(kb).reads
    query2 = "narwhal basalt ocarina"
    code = ("import sys; from kbstore import FakeEmbedder, KnowledgeStore\n"
            "s = KnowledgeStore.open(sys.argv[1], FakeEmbedder(64), hype=False)\n"
            f"s.upsert('new/narwhal.md', title='nbo', body={query2!r}); s.close()\n")
    subprocess.run([sys.executable, "-c", code, kb.location], check=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert [h.path for h in kb.search(query2, limit=1, now=NOW, **_vector_only(query2))] == \
        ["new/narwhal.md"]
    assert _scan(kb).reads == reads  # changed under it: the SQL scan, no re-read yet


def test_the_numpy_ranking_is_the_sql_ranking_with_many_ties(tmp_path: Path) -> None:
    """_top against SQLite's ORDER BY vec_distance_hamming(...), vector_id on
    16-bit vectors (distances 0..16 only: every k cuts through a tie)."""
    from kbstore.backends.sqlite.connection import connect

    rng = np.random.default_rng(3)
    ids = rng.choice(10**9, size=500, replace=False).astype(np.int64)
    bits = rng.integers(0, 256, size=(500, 2), dtype=np.uint8)
    conn = connect(tmp_path / "t.sqlite")
    conn.execute("CREATE TABLE b (vector_id INTEGER PRIMARY KEY, bits BLOB)")
    conn.executemany("INSERT INTO b VALUES (?, ?)",
                     [(int(i), row.tobytes()) for i, row in zip(ids, bits, strict=True)])
    order = np.argsort(ids)
    for trial in range(20):
        query = rng.integers(0, 256, size=2, dtype=np.uint8)
        for k in (1, 7, 50, 499, 500, 900):
            want = [r[0] for r in conn.execute(
                "SELECT vector_id FROM b ORDER BY vec_distance_hamming(vec_bit(bits), "
                "vec_bit(?)), vector_id LIMIT ?", (query.tobytes(), k))]
            assert _top(ids[order], columns(bits[order]), query, k) == want, (trial, k)


def test_the_numpy_ranking_over_several_blocks_matches_a_full_sort() -> None:
    """More vectors than one block of the distance computation (64-bit
    words, as 384-d vectors have): the top k by (distance, vector id) of a
    full sort, with a third of the rows identical (ties at every k)."""
    rng = np.random.default_rng(5)
    n = 2 * bits_scan._BLOCK + 123
    rows = rng.integers(0, 2**63, size=(n, 6), dtype=np.uint64)
    rows[: n // 3] = rows[0]
    ids = np.sort(rng.choice(10**12, size=n, replace=False)).astype(np.int64)
    query = rows[0] ^ np.uint64(0b1011)  # 3 bits from the tied third
    dist = np.array([sum(int(w).bit_count() for w in row ^ query) for row in rows])
    full = [int(ids[i]) for i in np.lexsort((ids, dist))]
    for k in (1, 3, 320, n // 3, n // 3 + 1, n - 1, n, n + 10):
        assert _top(ids, columns(rows), query, k) == full[:k], k


def test_searches_racing_a_writer_always_see_what_it_committed(kb: KnowledgeStore) -> None:
    """Another connection commits documents while this one searches: each
    document reported committed before a search started is found by it (a
    copy of the bits read before that commit must not be used)."""
    import threading
    import time

    _warm(kb)
    committed: list[tuple[str, str]] = []
    done = threading.Event()

    def write() -> None:
        other = KnowledgeStore.open(kb.location, FakeEmbedder(64), hype=False)
        try:
            for i in range(12):
                # letters only, no word of the other documents
                body = " ".join("".join(chr(97 + (i * 5 + j * 3 + m) % 26) for m in range(7))
                                + "qz" for j in range(4))
                other.upsert(f"race/r{i:02d}.md", title=f"r{i}", body=body)
                committed.append((f"race/r{i:02d}.md", body))
                time.sleep(0.05)  # room for searches between the commits
        finally:
            other.close()
            done.set()

    def check(path: str, body: str) -> None:
        # every vector a candidate: a copy without the new one misses it
        hits = kb.search(body, limit=1, now=NOW, **{**_vector_only(body), **DEEP})
        assert [h.path for h in hits] == [path], path

    writer = threading.Thread(target=write)
    writer.start()
    during = 0
    while not done.is_set():
        if committed:
            check(*committed[-1])
            during += 1
    writer.join()
    for path, body in committed:
        check(path, body)
    assert len(committed) == 12 and during >= 3  # searches did run between the commits


def test_without_numpys_popcount_the_statement_keeps_scanning(
        kb: KnowledgeStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy < 2.0 has no bitwise_count: no copy is read, searches still work."""
    monkeypatch.delattr(np, "bitwise_count")
    first = [_rows(kb, q, **SHALLOW) for q in QUERIES]
    again = [_rows(kb, q, **SHALLOW) for q in QUERIES]
    assert _scan(kb).reads == 0 and first == again and any(first)
