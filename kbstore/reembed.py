"""Rebuilding every vector with another embedder (``kbstore reembed``).

New vectors are staged batch by batch while the old index keeps serving
searches; ONE transaction then swaps them in together with the new
fingerprint. A failure or a kill while staging leaves the old state (and a
staging table that the next run resumes). Documents written meanwhile are
staged again until a round finds everything current; the last round runs
under the write lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .chunks import chunk_spans, chunk_text, chunks_hash
from .embed import Embedder, embedding_text, fingerprint_id
from .model import Chunks
from .vectors import unit, usable

if TYPE_CHECKING:
    from .backends.base import Backend
    from .writer import Progress

ROUNDS = 5


def check_embedder(embedder: Embedder) -> None:
    """Fail before anything is staged if the model cannot run here."""
    from .errors import EmbedderUnavailableError

    vectors = embedder.embed_documents(["kbstore embedder check"])
    if len(vectors) != 1 or not usable(vectors[0], embedder.dim):
        raise EmbedderUnavailableError(f"the {embedder.name} embedder returned no usable "
                                       "vector; nothing was changed")


def reembed(backend: Backend, embedder: Embedder, *, batch_size: int,
            progress: Progress | None = None) -> int:
    """Re-embed every document (and its stored HyPE questions) with
    ``embedder``; returns the documents embedded."""
    check_embedder(embedder)
    fingerprint = embedder.fingerprint()
    fp = fingerprint_id(fingerprint)
    done = 0
    for attempt in range(ROUNDS + 1):
        staged = backend.rebuild_begin(fp)
        if attempt < ROUNDS:
            done += _stage_round(backend, embedder, fp, staged, batch_size, progress)
            if not backend.rebuild_finish(fingerprint, fp):
                return done
            continue
        with backend.write_lock():  # writers keep racing us: finish under the lock
            done += _stage_round(backend, embedder, fp, staged, batch_size, progress)
            missing = backend.rebuild_finish(fingerprint, fp)
        if missing:
            raise RuntimeError(f"reembed could not stage {len(missing)} document(s)")
    return done


def _stage_round(backend: Backend, embedder: Embedder, fp: str,
                 staged: dict[int, dict[int, str]], batch_size: int,
                 progress: Progress | None) -> int:
    done = 0
    for batch in backend.iter_documents(batch_size):
        todo = []
        for doc, stored in batch:
            questions = backend.questions(doc.path)
            have = staged.get(stored.key, {})
            # Chunk slots (above the question slots) are staged with slot 0 in
            # one transaction: a staged slot 0 means staged chunks.
            if have.get(0) == doc.vector_hash() and {
                    s for s in have if 0 < s <= backend.max_questions} == set(
                    range(1, len(questions) + 1)):
                continue
            todo.append((doc, stored, questions))
        if todo:
            # The new embedder's window decides the chunks (none for a long-window model).
            window = getattr(embedder, "max_tokens", None)
            spans = [chunk_spans(d.body, window) for d, _, _ in todo]
            ctexts = [chunk_text(d.title, d.body, span)
                      for (d, _, _), mine in zip(todo, spans, strict=True) for span in mine]
            vectors = list(embedder.embed_documents(
                [embedding_text(d.title, d.tags, d.body) for d, _, _ in todo] + ctexts))
            vectors, cvectors = vectors[:len(todo)], vectors[len(todo):]
            flat = [q for _, _, qs in todo for q in qs]
            qvectors: list[Any] = list(embedder.embed_queries(flat)) if flat else []
            items = []
            for (doc, stored, questions), vector, cspans in zip(todo, vectors, spans,
                                                                strict=True):
                mine, qvectors = qvectors[:len(questions)], qvectors[len(questions):]
                cmine, cvectors = cvectors[:len(cspans)], cvectors[len(cspans):]
                if not usable(vector, embedder.dim) or not all(
                        usable(v, embedder.dim) for v in [*mine, *cmine]):
                    raise ValueError(f"the {embedder.name} embedder returned an unusable vector "
                                     f"for {doc.path}; nothing was changed")
                chunks = Chunks(chunks_hash(doc.title, doc.body, window), cspans,
                                [unit(v) for v in cmine]) if cspans else None
                items.append((stored, doc.vector_hash(), unit(vector), [unit(v) for v in mine],
                              chunks))
            done += backend.rebuild_stage(items, fp)
        if progress:
            progress(len(batch))
    return done
