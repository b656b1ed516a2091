"""benchmarks/results/first_query.md from first_query.json (tables only;
the notes below the tables are kept from the existing file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

NOTES_MARK = "<!-- notes: kept when the tables are regenerated -->"


def _s(stat: dict[str, float], scale: float = 1.0, fmt: str = "{:.0f}") -> str:
    return (f"{fmt.format(stat['median'] * scale)} "
            f"({fmt.format(stat['min'] * scale)}-{fmt.format(stat['max'] * scale)})")


def _ratio(a: dict[str, float], b: dict[str, float]) -> str:
    return f"{a['median'] / b['median']:.2f}x"


def _search_table(r: dict[str, Any]) -> list[str]:
    s = r["search"]
    base = s["before"]
    labels = {
        "before": "before (main): model loads",
        "after_new_query": "after: a query text never embedded (model loads)",
        "after_repeated_query": "after: a query text embedded before (query-vector cache)",
    }
    lines = ["| `kbstore search` in a fresh process | wall ms, median (min-max) | vs before "
             "| CPU ms (user+sys), median | vs before | peak RSS MB, median (min-max) "
             "| vs before |", "|---|---|---|---|---|---|---|"]
    for key, label in labels.items():
        row = s[key]
        cpu = (f"{row['cpu_s']['median'] * 1000:.0f} | {_ratio(row['cpu_s'], base['cpu_s'])}"
               if "cpu_s" in row and "cpu_s" in base else "- | -")
        lines.append(f"| {label} | {_s(row['wall_s'], 1000)} | "
                     f"{_ratio(row['wall_s'], base['wall_s'])} | {cpu} | "
                     f"{_s(row['peak_rss_mb'])} | "
                     f"{_ratio(row['peak_rss_mb'], base['peak_rss_mb'])} |")
    fe = s["after_first_ever"]
    lines.append(f"| after: first search on a machine with no cache dir (writes the edited "
                 f"model, 23 MB, and the vocabulary, once) | {fe['wall_s'] * 1000:.0f} (1 run) | "
                 f"{fe['wall_s'] / base['wall_s']['median']:.2f}x | - | - | "
                 f"{fe['peak_rss_mb']:.0f} | "
                 f"{fe['peak_rss_mb'] / base['peak_rss_mb']['median']:.2f}x |")
    n = base["wall_s"]["n"]
    lines += ["", f"{n} fresh processes per row, rows interleaved. Same top hit before and "
              f"after for the same query text: {s['same_top_hit']}."]
    return lines


def _import_table(r: dict[str, Any]) -> list[str]:
    im = r["imports"]
    lines = ["| `kbstore import --embedder minilm --no-hype` of the sample KB (34 documents) "
             "| wall s | docs/s | CPU s (user+sys) | peak RSS MB | RSS vs before |",
             "|---|---|---|---|---|---|"]
    for key, label in (("before", "before (main)"), ("after", "after"),
                       ("after_first_ever", "after, no cache dir yet")):
        if im.get(key, {}).get("wall_s"):
            row = im[key]
            cpu = _s(row["cpu_s"], 1, "{:.1f}") if "cpu_s" in row else "-"
            lines.append(f"| {label} | {_s(row['wall_s'], 1, '{:.2f}')} | "
                         f"{34 / row['wall_s']['median']:.1f} | {cpu} | "
                         f"{_s(row['peak_rss_mb'])} | "
                         f"{_ratio(row['peak_rss_mb'], im['before']['peak_rss_mb'])} |")
    return lines


PHASE_LABELS = (
    ("interpreter_ms", "interpreter start (`python -c pass`)"),
    ("startup_in_process_ms", "first statements of the script"),
    ("import_cli_ms", "imports: kbstore + click + CLI commands (after: search's only)"),
    ("open_store_ms", "open the database (sqlean, sqlite-vec, schema check)"),
    ("import_numpy_onnxruntime_tokenizers_ms", "model libraries: before numpy + onnxruntime + "
     "tokenizers modules; after onnxruntime's C library (ctypes)"),
    ("model_load_ms", "model load: tokenizer (after: plain-Python vocabulary) + ONNX session"),
    ("embed_query_ms", "query embedding"),
    ("sql_ms", "SQL: search statement, snippets, hits"),
    ("print_ms", "printing"),
)


def _phase_table(r: dict[str, Any]) -> list[str]:
    p = r["phases"]
    lines = ["| phase (model path, query-vector cache off) | before ms | after ms | "
             "before peak RSS MB | after peak RSS MB |", "|---|---|---|---|---|"]
    for key, label in PHASE_LABELS:
        if key == "interpreter_ms":
            lines.append(f"| {label} | {p[key]:.0f} | {p[key]:.0f} | | |")
            continue
        b, a = p["before"], p["after"]
        rss = (f"{b['peak_rss_mb'].get(key, 0):.0f} | {a['peak_rss_mb'].get(key, 0):.0f}"
               if key in b["peak_rss_mb"] else " | ")
        lines.append(f"| {label} | {b[key]:.1f} | {a[key]:.1f} | {rss} |")
    for key, label in (("in_process_total_ms", "in-process total"),
                       ("process_wall_ms", "whole process, spawn to exit")):
        lines.append(f"| **{label}** | {p['before'][key]:.0f} | {p['after'][key]:.0f} | | |")
    if "paths" in p:
        lines += ["", f"Query embedded through: before {p['paths']['before']}, after "
                  f"{p['paths']['after']}."]
    return lines


def _import_list(r: dict[str, Any]) -> list[str]:
    p = r["phases"]
    lines = ["| module (top level of `kbstore search`) | before ms | after ms |", "|---|---|---|"]
    before, after = p["before_imports"]["top_level"], p["after_imports"]["top_level"]
    for name in sorted(set(before) | set(after), key=lambda n: -max(before.get(n, 0),
                                                                     after.get(n, 0))):
        if max(before.get(name, 0), after.get(name, 0)) >= 2:
            lines.append(f"| {name} | {before.get(name, 0):.1f} | {after.get(name, 0):.1f} |")
    lines.append(f"| **all imports** | {p['before_imports']['total_ms']:.0f} | "
                 f"{p['after_imports']['total_ms']:.0f} |")
    return lines


def _throughput_table(r: dict[str, Any]) -> list[str]:
    t = r["throughput"]
    first = next(iter(t.values()))
    lines = [f"{first['docs']} documents of 100-2000 words ({first['tokens']} tokens after "
             "truncation at 256), embedded in one process per row; docs/s and tokens/s "
             "exclude the model load.", "",
             "| configuration | docs/s | tokens/s | CPU s per doc | peak RSS MB | max abs diff "
             "vs today | min cosine vs today |", "|---|---|---|---|---|---|---|"]
    for name, row in t.items():
        cpu = _s(row["cpu_s_per_doc"], 1, "{:.2f}") if "cpu_s_per_doc" in row else "-"
        lines.append(f"| {name} | {_s(row['docs_per_s'], 1, '{:.1f}')} | "
                     f"{_s(row['tokens_per_s'])} | {cpu} | {_s(row['peak_rss_mb'])} | "
                     f"{row['max_abs_diff']:.1e} | {row['min_cosine']:.7f} |")
    return lines


def _session_table(r: dict[str, Any]) -> list[str]:
    rows = r["sessions"]
    lines = ["Each row: a fresh process loads numpy, onnxruntime and the tokenizer, starts one "
             "ONNX session and embeds one query twice (medians of "
             f"{next(iter(rows.values()))['n']} interleaved runs).", "",
             "| session settings | session start ms (min-max) | first query ms | second query "
             "ms | peak RSS MB after start | after the query |", "|---|---|---|---|---|---|"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['load_ms']:.0f} ({row['load_ms_min']:.0f}-"
                     f"{row['load_ms_max']:.0f}) | {row['first_run_ms']:.1f} | "
                     f"{row['second_run_ms']:.1f} | {row['rss_after_load_mb']:.0f} | "
                     f"{row['rss_after_query_mb']:.0f} |")
    return lines


def _tokenizer_table(r: dict[str, Any]) -> list[str]:
    rows = r["tokenizers"]
    lines = ["Each row: a fresh process loads one tokenizer and tokenises one query (medians "
             f"of {next(iter(rows.values()))['load_ms']['n']} interleaved runs; the process's "
             "peak RSS includes the interpreter and kbstore's modules).", "",
             "| tokenizer | load + one query ms (min-max) | CPU ms | process peak RSS MB |",
             "|---|---|---|---|"]
    for name, row in rows.items():
        lines.append(f"| {name} | {_s(row['load_ms'], 1, '{:.1f}')} | "
                     f"{row['cpu_ms']['median']:.1f} | {row['peak_rss_mb']['median']:.0f} |")
    return lines


def _warm_table(r: dict[str, Any]) -> list[str]:
    rows = r["warm"]
    base = next(iter(rows.values()))["median_ms"]
    lines = ["One process, one short query at a time, the three sessions interleaved "
             f"({next(iter(rows.values()))['n']} queries each).", "",
             "| session | median ms | min ms | vs today |", "|---|---|---|---|"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['median_ms']:.1f} | {row['min_ms']:.1f} | "
                     f"{row['median_ms'] / base:.2f}x |")
    return lines


def write_report(r: dict[str, Any], path: Path) -> None:
    notes = ""
    if path.exists() and NOTES_MARK in path.read_text():
        notes = path.read_text().split(NOTES_MARK, 1)[1]
    load = r["machine"]
    lines = ["# The first query and memory while importing (real MiniLM model)", "",
             f"`python -m benchmarks.first_query`: before = `{r['base_ref']}` "
             f"({r['base_sha'][:10]}), after = this branch. {load['cpus']} cores shared with "
             "other jobs: absolute times carry the machine's load; compare within a table, "
             "not across tables.", ""]
    runs = r.get("step_runs", {})
    if runs:
        lines += ["| section | run started | load average start-end | after = |",
                  "|---|---|---|---|"]
        for step, meta in runs.items():
            lines.append(f"| {step} | {meta['date']} | {meta['load']:.1f}-{meta['load_end']:.1f}"
                         f" | {meta['after_sha'][:10]}"
                         f"{' + uncommitted' if meta['after_dirty'] else ''} |")
        lines.append("")
    if "search" in r:
        lines += ["## First query", ""] + _search_table(r) + [""]
    if "imports" in r:
        lines += ["## Import of the sample KB", ""] + _import_table(r) + [""]
    if "phases" in r:
        lines += ["## Where a first query's time goes", ""] + _phase_table(r) + [""]
        lines += ["### Imports of `kbstore search` (python -X importtime, cumulative)", ""]
        lines += _import_list(r) + [""]
    if "sessions" in r:
        lines += ["## ONNX session settings: start-up and memory", ""] + _session_table(r) + [""]
    if "tokenizers" in r:
        lines += ["## Tokenizer load", ""] + _tokenizer_table(r) + [""]
    if "warm" in r:
        lines += ["## Warm queries in a long-lived process", ""] + _warm_table(r) + [""]
    if "throughput" in r:
        lines += ["## Embedding throughput and memory", ""] + _throughput_table(r) + [""]
    path.write_text("\n".join(lines) + "\n" + NOTES_MARK + (notes or "\n"))
