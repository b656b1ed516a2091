"""kbstore's domain types: documents, what a backend holds for them, planned
changes, hits, reports and checks. No I/O here and no imports of the rest
of the package: every other module builds on these."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# Kinds of derived data, as recorded per document with the content hash and
# model that produced them (unchanged content is never re-made).
DOC_VECTOR = "doc_vector"
HYPE_QUESTIONS = "hype_questions"
HYPE_VECTORS = "hype_vectors"
CHUNK_VECTORS = "chunk_vectors"   # long documents: one vector per overlapping chunk
DERIVED_KINDS = (DOC_VECTOR, HYPE_QUESTIONS, HYPE_VECTORS, CHUNK_VECTORS)
OK, PENDING = "ok", "pending"
DOC_TYPES = ("entry", "skill", "journal")


def tag_key(tag: str) -> str:
    """A tag's exact-lookup key (document_tags rows): trimmed and lower-cased
    as the query's words are (Python's full Unicode rule; SQLite's own lower()
    changes ASCII letters only, so "Ärger" would never meet the query "ärger")."""
    return tag.strip().lower()


def tag_keys(tags: Sequence[str]) -> list[str]:
    """A document's exact-tag keys (its document_tags rows): one per distinct
    non-blank tag, in order. Both backends write these from Python: neither
    server's lower() is Python's (SQLite's folds ASCII only; PostgreSQL's
    follows the database's locale and has no final sigma). Items that are not
    strings (only a shell edit stores them, see :func:`tags_valid`) have none."""
    if not isinstance(tags, list | tuple):
        return []
    return [key for key in dict.fromkeys(tag_key(t) for t in tags if isinstance(t, str)) if key]


def fts_fold(text: str) -> str:
    """Full-text case folding where the server's own depends on its locale
    (PostgreSQL): Python's lower() with the final sigma and "İ" folded as
    SQLite's unicode61 folds them ("ς" -> "σ", "i̇" -> "i"). The PostgreSQL
    backend folds document text and query words with it, so to_tsvector's
    lower-casing has nothing left to change under any LC_CTYPE."""
    return text.lower().replace("i\u0307", "i").replace("ς", "σ")


def tags_valid(tags: Any) -> bool:
    """Whether stored tags are what kbstore writes: a list of strings. An edit
    in the database's shell can store anything (``'[1, "Y"]'``); doctor reports
    such a document (invalid_tags) and the vector paths leave it alone."""
    return isinstance(tags, list) and all(isinstance(t, str) for t in tags)


def embedding_text(title: str, tags: Sequence[str], body: str) -> str:
    """The text embedded for a document (seed 000): title, tags, body. A tag
    that is not a string (a shell edit, see :func:`tags_valid`) is embedded as
    its JSON text, so re-embedding such a document never fails."""
    words = (t if isinstance(t, str) else json.dumps(t, ensure_ascii=False) for t in tags)
    return f"{title}. Tags: {', '.join(words)}. {body}"


def fingerprint_id(fingerprint: dict[str, Any]) -> str:
    """A short stable id for a fingerprint, recorded with each derived row."""
    keys = ("name", "model", "dim", "document_prefix", "query_prefix")
    return ":".join(str(fingerprint.get(k, "")) for k in keys)


def same_model(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return fingerprint_id(a) == fingerprint_id(b)


def text_hash(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


@dataclass
class Document:
    """One searchable document as stored."""

    path: str
    title: str
    body: str
    tags: list[str] = field(default_factory=list)
    topic: str = ""
    doc_type: str = "entry"
    created: str | None = None
    updated: str | None = None
    # Frontmatter keys kbstore does not interpret (a skill's name and
    # description, an author...), kept so an export writes the file back.
    extra: dict[str, Any] = field(default_factory=dict)

    def content_hash(self) -> str:
        """sha256 over every stored field: any change means an update."""
        fields: list[Any] = [self.path, self.title, self.body, self.tags, self.topic,
                             self.doc_type, self.created, self.updated]
        if self.extra:  # absent from older hashes: keeps them valid
            fields.append(self.extra)
        payload = json.dumps(fields, ensure_ascii=False, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def vector_hash(self) -> str:
        """What the document vector is made from."""
        return text_hash(embedding_text(self.title, self.tags, self.body))

    def hype_hash(self) -> str:
        """What the HyPE questions are written from."""
        return text_hash(self.title, self.body)


@dataclass(frozen=True)
class Derived:
    """One kind of derived data a document has: made from which content, by
    which model, and whether it is done ('ok') or waiting ('pending')."""

    content_hash: str
    model: str
    status: str = OK


@dataclass(frozen=True)
class Stored:
    """What a backend holds for one path. Plans compare it with the state
    under the write lock: any difference means another writer came first."""

    key: int                       # the backend's own document id
    content_hash: str
    topic: str
    doc_type: str
    derived: Mapping[str, Derived] = field(default_factory=dict)

    def made(self, kind: str) -> Derived | None:
        return self.derived.get(kind)


@dataclass
class Questions:
    """A document's new HyPE state: questions (with one query vector each)
    written from content ``content_hash`` by ``llm_model``, or a failure
    (``status`` pending, ``error`` set, no questions)."""

    content_hash: str
    llm_model: str
    texts: list[str] = field(default_factory=list)
    vectors: list[Any] = field(default_factory=list)
    status: str = OK
    error: str | None = None


@dataclass
class Chunks:
    """A long document's chunk vectors: character spans of its body (see
    kbstore.chunks) made from content ``content_hash``, one vector each."""

    content_hash: str
    spans: list[tuple[int, int]] = field(default_factory=list)
    vectors: list[Any] = field(default_factory=list)


@dataclass
class Change:
    """One document's planned write, applied under the write lock only if the
    store still holds ``expected`` (``None``: the path is absent).

    ``document`` set: store this content (insert or update). ``document``
    None: derived data only, for the content that ``expected`` describes;
    if that content changed meanwhile, the change is dropped (the writer of
    the new content owns its derived data). ``questions``: replace the HyPE
    questions (an empty, pending one records a failure); ``drop_questions``:
    remove stale ones. ``chunks``: replace the chunk vectors;
    ``drop_chunks``: remove them (the document now fits one window).
    """

    path: str
    expected: Stored | None
    document: Document | None = None
    delete: bool = False
    doc_vector: Any = None          # float32 vector, unit length
    vector_hash: str = ""
    vector_model: str = ""          # embedder fingerprint id
    questions: Questions | None = None
    drop_questions: bool = False
    chunks: Chunks | None = None
    drop_chunks: bool = False

    @property
    def derive_only(self) -> bool:
        return self.document is None and not self.delete

    @property
    def writes_vectors(self) -> bool:
        """Whether applying it stores vectors (the file's embedder must match)."""
        return (self.doc_vector is not None or bool(self.questions and self.questions.texts)
                or bool(self.chunks and self.chunks.vectors))


@dataclass
class Applied:
    """What one ``Backend.apply`` did."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    derived: list[str] = field(default_factory=list)    # derived data written only
    stale: list[str] = field(default_factory=list)      # another writer came first


@dataclass
class Skipped:
    path: str
    reason: str


@dataclass
class ImportReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    embedded: int = 0          # document vectors computed
    hype_generated: int = 0    # documents whose questions the LLM wrote
    hype_pending: int = 0      # documents whose HyPE failed and waits for a retry
    skipped: list[Skipped] = field(default_factory=list)
    # Documents missing from the folder that were NOT deleted (a removal that
    # looked like a mistake, or prune=False), with the reason.
    kept_missing: list[str] = field(default_factory=list)
    kept_reason: str = ""

    def add(self, other: ImportReport) -> None:
        for name in ("added", "updated", "unchanged", "deleted", "embedded", "hype_generated",
                     "hype_pending"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.skipped += other.skipped
        self.kept_missing += other.kept_missing
        self.kept_reason = self.kept_reason or other.kept_reason

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "skipped"}
        data["skipped"] = [{"path": s.path, "reason": s.reason} for s in self.skipped]
        return data


@dataclass
class Hit:
    path: str
    title: str
    tags: list[str]
    doc_type: str
    topic: str
    updated: str | None
    score: float
    snippet: str
    explain: dict[str, Any] | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["explain"] is None:
            del data["explain"]
        return data


@dataclass(frozen=True)
class SearchRequest:
    """A query analysed into backend-neutral parts (see kbstore.query):
    words, tag candidates, the query vector, filters and every fusion
    setting. Each backend compiles it into its one search statement."""

    text: str
    terms: tuple[str, ...]          # lower-cased words, repeats kept (BM25 counts them)
    fts_terms: tuple[str, ...]      # terms for the full-text retriever (stopwords dropped)
    title_terms: tuple[str, ...]    # distinct content words for title overlap
    tag_terms: tuple[str, ...]      # strings that count as an exact tag match
    vector: bytes | None            # float32 query vector; None: no vector retriever
    topic: str | None
    limit: int
    now: str                        # ISO timestamp recency is measured at
    settings: Mapping[str, Any]     # validated fusion settings (kbstore.query.DEFAULTS keys)
    explain: bool = False
    # tag candidate -> share of the query's content words it covers (its weight)
    tag_weights: Mapping[str, float] = field(default_factory=dict)
    # days the query names ("in March", "last week"): [start, end) ISO dates
    date_ranges: tuple[tuple[str, str], ...] = ()
    latest: bool = False            # a question about the newest entry on something
    # a "latest" question's full-text words without its cue words (empty: no
    # topical test; see DEFAULTS latest_topical)
    topical_terms: tuple[str, ...] = ()


@dataclass
class Check:
    name: str
    count: int = 0            # rows affected (0 = healthy)
    detail: str = ""
    fixable: bool = True      # doctor --fix can rebuild it
    problem: bool = True      # False: a note that does not fail the store
    sample: list[Any] = field(default_factory=list)
    skipped: bool = False     # the check could not run here (the detail says why)

    @property
    def ok(self) -> bool:
        return self.count == 0 or not self.problem

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "count": self.count, "detail": self.detail,
                "fixable": self.fixable, "problem": self.problem, "sample": self.sample,
                "skipped": self.skipped}


@dataclass
class DoctorReport:
    path: str
    checks: list[Check] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)  # actions --fix took

    @property
    def problems(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def ok(self) -> bool:
        return not self.problems

    def get(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok, "checks": [c.to_dict() for c in self.checks],
                "fixed": self.fixed}
