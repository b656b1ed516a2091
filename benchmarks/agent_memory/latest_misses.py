"""Why a "latest" question misses: every latest / superseded question whose
rank 1 is not the newest relevant entry, with the evidence behind it.

    python -m benchmarks.agent_memory.latest_misses benchmarks/agent_memory/sessions
    python -m benchmarks.agent_memory.latest_misses DIR --split dev --set latest_top=12

For each miss: the question (and whether it was read as a "latest"
question, with its topical words), the expected entry (the newest of the
best-graded, as metrics.latest_accuracy wants it) with its final rank, its
rank by evidence (the fused score before recency, without the vector
standout: what search.sql's `latest` CTE ranks by), its rank in each list,
its best cosine and its topical share (BM25 of the topical words / the
best), and the entries ranked above it. Then the first reason that applies,
in the order search.sql tests them:

- `not latest`: the question was not read as a "latest" question;
- `dominated`: an entry newer than the expected one is at least as strong on
  every signal the statement has (evidence, cosine, full-text BM25, topical
  share): any eligibility rule that grows with these signals and admits the
  expected entry admits that one too, and newest-first puts it above;
- `pool`: outside the latest_top best by evidence;
- `ratio`: its evidence is below latest_ratio x the best;
- `topical`: its topical share is below latest_topical (the detail lists
  every one of these three tests that fails);
- `newer eligible`: eligible, but a newer eligible entry comes first;
- `not dated`: no `updated`/`created` (only dated journal entries are
  eligible).

Stores are built as run.py builds them (MiniLM behind the disk cache; the
FakeEmbedder in tests). Writes DIR's report to --out (markdown) if given.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.agent_memory import metrics as mt
from benchmarks.agent_memory.data import Dataset, load
from benchmarks.agent_memory.run import DEFAULT_CACHE, parse_sets
from benchmarks.agent_memory.systems import DEPTH, Stores, caching_minilm, save_cache
from kbstore import query as kq
from kbstore.backends.sqlite.search import fts_expression

LISTS = ("frontmatter", "fts", "vector", "hype", "hype_fts", "date")
SIGNALS = ("evidence", "cosine", "bm25", "topical")


def topical_scores(store: Any, terms: Sequence[str], settings: dict[str, Any]) -> dict[str, float]:
    """path -> BM25 of the topical words, as search.sql's `topical` CTE
    scores them (SQLite stores only; {} otherwise)."""
    conn = getattr(store.backend, "conn", None)
    expr = fts_expression(tuple(terms))
    if conn is None or expr is None:
        return {}
    rows = conn.execute(
        "SELECT d.path, -bm25(documents_fts, ?, ?, ?) FROM documents_fts "
        "JOIN documents AS d ON d.id = documents_fts.rowid WHERE documents_fts MATCH ?",
        (settings["w_title"], settings["w_tags"], settings["w_body"], expr)).fetchall()
    return {path: float(score) for path, score in rows}


def evidence(explain: dict[str, Any], settings: dict[str, Any]) -> float:
    """The fused evidence without recency and without the vector rank 1's
    standout (search.sql's latest_evidence, RRF fusion)."""
    rrf = sum(v or 0.0 for v in explain["rrf"].values())
    if explain["ranks"]["vector"] == 1:
        rrf -= (settings["w_vec"] * settings["vec_standout"] * (explain["vector_gap"] or 0.0)
                / (settings["k_rrf"] + 1))
    return rrf * (explain["boost"] or 1.0)


def rows_for(hits: Sequence[Any], settings: dict[str, Any], topical: dict[str, float],
             rels: dict[str, int]) -> list[dict[str, Any]]:
    best_topical = max(topical.values(), default=0.0)
    rows = []
    for rank, h in enumerate(hits, 1):
        e = h.explain
        rows.append({
            "path": h.path, "rank": rank, "dated": h.updated, "doc_type": h.doc_type,
            "grade": rels.get(h.path, 0), "ranks": e["ranks"], "latest_rank": e["latest_rank"],
            "evidence": evidence(e, settings), "cosine": e["similarity"] or 0.0,
            "bm25": e["raw"]["bm25"] or 0.0,
            "topical": topical.get(h.path, 0.0) / best_topical if best_topical > 0 else None,
        })
    by_evidence = sorted(rows, key=lambda r: (-r["evidence"], r["path"]))
    for i, r in enumerate(by_evidence, 1):
        r["evidence_rank"] = i
    return rows


def reason(want: dict[str, Any], rows: Sequence[dict[str, Any]], latest: bool,
           settings: dict[str, Any]) -> tuple[str, str]:
    """(reason, detail) for a miss, in the order the statement decides."""
    if not latest:
        return "not latest", ""
    if not want["dated"] or want["doc_type"] != "journal":
        return "not dated", ""

    def at_least(r: dict[str, Any]) -> bool:
        return all((r[s] or 0.0) >= (want[s] or 0.0) for s in SIGNALS)

    newer = [r for r in rows if r["dated"] and r["dated"] > want["dated"] and at_least(r)]
    if newer:
        return "dominated", newer[0]["path"]
    best = max(r["evidence"] for r in rows)
    failed = []
    if want["evidence_rank"] > settings["latest_top"]:
        failed.append(("pool", f"evidence rank {want['evidence_rank']} > latest_top "
                               f"{settings['latest_top']}"))
    if want["evidence"] < settings["latest_ratio"] * best:
        failed.append(("ratio", f"evidence {want['evidence'] / best:.2f} of the best < "
                                f"{settings['latest_ratio']}"))
    if want["topical"] is not None and want["topical"] < settings["latest_topical"]:
        failed.append(("topical", f"topical share {want['topical']:.2f} < "
                                  f"{settings['latest_topical']}"))
    if failed:  # the first test that fails names the reason; the detail lists all
        return failed[0][0], "; ".join(d for _, d in failed)
    first = min((r for r in rows if r["latest_rank"] is not None),
                key=lambda r: r["latest_rank"], default=None)
    return "newer eligible", first["path"] if first else ""


def diagnose(ds: Dataset, stores: Stores, queries: Sequence[dict[str, Any]],
             overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per latest / superseded question: hit or miss, and why."""
    dates = {kb: {p: d for (k, p), d in ds.updated.items() if k == kb} for kb in ds.docs}
    out = []
    for q in queries:
        rels = ds.qrels.get(q["id"], {})
        if q["type"] not in mt.LATEST_TYPES or not rels:
            continue
        want_path = mt.newest_relevant(rels, dates[q["kb"]])
        if want_path is None:
            continue
        store = stores.stores[q["kb"]]
        settings = kq.resolve_settings(store.search_defaults, overrides)
        request = kq.analyse(q["text"], None, topic=q.get("topic"), now=q.get("now"),
                             settings=settings)
        hits = store.search(q["text"], limit=DEPTH, now=q.get("now"), topic=q.get("topic"),
                            explain=True, **overrides)
        rows = rows_for(hits, settings, topical_scores(store, request.topical_terms, settings),
                        rels)
        record: dict[str, Any] = {
            "id": q["id"], "type": q["type"], "split": q.get("split"), "text": q["text"],
            "latest": request.latest, "topical_terms": list(request.topical_terms),
            "want": want_path, "hit": bool(rows) and rows[0]["path"] == want_path}
        want = next((r for r in rows if r["path"] == want_path), None)
        if record["hit"]:
            record["reason"] = ""
        elif want is None:
            record["reason"], record["detail"] = "not found", f"not in the top {DEPTH}"
        else:
            record["reason"], record["detail"] = reason(want, rows, request.latest, settings)
            record["expected"] = want
            record["above"] = rows[:want["rank"] - 1][:12]
        out.append(record)
    return out


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1][:40]


def _row(r: dict[str, Any]) -> str:
    ranks = " ".join(f"{k[:4]}{v}" for k, v in r["ranks"].items() if v is not None)
    topical = "–" if r["topical"] is None else f"{r['topical']:.2f}"
    return (f"| {r['rank']} | {_short(r['path'])} | {r['dated'] or '–'} | {r['grade']} | "
            f"{r['evidence_rank']} ({r['evidence']:.4f}) | {ranks} | {r['cosine']:.3f} | "
            f"{topical} | {r['latest_rank'] or ''} |")


def markdown(records: Sequence[dict[str, Any]], title: str) -> str:
    lines = [f"# Latest misses: {title}", ""]
    for kind in mt.LATEST_TYPES:
        for split in sorted({r["split"] for r in records if r["type"] == kind}, key=str):
            part = [r for r in records if r["type"] == kind and r["split"] == split]
            lines.append(f"- {kind} ({split}): {sum(r['hit'] for r in part)}/{len(part)} "
                         "newest relevant at rank 1")
    counts: dict[str, int] = {}
    for r in records:
        if not r["hit"]:
            counts[r["reason"]] = counts.get(r["reason"], 0) + 1
    lines += ["", "Misses by reason: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
              ""]
    header = ("| rank | entry | date | grade | evidence rank | lists | cosine | topical | "
              "latest rank |\n|---|---|---|---|---|---|---|---|---|")
    for r in records:
        if r["hit"]:
            continue
        lines += [f"## {r['id']} ({r['type']}, {r['split']}): {r['text']}", "",
                  f"Read as latest: {r['latest']}; topical words: "
                  f"{', '.join(r['topical_terms']) or '–'}. Expected `{r['want']}`. "
                  f"Reason: **{r['reason']}** {r.get('detail', '')}", ""]
        if "expected" in r:
            lines += [header, *map(_row, r["above"]), "| … | | | | | | | | |",
                      _row(r["expected"]), ""]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", type=Path)
    p.add_argument("--split", choices=("dev", "test", "all"), default="all")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", type=Path, default=None, help="markdown report path")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    args = p.parse_args(argv)
    ds = load(args.dataset)
    embedder = caching_minilm(args.cache_dir, ds.name)
    with tempfile.TemporaryDirectory(prefix="latest-misses-") as tmp:
        stores = Stores(ds.docs, Path(tmp), embedder)
        try:
            records = diagnose(ds, stores, ds.split(args.split), parse_sets(args.sets))
        finally:
            save_cache(embedder)
            stores.close()
    text = markdown(records, f"{ds.name} ({args.split})")
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
