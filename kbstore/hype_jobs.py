"""(Re)generating HyPE questions for documents already in a store.

Import writes HyPE as it goes, but an LLM that was down, a missing key or
an import with ``--no-hype`` leaves documents without questions. This job
finds them (``pending``) -- or takes every document (``all``, e.g. after
switching LLM) -- and asks the LLM with bounded parallelism, embeds each
batch's questions in one call and writes each batch in one transaction.
Failures never touch the document itself: it stays stored and searchable,
its HyPE stays pending with the error.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import db as _db
from .embed import fingerprint_id
from .hype import HypeConfig, generate_many
from .writer import _mark, _replace_questions

if TYPE_CHECKING:
    from .ingest import Document
    from .store import KnowledgeStore

log = logging.getLogger("kbstore.hype")
MODES = ("pending", "all")
BATCH_SIZE = 64
_SKIPPED = "skipped:"  # generate_many's prefix for items the breaker never sent


@dataclass
class _Target:
    doc_id: int
    path: str
    hype_hash: str
    current: bool  # questions for exactly this content exist (status ok)
    status: str | None  # derived hype_questions status, None when no row


def select_targets(store: KnowledgeStore, mode: str = "pending") -> list[_Target]:
    """Documents the job would send to the LLM, in id order.

    ``pending``: HyPE marked pending (a failed call), no HyPE row at all
    (imported with HyPE off) or questions for older content. ``all``: every
    document.
    """
    from .store import text_hash

    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    rows = store.conn.execute(
        "SELECT d.id, d.path, d.title, d.body, h.content_hash, h.status "
        "FROM documents AS d LEFT JOIN derived AS h "
        "ON h.doc_id = d.id AND h.kind = 'hype_questions' ORDER BY d.id").fetchall()
    targets = []
    for doc_id, path, title, body, stored_hash, status in rows:
        # Same hash as store.hype_hash(doc), without building a Document.
        current_hash = text_hash(title, body)
        current = status == "ok" and stored_hash == current_hash
        if mode == "all" or not current:
            targets.append(_Target(int(doc_id), path, current_hash, current, status))
    return targets


def run_hype(store: KnowledgeStore, mode: str = "pending", *, concurrency: int | None = None,
             model: str | None = None, dry_run: bool = False, batch_size: int = BATCH_SIZE,
             progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Generate HyPE questions for the ``mode`` documents of ``store``.

    HyPE is forced on for this run whatever ``store.hype.enabled`` says
    (asking for it is the point); the model is ``model``, else the store's
    (hype_model > env KBSTORE_HYPE_MODEL > default). ``dry_run`` only counts
    the LLM calls that would be made. ``progress(n)`` is called per
    finished document. Returns counts:

    documents  targets selected        llm_calls  documents sent to the LLM
    generated  documents now current   failed     documents left pending
    questions  questions stored        changed    skipped: edited meanwhile
    aborted    True when the breaker stopped the run (LLM clearly down)
    """
    targets = select_targets(store, mode)
    counts: dict[str, Any] = {"mode": mode, "dry_run": dry_run, "documents": len(targets),
                              "llm_calls": len(targets) if dry_run else 0, "generated": 0,
                              "failed": 0, "questions": 0, "changed": 0, "aborted": False}
    if dry_run or not targets:
        return counts
    config = dataclasses.replace(
        store.hype, enabled=True, model=model or store.hype.model,
        concurrency=max(1, concurrency if concurrency is not None else store.hype.concurrency))
    counts["model"] = config.model
    counts["concurrency"] = config.concurrency
    for start in range(0, len(targets), max(1, batch_size)):
        batch = targets[start:start + batch_size]
        if _run_batch(store, config, batch, counts, progress):
            # The breaker tripped: the LLM is down (no key, no network). The
            # rest stays pending for the next run instead of failing slowly.
            counts["aborted"] = True
            counts["failed"] += len(targets) - start - len(batch)
            if progress:
                progress(len(targets) - start - len(batch))
            log.warning("HyPE run stopped after repeated LLM failures; %d document(s) left "
                        "pending", counts["failed"])
            break
    return counts


def _run_batch(store: KnowledgeStore, config: HypeConfig, batch: list[_Target],
               counts: dict[str, Any], progress: Callable[[int], None] | None) -> bool:
    """Generate and write one batch; True when the breaker skipped calls."""
    docs: dict[str, Document] = {}
    for t in batch:
        doc = store.get(t.path)
        if doc is not None:
            docs[t.path] = doc
    # 1. Slow work outside any transaction: LLM calls, then one embedding call.
    on_done = (lambda: progress(1)) if progress else None
    questions, errors = generate_many(
        config, [(path, d.title, d.body) for path, d in docs.items()], on_done=on_done)
    skipped = sum(1 for e in errors.values() if e.startswith(_SKIPPED))
    counts["llm_calls"] += len(questions) + len(errors) - skipped
    flat = [(path, pos, q) for path, qs in questions.items() for pos, q in enumerate(qs, 1)]
    # Questions are queries (see writer.py): question-to-question matching.
    vectors: Any = store.embedder.embed_queries([q for _, _, q in flat]) if flat else []
    items: dict[str, list[tuple[int, str, Any]]] = {}
    for (path, pos, q), vec in zip(flat, vectors, strict=True):
        items.setdefault(path, []).append((pos, q, vec))
    fp = fingerprint_id(store.embedder.fingerprint())

    # 2. One transaction per batch.
    from .store import hype_hash

    with _db.transaction(store.conn):
        for t in batch:
            doc = store.get(t.path)
            if doc is None or hype_hash(doc) != t.hype_hash:
                # Edited or deleted while the LLM was busy: these questions
                # describe content that no longer exists; the writer of the
                # new content owns its HyPE.
                counts["changed"] += 1
                continue
            doc_id = _doc_id(store, t.path)
            if t.path in items:
                _replace_questions(store.conn, doc_id, doc, items[t.path])
                _mark(store.conn, doc_id, "hype_questions", t.hype_hash, config.model)
                _mark(store.conn, doc_id, "hype_vectors", t.hype_hash, fp)
                counts["generated"] += 1
                counts["questions"] += len(items[t.path])
                continue
            counts["failed"] += 1
            if t.current:
                continue  # `all` failed to refresh good questions: keep them
            _replace_questions(store.conn, doc_id, doc, [])  # drop stale ones, if any
            store.conn.execute("DELETE FROM derived WHERE doc_id = ? AND kind = 'hype_vectors'",
                               (doc_id,))
            _mark(store.conn, doc_id, "hype_questions", t.hype_hash, config.model,
                  status="pending", error=errors.get(t.path, "unknown error"))
    return skipped > 0


def _doc_id(store: KnowledgeStore, path: str) -> int:
    row = store.conn.execute("SELECT id FROM documents WHERE path = ?", (path,)).fetchone()
    return int(row[0])
