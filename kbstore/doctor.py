"""`kbstore doctor`: find, and where possible repair, damage to a store.

The backend checks its own storage (:meth:`Backend.diagnose`) and rebuilds
what needs no model (:meth:`Backend.repair`); vectors that must be made
again go through the one write path (:meth:`KnowledgeStore.refresh`), which
never calls the LLM. A *problem* makes the store wrong; a *note* is work
left to do that the store copes with (HyPE questions waiting for the LLM).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import query as _query
from .embed import Embedder, fingerprint_id
from .listing import some_paths
from .model import Check, DoctorReport

if TYPE_CHECKING:
    from .store import KnowledgeStore

# Problems the write path fixes by (re-)embedding.
_REEMBED = {"documents_missing_vectors", "questions_missing_vectors", "chunks_missing_vectors",
            "stale_vectors", "documents_missing_hash_row", "fingerprint_mismatch",
            "invalid_vectors", "vector_table"}


def diagnose(store: KnowledgeStore) -> DoctorReport:
    """Check ``store`` without changing it."""
    fp = store.backend.fingerprint()
    report = DoctorReport(store.location)
    report.checks = store.backend.diagnose(fingerprint_id(fp) if fp else None)
    return report


def fix(store: KnowledgeStore, *, embedder: Embedder | None = None) -> DoctorReport:
    """Rebuild everything derivable, then diagnose again. Never calls the
    LLM. ``embedder`` records a fingerprint for a file that lost its own
    (every vector is then made again with it)."""
    before = diagnose(store)
    actions: list[str] = []
    bad = {c.name for c in before.problems} | {c.name for c in before.checks
                                               if c.name == "rebuild_in_progress" and c.count}
    if "fingerprint" in bad:
        if embedder is None:
            after = diagnose(store)
            after.checks.append(Check("fix", 1, "the embedder fingerprint is missing: rerun with "
                                      "--embedder NAME to record one (documents are kept)",
                                      fixable=False))
            return after
        done = store.restamp(embedder)
        actions.append(f"recorded the {embedder.name} fingerprint and embedded {done} "
                       "document(s)")
        bad = {c.name for c in diagnose(store).problems}
    repaired = bad - {"fingerprint"}
    if repaired:
        actions += store.backend.repair(repaired, _query.new_database_defaults(store.embedder))
    if bad & (_REEMBED | {"stale_questions"}):
        done = store.refresh()
        actions.append(f"re-embedded {done} document(s)")
    after = diagnose(store)
    untouched = next((c for c in after.problems if c.name == "invalid_tags"), None)
    if untouched is not None:
        actions.append(f"left the tags of {untouched.count} document(s) as they are (not a "
                       f"list of strings: {some_paths(untouched.sample)}); write them back "
                       "as strings")
    after.fixed = actions
    return after
