"""Integration: a query's ids and vector from the plain-Python tokenizer
(kbstore.embed_wordpiece) are the shipped tokenizer's, so a first query can
skip the ``tokenizers`` package without changing a vector or a hit."""

from __future__ import annotations

import os
import random
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kbstore import KnowledgeStore, embed_cache
from kbstore.embed_minilm import MAX_TOKENS, MiniLMEmbedder, model_files
from kbstore.embed_wordpiece import CHECKED_UP_TO, QueryTokenizer, load

pytestmark = pytest.mark.integration
tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def shipped() -> object:
    _, tokenizer_file = model_files()
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_file))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_TOKENS)
    return tok


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> QueryTokenizer:
    _, tokenizer_file = model_files()
    cached = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    built = load(tokenizer_file, cached, MAX_TOKENS)
    assert built is not None and cached.is_file()
    again = load(tokenizer_file, cached, MAX_TOKENS)  # read back from the cache file
    assert again is not None and again.vocab == built.vocab and again.special == built.special
    return again


def _same(plain: QueryTokenizer, shipped: object, text: str) -> bool:
    ids = plain.encode(text)
    return ids is not None and ids == shipped.encode(text).ids  # type: ignore[attr-defined]


def test_every_checked_character_tokenises_like_the_shipped_tokenizer(
        plain: QueryTokenizer, shipped: object) -> None:
    wrong = [hex(cp) for cp in range(CHECKED_UP_TO + 1)
             for text in (chr(cp), f"ab{chr(cp)}cd", f"x {chr(cp)} Y", chr(cp) * 3)
             if plain.encode(text) is not None and not _same(plain, shipped, text)]
    assert wrong == []
    # accents, punctuation, controls and whitespace did go through the plain path
    for text in ("Café Ökonomie", "a\x00b\x0bc\u00a0d\re", "¿qué? ¡sí!", "x_y-z"):
        assert _same(plain, shipped, text), text


def test_random_and_real_texts(plain: QueryTokenizer, shipped: object) -> None:
    rng = random.Random(14)
    alphabet = [chr(i) for i in range(CHECKED_UP_TO + 1)] + list("abcdefghij klmnop") * 20
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        assert _same(plain, shipped, text), repr(text)
    root = Path(str(resources.files("kbstore.sample_kb")))
    covered = 0
    for path in sorted(root.rglob("*.md")):
        text = path.read_text()
        ids = plain.encode(text)
        if ids is not None:
            covered += 1
            assert ids == shipped.encode(text).ids, path.name  # type: ignore[attr-defined]
    assert covered >= 30
    # long words become [UNK]; long texts are truncated to the model's window
    assert _same(plain, shipped, "a" * 101 + " b " + "c" * 100)
    long = " ".join(f"word{i}" for i in range(400))
    assert len(plain.encode(long) or []) == MAX_TOKENS and _same(plain, shipped, long)


def test_texts_outside_the_checked_range_are_left_to_the_shipped_tokenizer(
        plain: QueryTokenizer) -> None:
    for text in ("日本語の検索", "naïve résumé → ok", "emoji 🙂", "what is [MASK] here",
                 "[CLS] start"):
        assert plain.encode(text) is None, text
    assert plain.encode("a [bracket] is fine") is not None


def test_query_vectors_and_top_hits_are_unchanged(tmp_path: Path,
                                                  copy_minilm_sample: Any) -> None:
    """Both paths, same session: the same vector bit for bit; and a search in
    a store gives the hits the shipped tokenizer's vector gives."""
    queries = ["how do I recover when a release breaks production?", "Sourdough STARTER!",
               "naïve résumé → ok", "how does Lena like her answers?"]
    emb = MiniLMEmbedder(query_cache=False)
    emb._load()
    for query in queries:
        via_query_path = np.frombuffer(emb._embed_query(query), np.float32)
        via_documents = emb.embed_documents([query])[0]  # the tokenizers package
        assert np.abs(via_query_path - via_documents).max() < 1e-5
    db = copy_minilm_sample(tmp_path / "kb.sqlite")  # the sample knowledge base, MiniLM vectors
    with KnowledgeStore.open(db, emb, hype=False) as store:
        for query in queries:
            hits = store.search(query)
            expected = store.search(query, query_vector=emb.embed_documents([query])[0])
            assert hits and [h.path for h in hits] == [h.path for h in expected]


def test_the_c_library_session_gives_the_modules_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh embedder answers a query through onnxruntime's C library
    (embed_ort_capi); the Python module's session gives the same vector."""
    from kbstore import embed_minilm

    queries = ["how do I recover when a release breaks production?", "x",
               " ".join(f"word{i}" for i in range(400)), "naïve résumé → ok"]
    fresh = MiniLMEmbedder(query_cache=False)
    via_c = [np.frombuffer(fresh.query_vector_blob(q), np.float32) for q in queries[:3]]
    assert fresh._capi and fresh._session is None
    reference = MiniLMEmbedder(query_cache=False)
    reference._load()
    for vector, query in zip(via_c, queries, strict=False):
        expected = reference.embed_documents([query])[0]
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-6
        assert float(np.abs(vector - expected).max()) < 1e-6, query
    # text the plain tokenizer leaves alone loads the tokenizers package and
    # the module's session; a missing C library falls back to the module
    assert np.abs(np.frombuffer(fresh.query_vector_blob(queries[3]), np.float32)
                  - reference.embed_documents([queries[3]])[0]).max() < 1e-6
    assert fresh._session is not None
    monkeypatch.setattr(embed_minilm, "_capi_query_session", lambda threads: False)
    fallback = MiniLMEmbedder(query_cache=False)
    assert np.array_equal(np.frombuffer(fallback.query_vector_blob(queries[0]), np.float32),
                          reference.embed_documents([queries[0]])[0])
    assert fallback._capi is False and fallback._session is not None


def _search_in_a_new_process(db: Path, query: str, query_cache: str,
                             unused: list[str]) -> tuple[str, list[str]]:
    """`kbstore search` in a fresh interpreter: its first hit line and which
    of ``unused`` it imported."""
    import subprocess
    import sys

    script = ("import sys\n"
              "sys.argv = ['kbstore', 'search', '--db', sys.argv[1], sys.argv[2]]\n"
              "from kbstore.cli import main\n"
              "try:\n    main()\nexcept SystemExit:\n    pass\n"
              f"print([m for m in {unused!r} if m in sys.modules])\n")
    proc = subprocess.run([sys.executable, "-c", script, str(db), query], capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "KBSTORE_QUERY_CACHE": query_cache})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    return lines[0], eval(lines[-1])  # noqa: S307 - our own repr of a list of names


def test_a_fresh_search_process_imports_only_what_it_runs(tmp_path: Path,
                                                          copy_minilm_sample: Any) -> None:
    """`kbstore search` in a new process: on the model path (query-vector
    cache off) neither numpy, the onnxruntime module nor the tokenizers
    package, nor any module of another command; a query text seen before
    loads no model library at all."""
    db = copy_minilm_sample(tmp_path / "kb.sqlite")  # the sample knowledge base, MiniLM vectors
    unused = ["numpy", "onnxruntime", "tokenizers", "litellm", "sqlite_utils", "yaml",
              "frontmatter", "tqdm", "mcp", "watchfiles", "kbstore.hype_jobs", "kbstore.writer",
              "kbstore.ingest", "kbstore.documents", "kbstore.frontmatter_fields",
              "kbstore.exchange", "kbstore.watch", "kbstore.mcp_server",
              "kbstore.cli.admin", "kbstore.cli.exchange", "kbstore.cli.mcp_cmd",
              "kbstore.backends.sqlite.doctor"]
    first, imported = _search_in_a_new_process(db, "sourdough feeding schedule", "0", unused)
    assert "sourdough-starter-care.md" in first and imported == []
    seen, imported = _search_in_a_new_process(db, "sourdough feeding schedule?", "1", unused)
    assert "sourdough-starter-care.md" in seen and imported == []
    again, imported = _search_in_a_new_process(db, "sourdough feeding schedule?", "1",
                                               [*unused, "kbstore.embed_ort_capi", "ctypes"])
    assert again == seen and imported == []
    assert os.environ[embed_cache.CACHE_DIR_ENV]  # the test session's cache folder


def test_a_long_lived_process_folds_after_c_library_queries() -> None:
    """After FOLD_AFTER_QUERIES queries on the C library's session the folded
    module session takes over; queries and documents keep working on it."""
    from kbstore.embed_minilm import FOLD_AFTER_QUERIES

    emb = MiniLMEmbedder(query_cache=False)
    lean = [np.frombuffer(emb.query_vector_blob(f"query number {n}"), np.float32)
            for n in range(FOLD_AFTER_QUERIES)]
    assert emb._capi and emb.folded.wait(300), "the folded session was not built"
    after = [np.frombuffer(emb.query_vector_blob(f"query number {n}"), np.float32)
             for n in range(FOLD_AFTER_QUERIES)]
    assert max(float(np.abs(a - b).max()) for a, b in zip(lean, after, strict=True)) < 1e-5
    assert np.frombuffer(emb.query_vector_blob("naïve → ok"), np.float32).shape == (384,)
    docs = emb.embed_documents([f"query number {n}" for n in range(FOLD_AFTER_QUERIES)])
    assert float(np.abs(docs - np.stack(lean)).max()) < 1e-5
