"""MiniLM start-up and memory machinery without the model: token-budgeted
batches, the ONNX graph edit (on a tiny hand-built model run by
onnxruntime), the cached model file and the query-vector cache."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from kbstore import embed_cache, embed_minilm
from kbstore.embed_cache import QueryVectorCache
from kbstore.embed_minilm import MiniLMEmbedder, edited_model, token_batches
from kbstore.embed_onnx_graph import (
    FLOAT,
    INT8,
    _encode_node,
    _fields,
    _int_field,
    _len_field,
    gather_before_dequantize,
)


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(embed_cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(embed_cache.QUERY_CACHE_ENV, raising=False)


# -- token-budgeted batches ---------------------------------------------------

def test_token_batches_cover_every_row_once_within_the_budget() -> None:
    rng = np.random.default_rng(3)
    lengths = [int(n) for n in rng.integers(1, 257, size=200)]
    batches = token_batches(lengths, budget=1024)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(200))
    assert [lengths[i] for i in flat] == sorted(lengths)  # shortest first
    for batch in batches:
        assert len(batch) * max(lengths[i] for i in batch) <= 1024
    # greedy: no batch could have taken the next row
    for batch, following in zip(batches, batches[1:], strict=False):
        assert (len(batch) + 1) * lengths[following[0]] > 1024


def test_token_batches_row_over_budget_gets_its_own_batch() -> None:
    assert token_batches([300, 5, 6], budget=256) == [[1, 2], [0]]
    assert token_batches([], budget=256) == []


# -- the graph edit on a tiny model ------------------------------------------

def _tensor(name: str, data_type: int, dims: list[int], raw: bytes) -> bytes:
    return (b"".join(_int_field(1, d) for d in dims) + _int_field(2, data_type)
            + _len_field(8, name.encode()) + _len_field(9, raw))


def _value_info(name: str, elem_type: int, dims: list[int | str]) -> bytes:
    shape = b"".join(_len_field(1, _int_field(1, d) if isinstance(d, int)
                                else _len_field(2, d.encode())) for d in dims)
    tensor_type = _int_field(1, elem_type) + _len_field(2, shape)
    return _len_field(1, name.encode()) + _len_field(2, _len_field(1, tensor_type))


def tiny_model(weights: np.ndarray, scale: np.ndarray) -> bytes:
    """out = Gather(Mul(Cast(weights_q), scale), ids): the shipped model's
    embedding lookup, in miniature."""
    rows, width = weights.shape
    graph = (_encode_node("Cast", ["w_q"], ["w_f"], "cast", {"to": FLOAT})
             + _encode_node("Mul", ["w_f", "w_scale"], ["w"], "mul")
             + _encode_node("Gather", ["w", "ids"], ["out"], "gather", {"axis": 0})
             + _len_field(2, b"tiny")
             + _len_field(5, _tensor("w_q", INT8, [rows, width], weights.astype(np.int8)
                                     .tobytes()))
             + _len_field(5, _tensor("w_scale", FLOAT, list(scale.shape),
                                     scale.astype(np.float32).tobytes()))
             + _len_field(11, _value_info("ids", 7, ["batch", "seq"]))
             + _len_field(12, _value_info("out", FLOAT, ["batch", "seq", width])))
    opset = _len_field(1, b"") + _int_field(2, 17)
    return _int_field(1, 8) + _len_field(8, opset) + _len_field(7, graph)


def _run(model: bytes, ids: np.ndarray) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model, sess_options=options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"ids": ids})[0]


def _op_types(model: bytes) -> list[str]:
    (graph,) = [model[vs:ve] for n, _, _, vs, ve in _fields(model) if n == 7]
    ops = []
    for number, _, _, vs, ve in _fields(graph):
        if number == 1:
            node = graph[vs:ve]
            ops += [node[a:b].decode() for n, _, _, a, b in _fields(node) if n == 4]
    return ops


def test_gather_before_dequantize_keeps_every_value() -> None:
    rng = np.random.default_rng(0)
    weights = rng.integers(-128, 128, size=(50, 8))
    scale = rng.uniform(0.001, 0.1, size=(50, 1)).astype(np.float32)
    model = tiny_model(weights, scale)
    edited, count = gather_before_dequantize(model)
    assert count == 1
    assert _op_types(model) == ["Cast", "Mul", "Gather"]
    assert _op_types(edited) == ["Gather", "Cast", "Gather", "Mul"]  # rows first
    ids = rng.integers(0, 50, size=(3, 7)).astype(np.int64)
    expected = (weights.astype(np.float32) * scale)[ids]
    assert np.array_equal(_run(model, ids), expected)
    assert np.array_equal(_run(edited, ids), expected)  # bit for bit


def test_gather_before_dequantize_leaves_a_per_column_scale_alone() -> None:
    rng = np.random.default_rng(1)
    model = tiny_model(rng.integers(-128, 128, size=(20, 4)),
                       rng.uniform(0.01, 0.1, size=(1, 4)).astype(np.float32))
    edited, count = gather_before_dequantize(model)
    assert count == 0 and edited == model


def test_gather_before_dequantize_ignores_bytes_without_the_pattern() -> None:
    model = _int_field(1, 8) + _len_field(7, _encode_node("Relu", ["x"], ["y"], "relu"))
    assert gather_before_dequantize(model) == (model, 0)


# -- the cached model file ----------------------------------------------------

def test_edited_model_is_written_once_to_the_cache(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    source = tmp_path / "model.onnx"
    source.write_bytes(tiny_model(rng.integers(-128, 128, size=(10, 4)),
                                  rng.uniform(0.01, 0.1, size=(10, 1)).astype(np.float32)))
    first = edited_model(source, tmp_path / "c")
    assert isinstance(first, Path) and first.parent == tmp_path / "c"
    assert _op_types(first.read_bytes())[0] == "Gather"
    calls = []
    monkeypatch.setattr("kbstore.embed_onnx_graph.gather_before_dequantize",
                        lambda b: calls.append(1) or (b, 0))
    assert edited_model(source, tmp_path / "c") == first and calls == []


def test_edited_model_falls_back_to_bytes_when_the_cache_is_unwritable(
        tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    source = tmp_path / "model.onnx"
    source.write_bytes(tiny_model(rng.integers(-128, 128, size=(10, 4)),
                                  rng.uniform(0.01, 0.1, size=(10, 1)).astype(np.float32)))
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    result = edited_model(source, blocker)
    assert isinstance(result, bytes) and _op_types(result)[0] == "Gather"


# -- the query-vector cache ---------------------------------------------------

def test_query_cache_round_trip_per_model_and_no_clear_text(tmp_path: Path) -> None:
    cache = QueryVectorCache("model-a", tmp_path)
    assert cache.get("how do I deploy?") is None
    blob = np.arange(4, dtype=np.float32).tobytes()
    cache.put("how do I deploy?", blob)
    assert cache.get("how do I deploy?") == blob
    assert QueryVectorCache("model-b", tmp_path).get("how do I deploy?") is None
    assert cache.get("how do I deploy") is None
    cache.close()
    raw = (tmp_path / embed_cache.QUERY_CACHE_FILE).read_bytes()
    assert b"deploy" not in raw  # keys are hashes


def test_query_cache_prunes_oldest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_cache, "MAX_QUERY_VECTORS", 5)
    monkeypatch.setattr(embed_cache, "PRUNE_TO", 3)
    cache = QueryVectorCache("m", tmp_path)
    for n in range(6):
        cache.put(f"q{n}", bytes([n]) * 4)
    kept = [n for n in range(6) if cache.get(f"q{n}") is not None]
    assert kept == [3, 4, 5]


def test_query_cache_failures_cost_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cache = QueryVectorCache("m", blocker)  # directory cannot be created
    cache.put("q", b"\0" * 4)
    assert cache.get("q") is None
    QueryVectorCache("m", tmp_path).put("kept", b"\1" * 4)
    holder = sqlite3.connect(tmp_path / embed_cache.QUERY_CACHE_FILE, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process is writing
    try:
        cache = QueryVectorCache("m", tmp_path)
        cache.put("q", b"\0" * 4)  # locked: skipped after the short timeout, no error
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # a locked cache is not mistaken for a damaged one
    assert QueryVectorCache("m", tmp_path).get("kept") == b"\1" * 4


def test_a_damaged_query_cache_is_rebuilt(tmp_path: Path) -> None:
    (tmp_path / embed_cache.QUERY_CACHE_FILE).write_bytes(b"not a database" * 100)
    cache = QueryVectorCache("m", tmp_path)
    assert cache.get("q") is None
    cache.put("q", b"\0" * 4)
    assert cache.get("q") == b"\0" * 4


class _CountingMiniLM(MiniLMEmbedder):
    """The real query path with the model call replaced (no weights)."""

    def __init__(self, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(**kwargs)
        self.model_calls: list[list[str]] = []

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        self.model_calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), np.float32)
        out[:, len(self.model_calls) % self.dim] = 1.0
        return out

    def _embed_query(self, text):  # type: ignore[no-untyped-def]
        # one query's model call (the C library's session in the real class)
        return self.embed_documents([text])[0].tobytes()


def test_repeated_query_text_skips_the_model() -> None:
    emb = _CountingMiniLM()
    first = emb.embed_queries(["sourdough feeding schedule"])
    again = _CountingMiniLM()  # a new process: only the cache file is shared
    second = again.embed_queries(["sourdough feeding schedule"])
    assert emb.model_calls == [["sourdough feeding schedule"]] and again.model_calls == []
    assert np.array_equal(first, second) and second.shape == (1, 384)
    assert again.cache_hits == 1
    assert again.query_vector_blob("sourdough feeding schedule") == first[0].tobytes()
    # lists (HyPE questions) go to the model and are not cached
    again.embed_queries(["q one", "q two"])
    assert again.model_calls == [["q one", "q two"]]
    third = _CountingMiniLM()
    third.embed_queries(["q one"])
    assert third.model_calls == [["q one"]]


def test_query_cache_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(embed_cache.QUERY_CACHE_ENV, "0")
    for _ in range(2):
        emb = _CountingMiniLM()
        emb.embed_queries(["same text"])
        assert emb.model_calls == [["same text"]]
    emb = _CountingMiniLM(query_cache=False)
    emb.embed_queries(["same text"])
    assert emb.model_calls == [["same text"]] and emb.cache_hits == 0


def test_query_cache_key_follows_the_installed_model(monkeypatch: pytest.MonkeyPatch) -> None:
    emb = _CountingMiniLM()
    emb.embed_queries(["text"])
    monkeypatch.setattr(embed_minilm, "_model_stamp", lambda model: "another-build")
    other = _CountingMiniLM()
    other.embed_queries(["text"])
    assert other.model_calls == [["text"]]


def test_session_options_keep_int8_weights() -> None:
    ort = pytest.importorskip("onnxruntime")
    options = embed_minilm.session_options(ort, threads=1)
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert options.intra_op_num_threads == 1



def test_query_cache_is_shared_by_threads(tmp_path: Path) -> None:
    import threading

    cache = QueryVectorCache("m", tmp_path)
    cache.put("made in the main thread", b"\1" * 8)
    seen: list[bytes | None] = []

    def worker(n: int) -> None:
        cache.put(f"t{n}", bytes([n]) * 8)
        seen.append(cache.get("made in the main thread"))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [b"\1" * 8] * 4
    assert [cache.get(f"t{n}") for n in range(4)] == [bytes([n]) * 8 for n in range(4)]


def test_a_process_that_keeps_searching_gets_the_folded_session(
        monkeypatch: pytest.MonkeyPatch) -> None:
    emb = _CountingMiniLM(query_cache=False)
    folds: list[int] = []
    monkeypatch.setattr(emb, "_fold", lambda: folds.append(emb.model_queries))
    for n in range(embed_minilm.FOLD_AFTER_QUERIES - 1):
        emb.embed_queries([f"query {n}"])
    emb.embed_queries(["document one", "document two"])  # bulk calls do not count
    assert folds == [] and emb.model_queries == embed_minilm.FOLD_AFTER_QUERIES - 1
    for n in range(3):
        emb.embed_queries([f"more {n}"])
    for _ in range(100):  # the fold runs on its own thread
        if folds:
            break
        time.sleep(0.01)
    assert folds == [embed_minilm.FOLD_AFTER_QUERIES]  # once, at the threshold


def test_bulk_threads_follow_the_setting_then_the_machines_load(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kbstore.embed_minilm import bulk_threads

    monkeypatch.setattr(embed_minilm.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(embed_minilm.os, "getloadavg", lambda: (2.5, 1.0, 1.0))
    assert bulk_threads(None) == 1  # busy: one thread
    assert bulk_threads(3) == 3     # a setting always wins
    monkeypatch.setattr(embed_minilm.os, "getloadavg", lambda: (0.4, 1.0, 1.0))
    assert bulk_threads(None) is None  # idle: onnxruntime's default (one per core)

    def no_load_average() -> tuple[float, float, float]:
        raise OSError("unavailable")

    monkeypatch.setattr(embed_minilm.os, "getloadavg", no_load_average)
    assert bulk_threads(None) is None
