"""Importing picobot's old ``embeddings.npz`` sidecar (seed 000) into a store.

Layout: ``vectors`` (N, D), ``doc_ids`` ('projects/x.md'), ``content_hashes``
(md5 of the body), optional ``hype_vectors`` (M, D), ``hype_doc_ids``,
``hype_questions``, and an optional ``fingerprint``: the JSON text of the
embedder fingerprint the vectors were made with (kbstore's
``{"name", "model", "dim", "document_prefix", "query_prefix"}``). picobot's
own sidecar has none.

The documents come from the workspace. The archive's vectors are reused only
when they are known to come from the store's model: its fingerprint is the
store's (:func:`kbstore.model.same_model`), or it has none and the caller
vouches for them (``trust_vectors``; ``kbstore import-npz --trust-vectors``).
A fingerprint of another model is never trusted. Then a vector is reused
only when its document's current body still hashes to the npz hash and its
dimension is the store's. Everything else is counted and left to the normal
reconcile, which embeds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import ExchangeError, InvalidDocumentError
from .ingest import parse_file, scan_workspace
from .model import Document, ImportReport, fingerprint_id, same_model
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
    untrusted: int = 0                # fresh, but the npz's embedder is unknown/another
    untrusted_reason: str = ""        # why its vectors were not reused ('' = they were)
    fingerprint: str = ""             # the embedder the npz names ('' = none recorded)
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
                f"mismatched dimension {self.mismatched_dimension}, invalid {self.invalid}, "
                f"untrusted {self.untrusted}; not in npz {self.not_in_npz}; "
                f"embedded {self.embedded}")


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


@dataclass
class NpzArchive:
    vectors: np.ndarray
    doc_ids: list[str]
    hashes: list[str]
    questions: dict[str, list[tuple[str, Any]]]
    fingerprint: dict[str, Any] | None  # None: the archive does not say


def _fingerprint(path: str | os.PathLike[str], value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    flat = np.asarray(value).reshape(-1)
    try:
        theirs = json.loads(str(flat[0])) if flat.size == 1 else None
    except ValueError:
        theirs = None
    if not isinstance(theirs, dict) or not isinstance(theirs.get("name"), str):
        raise ExchangeError(f"{path}: 'fingerprint' is not the JSON text of an embedder "
                            'fingerprint ({"name": ..., "model": ..., "dim": ...})')
    return theirs


def read_npz(path: str | os.PathLike[str], allow_pickle: bool = False) -> NpzArchive:
    """The archive's arrays, checked; ExchangeError names what is wrong."""
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
    return NpzArchive(vectors, doc_ids, hashes, questions,
                      _fingerprint(path, data.get("fingerprint")))


def _usable(vector: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(vector))) and bool(np.any(vector))


def untrusted_reason(theirs: dict[str, Any] | None, ours: dict[str, Any],
                     trust_vectors: bool) -> str:
    """Why an archive's vectors must not be mixed into a store embedding
    with ``ours`` ('' when they may)."""
    if theirs is None:
        return "" if trust_vectors else (
            "the npz records no embedder, so its vectors may come from another model "
            f"than this store's {ours.get('model')} (--trust-vectors reuses them)")
    if same_model(theirs, ours):
        return ""
    return (f"the npz's vectors were made by {fingerprint_id(theirs)}, not this store's "
            f"{fingerprint_id(ours)}")


def workspace_files(workspace: str | os.PathLike[str]) -> dict[str, tuple[Document, Path]]:
    files: dict[str, tuple[Document, Path]] = {}
    for rel, file, reason in scan_workspace(Path(workspace).expanduser()):
        if reason or file is None:
            continue  # reported by the reconcile below
        try:
            files[rel] = (parse_file(file, rel), file)
        except (InvalidDocumentError, OSError):
            continue
    return files


def sort_entries(archive: NpzArchive, files: dict[str, tuple[Document, Path]],
                 ours: dict[str, Any], dim: int, trust_vectors: bool, report: NpzReport,
                 reasons: dict[str, str] | None = None) -> dict[str, Provided]:
    """What the archive provides for each workspace document, counting the
    entries it cannot provide a vector for into ``report`` (and, per
    document, why into ``reasons``)."""
    report.entries = len(archive.doc_ids)
    report.untrusted_reason = untrusted_reason(archive.fingerprint, ours, trust_vectors)
    report.fingerprint = fingerprint_id(archive.fingerprint) if archive.fingerprint else ""
    # Question vectors in the sidecar were embedded as documents (seed 000
    # has one embed call); reusable as-is only if the store embeds documents
    # and queries the same way. Otherwise keep the text, re-embed the vectors.
    symmetric = ours.get("document_prefix") == ours.get("query_prefix")
    latest = {doc_id: i for i, doc_id in enumerate(archive.doc_ids)}  # repeated: last wins
    report.not_in_npz = sum(1 for rel in files if rel not in latest)
    why = reasons if reasons is not None else {}
    why.update({rel: "not in the npz" for rel in files if rel not in latest})
    provided: dict[str, Provided] = {}
    vectors = archive.vectors
    for i, doc_id in enumerate(archive.doc_ids):
        if latest[doc_id] != i:
            continue
        if doc_id not in files:
            report.unknown += 1
            continue
        doc, file = files[doc_id]
        vector = np.asarray(vectors[i], dtype=np.float32)
        if vectors.shape[1] != dim:
            report.mismatched_dimension += 1
            why[doc_id] = f"its npz vector has {vectors.shape[1]} dimensions, not {dim}"
            continue
        if not _usable(vector):
            report.invalid += 1
            why[doc_id] = "its npz vector is not usable (NaN, inf or zero)"
            continue
        if archive.hashes[i] not in _body_hashes(doc, file):
            report.stale += 1
            why[doc_id] = "its body changed since the npz was written"
            continue
        qs = archive.questions.get(doc_id, [])
        texts = [q for q, _ in qs] or None
        if report.untrusted_reason:
            report.untrusted += 1
            why[doc_id] = report.untrusted_reason
            if texts:
                provided[doc_id] = Provided(None, texts, None)  # questions are text
            continue
        qvecs = [v for _, v in qs]
        reuse_qvecs = (symmetric and bool(qs) and all(
            v is not None and np.asarray(v).shape == (dim,) and _usable(np.asarray(v))
            for v in qvecs))
        provided[doc_id] = Provided(vector, texts,
                                    [np.asarray(v, np.float32) for v in qvecs] if reuse_qvecs
                                    else None)
    return provided


def import_npz(store: KnowledgeStore, workspace: str | os.PathLike[str],
               npz_path: str | os.PathLike[str], *, allow_pickle: bool = False,
               trust_vectors: bool = False,
               prune: bool | None = None, batch_size: int | None = None,
               before_delete: Callable[[list[str]], None] | None = None,
               progress: Callable[[int], None] | None = None) -> NpzReport:
    """Bring picobot's ``embeddings.npz`` into the store while reconciling it
    with the workspace. Fresh vectors (same body md5, the store's dimension,
    from the store's model: see the module docstring for ``trust_vectors``)
    are reused; stale, unknown, mismatched, untrusted and uncovered documents
    are reported and embedded by the same write (which also calls the LLM for
    HyPE if the store has it enabled and the npz brought no questions)."""
    archive = read_npz(npz_path, allow_pickle)
    report = NpzReport()
    ours = store.embedder.fingerprint()  # type: ignore[union-attr]
    dim = int(store.embedder.dim)  # type: ignore[union-attr]
    provided = sort_entries(archive, workspace_files(workspace), ours, dim, trust_vectors,
                            report)
    outcome = store.reconcile(workspace, prune=prune, batch_size=batch_size, provided=provided,
                              before_delete=before_delete, progress=progress)
    report.reconcile = outcome.report
    report.imported_vectors = outcome.reused_vectors
    report.imported_questions = outcome.imported_questions
    report.reused_question_vectors = outcome.reused_question_vectors
    report.already_current = sum(1 for p in provided.values()
                                 if p.vector is not None) - outcome.reused_vectors
    report.embedded = report.reconcile.embedded
    return report
