"""Bad input for ``delete_many``: lists of paths where good ones (stored
documents) sit among paths that are not stored, look like SQL patterns or
other documents' paths, are not strings, or repeat. Exactly the good
documents may go: a document nobody named being deleted is *unaccounted*, a
named one left behind after the call returned is *good lost*, and the count
returned must be the documents that went. *Skipped with reason*: a bad entry
that deleted nothing (a call with a path that is not text is refused with a
TypeError naming it, and deletes nothing)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from benchmarks.reliability_check import contents
from benchmarks.reliability_docs import doc_path, fake_hype, make_docs, open_store
from benchmarks.reliability_fuzz import _finish, _result, _sample
from kbstore import KBStoreError

STORED = 400  # documents 0..STORED-1 in the store; a round takes what it deletes


def _bad(rng: random.Random, i: int) -> Any:
    """One path that names no stored document (``i``: a stored one's number)."""
    real = doc_path(i)
    if rng.random() < 0.02:  # not text: the whole call is refused with a reason
        return rng.choice([None, 3, 3.5, b"projects/doc-0001.md", ["projects/doc-0001.md"]])
    return rng.choice([
        "", " ", "%", "_", "*", "projects/%", "projects/doc-%", "projects/doc-____.md",
        f"{real} ", f" {real}", real.upper(), f"/{real}", f"./{real}", f"projects//doc-{i:04d}.md",
        f"{real}\x00", f"{real}/../{real}", real.replace("/", "\\"), real[:-3],
        f"{real}' OR '1'='1", "'; DROP TABLE documents; --", "x" * 5000, "projects/doc-ä.md",
        f"projects/doc-{STORED + i:04d}.md",
    ])


def run(workdir: Path, inputs: int, seed: int = 0) -> dict[str, Any]:
    """``inputs`` entries (a fifth good), deleted in calls of 20."""
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "delete_many.sqlite"
    stats = _result(inputs)
    stats["stored"] = max(STORED, inputs)
    with fake_hype(), open_store(db) as store:
        store.upsert_many(make_docs(range(stats["stored"]), "m0x0"))
    left = list(range(stats["stored"]))
    rng.shuffle(left)
    with open_store(db, hype=False) as store:
        for start in range(0, inputs, 20):
            entries: list[tuple[Any, bool]] = []
            for _ in range(start, min(inputs, start + 20)):
                i = left[-1] if left else 0
                if left and rng.random() < 0.2:
                    entries.append((doc_path(left.pop()), True))
                    if rng.random() < 0.3:  # the same good path twice
                        entries.append((doc_path(i), False))
                else:
                    entries.append((_bad(rng, i), False))
            before = set(contents(db))
            good = {p for p, is_good in entries if is_good}
            try:
                count = store.delete_many([p for p, _ in entries])
            except (KBStoreError, TypeError, ValueError) as exc:
                count = None
                if not str(exc).strip():
                    stats["crashes"] += 1
                    _sample(stats, f"{type(exc).__name__} without a reason")
            except Exception as exc:
                stats["crashes"] += len(entries)
                _sample(stats, f"delete_many raised {type(exc).__name__}: {exc}")
                continue
            gone = before - set(contents(db))
            wrong = gone - good
            stats["unaccounted"] += len(wrong)
            if wrong:
                _sample(stats, f"deleted without being named: {sorted(wrong)[:3]} "
                               f"by {[p for p, _ in entries][:5]}")
            if count is not None and count != len(gone):
                stats["unaccounted"] += 1
                _sample(stats, f"delete_many returned {count}, {len(gone)} went")
            for _p, is_good in entries:
                if is_good:
                    stats["accepted"] += _p in gone
                    stats["good_lost"] += count is not None and _p not in gone
                else:
                    stats["skipped_with_reason"] += True
            if count is None:  # refused with a reason: the named ones stay, nothing lost
                left += [int(p[13:17]) for p in good]
    return _finish(stats, db)
