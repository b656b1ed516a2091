"""The results dict of run.py as a markdown report."""

from __future__ import annotations

from typing import Any

from benchmarks.agent_memory.metrics import AGE_BUCKETS


def _f(value: Any, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    return str(value)


def _settings(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items()) or "(shipped defaults)"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(r) + " |" for r in rows)]


def _stats(stats: dict[str, Any]) -> list[str]:
    def spread(key: str) -> str:
        s = stats.get(key) or {}
        if not s:
            return "–"
        return (f"mean {s['mean']}, median {s['median']}, p10-p90 {s['p10']}-{s['p90']}, "
                f"min {s['min']}, max {s['max']}")
    lines = [f"- {stats['kbs']} knowledge bases, {stats['documents']} documents "
             f"(per kb: {spread('documents_per_kb')})",
             f"- words per document: {spread('words_per_document')}"]
    if "tokens_per_document" in stats:
        lines.append(f"- MiniLM tokens per document (kbstore's embedding input): "
                     f"{spread('tokens_per_document')}; longer than the 256-token window: "
                     f"{100 * stats['share_longer_than_window']:.0f}%")
    if "months_spanned_per_kb" in stats:
        lines.append(f"- months spanned per kb: {spread('months_spanned_per_kb')}")
    types = ", ".join(f"{k} {v}" for k, v in stats["queries_per_type"].items())
    splits = ", ".join(f"{k} {v}" for k, v in stats["queries_per_split"].items())
    lines += [f"- {stats['queries']} queries ({stats['answerable']} answerable): {types}",
              f"- splits: {splits}; relevant documents per answerable query: "
              f"{spread('relevant_per_answerable_query')}"]
    return lines


def markdown(results: dict[str, Any]) -> str:
    systems: dict[str, Any] = results["systems"]
    names = list(systems)
    out = [f"# Agent memory: {results['dataset']} (benchmarks/agent_memory/run.py)", "",
           f"Run {results['started']} at commit {results.get('commit', '?')}; embedder "
           f"{results['embedder']}; HyPE off; split **{results['split']}**; dataset "
           f"fingerprint {results['dataset_fingerprint']}. `--set` overrides: "
           f"{_settings(results['overrides']) if results['overrides'] else 'none'}. Every "
           "kbstore row is `KnowledgeStore.search(text, limit=100, now=query.now, "
           "topic=query.topic, **settings)`. Metric definitions: "
           "benchmarks/agent_memory/FORMAT.md.", "", "## Dataset", "",
           *_stats(results["stats"]), "", "## Overall (answerable queries)", ""]
    rows = []
    for n in names:
        s = systems[n]
        o = s["overall"]
        latest = s["latest"].get("latest")
        rows.append([n, _f(o["recall@5"]), _f(o["ndcg@10"]), _f(o["mrr"]),
                     f"{latest['correct']}/{latest['n']}" if latest else "–",
                     f"{s['newest5']['count']}/{s['newest5']['n']}", s["about"]])
    out += _table(["system", "recall@5", "nDCG@10", "MRR", "latest@1",
                   "top 5 = 5 newest", "what"], rows)
    first = systems[names[0]]
    for field in results["by"]:
        values = list(first["by"].get(field, {}))
        if not values:
            continue
        for metric in ("recall@5", "ndcg@10"):
            out += ["", f"## {metric} by {field}", ""]
            header = ["system"] + [f"{v} (n={first['by'][field][v]['n']})" for v in values]
            out += _table(header, [[n] + [_f(systems[n]["by"][field].get(v, {}).get(metric))
                                          for v in values] for n in names])
    if any(first["age"][b]["pairs"] for b, _, _ in AGE_BUCKETS):
        out += ["", "## recall@5 by age of the evidence at `now`", "",
                "(query, answer path) pairs; answer paths = the query's highest grade.", ""]
        header = ["system"] + [f"{b} ({first['age'][b]['pairs']} pairs)"
                               for b, _, _ in AGE_BUCKETS]
        out += _table(header, [[n] + [_f(systems[n]["age"][b]["recall@5"])
                                      for b, _, _ in AGE_BUCKETS] for n in names])
    kinds = list(first["latest"])
    if kinds:
        out += ["", "## Newest relevant document at rank 1", ""]
        out += _table(["system"] + [f"{k} (n={first['latest'][k]['n']})" for k in kinds],
                      [[n] + [_f(systems[n]["latest"].get(k, {}).get("accuracy"))
                              for k in kinds] for n in names])
    splits = list(first["splits"])
    if len(splits) > 1:
        out += ["", "## By split", ""]
        header = ["system"] + [f"{s} {m} (n={first['splits'][s]['n']})"
                               for s in splits for m in ("recall@5", "nDCG@10")]
        out += _table(header, [[n] + [_f(systems[n]["splits"][s][m])
                                      for s in splits for m in ("recall@5", "ndcg@10")]
                               for n in names])
    if results.get("floors"):
        out += ["", "## Similarity floor: absent queries vs answerable recall", "",
                "`min_similarity` for kbstore: when no hit's best vector reaches it the query "
                "is out of the knowledge base (no hits), else hits below it are kept only if "
                "they match query words; `default` is the database's own floor (the "
                "embedder's: MiniLM 0.25, what the shipped defaults use); dense: cosine of the "
                "hit, `default` = none.", ""]
        rows = []
        for n, by_floor in results["floors"].items():
            base = by_floor["none"]["answerable_recall@5"]
            for floor, r in by_floor.items():
                rows.append([n, floor, f"{r['absent_empty']}/{r['absent_n']}",
                             _f(r["absent_mean_hits"], 1), _f(r["answerable_recall@5"]),
                             _f(r["answerable_recall@5"] - base, signed=True)
                             if floor != "none" else "–",
                             str(r["answerable_empty"])])
        out += _table(["system", "floor", "absent: no hit", "absent: mean hits",
                       "answerable recall@5", "change vs no floor", "answerable: no hit"],
                      rows)
    out += ["", "## Systems and settings", ""]
    for n in names:
        s = systems[n]
        line = f"- **{n}**: {s['about']}; {_settings(s['settings']) if s['settings'] else '-'}"
        if "isolation" in s:
            iso = s["isolation"]
            line += (f"; isolation checked with explain=True on {iso['queries']} queries: "
                     f"{iso['violations']} violations")
            if iso["examples"]:
                line += " (" + "; ".join(iso["examples"]) + ")"
        out.append(line + f"; {s['ms_per_query']} ms/query")
    return "\n".join(out) + "\n"
