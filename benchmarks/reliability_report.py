"""benchmarks/results/reliability.md: the reliability figures as tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PATH_COLUMNS = ("trials", "killed_mid_way", "corrupt", "half_indexed", "lost", "resumed")
RACE_COLUMNS = ("rounds", "deletes", "resurrected", "lost", "errors", "store_damage")
FUZZ_COLUMNS = ("inputs", "accepted", "skipped_with_reason", "unaccounted", "crashes",
                "good_lost", "store_damage")


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return str(len(value))
    return "-" if value is None else str(value)


def _table(rows: dict[str, dict[str, Any]], first: str, columns: tuple[str, ...],
           extra: tuple[str, ...] = ()) -> list[str]:
    extra = tuple(c for c in extra if any(c in row for row in rows.values()))
    head = (first, *columns, *extra)
    lines = ["| " + " | ".join(h.replace("_", " ") for h in head) + " |",
             "|" + "---|" * len(head)]
    for name, row in rows.items():
        lines.append("| " + " | ".join([name, *(_cell(row.get(c)) for c in columns + extra)])
                     + " |")
    return lines


_INTRO = {
    "sqlite": ["# Reliability", "",
               "Made by `python benchmarks/reliability.py` (FakeEmbedder, a stand-in LLM; "
               "the checker reads the file with plain SQL). Every figure but *trials*, "
               "*killed mid way*, *resumed*, *deletes* and *inputs* should be 0.", ""],
    "postgres": ["# Reliability on PostgreSQL", "",
                 "Made by `python benchmarks/reliability.py --backend postgres` against a "
                 "PostgreSQL 18 + pgvector server started from the installed package "
                 "(tests/pg_server.py, default durable settings); every store is a "
                 "knowledge base in a database of its own (FakeEmbedder, a stand-in LLM). "
                 "The checker (benchmarks/reliability_check_pg.py) reads the schema with "
                 "plain SQL in one repeatable-read snapshot. Only the client is killed: "
                 "*corrupt* means the BM25 postings and totals disagree with the stored "
                 "tsvectors and questions, or a primary-key index with its table. Every "
                 "figure but *trials*, *killed mid way*, *resumed*, *deletes* and *inputs* "
                 "should be 0. *load*: the 1-minute load average before and after each "
                 "scenario (2 shared cores).", ""],
}


def render(results: dict[str, Any], backend: str = "sqlite") -> str:
    out = list(_INTRO[backend])
    out += [f"Runs: {results['run']['note']}", ""] if results.get("run", {}).get("note") else []
    paths = results.get("paths", {})
    if paths:
        out += ["## SIGKILL at a random moment of each write path", "",
                "*killed mid way*: the command was still running when it was killed; "
                "*corrupt*: the file failed `integrity_check` or an FTS5 integrity check; "
                "*half indexed*: a document whose vectors/FTS/questions/hash rows disagree "
                "with its content (for reembed: vectors of two embedders; for doctor: damage "
                "it did not inflict; for export: a partial target); *lost*: committed data "
                "missing or changed (for export: the source changed); *resumed*: the same "
                "command run again completed and left a healthy store.", ""]
        out += _table(paths, "write path", PATH_COLUMNS, ("window_seconds", "load"))
        out.append("")
        stray = {k: v["stray_temp_files"] for k, v in paths.items() if "stray_temp_files" in v}
        if stray:
            out += ["Hidden temp files/folders a kill left beside an export target (never "
                    "the target itself; the next export removed each of them, or *resumed* "
                    "would fail): " + ", ".join(f"{k} {v}" for k, v in stray.items()), ""]
    races = results.get("races", {})
    if races:
        out += ["## A delete (another process, public API) racing each long operation", "",
                "*resurrected*: a deleted document came back in its old version; *lost*: a "
                "document (or, for hype, its questions) that was not deleted is missing or "
                "wrong; *errors*: anything either process saw (a 'database is locked' "
                "counts); *store damage*: half-indexed rows after both finished. copy_prune: the "
                "racing process also writes new documents the source lacks (*upserts*); "
                "*racers pruned*: those the copy deleted with the ones the source lacks; "
                "*unaccounted*: deletions the copy's report does not match.", ""]
        out += _table(races, "operation", RACE_COLUMNS, ("upserts", "racers_pruned",
                                                          "unaccounted", "ops", "deleters",
                                                          "window_seconds", "load"))
        out.append("")
    fuzzers = results.get("fuzzers", {})
    if fuzzers:
        out += ["## Bad input per importer", "",
                "*skipped with reason*: the item was refused and the report says why; "
                "*unaccounted*: neither stored nor reported; *crashes*: a traceback or any "
                "exception other than kbstore's own error with a reason; *good lost*: a good "
                "item among the bad ones not stored.", ""]
        out += _table(fuzzers, "input", FUZZ_COLUMNS, ("load",))
        out.append("")
        llm = fuzzers.get("llm_answers", {})
        if llm.get("left_pending_by_breaker") or llm.get("good_left_pending"):
            out += [f"LLM answers: answers that arrive as exceptions look like an outage to "
                    f"HyPE's breaker (three in a row stop the batch); "
                    f"{llm.get('left_pending_by_breaker', 0)} documents were left pending "
                    f"without being asked and {llm.get('good_left_pending', 0)} good ones were "
                    "left pending with bad ones (not lost: the next `kbstore hype` asks again).",
                    ""]
    legacy = [k for k in ("crash", "concurrency", "two_writers", "migration_race",
                          "query_fuzz") if k in results]
    if legacy:
        out += ["## Earlier scenarios", ""]
        for key in legacy:
            row = {k: v for k, v in results[key].items()
                   if not isinstance(v, (dict, list)) or not v}
            out.append(f"- **{key}**: " + ", ".join(f"{k} {v}" for k, v in sorted(row.items())))
        out.append("")
    return "\n".join(out)


def write_markdown(results: dict[str, Any], file: Path, backend: str = "sqlite") -> None:
    file.write_text(render(results, backend), encoding="utf-8")
