"""Moving knowledge in and out of a store without paying for it twice.

* :func:`import_npz` takes over picobot's old ``embeddings.npz`` sidecar
  (seed 000: ``vectors`` (N, D), ``doc_ids``, ``content_hashes`` = md5 of the
  body, optional ``hype_vectors``/``hype_doc_ids``/``hype_questions``). The
  documents come from the workspace; a vector is reused only when its
  document's current body still hashes to the npz hash and its dimension is
  the store's. Everything else is counted and embedded the normal way.
* :func:`export_jsonl` / :func:`import_jsonl`: a lossless round trip of
  documents, tags, dates and HyPE questions; vectors optionally, tagged with
  the embedder fingerprint so they are reused only by the same model.
* :func:`export_markdown`: a picobot-layout tree (``knowledge/<topic>/...``,
  ``skills/<name>/SKILL.md``) that ``import_directory`` reads back.

Reused vectors are written with the writer's own helpers, one transaction
per batch, and recorded in ``derived`` like computed ones; the normal write
path then finds them current and embeds only what is left.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from . import db as _db
from . import schema
from .embed import fingerprint_id, normalize, same_model
from .errors import InvalidDocumentError, KBStoreError
from .ingest import (
    EXCLUDED_NAMES,
    SKILLS_TOPIC,
    TOPICS,
    Document,
    make_document,
)
from .store import BATCH_SIZE, ImportReport, KnowledgeStore, doc_vector_hash, hype_hash
from .writer import batches

SLOTS = schema.VECTOR_SLOTS
MAX_QUESTION_SLOT = SLOTS - 1
IMPORTED_QUESTIONS_MODEL = "imported"  # recorded when the LLM that wrote them is unknown


class ExchangeError(KBStoreError, ValueError):
    """An export/import file is unreadable or not in the expected layout."""


# -- writing documents with vectors we already have ---------------------------------


@dataclass
class Prepared:
    """A document plus whatever derived data came with it."""

    doc: Document
    vector: np.ndarray | None = None
    questions: list[str] = field(default_factory=list)
    question_vectors: list[np.ndarray] | None = None  # same length as questions
    questions_model: str = IMPORTED_QUESTIONS_MODEL


@dataclass
class Written:
    vectors: int = 0
    already_current: int = 0
    questions: int = 0
    question_vectors: int = 0
    added: int = 0
    updated: int = 0

    def credit(self, report: ImportReport) -> None:
        """The normal write path that runs next sees these documents as
        already stored ('unchanged'); move them to where they belong."""
        report.added += self.added
        report.updated += self.updated
        report.unchanged = max(0, report.unchanged - self.added - self.updated)


def _unit(vector: np.ndarray) -> np.ndarray:
    """float32, L2-normalised; an already-unit vector is kept bit for bit so a
    reused vector is exactly the one that was exported."""
    vec = np.asarray(vector, dtype=np.float32).reshape(-1)
    if abs(float(np.linalg.norm(vec)) - 1.0) <= 1e-5:
        return vec
    return normalize(vec)[0]


def write_prepared(store: KnowledgeStore, items: list[Prepared]) -> Written:
    """Write documents with reusable vectors/questions in ONE transaction.

    Nothing is embedded here. A vector is written only where the store lacks a
    current one; questions only where the store lacks current ones. Documents
    whose vec0 metadata would need rewriting (topic moved) are deferred to
    the normal write path, which knows how.
    """
    from .writer import _mark, _plan_batch, _replace_questions, _write_document, _write_vector

    done = Written()
    unique = list({p.doc.path: p for p in items}.values())
    plans = _plan_batch(store, [p.doc for p in unique])
    fp = fingerprint_id(store.embedder.fingerprint())
    conn = store.conn
    with _db.transaction(conn):
        for item, plan in zip(unique, plans, strict=True):
            doc = item.doc
            if plan.meta_changed and not plan.need_vector:
                continue  # the normal write path rewrites vec0 metadata
            want_questions = bool(item.questions) and not plan.hype_current
            if not (plan.need_vector and item.vector is not None) and not want_questions:
                if not plan.need_vector:
                    done.already_current += 1
                continue
            doc_id = _write_document(conn, plan)
            if plan.doc_id is None:
                done.added += 1
            elif plan.changed:
                done.updated += 1
            if plan.need_vector and item.vector is not None:
                _write_vector(conn, doc_id, 0, "doc", doc, _unit(item.vector))
                _mark(conn, doc_id, "doc_vector", plan.vector_hash, fp)
                done.vectors += 1
            elif not plan.need_vector:
                done.already_current += 1
            if want_questions:
                questions = item.questions[:MAX_QUESTION_SLOT]
                vectors = item.question_vectors
                if vectors is not None:
                    vectors = vectors[:len(questions)]
                    pairs = zip(questions, vectors, strict=True)
                    _replace_questions(conn, doc_id, doc, [
                        (pos, q, _unit(v)) for pos, (q, v) in enumerate(pairs, start=1)])
                    _mark(conn, doc_id, "hype_vectors", plan.hype_hash, fp)
                    done.question_vectors += len(questions)
                else:
                    # Questions without usable vectors: the normal path embeds
                    # them (as queries) because hype_vectors is not marked.
                    _replace_questions(conn, doc_id, doc, [])
                    conn.execute("DELETE FROM derived WHERE doc_id = ? AND kind = "
                                 "'hype_vectors'", (doc_id,))
                    conn.executemany(
                        "INSERT INTO hype_questions (doc_id, position, question) "
                        "VALUES (?, ?, ?)",
                        [(doc_id, pos, q) for pos, q in enumerate(questions, start=1)])
                _mark(conn, doc_id, "hype_questions", plan.hype_hash, item.questions_model)
                done.questions += len(questions)
    return done


def import_npz(store: KnowledgeStore, workspace: str | os.PathLike[str],
               npz_path: str | os.PathLike[str], **options: Any) -> Any:
    """picobot's embeddings.npz sidecar; see :mod:`kbstore.exchange_npz`."""
    from .exchange_npz import import_npz as _import_npz

    return _import_npz(store, workspace, npz_path, **options)


# -- JSONL ------------------------------------------------------------------------------


def _derived(conn: Any, doc_id: int) -> dict[str, tuple[str, str, str]]:
    return {r[0]: (r[1], r[2], r[3]) for r in conn.execute(
        "SELECT kind, content_hash, model, status FROM derived WHERE doc_id = ?", (doc_id,))}


def _vector(conn: Any, vector_id: int) -> list[float] | None:
    row = conn.execute("SELECT embedding FROM vector_data WHERE vector_id = ?",
                       (vector_id,)).fetchone()
    return None if row is None else np.frombuffer(row[0], dtype=np.float32).tolist()


def document_records(store: KnowledgeStore, include_vectors: bool = False
                     ) -> Iterator[dict[str, Any]]:
    """One dict per document, in id order. Questions and vectors are included
    only when current for the document's content (stale ones would mislead)."""
    conn = store.conn
    fingerprint = schema.get_meta(conn, "embedder") or store.embedder.fingerprint()
    fp = fingerprint_id(fingerprint)
    for doc_id, path in conn.execute("SELECT id, path FROM documents ORDER BY id").fetchall():
        doc = store.get(path)
        if doc is None:  # deleted meanwhile
            continue
        made = _derived(conn, doc_id)
        hq = made.get("hype_questions")
        rows = conn.execute("SELECT position, question FROM hype_questions WHERE doc_id = ? "
                            "ORDER BY position", (doc_id,)).fetchall()
        current = hq is not None and hq[0] == hype_hash(doc) and hq[2] == "ok"
        record: dict[str, Any] = {
            "path": doc.path, "title": doc.title, "tags": doc.tags, "topic": doc.topic,
            "doc_type": doc.doc_type, "created": doc.created, "updated": doc.updated,
            "body": doc.body, "questions": [q for _, q in rows] if current else [],
            "questions_model": hq[1] if hq is not None and current and rows else None,
        }
        if include_vectors:
            vectors: dict[str, Any] = {"fingerprint": fingerprint}
            dv = made.get("doc_vector")
            if dv is not None and dv[0] == doc_vector_hash(doc) and dv[1] == fp:
                vectors["doc"] = _vector(conn, doc_id * SLOTS)
            hv = made.get("hype_vectors")
            if current and rows and hv is not None and hv[0] == hype_hash(doc) and hv[1] == fp:
                qv = [_vector(conn, doc_id * SLOTS + pos) for pos, _ in rows]
                if all(v is not None for v in qv):
                    vectors["questions"] = qv
            record["vectors"] = vectors
        yield record


def _open_out(out: str | os.PathLike[str] | IO[str]) -> tuple[IO[str], Any]:
    """A text handle for ``out`` ('-' = stdout) and a finish(ok) callback that
    moves a temp file into place, so a failed export leaves no half file."""
    if hasattr(out, "write"):
        return out, lambda ok: None  # type: ignore[return-value]
    if str(out) == "-":
        return sys.stdout, lambda ok: sys.stdout.flush()
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    handle = os.fdopen(fd, "w", encoding="utf-8", newline="\n")

    def finish(ok: bool) -> None:
        handle.close()
        if ok:
            os.replace(tmp, target)
        elif os.path.exists(tmp):
            os.unlink(tmp)

    return handle, finish


def export_jsonl(store: KnowledgeStore, out: str | os.PathLike[str] | IO[str],
                 include_vectors: bool = False) -> int:
    """Write one JSON object per document; returns how many."""
    handle, finish = _open_out(out)
    count = 0
    try:
        for record in document_records(store, include_vectors):
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    except BaseException:
        finish(False)
        raise
    finish(True)
    return count


@dataclass
class JsonlReport:
    documents: int = 0
    reused_vectors: int = 0
    reused_question_vectors: int = 0
    imported_questions: int = 0
    fingerprint_mismatch: int = 0  # records whose vectors came from another model
    embedded: int = 0
    write: ImportReport = field(default_factory=ImportReport)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "write"}
        data["write"] = self.write.to_dict()
        return data

    def summary(self) -> str:
        w = self.write
        return (f"imported {self.documents} document(s): added {w.added}, updated {w.updated}, "
                f"unchanged {w.unchanged}; reused {self.reused_vectors} vectors, "
                f"{self.imported_questions} HyPE questions; fingerprint mismatch "
                f"{self.fingerprint_mismatch}; embedded {self.embedded}")


def _record_to_prepared(record: Any, where: str, fingerprint: dict[str, Any], dim: int,
                        report: JsonlReport) -> Prepared:
    if not isinstance(record, dict):
        raise ExchangeError(f"{where}: expected a JSON object")
    try:
        doc = make_document(record["path"], title=record["title"], body=record["body"],
                            tags=record.get("tags"), topic=record.get("topic"),
                            doc_type=record.get("doc_type"), created=record.get("created"),
                            updated=record.get("updated"))
    except KeyError as exc:
        raise ExchangeError(f"{where}: missing field {exc.args[0]!r}") from exc
    except InvalidDocumentError as exc:
        raise ExchangeError(f"{where}: {exc}") from exc
    questions = [str(q).strip() for q in record.get("questions") or [] if str(q).strip()]
    item = Prepared(doc, questions=questions,
                    questions_model=record.get("questions_model") or IMPORTED_QUESTIONS_MODEL)
    vectors = record.get("vectors")
    if isinstance(vectors, dict) and (vectors.get("doc") or vectors.get("questions")):
        theirs = vectors.get("fingerprint")
        if not isinstance(theirs, dict) or not same_model(theirs, fingerprint):
            report.fingerprint_mismatch += 1
            return item
        doc_vec = vectors.get("doc")
        if doc_vec is not None and len(doc_vec) == dim:
            item.vector = np.asarray(doc_vec, dtype=np.float32)
        qv = vectors.get("questions")
        if qv and len(qv) == len(questions) and all(len(v) == dim for v in qv):
            item.question_vectors = [np.asarray(v, dtype=np.float32) for v in qv]
    return item


def _read_jsonl(file: str | os.PathLike[str] | IO[str]) -> Iterator[tuple[str, Any]]:
    handle: IO[str]
    if hasattr(file, "read"):
        handle, name, close = file, getattr(file, "name", "<stream>"), False  # type: ignore[assignment]
    elif str(file) == "-":
        handle, name, close = sys.stdin, "<stdin>", False
    else:
        handle, name, close = open(file, encoding="utf-8"), str(file), True  # noqa: SIM115
    try:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield f"{name}:{lineno}", json.loads(line)
            except json.JSONDecodeError as exc:
                raise ExchangeError(f"{name}:{lineno}: not JSON ({exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise ExchangeError(f"{name} is not UTF-8 text") from exc
    finally:
        if close:
            handle.close()


def import_jsonl(store: KnowledgeStore, file: str | os.PathLike[str] | IO[str], *,
                 batch_size: int = BATCH_SIZE) -> JsonlReport:
    """Load an :func:`export_jsonl` file. Vectors are reused when their
    fingerprint is the store's; questions are kept (no LLM call); whatever is
    missing is embedded. Each batch is validated before anything is written."""
    report = JsonlReport()
    fingerprint = store.embedder.fingerprint()
    dim = int(store.embedder.dim)
    records = (_record_to_prepared(rec, where, fingerprint, dim, report)
               for where, rec in _read_jsonl(file))
    for batch in batches(records, batch_size):
        done = write_prepared(store, batch)
        report.documents += len(batch)
        report.reused_vectors += done.vectors
        report.reused_question_vectors += done.question_vectors
        report.imported_questions += done.questions
        written = store.upsert_many([p.doc for p in batch], batch_size=batch_size)
        done.credit(written)
        report.write.add(written)
        report.embedded += written.embedded
    return report


# -- markdown -------------------------------------------------------------------------


@dataclass
class MarkdownReport:
    written: int = 0
    outside_layout: list[str] = field(default_factory=list)  # import_directory will not see

    def summary(self) -> str:
        extra = (f" ({len(self.outside_layout)} outside picobot's layout, not re-importable: "
                 f"{', '.join(self.outside_layout[:5])})" if self.outside_layout else "")
        return f"wrote {self.written} file(s){extra}"


def _yaml_date(value: str | None) -> Any:
    """A plain date is written unquoted like picobot's files (2026-08-04)."""
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value) if len(value) == 10 else value
    except ValueError:
        return value


def markdown_file(doc: Document) -> tuple[str, dict[str, Any]]:
    """(relative file path, frontmatter) of one document in picobot's layout."""
    dates = {"created": _yaml_date(doc.created), "updated": _yaml_date(doc.updated)}
    dates = {k: v for k, v in dates.items() if v is not None}
    if doc.doc_type == "skill" and doc.path.startswith(f"{SKILLS_TOPIC}/"):
        return doc.path, {"name": doc.title, "tags": doc.tags, **dates}
    return f"knowledge/{doc.path}", {"title": doc.title, "topic": doc.topic, "tags": doc.tags,
                                     **dates}


def _in_layout(doc: Document) -> bool:
    parts = doc.path.split("/")
    if parts[-1].lower() in EXCLUDED_NAMES:
        return False
    if parts[0] == SKILLS_TOPIC:
        return len(parts) == 3 and parts[2] == "SKILL.md"
    return len(parts) > 1 and parts[0] in TOPICS and doc.topic == parts[0]


def export_markdown(store: KnowledgeStore, out_dir: str | os.PathLike[str]) -> MarkdownReport:
    """Write every document as a markdown file with frontmatter into a new (or
    empty) folder laid out like a picobot workspace. HyPE questions and
    vectors are not part of markdown; use JSONL to keep them."""
    from .picobot import atomic_write, render_markdown

    root = Path(out_dir)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ExchangeError(f"{root} exists and is not an empty folder; export into a new one")
    root.mkdir(parents=True, exist_ok=True)
    report = MarkdownReport()
    for path in store.paths():
        doc = store.get(path)
        if doc is None:
            continue
        rel, meta = markdown_file(doc)
        target = root / rel
        if not target.resolve().is_relative_to(root.resolve()):  # paths are validated; belt
            raise ExchangeError(f"document path {doc.path!r} leaves the export folder")
        atomic_write(target, render_markdown(meta, doc.body))
        report.written += 1
        if not _in_layout(doc):
            report.outside_layout.append(doc.path)
    return report
