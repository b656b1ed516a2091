"""Shared fixtures: a deterministic fake embedder, a fake LLM, the sample
workspace and a CLI runner.

No unit test touches the network or loads a model: stores use FakeEmbedder
and HyPE calls go to a monkeypatched ``litellm.completion``. Store locations
come from ``tests/contract/conftest.py`` (any backend) or
``tests/sqlite/conftest.py`` (SQLite files).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kbstore import FakeEmbedder

# PostgreSQL fixtures (pg_url, pg_kb, pg_database): a real server, started
# only when a test asks for one.
pytest_plugins = ["tests.conftest_pg"]

# litellm fetches a model price list over the network at import time unless
# told to use its bundled copy: unit tests never touch the network.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch,
                  tmp_path_factory: pytest.TempPathFactory) -> None:
    _isolate(monkeypatch, tmp_path_factory)


def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for name in ("KBSTORE_DB", "KBSTORE_HYPE", "KBSTORE_HYPE_MODEL", "KBSTORE_SQLITE_BINDING",
                 "KBSTORE_BUSY_TIMEOUT_MS", "KBSTORE_NOMIC_MODEL_DIR", "KBSTORE_QUERY_CACHE",
                 "KBSTORE_EMBED_THREADS", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    # Derived model files and cached query vectors go to a per-session folder,
    # never the user's ~/.cache.
    monkeypatch.setenv("KBSTORE_CACHE_DIR", str(_session_cache(tmp_path_factory)))
    # No test reaches a real LLM: a HyPE call the test did not fake fails at
    # once as an outage would (the fake_llm fixture replaces this).
    import litellm

    monkeypatch.setattr(litellm, "completion", _no_network)


def _no_network(**kwargs: Any) -> Any:
    raise ConnectionError("the test suite has no network (use the fake_llm fixture)")


_CACHE: list[Path] = []


def _session_cache(factory: pytest.TempPathFactory) -> Path:
    if not _CACHE:
        _CACHE.append(factory.mktemp("kbstore-cache"))
    return _CACHE[0]


@pytest.fixture(scope="session")
def minilm_sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample knowledge base imported once with the real MiniLM
    embedder (a SQLite file, closed, no WAL left). Tests that only need such
    a store copy it (``copy_minilm_sample``) instead of embedding it again;
    the import itself is checked by tests/contract/test_integration_minilm.py."""
    from kbstore import KnowledgeStore

    db = tmp_path_factory.mktemp("minilm-sample") / "kb.sqlite"
    with pytest.MonkeyPatch.context() as patch:  # the same environment as a test's
        _isolate(patch, tmp_path_factory)
        with KnowledgeStore.open(db, "minilm", hype=False) as store:
            report = store.import_directory(Path(str(resources.files("kbstore.sample_kb"))))
            assert report.skipped == [] and report.embedded == report.added > 20
    assert not Path(f"{db}-wal").exists()
    return db


@pytest.fixture
def copy_minilm_sample(minilm_sample_db: Path) -> Callable[[Path], Path]:
    """``copy_minilm_sample(dest)``: a private copy of ``minilm_sample_db``."""

    def copy(dest: Path) -> Path:
        shutil.copyfile(minilm_sample_db, dest)
        return dest

    return copy


@pytest.fixture
def embedder() -> FakeEmbedder:
    return FakeEmbedder(dim=64)


@pytest.fixture
def sample_workspace(tmp_path: Path) -> Path:
    """A writable copy of the bundled sample knowledge base."""
    src = Path(str(resources.files("kbstore.sample_kb")))
    dst = tmp_path / "workspace"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    return dst


class FakeLLM:
    """Stands in for litellm.completion; counts calls, answers from a function."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.fail_with: BaseException | None = None
        self.answer = lambda prompt: (
            "How do I use this?\nWhat is this about?\nWhen should I read this?")

    def __call__(self, **kwargs):  # type: ignore[no-untyped-def]
        self.calls.append(kwargs)
        if self.fail_with is not None:
            raise self.fail_with
        prompt = kwargs["messages"][0]["content"]
        message = SimpleNamespace(content=self.answer(prompt))
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


@pytest.fixture
def fake_llm(monkeypatch: pytest.MonkeyPatch) -> FakeLLM:
    import litellm

    llm = FakeLLM()
    monkeypatch.setattr(litellm, "completion", llm)
    return llm



@pytest.fixture
def sample_db_with_questions(tmp_path: Path, sample_workspace: Path, fake_llm: FakeLLM) -> Path:
    """The sample KB imported with a 64-d fake embedder and three HyPE
    questions per document from the fake LLM, in a closed file."""
    from kbstore import KnowledgeStore

    fake_llm.answer = lambda prompt: ("What does this note say?\nWhich project is it about?\n"
                                      f"Why does it matter? {len(prompt) % 7}")
    db = tmp_path / "kb.sqlite"
    with KnowledgeStore.open(db, FakeEmbedder(64), hype=True) as store:
        store.import_directory(sample_workspace)
    return db

@pytest.fixture
def run_cli() -> Callable[..., Any]:
    """``run_cli(*args)``: the kbstore CLI through click's CliRunner (stdout and
    stderr captured apart; exceptions other than click's propagate)."""
    from click.testing import CliRunner

    from kbstore.cli import _register, cli

    _register()
    runner = CliRunner()

    def invoke(*args: Any, input: str | None = None) -> Any:
        return runner.invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)

    return invoke
