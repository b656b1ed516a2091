"""The vector list's rank 1 standout (``vec_standout``): when the best
vector hit's similarity stands clearly above every other document's, its RRF
term weighs 1 + vec_standout x (s1 - s2) / (1 - s2), so a paraphrase found by
its vector alone is not outvoted by a hit ranked second in both lists on a
stray word."""

from __future__ import annotations

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.errors import InvalidQueryError

from .reference import vector_gap

# FakeEmbedder embeds every word, the full-text query drops stopwords. The
# profile holds the query's stopwords (its nearest vector by far) and no
# content word; the note holds the one content word, "zebra", with the
# stopwords' neighbours: second in both lists. Fillers keep other vectors far.
QUERY = "where was she when they moved zebra"
PROFILE = ("people/profile.md", "where was she when they", "where was she when they")
NOTE = ("notes/zebra.md", "zebra", "zebra where filler1 filler2 filler3")
FILLERS = [(f"notes/f{i}.md", f"filler {i}",
            f"zebra {' '.join(f'other{i}x{j}' for j in range(12))}") for i in range(3)]


@pytest.fixture()
def store(backend):  # type: ignore[no-untyped-def]
    with KnowledgeStore.open(backend("standout"), FakeEmbedder(64), hype=False) as s:
        for path, title, body in [PROFILE, NOTE, *FILLERS]:
            s.upsert(path, title=title, body=body)
        yield s


def _search(store: KnowledgeStore, **settings: object) -> list:  # type: ignore[type-arg]
    # the text lists at full weight, so only the standout differs
    return store.search(QUERY, limit=10, explain=True, agreement_ratio=0.0, **settings)


def test_a_standout_vector_rank_1_outranks_a_hit_second_in_both_lists(
        store: KnowledgeStore) -> None:
    off = _search(store, vec_standout=0.0)
    on = _search(store, vec_standout=4.0)
    profile = next(h for h in on if h.path == PROFILE[0])
    assert profile.explain["ranks"]["vector"] == 1 and profile.explain["ranks"]["fts"] is None
    cosines = [h.explain["raw"]["cosine"] for h in on if h.explain["ranks"]["vector"]]
    gap = vector_gap(cosines)
    assert 0.1 < gap < 1.0
    assert [h.explain["vector_gap"] for h in on] == pytest.approx([gap] * len(on), rel=1e-6)
    k = 20.0  # the default k_rrf
    assert profile.explain["rrf"]["vector"] == pytest.approx((1 + 4.0 * gap) / (k + 1))
    for hit in on:  # only the vector rank 1's term changes
        before = next(h for h in off if h.path == hit.path)
        if hit.path != PROFILE[0]:
            assert hit.explain["rrf"] == pytest.approx(before.explain["rrf"])
    # without the standout a hit in both lists comes first; with it the profile
    assert off[0].path != PROFILE[0]
    assert off[0].explain["ranks"]["fts"] and off[0].explain["ranks"]["vector"]
    assert on[0].path == PROFILE[0]


def test_near_tied_vectors_keep_plain_rrf(store: KnowledgeStore) -> None:
    # a second copy of the profile: ranks 1 and 2 tie, the gap is 0
    store.upsert("people/profile-copy.md", title=PROFILE[1], body=PROFILE[2])
    hits = _search(store, vec_standout=4.0)
    assert [h.explain["vector_gap"] for h in hits] == pytest.approx([0.0] * len(hits), abs=1e-6)
    first = next(h for h in hits if h.explain["ranks"]["vector"] == 1)
    assert first.explain["rrf"]["vector"] == pytest.approx(1 / 21, rel=1e-5)


def test_convex_fusion_ignores_the_standout(store: KnowledgeStore) -> None:
    # convex fusion reads the similarities themselves: the standout is RRF's
    off = _search(store, fusion="convex", vec_standout=0.0)
    on = _search(store, fusion="convex", vec_standout=4.0)
    assert [(h.path, h.score) for h in on] == [(h.path, pytest.approx(h.score)) for h in off]
    assert on[0].explain["vector_gap"] > 0.1


@pytest.mark.parametrize("value", [-0.5, "1", float("nan")])
def test_vec_standout_is_validated(store: KnowledgeStore, value: object) -> None:
    with pytest.raises(InvalidQueryError):
        store.search(QUERY, vec_standout=value)
