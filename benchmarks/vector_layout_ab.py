"""What another layout of the vector tables would save on ingest and cost on
search, measured before building it (issue 14: 2,000 docs/s at 10k).

    python -m benchmarks.vector_layout_ab --write 10000 --rounds 3
    python -m benchmarks.vector_layout_ab --search 10000 --store /tmp/kb10k.sqlite
    python -m benchmarks.vector_layout_ab --write 10000 --search 10000 --json out.json

``--write``: n documents of 7 float32 vectors (a document vector and 6
HyPE questions, 384-d) written in batches of 500, one transaction each,
through kbstore's connection factory and bulk settings, in several layouts
of the two vector tables, each on a fresh file, rounds alternating the
order. Reported: thread CPU (and wall) microseconds per document, COMMIT
included. vec0 arms: today's columns (kind partition, bits, doc_id, topic,
doc_type metadata) against fewer metadata columns; vector_data arms (with a
``documents`` parent table, foreign keys on, like the real one): one row
per vector with its doc_id index (today), without that index, one row per
document (its vectors concatenated in slot order) and one row per
(document, kind) keyed by one integer.

``--search``: on a store built by the write path (benchmarks/latency_data:
SciFact text, clustered vectors), vector_data is copied into the two
candidate layouts in the same file, then search.sql's rescoring shapes
(KNN candidates rescored by exact cosine, every question of the found
documents, exact scans, the floor's every-vector-of-a-document) run in
today's form and with ``vec_slice`` of the concatenated blob, interleaved
in one process with the same query vectors; each pair must return the same
rows and scores (1e-6). Thread CPU per statement, medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384
QUESTIONS = 6
BATCH = 500

VEC0_ARMS = {
    "vec0: kind, bits, doc_id, topic, doc_type (today)": ("doc_id INTEGER", "topic TEXT",
                                                         "doc_type TEXT"),
    "vec0: kind, bits, topic": ("topic TEXT",),
    "vec0: kind, bits": (),
}
DATA_ARMS = ("vector_data: row per vector + doc_id index (today)",
             "vector_data: row per vector, no doc_id index",
             "vector_data: row per document",
             "vector_data: row per (document, kind), integer key")
TOPICS = ("projects", "domains", "journal", "user", "self")


def _open(path: Path) -> Any:
    from kbstore.backends.sqlite import connection

    conn = connection.connect(path)
    connection.enable_writes(conn)
    return conn


def _write_arm(arm: str, vecs: np.ndarray, tmp: Path) -> tuple[float, float]:
    from kbstore.backends.sqlite.connection import bulk_writes, transaction
    from kbstore.backends.sqlite.vectors import sign_bits

    n = len(vecs)
    folder = Path(tempfile.mkdtemp(dir=tmp))
    conn = _open(folder / "kb.sqlite")
    conn.execute("CREATE TABLE documents (id INTEGER PRIMARY KEY)")
    conn.executemany("INSERT INTO documents (id) VALUES (?)", [(d,) for d in range(1, n + 1)])
    columns = VEC0_ARMS.get(arm)
    if columns is not None:
        extra = "".join(f", {c}" for c in columns)  # constants above
        conn.execute(f"CREATE VIRTUAL TABLE vectors USING vec0(vector_id INTEGER PRIMARY KEY, "
                     f"kind TEXT PARTITION KEY, embedding_bits bit[{DIM}]{extra}, "
                     "chunk_size=4096)")
        names = [c.split()[0] for c in columns]
        insert = (f"INSERT INTO vectors (vector_id, kind, embedding_bits"
                  f"{''.join(', ' + x for x in names)}) VALUES (?, ?, vec_bit(?)"
                  f"{', ?' * len(names)})")
    elif arm == DATA_ARMS[0] or arm == DATA_ARMS[1]:
        conn.execute("CREATE TABLE vector_data (vector_id INTEGER PRIMARY KEY, doc_id INTEGER "
                     "NOT NULL REFERENCES documents (id) ON DELETE CASCADE, "
                     "embedding BLOB NOT NULL)")
        if arm == DATA_ARMS[0]:
            conn.execute("CREATE INDEX vector_data_doc ON vector_data (doc_id)")
    elif arm == DATA_ARMS[2]:
        conn.execute("CREATE TABLE vector_data (doc_id INTEGER PRIMARY KEY REFERENCES "
                     "documents (id) ON DELETE CASCADE, embeddings BLOB NOT NULL)")
    else:
        conn.execute("CREATE TABLE vector_data (vector_key INTEGER PRIMARY KEY, doc_id INTEGER "
                     "NOT NULL REFERENCES documents (id) ON DELETE CASCADE, "
                     "embeddings BLOB NOT NULL)")
    cpu, wall = time.thread_time(), time.perf_counter()
    with bulk_writes(conn, True):
        for start in range(1, n + 1, BATCH):
            ids = range(start, min(n, start + BATCH - 1) + 1)
            with transaction(conn):
                if columns is not None:
                    rows = sorted(((d * 32 + s, "doc" if s == 0 else "hype", d)
                                   for d in ids for s in range(QUESTIONS + 1)),
                                  key=lambda r: r[1])
                    bits = sign_bits([vecs[r[2] - 1, r[0] % 32].tobytes() for r in rows])
                    meta = {"doc_id": lambda r: r[2], "topic": lambda r: TOPICS[r[2] % 5],
                            "doc_type": lambda r: "entry"}
                    conn.executemany(insert, [(r[0], r[1], b, *[meta[x](r) for x in names])
                                              for r, b in zip(rows, bits, strict=True)])
                elif arm in DATA_ARMS[:2]:
                    conn.executemany("INSERT OR REPLACE INTO vector_data VALUES (?, ?, ?)",
                                     [(d * 32 + s, d, vecs[d - 1, s].tobytes())
                                      for d in ids for s in range(QUESTIONS + 1)])
                elif arm == DATA_ARMS[2]:
                    conn.executemany("INSERT OR REPLACE INTO vector_data VALUES (?, ?)",
                                     [(d, vecs[d - 1].tobytes()) for d in ids])
                else:
                    conn.executemany("INSERT OR REPLACE INTO vector_data VALUES (?, ?, ?)",
                                     [r for d in ids for r in (
                                         (d * 4, d, vecs[d - 1, 0].tobytes()),
                                         (d * 4 + 1, d, vecs[d - 1, 1:].tobytes()))])
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    table = "vectors" if columns is not None else "vector_data"
    written = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # constants
    stored = conn.execute("SELECT sum(length(embeddings)) FROM vector_data").fetchone()[0] \
        if arm in DATA_ARMS[2:] else written * 4 * DIM
    conn.close()
    if (columns is not None and written != n * (QUESTIONS + 1)) \
            or stored != n * (QUESTIONS + 1) * 4 * DIM:
        raise RuntimeError(f"{arm}: wrote {written} rows, {stored} bytes of vectors")
    shutil.rmtree(folder)
    return cpu / n * 1e6, wall / n * 1e6


def write_ab(n: int, rounds: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((n, QUESTIONS + 1, DIM)).astype(np.float32)
    arms = [*VEC0_ARMS, *DATA_ARMS]
    runs: dict[str, list[tuple[float, float]]] = {a: [] for a in arms}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for arm in (arms if r % 2 == 0 else arms[::-1]):
                runs[arm].append(_write_arm(arm, vecs, Path(tmp)))
    return {arm: {"cpu_us_per_doc": statistics.median(x[0] for x in v),
                  "wall_us_per_doc": statistics.median(x[1] for x in v), "runs": v}
            for arm, v in runs.items()}


def _build_store(n: int, path: Path) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    from benchmarks.latency_data import (
        DATASETS,
        fake_completion,
        make_records,
        make_vectors,
        precomputed_corpus,
    )
    from kbstore import KnowledgeStore

    records = make_records(n, DATASETS)
    docs, embedder = precomputed_corpus(records, make_vectors(n, DIM), DIM)
    saved, litellm.completion = litellm.completion, fake_completion(records)
    try:
        store = KnowledgeStore.open(path, embedder, hype=True, hype_model="fake/benchmark")
        store.upsert_many(docs)
        store.close()
    finally:
        litellm.completion = saved


def _slice(blob: str, slot: str, dim: int) -> str:
    return f"vec_slice({blob}, ({slot}) * {dim}, ({slot}) * {dim} + {dim})"


_KNN = ("(SELECT vector_id FROM vectors WHERE embedding_bits MATCH "
        "vec_quantize_binary(vec_f32(:q)) AND k = {k} AND kind = '{kind}')")
_COS = "1.0 - vec_distance_cosine({}, vec_f32(:q))"
def search_statements(dim: int) -> dict[str, tuple[str, str, str]]:
    """name -> (today, one row per document, one row per (document, kind));
    per (document, kind): vector_key = doc_id * 4 + 0 (doc) | 1 (hype)."""

    def sl(slot: str) -> str:  # one slot of the concatenated blob
        return _slice("v.embeddings", slot, dim)

    return {
        "hype KNN (400 candidates) rescored, top 40": (
            f"SELECT c.vector_id, v.doc_id FROM {_KNN.format(k=400, kind='hype')} AS c "
            "JOIN vector_data AS v ON v.vector_id = c.vector_id ORDER BY "
            "vec_distance_cosine(v.embedding, vec_f32(:q)), c.vector_id LIMIT 40",
            f"SELECT c.vector_id, v.doc_id FROM {_KNN.format(k=400, kind='hype')} AS c "
            "JOIN vd_doc AS v ON v.doc_id = c.vector_id / 32 ORDER BY vec_distance_cosine("
            f"{sl('c.vector_id % 32')}, vec_f32(:q)), c.vector_id LIMIT 40",
            f"SELECT c.vector_id, v.doc_id FROM {_KNN.format(k=400, kind='hype')} AS c "
            "JOIN vd_kind AS v ON v.vector_key = c.vector_id / 32 * 4 + 1 ORDER BY "
            f"vec_distance_cosine({sl('c.vector_id % 32 - 1')}, vec_f32(:q)), "
            "c.vector_id LIMIT 40"),
        "doc KNN (50 candidates) rescored": (
            f"SELECT c.vector_id, v.doc_id, {_COS.format('v.embedding')} "
            f"FROM {_KNN.format(k=50, kind='doc')} AS c "
            "JOIN vector_data AS v ON v.vector_id = c.vector_id",
            f"SELECT c.vector_id, v.doc_id, {_COS.format(sl('0'))} "
            f"FROM {_KNN.format(k=50, kind='doc')} AS c JOIN vd_doc AS v "
            "ON v.doc_id = c.vector_id / 32",
            f"SELECT c.vector_id, v.doc_id, {_COS.format('v.embeddings')} "
            f"FROM {_KNN.format(k=50, kind='doc')} AS c JOIN vd_kind AS v "
            "ON v.vector_key = c.vector_id / 32 * 4"),
        "every question of 40 documents (hype_scored)": (
            f"SELECT q.doc_id, q.position, {_COS.format('v.embedding')} FROM hype_questions AS q "
            "JOIN vector_data AS v ON v.vector_id = q.doc_id * 32 + q.position "
            "WHERE q.doc_id IN (SELECT value FROM json_each(:ids))",
            f"SELECT q.doc_id, q.position, {_COS.format(sl('q.position'))} "
            "FROM hype_questions AS q JOIN vd_doc AS v ON v.doc_id = q.doc_id "
            "WHERE q.doc_id IN (SELECT value FROM json_each(:ids))",
            f"SELECT q.doc_id, q.position, {_COS.format(sl('q.position - 1'))} "
            "FROM hype_questions AS q JOIN vd_kind AS v ON v.vector_key = q.doc_id * 4 + 1 "
            "WHERE q.doc_id IN (SELECT value FROM json_each(:ids))"),
        "exact scan: every document vector, top 50": (
            f"SELECT v.vector_id, {_COS.format('v.embedding')} AS s FROM documents AS d "
            "JOIN vector_data AS v ON v.vector_id = d.id * 32 ORDER BY s DESC, 1 LIMIT 50",
            f"SELECT d.id * 32, {_COS.format(sl('0'))} AS s "
            "FROM documents AS d JOIN vd_doc AS v ON v.doc_id = d.id ORDER BY s DESC, 1 LIMIT 50",
            f"SELECT d.id * 32, {_COS.format('v.embeddings')} AS s FROM documents AS d "
            "JOIN vd_kind AS v ON v.vector_key = d.id * 4 ORDER BY s DESC, 1 LIMIT 50"),
        "exact scan: every question vector, top 40": (
            "SELECT v.vector_id, v.doc_id FROM hype_questions AS q JOIN vector_data AS v "
            "ON v.vector_id = q.doc_id * 32 + q.position "
            "ORDER BY vec_distance_cosine(v.embedding, vec_f32(:q)), 1 LIMIT 40",
            "SELECT q.doc_id * 32 + q.position, q.doc_id FROM hype_questions AS q JOIN vd_doc AS v "
            f"ON v.doc_id = q.doc_id ORDER BY vec_distance_cosine("
            f"{sl('q.position')}, vec_f32(:q)), 1 LIMIT 40",
            "SELECT q.doc_id * 32 + q.position, q.doc_id FROM hype_questions AS q "
            f"JOIN vd_kind AS v ON v.vector_key = q.doc_id * 4 + 1 ORDER BY vec_distance_cosine("
            f"{sl('q.position - 1')}, vec_f32(:q)), 1 LIMIT 40"),
        "floor: best vector of 40 documents": (
            f"SELECT v.doc_id, max({_COS.format('v.embedding')}) FROM vector_data AS v "
            "WHERE v.doc_id IN (SELECT value FROM json_each(:ids)) GROUP BY v.doc_id",
            f"SELECT v.doc_id, max({_COS.format(sl('s.value'))}) "
            "FROM vd_doc AS v JOIN json_each(:slots) AS s ON s.value < length(v.embeddings) / "
            f"{4 * dim} WHERE v.doc_id IN (SELECT value FROM json_each(:ids)) GROUP BY v.doc_id",
            f"SELECT v.doc_id, max({_COS.format(sl('s.value'))}) "
            "FROM json_each(:ids) AS i CROSS JOIN vd_kind AS v ON v.vector_key >= i.value * 4 "
            "AND v.vector_key < i.value * 4 + 4 JOIN json_each(:slots) AS s "
            f"ON s.value < length(v.embeddings) / {4 * dim} GROUP BY v.doc_id"),
    }


def _copy_layouts(conn: Any) -> None:
    """vector_data copied into vd_doc (one row per document: its document
    vector, questions and chunks concatenated, slot order) and vd_kind (one
    row per document and kind, vector_key = doc_id * 4 + 0 doc | 1 hype | 2
    chunk). In vd_doc a question's index is its position (the statements
    slice only the document vector and questions from it; chunks follow the
    questions); in vd_kind a question's index is position - 1 and a chunk's
    its chunk position. That holds only without gaps: such a store is refused."""
    from kbstore.backends.sqlite.connection import transaction
    from kbstore.backends.sqlite.vectors import CHUNK_SLOT, owner

    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'vd_kind'").fetchone():
        return
    kinds: dict[tuple[int, int], list[tuple[int, bytes]]] = {}
    for (vid, emb) in conn.execute("SELECT vector_id, embedding FROM vector_data"):
        doc_id, slot = owner(int(vid))
        kind = 0 if slot == 0 else 1 if slot < CHUNK_SLOT else 2
        kinds.setdefault((doc_id, kind), []).append((slot, bytes(emb)))
    first = {0: 0, 1: 1, 2: CHUNK_SLOT}
    for (doc_id, kind), slots in kinds.items():
        slots.sort()
        if [s for s, _ in slots] != list(range(first[kind], first[kind] + len(slots))) \
                or (kind and (doc_id, 0) not in kinds):
            raise RuntimeError(f"document {doc_id}: slots {[s for s, _ in slots]} are not "
                               "contiguous from the first, or it has no document vector")
    with transaction(conn):
        conn.execute("CREATE TABLE vd_doc (doc_id INTEGER PRIMARY KEY, embeddings BLOB NOT NULL)")
        conn.execute("CREATE TABLE vd_kind (vector_key INTEGER PRIMARY KEY, "
                     "doc_id INTEGER NOT NULL, embeddings BLOB NOT NULL)")
        conn.executemany("INSERT INTO vd_kind VALUES (?, ?, ?)",
                         [(d * 4 + k, d, b"".join(e for _, e in v))
                          for (d, k), v in sorted(kinds.items())])
        per_doc: dict[int, list[bytes]] = {}
        for (d, _k), v in sorted(kinds.items()):
            per_doc.setdefault(d, []).extend(e for _, e in v)
        conn.executemany("INSERT INTO vd_doc VALUES (?, ?)",
                         [(d, b"".join(v)) for d, v in per_doc.items()])
        bad = conn.execute("SELECT count(*) FROM vd_doc AS d WHERE length(d.embeddings) <> "
                           "(SELECT sum(length(k.embeddings)) FROM vd_kind AS k "
                           "WHERE k.doc_id = d.doc_id)").fetchone()[0]
        if bad:
            raise RuntimeError(f"{bad} concatenated row(s) lost bytes")


def _same(a: list[Any], b: list[Any]) -> bool:
    a, b = sorted(a), sorted(b)
    return len(a) == len(b) and all(
        x[:2] == y[:2] and all(abs(p - q) <= 1e-6 for p, q in zip(x[2:], y[2:], strict=True))
        for x, y in zip(a, b, strict=True))


def search_ab(path: Path, dim: int = DIM, queries: int = 30, rounds: int = 3
              ) -> dict[str, Any]:
    """Each statement's three forms on the store at ``path`` (vd_doc and
    vd_kind are added to it): median thread CPU, rows, same results."""
    conn = _open(path)
    _copy_layouts(conn)
    rng = np.random.default_rng(99)
    qs = [v.astype(np.float32).tobytes() for v in rng.standard_normal((queries, dim))]
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM documents ORDER BY id")]
    params = {"ids": json.dumps(ids[::max(1, len(ids) // 40)][:40]),
              "slots": json.dumps(list(range(conn.execute(
                  f"SELECT max(length(embeddings)) / {4 * dim} FROM vd_doc").fetchone()[0])))}
    out: dict[str, Any] = {}
    for name, sqls in search_statements(dim).items():
        times: list[list[float]] = [[] for _ in sqls]
        same, rows_seen = True, 0
        for r in range(rounds):
            for q in qs:
                by_arm = {}
                for arm in (range(len(sqls)) if r % 2 == 0 else reversed(range(len(sqls)))):
                    c = time.thread_time()
                    by_arm[arm] = conn.execute(sqls[arm], {**params, "q": q}).fetchall()
                    times[arm].append(time.thread_time() - c)
                same = same and all(_same(by_arm[0], by_arm[a]) for a in by_arm)
                rows_seen += len(by_arm[0])
        med = [statistics.median(t) * 1e3 for t in times]
        out[name] = {"ms_today": med[0], "ms_row_per_document": med[1],
                     "ms_row_per_document_kind": med[2], "same_results": same,
                     "rows_per_query": rows_seen / (rounds * len(qs))}
    conn.close()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", type=int, metavar="N", help="write A/B with N documents")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--search", type=int, metavar="N", help="search A/B on an N-document store")
    ap.add_argument("--store", type=Path, help="the store for --search (built if missing)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    result: dict[str, Any] = {"load": os.getloadavg()}
    if args.write:
        result["write"] = write_ab(args.write, args.rounds)
        for arm, r in result["write"].items():
            print(f"{arm:56s} CPU {r['cpu_us_per_doc']:6.1f} us/doc  "
                  f"wall {r['wall_us_per_doc']:6.1f} us/doc")
    if args.search:
        with tempfile.TemporaryDirectory() as tmp:
            store = args.store or Path(tmp) / "kb.sqlite"
            if not store.exists():
                _build_store(args.search, store)
            result["search"] = search_ab(store)
        for name, r in result["search"].items():
            print(f"{name:46s} today {r['ms_today']:7.3f} ms  per document "
                  f"{r['ms_row_per_document']:7.3f}  per (document, kind) "
                  f"{r['ms_row_per_document_kind']:7.3f}  same: {r['same_results']}")
    result["load_after"] = os.getloadavg()
    print(f"load {result['load']} -> {result['load_after']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
