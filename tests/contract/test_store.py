"""KnowledgeStore's lifecycle and read API: open/close, the context manager,
len/paths/list/get, and what status() reports."""

from __future__ import annotations

import pytest

from kbstore import (
    DatabaseNotFoundError,
    FakeEmbedder,
    KBStoreError,
    KnowledgeStore,
    ReadOnlyError,
)


def test_closing_twice_is_harmless(location: str, embedder: FakeEmbedder) -> None:
    store = KnowledgeStore.open(location, embedder, hype=False)
    store.upsert("projects/a.md", title="A", body="a")
    store.close()
    store.close()
    with KnowledgeStore.open(location, read_only=True) as reader:
        reader.close()
    with KnowledgeStore.open(location, hype=False) as again:
        assert again.paths() == ["projects/a.md"]


def test_create_false_and_read_only_refuse_a_missing_store(backend) -> None:  # type: ignore[no-untyped-def]
    missing = backend.missing()
    for kwargs in ({"create": False}, {"read_only": True}):
        with pytest.raises(DatabaseNotFoundError, match="no database at"):
            KnowledgeStore.open(missing, FakeEmbedder(64), **kwargs)
        assert not backend.exists(missing)
    assert issubclass(DatabaseNotFoundError, KBStoreError)


def test_reading_api(store: KnowledgeStore) -> None:
    assert len(store) == 0 and store.paths() == [] and store.get("projects/a.md") is None
    store.upsert("projects/b.md", title="B", body="b", updated="2026-01-02")
    store.upsert("projects/a.md", title="A", body="a", tags="x, y", updated="2026-03-04")
    store.upsert("domains/c.md", title="C", body="c", updated="2026-02-03")
    assert len(store) == 3
    assert store.paths() == ["domains/c.md", "projects/a.md", "projects/b.md"]
    assert [d.path for d in store.documents()] == ["projects/a.md", "domains/c.md", "projects/b.md"]
    assert [d.path for d in store.documents(recent=False)] == store.paths()
    assert [d.path for d in store.documents(topic="projects", limit=1)] == ["projects/a.md"]
    doc = store.get("projects/a.md")
    assert doc is not None and (doc.title, doc.body, doc.tags, doc.topic, doc.doc_type,
                                doc.updated) == ("A", "a", ["x", "y"], "projects", "entry",
                                                 "2026-03-04")


def test_status_reports_counts_and_the_embedder(store: KnowledgeStore, backend) -> None:  # type: ignore[no-untyped-def]
    store.upsert("projects/a.md", title="A", body="a")
    status = store.status()
    assert status["backend"] == backend.kind and status["read_only"] is False
    assert (status["documents"], status["vectors"], status["doc_vectors"]) == (1, 1, 1)
    assert (status["hype_questions"], status["hype_pending"], status["hype_failed"]) == (0, 1, 0)
    assert status["embedder"] == FakeEmbedder(64).fingerprint()
    assert status["pending_migrations"] == [] and status["rebuild_in_progress"] is False


def test_a_read_only_store_refuses_writes(location: str, embedder: FakeEmbedder) -> None:
    with KnowledgeStore.open(location, embedder, hype=False) as store:
        store.upsert("projects/a.md", title="A", body="a")
    with KnowledgeStore.open(location, read_only=True) as reader:
        assert reader.status()["read_only"] is True
        for write in (lambda: reader.upsert("projects/b.md", title="B", body="b"),
                      lambda: reader.delete("projects/a.md"),
                      lambda: reader.reembed(FakeEmbedder(32))):
            with pytest.raises(ReadOnlyError):
                write()
        assert reader.paths() == ["projects/a.md"]


def test_a_reembed_finished_by_another_process_meanwhile_does_not_fail_this_one(
        location: str) -> None:
    """Two `kbstore reembed` runs on one knowledge base (two machines, or two
    terminals): the second finishes and drops the staged vectors while the
    first is between batches. The first stages again and completes, and the
    vectors are the new embedder's (on SQLite it failed with 'no such table:
    vector_data_next')."""
    from kbstore.doctor import diagnose
    from kbstore.documents import make_document

    with KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as first, \
            KnowledgeStore.open(location, FakeEmbedder(64), hype=False) as second:
        first.upsert_many([make_document(f"projects/r{i:02d}.md", title=f"note {i}",
                                         body=f"body {i}") for i in range(12)])
        rounds = []

        def meanwhile(count: int) -> None:
            if not rounds:
                rounds.append(second.reembed(FakeEmbedder(32), batch_size=4))

        assert first.reembed(FakeEmbedder(32), batch_size=4, progress=meanwhile) >= 12
        assert len(rounds) == 1 and rounds[0] >= 8  # it reused what the first had staged
    with KnowledgeStore.open(location, FakeEmbedder(32), hype=False) as store:
        assert store.embedder.dim == 32 and len(store) == 12
        assert diagnose(store).ok, [c.name for c in diagnose(store).problems]
        hit = store.search("note 3", limit=1)[0]
        assert hit.path == "projects/r03.md"
