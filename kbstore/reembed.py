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

from .embed import Embedder, embedding_text, fingerprint_id
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
            if have.get(0) == doc.vector_hash() and set(have) - {0} == set(
                    range(1, len(questions) + 1)):
                continue
            todo.append((doc, stored, questions))
        if todo:
            vectors = embedder.embed_documents(
                [embedding_text(d.title, d.tags, d.body) for d, _, _ in todo])
            flat = [q for _, _, qs in todo for q in qs]
            qvectors: list[Any] = list(embedder.embed_queries(flat)) if flat else []
            items = []
            for (doc, stored, questions), vector in zip(todo, vectors, strict=True):
                mine, qvectors = qvectors[:len(questions)], qvectors[len(questions):]
                if not usable(vector, embedder.dim) or not all(
                        usable(v, embedder.dim) for v in mine):
                    raise ValueError(f"the {embedder.name} embedder returned an unusable vector "
                                     f"for {doc.path}; nothing was changed")
                items.append((stored, doc.vector_hash(), unit(vector), [unit(v) for v in mine]))
            done += backend.rebuild_stage(items, fp)
        if progress:
            progress(len(batch))
    return done
