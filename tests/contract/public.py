"""What a store holds, read through the public API only (exports, get, list):
helpers shared by the contract tests."""

from __future__ import annotations

import io
import json
import unicodedata
from typing import Any

from kbstore import KnowledgeStore
from kbstore.exchange import export_jsonl


def records(store: KnowledgeStore, *, vectors: bool = False) -> list[dict[str, Any]]:
    """Every document as ``kbstore export --format jsonl`` writes it."""
    out = io.StringIO()
    export_jsonl(store, out, include_vectors=vectors)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def questions(store: KnowledgeStore) -> dict[str, list[str]]:
    """path -> the document's current HyPE questions (documents with none left out)."""
    return {r["path"]: r["questions"] for r in records(store) if r["questions"]}


def questions_of(store: KnowledgeStore, path: str) -> list[str]:
    return questions(store).get(path, [])


def question_model(store: KnowledgeStore, path: str) -> str | None:
    """The LLM recorded for a document's current questions."""
    return next((r["questions_model"] for r in records(store) if r["path"] == path), None)


def doc_vectors(store: KnowledgeStore) -> dict[str, list[float]]:
    """path -> its current document vector."""
    return {r["path"]: r["vectors"]["doc"] for r in records(store, vectors=True)
            if "doc" in r["vectors"]}


def chunk_vectors(store: KnowledgeStore) -> dict[str, list[list[float]]]:
    """path -> its current chunk vectors (long documents only), in chunk order."""
    return {r["path"]: r["vectors"]["chunks"] for r in records(store, vectors=True)
            if "chunks" in r["vectors"]}


def documents(store: KnowledgeStore) -> dict[str, Any]:
    return {p: store.get(p) for p in store.paths()}


def snapshot(store: KnowledgeStore) -> list[tuple[Any, ...]]:
    """Every stored field of every document, in path order."""
    return [(d.path, d.title, d.body, d.tags, d.topic, d.doc_type, d.created, d.updated,
             d.extra, d.content_hash()) for d in store.documents(recent=False)]


def blank_query(query: str) -> bool:
    """The empty-query rule as a user sees it: nothing but spaces, punctuation
    and control/format characters ("", "???", "-- --", "\x00")."""
    return not any(unicodedata.category(ch)[0] in "LNS" or unicodedata.category(ch) in (
        "Co", "Cs", "Cn") for ch in query if not ch.isspace())
