"""The text lists' query-adaptive weight (``agreement_ratio``): when the
full-text list's top hits are far from the query in vector space while the
best vector hit is close, the text lists weigh less -- unless the top
full-text score stands far above the second (rare words: an identifier)."""

from __future__ import annotations

import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore.errors import InvalidQueryError

# FakeEmbedder embeds every word, the full-text query drops stopwords: the
# profile shares only stopwords with the query (no full-text match) but is
# its nearest vector; each text hit shares one content word among many others.
QUERY = "where was she when they moved zebra"
PROFILE = ("people/profile.md", "where was she when they", "where was she when they")
TEXT_HITS = [
    (f"notes/n{i}.md", f"note {i}",
     f"zebra {' '.join(f'filler{i}x{j}' for j in range(12))}") for i in range(4)
]


@pytest.fixture()
def store(backend):  # type: ignore[no-untyped-def]
    with KnowledgeStore.open(backend("agree"), FakeEmbedder(64), hype=False) as s:
        for path, title, body in [PROFILE, *TEXT_HITS]:
            s.upsert(path, title=title, body=body)
        yield s


def expected_weight(hits, ratio: float, top: int = 3) -> float:  # type: ignore[no-untyped-def]
    """search.sql's rule recomputed from the explained ranks and raw scores."""
    fts = sorted((h for h in hits if h.explain["ranks"]["fts"] is not None),
                 key=lambda h: h.explain["ranks"]["fts"])
    best = max(h.explain["raw"]["cosine"] for h in hits if h.explain["raw"]["cosine"] is not None)
    mean = sum(h.explain["raw"]["cosine"] for h in fts[:top]) / len(fts[:top])
    agreement = max(0.0, mean) / best
    scores = [h.explain["raw"]["bm25"] for h in fts[:2]]
    standout = (scores[0] - scores[1]) / scores[0] if len(scores) > 1 else 1.0
    return max(min(1.0, agreement / ratio) ** 2, standout)


def test_far_text_hits_weigh_less_and_a_vector_match_rises(store: KnowledgeStore) -> None:
    # the vector rank 1's standout off (tests/contract/test_vector_standout.py):
    # it alone already puts the profile first here
    off = store.search(QUERY, limit=10, explain=True, agreement_ratio=0.0, vec_standout=0.0)
    on = store.search(QUERY, limit=10, explain=True, agreement_ratio=0.9, vec_standout=0.0)
    assert {h.explain["text_weight"] for h in off} == {1.0}
    weight = on[0].explain["text_weight"]
    assert weight == pytest.approx(expected_weight(on, 0.9), rel=1e-6)
    assert 0.0 < weight < 1.0
    assert {h.explain["text_weight"] for h in on} == {weight}  # one weight per query
    profile = next(h for h in on if h.path == PROFILE[0])
    assert profile.explain["ranks"]["fts"] is None and profile.explain["ranks"]["vector"] == 1
    for hit in on:  # the text lists' contributions scale by the weight; vectors do not
        off_hit = next(h for h in off if h.path == hit.path)
        assert hit.explain["rrf"]["fts"] == pytest.approx(off_hit.explain["rrf"]["fts"] * weight)
        assert hit.explain["rrf"]["vector"] == pytest.approx(off_hit.explain["rrf"]["vector"])
    rank_off = [h.path for h in off].index(PROFILE[0])
    rank_on = [h.path for h in on].index(PROFILE[0])
    assert rank_on < rank_off


def test_a_standout_text_hit_keeps_its_weight(store: KnowledgeStore) -> None:
    # one document holds the rare word, far ahead of the rest: its weight is
    # at least (s1 - s2) / s1 whatever the vectors say
    store.upsert("notes/code.md", title="error code", body="qx7734 qx7734 zebra")
    hits = store.search("qx7734 zebra", limit=10, explain=True, agreement_ratio=1.0)
    fts = sorted((h for h in hits if h.explain["ranks"]["fts"]),
                 key=lambda h: h.explain["ranks"]["fts"])
    s1, s2 = fts[0].explain["raw"]["bm25"], fts[1].explain["raw"]["bm25"]
    assert fts[0].path == "notes/code.md"
    assert hits[0].explain["text_weight"] >= (s1 - s2) / s1 - 1e-9
    assert hits[0].explain["text_weight"] == pytest.approx(expected_weight(hits, 1.0), rel=1e-6)


def test_no_text_hit_means_weight_one(store: KnowledgeStore) -> None:
    only_vector = store.search("qqqq zzzz", limit=10, explain=True,
                               agreement_ratio=0.9)
    assert only_vector and all(h.explain["ranks"]["fts"] is None for h in only_vector)
    assert {h.explain["text_weight"] for h in only_vector} == {1.0}


@pytest.mark.parametrize("value", [-0.1, 1.5, "0.5"])
def test_agreement_ratio_is_validated(store: KnowledgeStore, value: object) -> None:
    with pytest.raises(InvalidQueryError):
        store.search(QUERY, agreement_ratio=value)
