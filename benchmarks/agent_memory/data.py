"""Loading and checking an agent-memory dataset (see FORMAT.md)."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

Qrels = dict[str, dict[str, int]]  # query id -> path -> grade


def _open(root: Path, name: str) -> IO[str]:
    plain, packed = root / name, root / f"{name}.gz"
    if packed.exists():
        return gzip.open(packed, "rt", encoding="utf-8")
    if plain.exists():
        return open(plain, encoding="utf-8")
    raise FileNotFoundError(f"{root} has neither {name} nor {name}.gz")


def _jsonl(root: Path, name: str) -> list[dict[str, Any]]:
    with _open(root, name) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def parse_date(value: Any) -> dt.datetime | None:
    """An ISO date or datetime as a naive UTC datetime (dates at midnight)."""
    if value is None or value == "":
        return None
    text = str(value).strip().replace("Z", "+00:00")
    parsed = dt.datetime.fromisoformat(text)
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return parsed


@dataclass
class Dataset:
    name: str
    root: Path
    docs: dict[str, list[dict[str, Any]]]  # kb -> documents
    queries: list[dict[str, Any]]
    qrels: Qrels
    fingerprint: str = ""  # hash of the three files: names cache entries
    updated: dict[tuple[str, str], dt.datetime | None] = field(default_factory=dict)

    def split(self, which: str) -> list[dict[str, Any]]:
        if which == "all":
            return list(self.queries)
        return [q for q in self.queries if q.get("split") == which]

    def answerable(self, query: dict[str, Any]) -> bool:
        return bool(self.qrels.get(query["id"]))

    def newest_first(self, kb: str, now: dt.datetime | None) -> list[str]:
        """The kb's paths that exist at ``now``, newest ``updated`` first."""
        dated = [(d, p) for (k, p), d in self.updated.items()
                 if k == kb and d is not None and (now is None or d <= now)]
        return [p for _, p in sorted(dated, key=lambda x: (x[0], x[1]), reverse=True)]


def load(root: str | Path) -> Dataset:
    root = Path(root)
    docs: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, str]] = set()
    updated: dict[tuple[str, str], dt.datetime | None] = {}
    for row in _jsonl(root, "corpus.jsonl"):
        for key in ("kb", "path", "title", "body"):
            if not isinstance(row.get(key), str):
                raise ValueError(f"corpus row without a string {key!r}: {str(row)[:120]}")
        ident = (row["kb"], row["path"])
        if ident in seen:
            raise ValueError(f"duplicate document {ident}")
        seen.add(ident)
        row.setdefault("tags", [])
        docs.setdefault(row["kb"], []).append(row)
        updated[ident] = parse_date(row.get("updated") or row.get("created"))
    queries = _jsonl(root, "queries.jsonl")
    ids = Counter(q.get("id") for q in queries)
    dupes = [i for i, n in ids.items() if n > 1]
    if dupes:
        raise ValueError(f"duplicate query ids: {dupes[:5]}")
    by_id = {}
    for q in queries:
        for key in ("id", "kb", "text", "type"):
            if not isinstance(q.get(key), str) or not q[key]:
                raise ValueError(f"query without a string {key!r}: {str(q)[:120]}")
        if q["kb"] not in docs:
            raise ValueError(f"query {q['id']} names kb {q['kb']!r}, which has no documents")
        if q.get("now") is not None:
            parse_date(q["now"])  # an unparsable date fails here, not mid-run
        by_id[q["id"]] = q
    qrels: Qrels = {}
    with _open(root, "qrels.tsv") as fh:
        for n, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if not line.strip() or (n == 0 and not parts[-1].strip().isdigit()):
                continue  # blank, or the header line
            qid, path, grade = parts
            if qid not in by_id:
                raise ValueError(f"qrels line {n + 1}: unknown query {qid!r}")
            if (by_id[qid]["kb"], path) not in seen:
                raise ValueError(f"qrels line {n + 1}: {path!r} is not in kb "
                                 f"{by_id[qid]['kb']!r}")
            if int(grade) > 0:
                qrels.setdefault(qid, {})[path] = int(grade)
    for q in queries:
        if q["type"] == "absent" and q["id"] in qrels:
            raise ValueError(f"absent query {q['id']} has relevant documents")
    digest = hashlib.sha256()
    for name in ("corpus.jsonl", "queries.jsonl", "qrels.tsv"):
        for candidate in (root / name, root / f"{name}.gz"):
            if candidate.exists():
                digest.update(candidate.read_bytes())
    return Dataset(name=root.name, root=root, docs=docs, queries=queries, qrels=qrels,
                   fingerprint=digest.hexdigest()[:16], updated=updated)
