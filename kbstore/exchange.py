"""Moving knowledge in and out of a store without paying for it twice.

* :func:`export_jsonl` / :func:`import_jsonl`: a lossless round trip of
  documents, tags, dates, extra frontmatter and HyPE questions; vectors
  optionally, tagged with the embedder fingerprint so they are reused only by
  the same model. A bad record is skipped with its line number and reason.
* :func:`export_markdown`: a picobot-layout tree (``knowledge/<topic>/...``,
  ``skills/<name>/SKILL.md``) that ``import_directory`` reads back.
* picobot's old ``embeddings.npz``: :mod:`kbstore.exchange_npz`.

Reused vectors and questions enter through the one write path
(:class:`kbstore.writer.Provided`), which embeds whatever is missing.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .documents import SKILLS_TOPIC, TOPICS, make_document
from .embed import fingerprint_id, same_model
from .errors import ExchangeError, InvalidDocumentError
from .files import atomic_write, open_output, render_markdown, staging_prefix, sweep_stale
from .ingest import EXCLUDED_NAMES
from .model import CHUNK_VECTORS, HYPE_QUESTIONS, OK, Document, ImportReport, Skipped
from .writer import IMPORTED_QUESTIONS_MODEL, Provided, batches

if TYPE_CHECKING:
    from .store import KnowledgeStore

__all__ = ["ExchangeError", "export_fingerprint", "export_jsonl", "export_markdown",
           "import_jsonl"]


# -- JSONL export -----------------------------------------------------------------------


def _floats(blob: bytes | None) -> list[float] | None:
    """A stored vector as floats; None for none, or for a blob cut short (not
    a whole number of float32s: damaged, so not reusable)."""
    if blob is None or len(blob) % 4:
        return None
    import numpy as np

    return np.frombuffer(blob, dtype=np.float32).tolist()


def document_records(store: KnowledgeStore, include_vectors: bool = False
                     ) -> Iterator[dict[str, Any]]:
    """One dict per document, in key order. Questions and vectors are included
    only when current for the document's content (stale ones would mislead)."""
    backend = store.backend
    fingerprint = backend.fingerprint()
    fp = fingerprint_id(fingerprint) if fingerprint else None
    for batch in backend.iter_documents(store.settings.batch_size):
        for doc, stored in batch:
            hq = stored.made(HYPE_QUESTIONS)
            current = hq is not None and hq.status == OK and hq.content_hash == doc.hype_hash()
            questions = backend.questions(doc.path) if current else []
            record: dict[str, Any] = {
                "path": doc.path, "title": doc.title, "tags": doc.tags, "topic": doc.topic,
                "doc_type": doc.doc_type, "created": doc.created, "updated": doc.updated,
                "body": doc.body, "questions": questions,
                "questions_model": hq.model if hq is not None and questions else None,
            }
            if doc.extra:
                record["extra"] = doc.extra
            if include_vectors and fingerprint is not None:
                vectors: dict[str, Any] = {"fingerprint": fingerprint}
                doc_blob, question_blobs = backend.vectors_of(doc.path)
                dv, hv = stored.made("doc_vector"), stored.made("hype_vectors")
                if dv is not None and dv.content_hash == doc.vector_hash() and dv.model == fp:
                    vectors["doc"] = _floats(doc_blob)
                if (questions and hv is not None and hv.content_hash == doc.hype_hash()
                        and hv.model == fp and len(question_blobs) == len(questions)
                        and all(b is not None for b in question_blobs)):
                    vectors["questions"] = [_floats(b) for b in question_blobs]
                cv = stored.made(CHUNK_VECTORS)
                if cv is not None and cv.model == fp:
                    # chunks_hash names the content, window and overlap they were made
                    # from: an importer uses them only when its own hash is the same.
                    chunk_blobs = backend.chunk_vectors_of(doc.path)
                    if chunk_blobs and all(b is not None for b in chunk_blobs):
                        vectors["chunks_hash"] = cv.content_hash
                        vectors["chunks"] = [_floats(b) for b in chunk_blobs]
                record["vectors"] = vectors
            yield record


def export_jsonl(store: KnowledgeStore, out: str | os.PathLike[str] | IO[str],
                 include_vectors: bool = False, *, overwrite: bool = False) -> int:
    """Write one JSON object per document; returns how many. Never writes over
    the store's own file, nor an existing file unless ``overwrite``."""
    handle, finish = open_output(out, protected=[Path(store.location)], overwrite=overwrite)
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


# -- JSONL import -----------------------------------------------------------------------


@dataclass
class JsonlReport:
    documents: int = 0
    reused_vectors: int = 0
    reused_question_vectors: int = 0
    reused_chunk_vectors: int = 0
    imported_questions: int = 0
    fingerprint_mismatch: int = 0   # records whose vectors came from another model
    invalid_vectors: int = 0        # NaN/inf/zero/wrong-size vectors (embedded instead)
    embedded: int = 0
    embedded_chunks: int = 0        # chunk vectors of long documents made by the embedder
    skipped: list[Skipped] = field(default_factory=list)   # bad records, with line and reason
    write: ImportReport = field(default_factory=ImportReport)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k not in ("write", "skipped")}
        data["skipped"] = [{"path": s.path, "reason": s.reason} for s in self.skipped]
        data["write"] = self.write.to_dict()
        return data

    def summary(self) -> str:
        w = self.write
        return (f"imported {self.documents} document(s): added {w.added}, updated {w.updated}, "
                f"unchanged {w.unchanged}; reused {self.reused_vectors} vectors, "
                f"{self.reused_chunk_vectors} chunk vectors, {self.imported_questions} HyPE "
                f"questions; fingerprint mismatch {self.fingerprint_mismatch}; invalid vectors "
                f"{self.invalid_vectors}; embedded {self.embedded} document(s) and "
                f"{self.embedded_chunks} chunk(s); skipped {len(self.skipped)} record(s)")


def _str_or_none(record: dict[str, Any], key: str) -> Any:
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise ExchangeError(f"{key!r} must be a string, not {type(value).__name__}")
    return value


def _vector_list(value: Any) -> list[float] | None:
    """A vector from a record, or None where it is no usable vector (not a
    list of numbers, NaN or infinite, or all zeros): counted as invalid and
    embedded again."""
    if not isinstance(value, list) or not value or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
        return None
    floats = [float(x) for x in value]
    if not all(math.isfinite(x) for x in floats) or not any(floats):
        return None
    return floats


def _record(record: Any, fingerprint: dict[str, Any], dim: int,
            report: JsonlReport) -> tuple[Document, Provided]:
    """A document and what came with it, or ExchangeError with the reason."""
    if not isinstance(record, dict):
        raise ExchangeError("expected a JSON object")
    for key in ("path", "title", "body"):
        if not isinstance(record.get(key), str):
            raise ExchangeError(f"missing or non-text field {key!r}")
    tags = record.get("tags")
    if tags is not None and not (isinstance(tags, str) or (
            isinstance(tags, list) and all(isinstance(t, str) for t in tags))):
        raise ExchangeError("'tags' must be a list of strings")
    extra = record.get("extra") or {}
    if not isinstance(extra, dict):
        raise ExchangeError("'extra' must be a JSON object")
    try:
        doc = make_document(record["path"], title=record["title"], body=record["body"],
                            tags=tags, topic=_str_or_none(record, "topic"),
                            doc_type=_str_or_none(record, "doc_type"),
                            created=_str_or_none(record, "created"),
                            updated=_str_or_none(record, "updated"))
    except InvalidDocumentError as exc:
        raise ExchangeError(str(exc)) from exc
    doc.extra = extra
    questions = record.get("questions")
    if questions is not None and not (isinstance(questions, list)
                                      and all(isinstance(q, str) for q in questions)):
        raise ExchangeError("'questions' must be a list of strings")
    provided = Provided(questions=[q.strip() for q in questions or [] if q.strip()],
                        questions_model=_str_or_none(record, "questions_model")
                        or IMPORTED_QUESTIONS_MODEL)
    vectors = record.get("vectors")
    if vectors is None:
        return doc, provided
    if not isinstance(vectors, dict):
        raise ExchangeError("'vectors' must be a JSON object")
    if vectors.get("doc") is None and not vectors.get("questions") and not vectors.get("chunks"):
        return doc, provided
    theirs = vectors.get("fingerprint")
    if not isinstance(theirs, dict) or not same_model(theirs, fingerprint):
        report.fingerprint_mismatch += 1
        return doc, provided
    if vectors.get("doc") is not None:
        provided.vector = _vector_list(vectors["doc"])
        if provided.vector is None or len(provided.vector) != dim:
            report.invalid_vectors += 1
            provided.vector = None
    qv = vectors.get("questions")
    if qv:
        rows = [_vector_list(v) for v in qv] if isinstance(qv, list) else [None]
        if len(rows) == len(provided.questions or []) and all(r is not None and len(r) == dim
                                                        for r in rows):
            provided.question_vectors = rows
        else:
            report.invalid_vectors += 1
    cv, chash = vectors.get("chunks"), vectors.get("chunks_hash")
    if cv:
        rows = [_vector_list(v) for v in cv] if isinstance(cv, list) else [None]
        if isinstance(chash, str) and all(r is not None and len(r) == dim for r in rows):
            provided.chunks_hash, provided.chunk_vectors = chash, rows
        else:
            report.invalid_vectors += 1
    return doc, provided


# Files that are not JSONL at all, by their first bytes: read line by line,
# each was thousands of "not UTF-8 text" skips and "imported 0".
_PACKED = ((b"\x1f\x8b", "gzip-compressed: gunzip it first"),
           (b"PK\x03\x04", "a zip archive: unzip it first"),
           (b"SQLite format 3\x00", "a SQLite database, not an export: `kbstore copy SRC DST` "
                                    "copies a knowledge base"))


def _refuse_packed(file: str | os.PathLike[str]) -> None:
    try:
        with open(file, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return  # the open below names the problem
    for magic, what in _PACKED:
        if head.startswith(magic):
            raise ExchangeError(f"{file} is {what}; import-jsonl reads the JSONL text "
                                "`kbstore export --format jsonl` writes")


def _read_jsonl(file: str | os.PathLike[str] | IO[str], report: JsonlReport
                ) -> Iterator[tuple[str, Any]]:
    handle: IO[str]
    if hasattr(file, "read"):
        handle, name, close = file, getattr(file, "name", "<stream>"), False  # type: ignore[assignment]
    elif str(file) == "-":
        handle, name, close = sys.stdin, "<stdin>", False
    else:
        _refuse_packed(file)
        handle = open(file, encoding="utf-8", errors="surrogateescape")  # noqa: SIM115
        name, close = str(file), True
    try:
        for lineno, line in enumerate(handle, start=1):
            where = f"{name}:{lineno}"
            if not line.strip():
                continue
            try:
                line.encode("utf-8")
                yield where, json.loads(line)
            except UnicodeEncodeError:
                report.skipped.append(Skipped(where, "not UTF-8 text"))
            except (json.JSONDecodeError, RecursionError) as exc:
                report.skipped.append(Skipped(where, f"not JSON ({getattr(exc, 'msg', exc)})"))
    except UnicodeDecodeError as exc:
        raise ExchangeError(f"{name} is not UTF-8 text") from exc
    finally:
        if close:
            handle.close()


def export_fingerprint(file: str | os.PathLike[str] | IO[str]) -> dict[str, Any] | None:
    """The embedder fingerprint an export's vectors were made with (the first
    record carrying vectors), or None when it carries none. A stream is read
    and rewound, so it must be seekable."""
    report = JsonlReport()
    start = file.tell() if hasattr(file, "tell") else None
    try:
        for _, record in _read_jsonl(file, report):
            vectors = record.get("vectors") if isinstance(record, dict) else None
            theirs = vectors.get("fingerprint") if isinstance(vectors, dict) else None
            if isinstance(theirs, dict) and isinstance(theirs.get("name"), str):
                return theirs
        return None
    finally:
        if start is not None:
            file.seek(start)  # type: ignore[union-attr]


def import_jsonl(store: KnowledgeStore, file: str | os.PathLike[str] | IO[str], *,
                 batch_size: int | None = None,
                 progress: Callable[[int], None] | None = None) -> JsonlReport:
    """Load an :func:`export_jsonl` file. Vectors are reused when their
    fingerprint is the store's; questions are kept (no LLM call for them);
    whatever is missing is embedded. Bad records are skipped with a reason."""
    report = JsonlReport()
    writer = store.writer()
    fingerprint = store.embedder.fingerprint()  # type: ignore[union-attr]
    dim = int(store.embedder.dim)  # type: ignore[union-attr]

    def records() -> Iterator[tuple[Document, Provided]]:
        for where, record in _read_jsonl(file, report):
            try:
                yield _record(record, fingerprint, dim, report)
            except ExchangeError as exc:
                report.skipped.append(Skipped(where, str(exc)))

    write_records(writer, records(), batch_size or store.settings.batch_size, report, progress)
    store.backend.checkpoint()
    return report


def write_records(writer: Any, records: Iterable[tuple[Document, Provided]], batch_size: int,
                  report: JsonlReport, progress: Callable[[int], None] | None = None) -> None:
    """Upsert exchanged documents (with what they carry) in batches through
    the one write path, counting into ``report``."""
    for batch in batches(records, batch_size):
        outcome = writer.upsert([d for d, _ in batch], provided={d.path: p for d, p in batch})
        report.documents += len(batch)
        report.reused_vectors += outcome.reused_vectors
        report.reused_question_vectors += outcome.reused_question_vectors
        report.reused_chunk_vectors += outcome.reused_chunk_vectors
        report.embedded_chunks += outcome.embedded_chunks
        report.imported_questions += outcome.imported_questions
        report.embedded += outcome.report.embedded
        report.write.add(outcome.report)
        if progress is not None:
            progress(len(batch))


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


def markdown_file(doc: Document) -> tuple[str, dict[str, Any], str]:
    """(relative file path, frontmatter, body) of one document in picobot's
    layout. A skill is written back with its own frontmatter (name,
    description, ...), and without the description kbstore put in front of
    its body for searching."""
    dates = {"created": _yaml_date(doc.created), "updated": _yaml_date(doc.updated)}
    dates = {k: v for k, v in dates.items() if v is not None}
    if doc.doc_type == "skill" and doc.path.startswith(f"{SKILLS_TOPIC}/"):
        meta = dict(doc.extra) or {"name": doc.title}
        body = doc.body
        description = meta.get("description")
        if isinstance(description, str) and body.startswith(f"{description}\n\n"):
            body = body[len(description) + 2:]
        elif isinstance(description, str) and body == description:
            body = ""
        if doc.tags:
            meta["tags"] = doc.tags
        for key, value in dates.items():
            meta.setdefault(key, value)
        return doc.path, meta, body
    meta = {"title": doc.title, "topic": doc.topic, "tags": doc.tags, **dates}
    meta.update({k: v for k, v in doc.extra.items() if k not in meta})
    return f"knowledge/{doc.path}", meta, doc.body


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
    root = Path(out_dir).expanduser()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ExchangeError(f"{root} exists and is not an empty folder; export into a new one")
    root.parent.mkdir(parents=True, exist_ok=True)
    # Written into a hidden sibling folder, then renamed into place: a failed
    # or killed export never leaves a half tree at the target (which would
    # also make the next run refuse the non-empty folder).
    sweep_stale(root)
    staging = Path(tempfile.mkdtemp(dir=root.parent, prefix=staging_prefix(root), suffix=".tmp"))
    report = MarkdownReport()
    try:
        for batch in store.backend.iter_documents(store.settings.batch_size):
            for doc, _ in batch:
                rel, meta, body = markdown_file(doc)
                target = staging / rel
                if not target.resolve().is_relative_to(staging.resolve()):  # validated; belt
                    raise ExchangeError(f"document path {doc.path!r} leaves the export folder")
                atomic_write(target, render_markdown(meta, body), sweep=False)
                report.written += 1
                if not _in_layout(doc):
                    report.outside_layout.append(doc.path)
        if root.exists():
            root.rmdir()  # empty (checked above); fails if something appeared meanwhile
        os.rename(staging, root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return report
