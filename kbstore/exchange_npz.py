"""Importing picobot's old ``embeddings.npz`` sidecar (seed 000) into a store.

Layout: ``vectors`` (N, D), ``doc_ids`` ('projects/x.md'), ``content_hashes``
(md5 of the body), optional ``hype_vectors`` (M, D), ``hype_doc_ids``,
``hype_questions``. The documents come from the workspace; a vector is reused
only when its document's current body still hashes to the npz hash and its
dimension is the store's. Everything else is counted and left to the normal
reconcile, which embeds it.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import ExchangeError, InvalidDocumentError
from .ingest import Document, parse_file, scan_workspace
from .model import ImportReport
from .writer import Provided

if TYPE_CHECKING:
    from .store import KnowledgeStore

# An npz is a zip of .npy arrays; deflate makes 1 GiB of zeros a 1 MB file.
# Arrays are read only if their declared size matches the zip entry and the
# whole file expands at most this much (picobot's vectors compress ~1.1x).
MAX_EXPANSION = 50
MAX_BYTES_FLOOR = 64 * 1024 * 1024


@dataclass
class NpzReport:
    entries: int = 0                  # rows in the npz
    imported_vectors: int = 0         # document vectors taken from the npz
    already_current: int = 0          # the store already had a current vector
    imported_questions: int = 0       # HyPE questions taken over (no LLM call)
    reused_question_vectors: int = 0  # ... with their vectors (no embedding)
    stale: int = 0                    # body changed since the npz was written
    unknown: int = 0                  # in the npz, not in the workspace
    mismatched_dimension: int = 0     # vector size is not the store's
    invalid: int = 0                  # NaN/inf/zero vectors
    not_in_npz: int = 0               # workspace documents the npz did not cover
    embedded: int = 0                 # document vectors the embedder computed
    reconcile: ImportReport = field(default_factory=ImportReport)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "reconcile"}
        data["reconcile"] = self.reconcile.to_dict()
        return data

    def summary(self) -> str:
        return (f"npz entries {self.entries}: reused {self.imported_vectors} vectors and "
                f"{self.imported_questions} HyPE questions, already current "
                f"{self.already_current}, stale {self.stale}, unknown {self.unknown}, "
                f"mismatched dimension {self.mismatched_dimension}, invalid {self.invalid}; "
                f"not in npz {self.not_in_npz}; embedded {self.embedded}")


def body_md5(text: str) -> str:
    """The sidecar's content hash (seed 000): md5 of the entry body."""
    return hashlib.md5(text.encode()).hexdigest()


def _body_hashes(doc: Document, file: Path) -> set[str]:
    """md5s of the current body under each reasonable reading of 'body':
    ours (python-frontmatter, stripped; skills with description) and the raw
    text after the closing '---', as picobot's own parser may have kept it.
    Any of them equal to the npz hash means the body has not changed."""
    text = file.read_text(encoding="utf-8")
    raw = text
    if text.startswith("---"):
        parts = text.split("---", 2)
        if len(parts) == 3:
            raw = parts[2]
    return {body_md5(b) for b in (doc.body, raw, raw.strip(), raw.lstrip("\n"))}


def _npz_doc_id(value: Any) -> str:
    text = str(value).replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    return text[len("knowledge/"):] if text.startswith("knowledge/") else text


def _check_sizes(path: str | os.PathLike[str]) -> None:
    """Refuse a decompression bomb before numpy allocates anything."""
    compressed = os.path.getsize(path)
    limit = max(MAX_BYTES_FLOOR, MAX_EXPANSION * compressed)
    total = 0
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            total += info.file_size
            if total > limit:
                raise ExchangeError(f"{path} would expand to over {limit:,} bytes "
                                    f"({compressed:,} on disk); refusing it")
            if not info.filename.endswith(".npy"):
                continue
            with archive.open(info) as member:
                try:
                    version = np.lib.format.read_magic(member)
                    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                            else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read(member)
                except (ValueError, OSError, SyntaxError) as exc:
                    raise ExchangeError(f"{path}: {info.filename} is not a .npy array "
                                        f"({exc})") from exc
            if dtype.itemsize and not dtype.hasobject:
                declared = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                if declared > info.file_size:
                    raise ExchangeError(f"{path}: {info.filename} claims {declared:,} bytes "
                                        f"but holds {info.file_size:,}; refusing it")


def _load_npz(path: str | os.PathLike[str], allow_pickle: bool) -> dict[str, np.ndarray]:
    # np.load would read a non-zip file as a pickle (or a bare .npy): refuse first.
    if not zipfile.is_zipfile(path):
        raise ExchangeError(f"{path} is not a readable npz file (not a zip archive)")
    try:
        _check_sizes(path)
    except (zipfile.BadZipFile, EOFError) as exc:
        raise ExchangeError(f"{path} is not a readable npz file: {exc}") from exc
    try:
        with np.load(path, allow_pickle=allow_pickle) as data:
            return {key: data[key] for key in data.files}
    except FileNotFoundError:
        raise
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise ExchangeError(f"{path} holds Python objects (pickled arrays); if you made "
                                "this file yourself, rerun with --allow-pickle") from exc
        raise ExchangeError(f"{path} is not a readable npz file: {exc}") from exc
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise ExchangeError(f"{path} is not a readable npz file: {exc}") from exc


def _read_npz(path: str | os.PathLike[str], allow_pickle: bool
              ) -> tuple[np.ndarray, list[str], list[str], dict[str, list[tuple[str, Any]]]]:
    data = _load_npz(path, allow_pickle)
    missing = [k for k in ("vectors", "doc_ids", "content_hashes") if k not in data]
    if missing:
        raise ExchangeError(f"{path} lacks {', '.join(missing)}; expected the picobot sidecar "
                            "layout: vectors (N, D), doc_ids (N,), content_hashes (N,)")
    vectors = np.asarray(data["vectors"])
    doc_ids = [_npz_doc_id(x) for x in np.asarray(data["doc_ids"]).reshape(-1)]
    hashes = [str(x) for x in np.asarray(data["content_hashes"]).reshape(-1)]
    if vectors.ndim != 2 or not (len(vectors) == len(doc_ids) == len(hashes)):
        raise ExchangeError(f"{path}: vectors {vectors.shape}, {len(doc_ids)} doc_ids and "
                            f"{len(hashes)} content_hashes do not line up")
    questions: dict[str, list[tuple[str, Any]]] = {}
    if "hype_doc_ids" in data and "hype_questions" in data:
        qdocs = [_npz_doc_id(x) for x in np.asarray(data["hype_doc_ids"]).reshape(-1)]
        qtext = [str(x) for x in np.asarray(data["hype_questions"]).reshape(-1)]
        qvecs = np.asarray(data["hype_vectors"]) if "hype_vectors" in data else None
        if len(qdocs) != len(qtext) or (qvecs is not None and (
                qvecs.ndim != 2 or len(qvecs) != len(qtext))):
            raise ExchangeError(f"{path}: hype_doc_ids, hype_questions and hype_vectors do "
                                "not line up")
        for i, (doc_id, question) in enumerate(zip(qdocs, qtext, strict=True)):
            if question.strip():
                questions.setdefault(doc_id, []).append(
                    (question.strip(), None if qvecs is None else qvecs[i]))
    return vectors, doc_ids, hashes, questions


def _usable(vector: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(vector))) and bool(np.any(vector))


def import_npz(store: KnowledgeStore, workspace: str | os.PathLike[str],
               npz_path: str | os.PathLike[str], *, allow_pickle: bool = False,
               prune: bool | None = None, batch_size: int | None = None,
               before_delete: Callable[[list[str]], None] | None = None,
               progress: Callable[[int], None] | None = None) -> NpzReport:
    """Bring picobot's ``embeddings.npz`` into the store while reconciling it
    with the workspace. Fresh vectors (same body md5, the store's dimension)
    are reused; stale, unknown, mismatched and uncovered documents are
    reported and embedded by the same write (which also calls the LLM for
    HyPE if the store has it enabled and the npz brought no questions)."""
    vectors, doc_ids, hashes, questions = _read_npz(npz_path, allow_pickle)
    report = NpzReport(entries=len(doc_ids))
    fingerprint = store.embedder.fingerprint()  # type: ignore[union-attr]
    dim = int(store.embedder.dim)  # type: ignore[union-attr]
    # Question vectors in the sidecar were embedded as documents (seed 000
    # has one embed call); reusable as-is only if the store embeds documents
    # and queries the same way. Otherwise keep the text, re-embed the vectors.
    symmetric = fingerprint.get("document_prefix") == fingerprint.get("query_prefix")

    files: dict[str, tuple[Document, Path]] = {}
    for rel, file, reason in scan_workspace(Path(workspace).expanduser()):
        if reason or file is None:
            continue  # reported by the reconcile below
        try:
            files[rel] = (parse_file(file, rel), file)
        except (InvalidDocumentError, OSError):
            continue
    latest = {doc_id: i for i, doc_id in enumerate(doc_ids)}  # a repeated id: last wins
    report.not_in_npz = sum(1 for rel in files if rel not in latest)

    provided: dict[str, Provided] = {}
    for i, doc_id in enumerate(doc_ids):
        if latest[doc_id] != i:
            continue
        if doc_id not in files:
            report.unknown += 1
            continue
        doc, file = files[doc_id]
        if vectors.shape[1] != dim:
            report.mismatched_dimension += 1
            continue
        vector = np.asarray(vectors[i], dtype=np.float32)
        if not _usable(vector):
            report.invalid += 1
            continue
        if hashes[i] not in _body_hashes(doc, file):
            report.stale += 1
            continue
        qs = questions.get(doc_id, [])
        qvecs = [v for _, v in qs]
        reuse_qvecs = (symmetric and bool(qs) and all(
            v is not None and np.asarray(v).shape == (dim,) and _usable(np.asarray(v))
            for v in qvecs))
        provided[doc_id] = Provided(vector, [q for q, _ in qs] or None,
                                    [np.asarray(v, np.float32) for v in qvecs] if reuse_qvecs
                                    else None)
    outcome = store.reconcile(workspace, prune=prune, batch_size=batch_size, provided=provided,
                              before_delete=before_delete, progress=progress)
    report.reconcile = outcome.report
    report.imported_vectors = outcome.reused_vectors
    report.imported_questions = outcome.imported_questions
    report.reused_question_vectors = outcome.reused_question_vectors
    report.already_current = len(provided) - outcome.reused_vectors
    report.embedded = report.reconcile.embedded
    return report
