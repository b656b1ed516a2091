"""picobot's KnowledgeBase keeps its index in one SQLite file,
``data_dir/kb.sqlite``, created on first use."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbstore import FakeEmbedder, InvalidDocumentError
from kbstore import picobot as picobot_module
from kbstore.picobot import KnowledgeBase

_RESULT = re.compile(r"^\d+\. .*\(([^()]+)\)$")


def paths(text: str) -> list[str]:
    return [m.group(1) for line in text.splitlines() if (m := _RESULT.match(line))]


def test_the_index_is_data_dir_kb_sqlite_created_on_first_use(tmp_path: Path) -> None:
    kb = KnowledgeBase(base_path=tmp_path / "kb", data_dir=tmp_path / "d",
                       embedder=FakeEmbedder(64), hype=False)
    kb.ensure_structure()
    assert not (tmp_path / "d").exists()  # nothing opened yet
    assert kb.db_path == tmp_path / "d" / "kb.sqlite"
    rel = kb.store("user", "Coffee", "Prefers flat white.", tags=["coffee"])
    assert kb.db_path.is_file()
    assert stat.S_IMODE(kb.db_path.stat().st_mode) == 0o600  # private memory
    assert paths(kb.search("coffee"))[0] == rel
    kb.close()


def test_picobots_existing_test_pattern_works_offline(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """picobot's tests build ``KnowledgeBase(workspace=tmp_path)``; one autouse
    fixture redirecting the defaults keeps them offline and out of ~/.picobot."""
    monkeypatch.setattr(picobot_module, "DEFAULT_DATA_DIR", tmp_path / "data")
    monkeypatch.setattr(picobot_module, "DEFAULT_EMBEDDER", "fake")
    kb = KnowledgeBase(workspace=tmp_path, hype=False)
    kb.ensure_structure()
    rel = kb.store("projects", "Home server", "Runs picobot under systemd.", tags=["infra"])
    assert paths(kb.search("systemd"))[0] == rel
    assert kb.db_path == tmp_path / "data" / "kb.sqlite" and kb.db_path.is_file()
    assert kb.knowledge_store.embedder.fingerprint()["name"] == "fake"
    kb.close()


SAME_SLUG = ["C tips", "C++ tips", "C# tips", "C! tips", "(C) tips", "C. tips", "C: tips",
             "C? tips"]


def test_agents_storing_titles_with_one_file_name_at_once_keep_every_entry(
        tmp_path: Path) -> None:
    """Eight processes' worth of KnowledgeBase objects store eight titles that
    share the slug c-tips at the same moment: every entry keeps its own file
    and index row (a name is only ever taken by creating the file)."""
    import threading

    ws, db = tmp_path / "ws", tmp_path / "kb.sqlite"
    KnowledgeBase(workspace=ws, db=db, embedder=FakeEmbedder(64), hype=False).ensure_structure()
    start, errors, rels = threading.Barrier(len(SAME_SLUG)), [], {}

    def store(title: str) -> None:
        with KnowledgeBase(workspace=ws, db=db, embedder=FakeEmbedder(64), hype=False) as kb:
            start.wait()
            try:
                rels[title] = kb.store("projects", title, f"what {title} says")
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(f"{title}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=store, args=(t,)) for t in SAME_SLUG]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(set(rels.values())) == len(SAME_SLUG)
    with KnowledgeBase(workspace=ws, db=db, embedder=FakeEmbedder(64), hype=False) as kb:
        kb.reindex()
        for title, rel in rels.items():
            doc = kb.knowledge_store.get(rel)
            assert doc.title == title and doc.body.endswith(f"what {title} says")
        assert len(kb.knowledge_store) == len(SAME_SLUG)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(SAME_SLUG + ["c tips", "C  TIPS", "D tips", "c-tips 2"]),
                min_size=1, max_size=12))
def test_any_sequence_of_colliding_titles_keeps_one_file_per_title(titles: list[str]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        with KnowledgeBase(workspace=ws, db=Path(tmp) / "kb.sqlite", embedder=FakeEmbedder(16),
                           hype=False) as kb:
            latest: dict[str, tuple[str, str]] = {}
            for n, title in enumerate(titles):
                rel = kb.store("projects", title, f"version {n} of {title}")
                latest[" ".join(title.casefold().split())] = (rel, f"version {n} of {title}")
            assert len({rel for rel, _ in latest.values()}) == len(latest)
            for rel, body in latest.values():
                assert kb.knowledge_store.get(rel).body.endswith(body)
            files = list((ws / "knowledge" / "projects").glob("*.md"))
            assert len(files) == len(latest) and len(kb.knowledge_store) == len(latest)


def test_composed_and_decomposed_titles_name_one_file(tmp_path: Path) -> None:
    """'Café' typed composed (U+00E9) or decomposed (e + U+0301) is one title:
    storing both must update one file, not create the twins café.md / cafe.md."""
    kb = KnowledgeBase(base_path=tmp_path / "kb", data_dir=tmp_path / "d",
                       embedder=FakeEmbedder(64), hype=False)
    first = kb.store("user", "Caf\u00e9", "Likes espresso.")
    second = kb.store("user", "Cafe\u0301", "Likes ristretto.")
    assert first == second
    assert len(list((tmp_path / "kb").rglob("*.md"))) == 1
    kb.close()


def test_a_note_whose_file_name_is_decomposed_is_updated_not_twinned(tmp_path: Path) -> None:
    """A note made on macOS or synced from there has a decomposed file name
    (cafe + U+0301.md, title 'Cafe' + U+0301): storing the title 'Café'
    again must update that file, not write a composed café.md beside it."""
    folder = tmp_path / "kb" / "user"
    folder.mkdir(parents=True)
    (folder / "cafe\u0301.md").write_text("---\ntitle: Cafe\u0301\n---\nLikes espresso.\n",
                                          encoding="utf-8")
    kb = KnowledgeBase(base_path=tmp_path / "kb", data_dir=tmp_path / "d",
                       embedder=FakeEmbedder(64), hype=False)
    rel = kb.store("user", "Caf\u00e9", "Likes ristretto.")
    assert rel == "user/cafe\u0301.md"
    assert os.listdir(folder) == ["cafe\u0301.md"]
    assert "ristretto" in (folder / "cafe\u0301.md").read_text(encoding="utf-8")
    assert kb.knowledge_store.paths() == ["user/cafe\u0301.md"]
    kb.close()


def test_a_lone_surrogate_in_the_title_is_named_as_the_title(tmp_path: Path) -> None:
    """The body carries the title as its heading and was checked first, so
    the error blamed the body; nothing is written either way."""
    kb = KnowledgeBase(base_path=tmp_path / "kb", data_dir=tmp_path / "d",
                       embedder=FakeEmbedder(64), hype=False)
    with pytest.raises(InvalidDocumentError, match="^title is not valid UTF-8"):
        kb.store("user", "caf\udce9", "plain body")
    assert list((tmp_path / "kb").rglob("*.md")) == []
    kb.close()
