"""The one write path. Every producer of documents and derived data --
imports, upserts, the HyPE job, JSONL/npz vectors, doctor's repairs -- goes
through :class:`Writer`:

1. plan: read what the backend holds for a batch's paths and decide per
   document what must be (re)made, by content hash and model;
2. produce, with no lock held: embed documents, ask the LLM, embed questions
   (or take vectors and questions that came with the input);
3. apply: ONE backend transaction re-checks that each document is still as
   planned and writes it with its derived data, or reports it stale.

Stale content writes are planned again (another writer came first); after a
few rounds a batch is planned and applied under the write lock. A stale
derived-only change (HyPE, repairs) is dropped: the writer of the new
content owns its derived data. A new kind of derived data is one more rule
in :meth:`Writer._plan` and one more step in :meth:`Writer._produce`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .chunks import chunk_spans, chunk_text, chunks_hash
from .embed import Embedder, embedding_text, fingerprint_id
from .hype import HypeConfig, generate_many
from .model import (
    CHUNK_VECTORS,
    DOC_VECTOR,
    HYPE_QUESTIONS,
    HYPE_VECTORS,
    OK,
    PENDING,
    Applied,
    Change,
    Chunks,
    Document,
    ImportReport,
    Questions,
    Skipped,
    Stored,
)
from .vectors import unit, unit_rows, usable

if TYPE_CHECKING:
    from .backends.base import Backend

log = logging.getLogger("kbstore.writer")
Progress = Callable[[int], None]  # called with the number of documents just handled
REPLANS = 8
IMPORTED_QUESTIONS_MODEL = "imported"  # recorded when the LLM that wrote them is unknown
MAX_QUESTION_CHARS = 300


def batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def storable_questions(texts: Any, limit: int) -> list[str]:
    """Questions that can be stored: strings, valid UTF-8, no NUL, one line,
    not too long, not repeated."""
    out: list[str] = []
    for text in texts if isinstance(texts, (list, tuple)) else []:
        if not isinstance(text, str):
            continue
        line = " ".join(text.split())
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            continue
        if line and "\x00" not in line and len(line) <= MAX_QUESTION_CHARS and line not in out:
            out.append(line)
    return out[:limit]


@dataclass
class Provided:
    """Derived data that came with a document (a JSONL export, picobot's npz):
    used instead of the embedder/LLM when it fits the store."""

    vector: Any = None
    questions: list[str] | None = None
    question_vectors: list[Any] | None = None
    questions_model: str = IMPORTED_QUESTIONS_MODEL
    # chunk vectors in position order, and the chunks_hash they were made for
    chunk_vectors: list[Any] | None = None
    chunks_hash: str | None = None


@dataclass
class _Work:
    change: Change
    content: Document                 # what derived data is made from
    retry: bool                       # a content write: plan again when stale
    embed_doc: bool = False
    ask_llm: bool = False
    keep_good_questions: bool = False  # an LLM failure must not drop current ones
    embed_questions: bool = False     # change.questions.texts need vectors
    embed_chunks: bool = False        # change.chunks.spans need vectors
    reused_vector: bool = False
    reused_questions: bool = False
    reused_chunks: bool = False


@dataclass
class Outcome:
    """What a batch did beyond the ImportReport counts."""

    report: ImportReport = field(default_factory=ImportReport)
    changed: list[str] = field(default_factory=list)   # derived-only, content moved on
    reused_vectors: int = 0
    reused_question_vectors: int = 0
    reused_chunk_vectors: int = 0
    embedded_chunks: int = 0           # chunk vectors the embedder made
    imported_questions: int = 0
    llm_calls: int = 0
    llm_failures: list[str] = field(default_factory=list)

    def add(self, part: Outcome) -> None:
        self.report.add(part.report)
        self.changed += part.changed
        self.reused_vectors += part.reused_vectors
        self.reused_question_vectors += part.reused_question_vectors
        self.reused_chunk_vectors += part.reused_chunk_vectors
        self.embedded_chunks += part.embedded_chunks
        self.imported_questions += part.imported_questions
        self.llm_calls += part.llm_calls
        self.llm_failures += part.llm_failures


# A transaction holds the works of consecutive batches up to these bounds.
# Measured at 10k documents with 7 vectors each: 1 transaction per 512
# documents instead of per 64 writes vec0's chunks, the FTS segments and
# the B-trees' edge pages fewer times (benchmarks/results/speed_findings.md).
GROUP_DOCS = 512
GROUP_BYTES = 32 * 2**20       # texts and vectors held in memory, uncommitted
# A batch whose planning and production took this long (an LLM writing
# questions, a real embedder) commits at once, and nothing waits longer than
# this to join a group: a crash loses at most ~this much work beyond the
# batch in progress, as with one transaction per batch.
GROUP_SECONDS = 1.0


class _Group:
    """Works of consecutive batches produced but not yet applied (content
    writes: ``work.content`` is the document to write)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.works: list[_Work] = []
        self.sizes: list[int] = []     # input documents per batch, for progress
        self.paths: set[str] = set()
        self.bytes = 0
        self.since: float | None = None

    def take(self) -> _Group:
        held = _Group()
        held.works, held.sizes = self.works, self.sizes
        self.clear()
        return held

    def add(self, works: list[_Work], size: int, started: float, dim: int) -> None:
        self.works += works
        self.sizes.append(size)
        self.paths.update(w.change.path for w in works)
        self.bytes += sum(_held_bytes(w, dim) for w in works)
        if self.since is None:
            self.since = started

    def holds(self, docs: list[Document]) -> bool:
        return any(d.path in self.paths for d in docs)

    def full(self) -> bool:
        return len(self.works) >= GROUP_DOCS or self.bytes >= GROUP_BYTES

    def old(self) -> bool:
        return self.since is not None and time.monotonic() - self.since >= GROUP_SECONDS


def _held_bytes(work: _Work, dim: int) -> int:
    """About what a produced work keeps in memory: its text (up to 4 bytes a
    character) and its float32 vectors."""
    change, doc = work.change, work.content
    vectors = ((change.doc_vector is not None)
               + (len(change.questions.vectors) if change.questions is not None else 0)
               + (len(change.chunks.vectors) if change.chunks is not None else 0))
    return 4 * (len(doc.body) + len(doc.title)) + vectors * dim * 4


class Writer:
    def __init__(self, backend: Backend, embedder: Embedder, hype: HypeConfig,
                 batch_size: int) -> None:
        self.backend = backend
        self.embedder = embedder
        self.hype = hype
        self.batch_size = batch_size
        self.fp = fingerprint_id(embedder.fingerprint())
        # The embedder's window decides which documents get chunk vectors.
        self.window: int | None = getattr(embedder, "max_tokens", None)

    # -- entry points ----------------------------------------------------------------

    def upsert(self, docs: Iterable[Document], progress: Progress | None = None, *,
               provided: dict[str, Provided] | None = None) -> Outcome:
        """Store documents (and what they need). Each batch of ``batch_size``
        is planned and produced on its own; consecutive batches whose
        production was quick are applied together, in ONE transaction of at
        most GROUP_DOCS documents and ~GROUP_BYTES of text and vectors (see
        :class:`_Group`), so a batch still commits whole or not at all."""
        total = Outcome()
        given = provided or {}
        group = _Group()

        def flush() -> None:
            held = group.take()  # emptied first: a failing apply is not retried here
            if held.works:
                self._apply_group(held, given, total)
            if progress:
                for size in held.sizes:
                    progress(size)

        try:
            for batch in batches(docs, self.batch_size):
                unique = list({d.path: d for d in batch}.values())  # last one wins
                if group.works and (group.holds(unique) or group.old()):
                    flush()  # a path planned twice must see its first write
                started = time.monotonic()
                works = self._prepare(unique, given, total)
                group.add(works, len(batch), started, self.embedder.dim)
                if (not group.works or group.full()
                        or time.monotonic() - started >= GROUP_SECONDS):
                    flush()  # a slow batch (an LLM's answers) commits at once
        except BaseException:
            flush()  # what was produced before the failure is kept, as batch by batch
            raise
        flush()
        return total

    def delete(self, paths: Sequence[str]) -> int:
        """Remove documents and everything derived from them; returns how many."""
        deleted = 0
        for batch in batches(paths, self.batch_size):
            for _ in range(REPLANS + 1):
                stored = self.backend.stored(batch)
                changes = [Change(p, stored[p], delete=True) for p in batch if p in stored]
                applied = self.backend.apply(changes)
                deleted += len(applied.deleted)
                batch = applied.stale
                if not batch:
                    break
        return deleted

    def derive(self, items: Sequence[tuple[Document, Stored]], *, ask_llm: bool = False,
               force_llm: bool = False, hype: HypeConfig | None = None) -> Outcome:
        """Derived data only, for documents as they are stored: missing or
        stale vectors, question vectors, stale questions dropped -- and HyPE
        questions with ``ask_llm`` (``force_llm``: even current ones)."""
        works = [w for w in (self._plan(doc.path, stored, None, doc, ask_llm=ask_llm,
                                        force_llm=force_llm, provided=None)
                             for doc, stored in items) if w is not None]
        out = Outcome()
        out.report.unchanged = len(items) - len(works)
        if works:
            self._produce(works, hype or self.hype, out)
            self._apply(works, out)
        return out

    # -- one content batch -------------------------------------------------------------

    def _apply_group(self, group: _Group, provided: dict[str, Provided],
                     out: Outcome) -> None:
        """Apply a group's works in one transaction; stale documents (another
        writer came first) are planned again batch by batch."""
        stale = set(self._apply(group.works, out))
        if stale:
            self._content_batch([w.content for w in group.works if w.change.path in stale],
                                provided, out, rounds=REPLANS - 1)

    def _content_batch(self, docs: list[Document], provided: dict[str, Provided],
                       out: Outcome, rounds: int = REPLANS) -> None:
        pending = docs
        for _ in range(rounds):
            pending = self._content_round(pending, provided, out)
            if not pending:
                return
        # Still racing a busy writer: plan, produce and apply under the lock.
        with self.backend.write_lock():
            left = self._content_round(pending, provided, out)
        if left:  # cannot happen under the lock; never lose them silently
            out.report.skipped += [Skipped(p.path, "changed by another writer repeatedly")
                                   for p in left]

    def _content_round(self, docs: list[Document], provided: dict[str, Provided],
                       out: Outcome) -> list[Document]:
        works = self._prepare(docs, provided, out)
        if not works:
            return []
        stale = set(self._apply(works, out))
        return [d for d in docs if d.path in stale]

    def _prepare(self, docs: list[Document], provided: dict[str, Provided],
                 out: Outcome) -> list[_Work]:
        """Plan and produce one batch (no lock held); unchanged documents are
        counted in ``out``."""
        stored = self.backend.stored([d.path for d in docs])
        works = []
        for doc in docs:
            work = self._plan(doc.path, stored.get(doc.path), doc, doc, ask_llm=self.hype.enabled,
                              force_llm=False, provided=provided.get(doc.path))
            if work is None:
                out.report.unchanged += 1
            else:
                works.append(work)
        if works:
            self._produce(works, self.hype, out)
        return works

    # -- planning ------------------------------------------------------------------

    def _plan(self, path: str, stored: Stored | None, doc: Document | None,
              content: Document, *, ask_llm: bool, force_llm: bool,
              provided: Provided | None) -> _Work | None:
        changed = doc is not None and (stored is None or stored.content_hash != doc.content_hash())
        # vector_model: the model of every vector this change writes (document,
        # question and chunk vectors alike).
        work = _Work(Change(path, stored, document=doc if changed else None,
                            vector_model=self.fp), content, retry=doc is not None)
        change = work.change
        made = stored.derived if stored is not None else {}
        vhash, hhash = content.vector_hash(), content.hype_hash()

        dv = made.get(DOC_VECTOR)
        if dv is None or dv.content_hash != vhash or dv.model != self.fp:
            change.vector_hash = vhash
            if provided is not None and usable(provided.vector, self.embedder.dim):
                change.doc_vector, work.reused_vector = unit(provided.vector), True
            else:
                work.embed_doc = True

        hq, hv = made.get(HYPE_QUESTIONS), made.get(HYPE_VECTORS)
        current = hq is not None and hq.status == OK and hq.content_hash == hhash
        given = storable_questions(provided.questions if provided else None,
                                   self.backend.max_questions)
        if current and hq is not None and not force_llm:
            if hv is None or hv.content_hash != hhash or hv.model != self.fp:
                texts = self.backend.questions(path) if stored is not None else []
                if texts:
                    change.questions = Questions(hhash, hq.model, texts)
                    work.embed_questions = True
        elif given and not force_llm:
            change.questions = Questions(hhash, provided.questions_model, given)  # type: ignore[union-attr]
            work.reused_questions = True
            vectors = provided.question_vectors if provided else None
            if vectors is not None and len(vectors) >= len(given) and all(
                    usable(v, self.embedder.dim) for v in vectors[:len(given)]):
                change.questions.vectors = [unit(v) for v in vectors[:len(given)]]
            else:
                work.embed_questions = True
        elif ask_llm or force_llm:
            work.ask_llm, work.keep_good_questions = True, current
        elif hq is not None and hq.content_hash != hhash:
            change.drop_questions = True  # describe older content

        self._plan_chunks(work, made.get(CHUNK_VECTORS), provided)

        if (change.document is None and change.doc_vector is None and not work.embed_doc
                and change.questions is None and not work.ask_llm and not change.drop_questions
                and change.chunks is None and not change.drop_chunks):
            return None
        return work

    def _plan_chunks(self, work: _Work, made: Any, provided: Provided | None) -> None:
        """Chunk vectors for a document longer than the embedder's window
        (re-made when the title, body, window or model changed; taken from
        ``provided`` when made for the same chunks); dropped when it now fits
        one window."""
        content = work.content
        spans = chunk_spans(content.body, self.window)
        if not spans:
            work.change.drop_chunks = made is not None
            return
        chash = chunks_hash(content.title, content.body, self.window)
        if made is None or made.content_hash != chash or made.model != self.fp:
            work.change.chunks = Chunks(chash, spans)
            given = provided.chunk_vectors if provided is not None else None
            if (given is not None and provided is not None and provided.chunks_hash == chash
                    and len(given) == len(spans)
                    and all(usable(v, self.embedder.dim) for v in given)):
                work.change.chunks.vectors = [unit(v) for v in given]
                work.reused_chunks = True
            else:
                work.embed_chunks = True

    # -- producing (no lock held) -----------------------------------------------------------

    def _produce(self, works: list[_Work], hype: HypeConfig, out: Outcome) -> None:
        to_embed = [w for w in works if w.embed_doc]
        chunked = [w for w in works if w.embed_chunks and w.change.chunks is not None]
        chunk_texts = [chunk_text(w.content.title, w.content.body, span)
                       for w in chunked for span in w.change.chunks.spans]  # type: ignore[union-attr]
        if to_embed or chunk_texts:
            # One embedding call for document and chunk texts (both are documents).
            vectors = unit_rows(self.embedder.embed_documents(
                [embedding_text(w.content.title, w.content.tags, w.content.body)
                 for w in to_embed] + chunk_texts), self.embedder.dim)
            vectors, chunk_vectors = vectors[:len(to_embed)], vectors[len(to_embed):]
            self._take_chunk_vectors(chunked, chunk_vectors, out)
            for work, vector in zip(to_embed, vectors, strict=True):
                if vector is not None:
                    work.change.doc_vector = vector
                else:  # stored without a vector; the next import tries again
                    work.embed_doc = False
                    out.report.skipped.append(Skipped(work.change.path, "the embedder returned "
                                                      "an unusable vector (NaN, zero or wrong "
                                                      "size); stored without one"))
        asked = [w for w in works if w.ask_llm]
        if asked:
            questions, errors = generate_many(
                hype, [(w.change.path, w.content.title, w.content.body) for w in asked])
            # Items the breaker never sent (the LLM kept failing) cost no call.
            out.llm_calls += len(asked) - sum(1 for e in errors.values()
                                              if e.startswith("skipped:"))
            for work in asked:
                hhash = work.content.hype_hash()
                texts = storable_questions(questions.get(work.change.path),
                                           self.backend.max_questions)
                if texts:
                    work.change.questions = Questions(hhash, hype.model, texts)
                    work.embed_questions = True
                else:
                    error = errors.get(work.change.path) or "the LLM answer held no usable question"
                    out.llm_failures.append(work.change.path)
                    if not work.keep_good_questions:
                        work.change.questions = Questions(hhash, hype.model, status=PENDING,
                                                          error=error)
        needing = [w for w in works if w.embed_questions and w.change.questions is not None]
        flat = [t for w in needing for t in w.change.questions.texts]  # type: ignore[union-attr]
        if flat:
            # Questions are queries: embed them like queries (question-to-question match).
            qvectors = unit_rows(self.embedder.embed_queries(flat), self.embedder.dim)
            start = 0
            for work in needing:
                q = work.change.questions
                assert q is not None
                mine, start = qvectors[start:start + len(q.texts)], start + len(q.texts)
                if all(v is not None for v in mine):
                    q.vectors = mine
                else:
                    work.change.questions = None
                    out.report.skipped.append(Skipped(work.change.path, "the embedder returned "
                                                      "unusable question vectors; HyPE left "
                                                      "for a later run"))

    def _take_chunk_vectors(self, chunked: list[_Work], vectors: list[Any],
                            out: Outcome) -> None:
        """``vectors``: the chunks' vectors in order, as unit_rows returns them."""
        for work in chunked:
            chunks = work.change.chunks
            assert chunks is not None
            mine, vectors = vectors[:len(chunks.spans)], vectors[len(chunks.spans):]
            if all(v is not None for v in mine):
                chunks.vectors = mine
            else:  # no chunk vectors until the next write tries again
                work.change.chunks, work.change.drop_chunks = None, True
                out.report.skipped.append(Skipped(work.change.path, "the embedder returned "
                                                  "unusable chunk vectors; the long "
                                                  "document's tail is left for a later run"))

    # -- applying -------------------------------------------------------------------

    def _apply(self, works: list[_Work], out: Outcome) -> list[str]:
        """Apply; returns the stale paths of content writes (to plan again)."""
        changes = [w.change for w in works]
        applied: Applied = self.backend.apply(changes, self.fp)
        stale = set(applied.stale)
        report = out.report
        report.added += len(applied.added)
        report.updated += len(applied.updated)
        written = set(applied.added) | set(applied.updated)
        retry = []
        for work in works:
            path = work.change.path
            if path in stale:
                if work.retry:
                    retry.append(path)
                else:
                    out.changed.append(path)
                continue
            if work.retry and path not in written:
                report.unchanged += 1  # only derived data was (re)made
            change = work.change
            if change.doc_vector is not None:
                if work.reused_vector:
                    out.reused_vectors += 1
                else:
                    report.embedded += 1
            if change.chunks is not None and change.chunks.vectors:
                if work.reused_chunks:
                    out.reused_chunk_vectors += len(change.chunks.vectors)
                else:
                    out.embedded_chunks += len(change.chunks.vectors)
            q = change.questions
            if q is not None and work.ask_llm:
                if q.status == OK:
                    report.hype_generated += 1
                else:
                    report.hype_pending += 1
            if q is not None and work.reused_questions:
                out.imported_questions += len(q.texts)
                if not work.embed_questions:
                    out.reused_question_vectors += len(q.texts)
        return retry
