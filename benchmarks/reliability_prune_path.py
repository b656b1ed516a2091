"""``kbstore copy SRC DST --prune`` under SIGKILL.

DST holds documents some of which SRC lacks: every generation's source
holds three fifths of the documents (at a new version, with HyPE questions
and vectors) and lacks two fifths, shifted by two fifths each time, so each
run adds the two fifths the previous source lacked, updates the fifth both
hold and deletes the two fifths only the previous one held (two fifths of
DST once the copy has written: under the mass-delete limit, so no --force;
more than one delete transaction at 200 documents). The command says which
documents it deletes before it does (stderr, kept per trial); it never asks
for confirmation. Half the kills land in the last third of the calibrated
run time, where the deletions are.

A kill may leave each document as it was or as the source holds it; a
document the source lacks present (as it was) or deleted -- and deleted only
if the command had announced it among exactly the documents the source
lacks. Nothing else: no document the source holds gone, none that neither
side had. The re-run must leave exactly the source's documents, and both
the plain-SQL checker and ``kbstore doctor`` must find the store clean.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from benchmarks.reliability_check import check_store, contents
from benchmarks.reliability_docs import fake_hype, make_docs, open_store
from benchmarks.reliability_path_inputs import marker
from benchmarks.reliability_write_paths import WritePath, _diff

ANNOUNCED = re.compile(r"deleting (\d+) document\(s\) the source does not have")


def doctor_problems(db: Any) -> list[str]:
    """What ``kbstore doctor`` (read-only) reports wrong with the store."""
    from kbstore import KnowledgeStore
    from kbstore.doctor import diagnose

    with KnowledgeStore.open(db, read_only=True, hype=False) as store:
        return [f"doctor: {c.name}" for c in diagnose(store).problems]


class CopyPrune(WritePath):
    @staticmethod
    def held(gen: int, i: int) -> bool:
        """Does generation ``gen``'s source hold document ``i``?"""
        return (i + 2 * gen) % 5 not in (0, 1)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.src: dict[str, Any] = {}
        # Where each trial stopped (a kill, or the end of a run that finished
        # first): none of the doomed documents deleted yet, some, or all.
        self.extra_stats = {"left_all_doomed": 0, "left_some_doomed": 0, "left_no_doomed": 0}

    def source(self, gen: int) -> Path:
        return self.work / f"source-{gen}.sqlite"

    def stderr(self, gen: int) -> Path:
        return self.work / f"stderr-{gen}.txt"

    def prepare(self, gen: int) -> None:
        if not self.source(gen).exists():
            with fake_hype(), open_store(self.source(gen)) as store:
                store.upsert_many(make_docs([i for i in range(self.n) if self.held(gen, i)],
                                            marker(gen)))
        self.src = contents(self.source(gen))
        # (the child, started before this, truncates its own stderr file)
        super().prepare(gen)

    def kill_delay(self, window: float) -> float:
        late = self.rng.random() < 0.5
        return self.rng.uniform(window * 2 / 3 if late else 0, window * 1.05)

    def spec(self, gen: int) -> dict[str, Any]:
        return {"kind": "cli", "argv": ["copy", str(self.source(gen)), str(self.db), "--prune"],
                "stderr": str(self.stderr(gen))}

    def doomed(self) -> list[str]:
        return sorted(p for p in self.before["contents"] if p not in self.src)

    def announced(self, gen: int) -> list[int]:
        file = self.stderr(gen)
        text = file.read_text(encoding="utf-8", errors="replace") if file.exists() else ""
        return [int(m.group(1)) for m in ANNOUNCED.finditer(text)]

    def lost(self, gen: int, committed: int) -> list[str]:
        now, before, doomed = contents(self.db), self.before["contents"], set(self.doomed())
        problems = []
        for path, was in before.items():
            if path not in now:
                if path not in doomed:
                    problems.append(f"{path}: gone, the source holds it")
            elif now[path] not in (was, self.src.get(path)):
                problems.append(f"{path}: neither as it was nor as the source holds it")
        problems += [f"{p}: unexpected" for p in now
                     if p not in before and now[p] != self.src.get(p)]
        deleted = [p for p in doomed if p not in now]
        announced = self.announced(gen)
        if deleted and announced != [len(doomed)]:
            problems.append(f"{len(deleted)} deleted, announced {announced} "
                            f"(of {len(doomed)} the source lacks)")
        return problems

    def check_killed(self, gen: int, committed: int) -> tuple[int, list[str], list[str]]:
        corrupt, half, lost = super().check_killed(gen, committed)
        left = sum(p in contents(self.db) for p in self.doomed())
        phase = "all" if left == len(self.doomed()) else "no" if left == 0 else "some"
        self.extra_stats[f"left_{phase}_doomed"] += 1
        return corrupt, half + ([] if corrupt else doctor_problems(self.db)), lost

    def check_resumed(self, gen: int) -> list[str]:
        # The checker's counts, then exactly the source's documents (the
        # re-run's own announcement went to this process's stderr).
        problems = [f"{k}={v}" for k, v in check_store(self.db).items()
                    if v and k != "documents"]
        return problems + _diff(self.src, contents(self.db)) + doctor_problems(self.db)
