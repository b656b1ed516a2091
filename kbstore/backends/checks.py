"""Doctor checks that read only rows every backend keeps the same way: the
per-document hash rows of derived data (``derived``) against the documents'
content and the stored embedder fingerprint."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..model import (
    CHUNK_VECTORS,
    DOC_VECTOR,
    HYPE_QUESTIONS,
    HYPE_VECTORS,
    PENDING,
    Check,
    Document,
    tags_valid,
)
from ..redact import redact


def derived_checks(add: Callable[..., None], docs: dict[int, Document],
                   derived: Sequence[Sequence[Any]], fp: str | None) -> None:
    """``derived``: (doc_id, kind, content_hash, model, status, error) rows;
    ``add(name, found, detail, **kw)`` records one check."""
    ids = set(docs)
    bad_tags = invalid_tag_docs(docs)
    add("invalid_tags", {docs[d].path for d in bad_tags},
        "documents whose tags are not a list of strings (edited outside kbstore, say "
        "'[1, \"Y\"]' in the shell); their tag rows are not checked. --fix leaves "
        "them: write the tags back as strings (a kbstore upsert, or the shell)",
        fixable=False)
    add("orphan_derived", {int(r[0]) for r in derived if int(r[0]) not in ids},
        "hash rows of deleted documents")
    by_kind: dict[str, dict[int, tuple[str, str, str]]] = {}
    for doc_id, kind, content_hash, model, status, _ in derived:
        by_kind.setdefault(kind, {})[int(doc_id)] = (content_hash, model, status)
    doc_rows, qrows = by_kind.get(DOC_VECTOR, {}), by_kind.get(HYPE_QUESTIONS, {})
    add("documents_missing_hash_row", ids - set(doc_rows),
        "documents without a 'doc_vector' hash row (never embedded)")
    add("stale_vectors", {d for d, (h, _, _) in doc_rows.items()
                          if d in docs and h != docs[d].vector_hash()},
        "document vectors made from older content")
    add("secrets_in_errors", {int(r[0]) for r in derived if r[5] and redact(r[5]) != r[5]},
        "stored LLM errors that still hold what looks like a credential (written by an "
        "older kbstore); --fix redacts them")
    add("pending_hype", {d for d, (_, _, s) in qrows.items() if d in ids and s == PENDING},
        "documents whose HyPE questions wait for the LLM (`kbstore hype`)",
        fixable=False, problem=False)
    add("stale_questions", {d for d, (h, _, s) in qrows.items()
                            if d in docs and s == "ok" and h != docs[d].hype_hash()},
        "HyPE questions written for older content (--fix drops them; `kbstore hype` asks "
        "again)")
    if fp is not None:
        add("fingerprint_mismatch", {d for kind in (DOC_VECTOR, HYPE_VECTORS, CHUNK_VECTORS)
                                     for d, (_, m, _) in by_kind.get(kind, {}).items()
                                     if d in ids and m != fp},
            f"vectors made by another embedder than the stored {fp}")


def invalid_tag_docs(docs: dict[int, Document]) -> set[int]:
    """Documents whose stored tags kbstore would not write (model.tags_valid)."""
    return {d for d, doc in docs.items() if not tags_valid(doc.tags)}


def guarded(name: str, check: Callable[..., Check], *args: Any) -> Check:
    """Run one check; a check that fails (a damaged file can fail any query)
    becomes a problem named after it, its message redacted."""
    try:
        return check(*args)
    except Exception as exc:
        return Check(name, 1, f"check failed: {redact(str(exc))}", fixable=False)


class Tally:
    """Checks gathered a page at a time (both backends' doctors). Each page's
    findings are distinct from every other page's (a document, its path, its
    rows belong to one page), so counts add up; the sample keeps the
    ``sample`` smallest. A check is listed, with its detail and flags, where
    it is first added; ``add`` takes the found items, ``counted`` a count and
    sample the server worked out."""

    def __init__(self, sample: int) -> None:
        self.sample = sample
        self.found: dict[str, tuple[int, list[Any], str, dict[str, Any]]] = {}

    def add(self, name: str, found: Any, detail: str, **kw: Any) -> None:
        items = sorted(set(found))
        self.counted(name, len(items), items[:self.sample], detail, **kw)

    def counted(self, name: str, count: int, sample: list[Any], detail: str, **kw: Any) -> None:
        before, kept, detail, kw = self.found.get(name, (0, [], detail, kw))
        self.found[name] = (before + count, sorted(kept + sample)[:self.sample], detail, kw)

    def note(self, check: Check) -> None:
        self.found[check.name] = (check.count, check.sample, check.detail,
                                  {"fixable": check.fixable, "problem": check.problem})

    def checks(self) -> list[Check]:
        return [Check(name, count, detail if count else "", sample=sample, **kw)
                for name, (count, sample, detail, kw) in self.found.items()]
