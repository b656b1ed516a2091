"""(Re)generating HyPE questions for documents already in a store.

Import writes HyPE as it goes, but an LLM that was down, a missing key or an
import with ``--no-hype`` leaves documents without questions. This job finds
them (``pending``: no current questions) -- or takes every document
(``all``, e.g. after switching LLM) -- and sends them through the write path
as derived-only changes: LLM calls with bounded parallelism outside any
lock, one embedding call and one transaction per batch. A failure never
touches the document itself, and good questions are kept when ``all``
fails to refresh them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .model import HYPE_QUESTIONS, OK, Document, Stored

if TYPE_CHECKING:
    from .store import KnowledgeStore

log = logging.getLogger("kbstore.hype")
MODES = ("pending", "all")


def is_current(doc: Document, stored: Stored) -> bool:
    hq = stored.made(HYPE_QUESTIONS)
    return hq is not None and hq.status == OK and hq.content_hash == doc.hype_hash()


def select_targets(store: KnowledgeStore, mode: str = "pending"
                   ) -> list[tuple[Document, Stored]]:
    """Documents the job would send to the LLM, in key order. ``pending``:
    no current questions (a failed call, never made, or older content) --
    the same definition as ``status()['hype_pending']``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    return [(doc, stored) for batch in store.backend.iter_documents(store.settings.batch_size)
            for doc, stored in batch if mode == "all" or not is_current(doc, stored)]


def run_hype(store: KnowledgeStore, mode: str = "pending", *, concurrency: int | None = None,
             model: str | None = None, dry_run: bool = False, batch_size: int | None = None,
             progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Generate HyPE questions for the ``mode`` documents of ``store``.

    HyPE is forced on for this run whatever ``store.hype.enabled`` says
    (asking for it is the point); the model is ``model``, else the store's.
    ``dry_run`` only counts the LLM calls that would be made. Returns counts:

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
    counts["model"], counts["concurrency"] = config.model, config.concurrency
    writer = store.writer(config)
    size = max(1, batch_size or store.settings.batch_size)
    for start in range(0, len(targets), size):
        batch = targets[start:start + size]
        outcome = writer.derive(batch, ask_llm=True, force_llm=mode == "all", hype=config)
        counts["llm_calls"] += outcome.llm_calls
        counts["changed"] += len(outcome.changed)
        counts["failed"] += len(outcome.llm_failures)
        counts["generated"] += outcome.report.hype_generated
        for doc, _ in batch:
            if doc.path not in outcome.changed and doc.path not in outcome.llm_failures:
                counts["questions"] += len(store.backend.questions(doc.path))
        if progress:
            progress(len(batch))
        if (outcome.llm_failures and not outcome.report.hype_generated
                and outcome.llm_calls < len(outcome.llm_failures) and start + size < len(targets)):
            # Nothing in the batch succeeded and the breaker stopped sending
            # (calls kept raising): the LLM is down (no key, no network). The
            # rest stays pending for the next run. Answers that were merely
            # unusable do not count: documents whose answers are always bad
            # sort first on every run and would otherwise block the rest.
            rest = len(targets) - start - size
            counts["aborted"] = True
            counts["failed"] += rest
            if progress:
                progress(rest)
            log.warning("HyPE run stopped after repeated LLM failures; %d document(s) left "
                        "pending", counts["failed"])
            break
    return counts
