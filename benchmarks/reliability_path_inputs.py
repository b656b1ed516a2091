"""What the write paths are fed: versions, workspace files, JSONL records,
npz sidecars, the damage ``doctor --fix`` has to repair, and a schema-v3
file for ``migrate``."""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from benchmarks.reliability_check import SLOTS
from benchmarks.reliability_docs import DIM, doc_path, is_postgres, make_docs
from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.backends.sqlite.connection import connect
from kbstore.documents import make_document
from kbstore.embed import embedding_text
from kbstore.files import render_markdown
from kbstore.model import fingerprint_id


def marker(gen: int) -> str:
    return f"m0x{gen + 1}"


def reembed_dim(gen: int) -> int:
    """Target dimension of run ``gen``: the seed is 64, runs alternate 32/64."""
    return 32 if gen % 2 == 0 else 64


# -- inputs: workspace files, JSONL, npz ------------------------------------------------


def doc_file_text(i: int, mark: str) -> str:
    doc = make_docs([i], mark)[0]
    return render_markdown({"title": doc.title, "tags": doc.tags, "created": "2025-01-02"},
                           doc.body)


def write_workspace(ws: Path, ids: range, mark: str) -> None:
    """picobot layout; each file replaced atomically (no fsync: speed)."""
    folder = ws / "knowledge" / "projects"
    folder.mkdir(parents=True, exist_ok=True)
    for i in ids:
        target = folder / f"doc-{i:04d}.md"
        tmp = folder / f".doc-{i:04d}.tmp"
        tmp.write_text(doc_file_text(i, mark), encoding="utf-8")
        os.replace(tmp, target)


def _fake_vectors(texts: list[str]) -> np.ndarray:
    return FakeEmbedder(DIM).embed_documents(texts)


def write_jsonl(file: Path, ids: range, mark: str) -> None:
    """Records as `kbstore export --format jsonl --vectors` writes them: every
    other one brings questions, every third one its vector."""
    fp = FakeEmbedder(DIM).fingerprint()
    docs = make_docs(ids, mark)
    vecs = _fake_vectors([embedding_text(d.title, d.tags, d.body) for d in docs])
    with open(file, "w", encoding="utf-8") as fh:
        for k, (doc, vec) in enumerate(zip(docs, vecs, strict=True)):
            record: dict[str, Any] = {"path": doc.path, "title": doc.title, "body": doc.body,
                                      "tags": doc.tags}
            if k % 2 == 0:
                record["questions"] = [f"what is {doc.title}?", f"why {doc.title}?"]
            if k % 3 == 0:
                record["vectors"] = {"fingerprint": fp, "doc": [float(x) for x in vec]}
            fh.write(json.dumps(record) + "\n")


def write_npz(file: Path, ws: Path, ids: range, mark: str) -> None:
    """picobot's sidecar for the workspace: vectors for 70% of its documents
    (md5 of the body), HyPE questions for a third of those."""
    from kbstore.ingest import parse_file

    folder = ws / "knowledge" / "projects"
    docs = [parse_file(folder / f"doc-{i:04d}.md", doc_path(i)) for i in ids if i % 10 < 7]
    vecs = _fake_vectors([embedding_text(d.title, d.tags, d.body) for d in docs])
    qdocs, qtext = [], []
    for d in docs[::3]:
        qdocs += [d.path, d.path]
        qtext += [f"what is {d.title}?", f"how to {d.title}?"]
    tmp = file.with_name(f".{file.name}.tmp.npz")
    np.savez(tmp, vectors=vecs, doc_ids=np.array([d.path for d in docs]),
             content_hashes=np.array([hashlib.md5(d.body.encode()).hexdigest() for d in docs]),
             hype_doc_ids=np.array(qdocs), hype_questions=np.array(qtext),
             hype_vectors=_fake_vectors(qtext))
    os.replace(tmp, file)


# -- damage for doctor --fix (plain SQL) -------------------------------------------------


def damage_plan(ids: list[int], rng: random.Random) -> list[tuple[str, list[int]]]:
    """[(kind of damage, document ids)]: always the vectors of a random
    20-80% of the documents (so --fix has real work: re-embedding), plus a
    random choice of other damage. Each backend applies it in its tables."""
    victims = rng.sample(ids, int(len(ids) * rng.uniform(0.2, 0.8)))
    plan = [("doc_vectors", victims),
            ("doc_floats", [d for d in victims if rng.random() < 0.5]),
            ("doc_hash_rows", [d for d in victims if rng.random() < 0.3])]
    for kind, chance, some in (("tags", 0.5, []), ("stale_hash", 0.5, None),
                               ("fusion", 0.3, []), ("question_vectors", 0.3, None)):
        if rng.random() < chance:
            plan.append((kind, rng.sample(ids, len(ids) // 10) if some is None else some))
    return plan


def describe_damage(plan: list[tuple[str, list[int]]]) -> list[str]:
    what = {"doc_vectors": "vectors of {} documents", "tags": "document_tags emptied",
            "stale_hash": "stale hash rows for {}", "fusion": "meta.fusion malformed",
            "question_vectors": "question vectors of {}"}
    return [what[kind].format(len(ids)) for kind, ids in plan if kind in what]


# Per kind: a statement run once per document id (None: once, without one).
_SQLITE_DAMAGE = {
    "doc_vectors": (f"DELETE FROM vectors WHERE vector_id = ? * {SLOTS}", True),
    "doc_floats": (f"DELETE FROM vector_data WHERE vector_id = ? * {SLOTS}", True),
    "doc_hash_rows": ("DELETE FROM derived WHERE doc_id = ? AND kind = 'doc_vector'", True),
    "tags": ("DELETE FROM document_tags", False),
    "stale_hash": ("UPDATE derived SET content_hash = 'stale' WHERE doc_id = ? "
                   "AND kind = 'doc_vector'", True),
    "fusion": ("UPDATE meta SET value = '[1, 2]' WHERE key = 'fusion'", False),
    "question_vectors": (f"DELETE FROM vector_data WHERE doc_id = ? AND vector_id % {SLOTS} > 0",
                         True),
}


def inflict_damage(db: Path | str, rng: random.Random) -> list[str]:
    """Damage kbstore's derived data with plain SQL (:func:`damage_plan`);
    returns what was done."""
    if is_postgres(db):
        from benchmarks.reliability_check_pg import inflict_damage as on_postgres

        return on_postgres(str(db), rng)
    conn = connect(db, mode="write")
    try:
        conn.execute("BEGIN IMMEDIATE")
        plan = damage_plan([r[0] for r in conn.execute("SELECT id FROM documents ORDER BY id")],
                           rng)
        for kind, ids in plan:
            sql, per_id = _SQLITE_DAMAGE[kind]
            if per_id:
                conn.executemany(sql, [(d,) for d in ids])
            else:
                conn.execute(sql)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return describe_damage(plan)


# -- a schema-v3 file for migrate ------------------------------------------------------


def make_v3_file(path: Path, documents: Sequence[tuple[str, str, list[str], str, list[str]]],
                 llm_model: str) -> None:
    """A schema-v3 file as kbstore's v3 code left it: the v3 steps applied by
    the runner, then each (path, title, tags, body, questions) and its
    vectors written with the statements v3 used, so its triggers made the
    index rows."""
    from kbstore import migrations as migration_files
    from kbstore.backends.sqlite import migrations as sqlite_migrations

    real_steps = migration_files.steps
    with mock.patch.object(sqlite_migrations, "steps", lambda backend: real_steps(backend)[:3]), \
            mock.patch.object(sqlite_migrations, "SCHEMA_VERSION", 3), \
            KnowledgeStore.open(path, FakeEmbedder(64), hype=False) as store:
        assert store.status()["schema_version"] == 3  # schema, meta, empty vec0 table
    embedder = FakeEmbedder(64)
    fp = fingerprint_id(embedder.fingerprint())
    conn = connect(path, mode="write")
    try:
        conn.execute("BEGIN IMMEDIATE")
        for path_, title, tags, body, questions in documents:
            doc = make_document(path_, title=title, body=body, tags=tags)
            did = conn.execute(
                "INSERT INTO documents (title, tags, body, topic, doc_type, created, updated, "
                "content_hash, extra, path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '{}', ?)",
                (doc.title, json.dumps(doc.tags), doc.body, doc.topic, doc.doc_type,
                 doc.created, doc.updated, doc.content_hash(), doc.path)).lastrowid
            vectors = [embedder.embed_documents([embedding_text(title, doc.tags, body)])[0],
                       *embedder.embed_queries(questions)]
            for slot, vector in enumerate(vectors):
                blob = np.asarray(vector, np.float32).tobytes()
                conn.execute("INSERT INTO vectors (vector_id, kind, embedding_bits, doc_id, "
                             "topic, doc_type) VALUES (?, ?, vec_quantize_binary(?), ?, ?, ?)",
                             (did * SLOTS + slot, "doc" if slot == 0 else "hype", blob, did,
                              doc.topic, doc.doc_type))
                conn.execute("INSERT INTO vector_data (vector_id, doc_id, embedding) "
                             "VALUES (?, ?, ?)", (did * SLOTS + slot, did, blob))
            for position, question in enumerate(questions, start=1):
                conn.execute("INSERT INTO hype_questions (doc_id, position, question) "
                             "VALUES (?, ?, ?)", (did, position, question))
            for kind, chash, model in (("doc_vector", doc.vector_hash(), fp),
                                       ("hype_questions", doc.hype_hash(), llm_model),
                                       ("hype_vectors", doc.hype_hash(), fp)):
                conn.execute("INSERT INTO derived (doc_id, kind, content_hash, model) "
                             "VALUES (?, ?, ?, ?)", (did, kind, chash, model))
        conn.execute("COMMIT")
    finally:
        conn.close()
