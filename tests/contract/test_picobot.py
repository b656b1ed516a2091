"""Seed 000's test list, run against the picobot drop-in ``kbstore.picobot.KnowledgeBase``.

Everything runs on FakeEmbedder (bag of hashed words: texts sharing words are
close, nothing else) and the fake_llm fixture. Where a test needs to know
*which* retriever found a document it looks at the explain data of the
underlying store; the formatted text is what picobot's agent sees.

KnowledgeBase opens ``data_dir/kb.sqlite``; to run on every backend these
tests point its ``db_path`` at the backend fixture's location (the default
file layout is tested in tests/sqlite/test_picobot_files.py).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from pathlib import Path

import frontmatter
import pytest

from kbstore import FakeEmbedder, KnowledgeStore
from kbstore import picobot as picobot_module
from kbstore.picobot import KnowledgeBase
from kbstore.query import DEFAULTS

from .public import questions_of
from .reference import vec_rank_weight

K_RRF = DEFAULTS["k_rrf"]
_RESULT = re.compile(r"^\d+\. .*\(([^()]+)\)$")
_SCORE = re.compile(r"score: ([0-9.]+)$")


def paths(text: str) -> list[str]:
    return [m.group(1) for line in text.splitlines() if (m := _RESULT.match(line))]


def scores(text: str) -> list[float]:
    return [float(m.group(1)) for line in text.splitlines() if (m := _SCORE.search(line))]


def explained(kb: KnowledgeBase, query: str, **kw):
    return {h.path: h for h in kb.knowledge_store.search(query, explain=True, **kw)}


WEIGHTS = {"frontmatter": DEFAULTS["w_fm"], "fts": DEFAULTS["w_fts"], "vector": DEFAULTS["w_vec"]}


def rrf(hit, standout: float = DEFAULTS["vec_standout"]) -> float:
    fm_factor = hit.explain["frontmatter_weight"] or 1.0  # w_fm_title for title-only matches
    # the vector rank 1 weighs 1 + vec_standout x its gap (test_vector_standout.py)
    vec_factor = vec_rank_weight(hit.explain["ranks"]["vector"], hit.explain["vector_gap"],
                                 standout)
    factor = {"frontmatter": fm_factor, "vector": vec_factor}
    return sum(WEIGHTS[name] * factor.get(name, 1.0) / (K_RRF + r)
               for name, r in hit.explain["ranks"].items() if r is not None)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "workspace"


def on_backend(kb: KnowledgeBase, location: str) -> KnowledgeBase:
    """The KnowledgeBase's index at the backend fixture's location."""
    kb.db = location
    return kb


@pytest.fixture
def make_kb(tmp_path: Path, workspace: Path, embedder: FakeEmbedder, location: str):  # type: ignore[no-untyped-def]
    opened: list[KnowledgeBase] = []

    def make(**kw) -> KnowledgeBase:  # type: ignore[no-untyped-def]
        kw.setdefault("hype", False)
        kw.setdefault("embedder", embedder)
        kb = on_backend(KnowledgeBase(workspace=workspace, data_dir=tmp_path / "data", **kw),
                        location)
        kb.ensure_structure()
        opened.append(kb)
        return kb

    yield make
    for kb in opened:
        kb.close()


@pytest.fixture
def kb(make_kb) -> KnowledgeBase:
    return make_kb()


def at(monkeypatch: pytest.MonkeyPatch, day: dt.date) -> None:
    monkeypatch.setattr(picobot_module, "_today", lambda: day)


# -- layout and file format --------------------------------------------------


def test_ensure_structure_creates_topics_with_unindexed_readmes(kb, workspace):
    base = workspace / "knowledge"
    for topic in ("self", "user", "projects", "domains", "journal"):
        assert (base / topic / "README.md").is_file()
    (base / "user" / "README.md").write_text("# mine\n", encoding="utf-8")
    kb.ensure_structure()
    assert (base / "user" / "README.md").read_text(encoding="utf-8") == "# mine\n"
    kb.reindex()
    assert kb.knowledge_store.paths() == []  # READMEs are never documents


def test_store_writes_picobot_file_and_returns_its_path(kb, workspace, monkeypatch):
    at(monkeypatch, dt.date(2026, 3, 1))
    rel = kb.store("projects", "TCP/IP notes: basics", "Sockets and ports.", tags=["net", "tcp"])
    assert rel == "projects/tcp-ip-notes-basics.md"
    text = (workspace / "knowledge" / rel).read_text(encoding="utf-8")
    assert text.startswith("---\ntitle: 'TCP/IP notes: basics'\ntopic: projects\n"
                           "tags: [net, tcp]\ncreated: 2026-03-01\nupdated: 2026-03-01\n---\n")
    post = frontmatter.loads(text)
    assert post.content == "# TCP/IP notes: basics\n\nSockets and ports."
    assert kb.knowledge_store.get(rel).tags == ["net", "tcp"]

    at(monkeypatch, dt.date(2026, 4, 2))
    assert kb.store("projects", "TCP/IP notes: basics", "Sockets, ports, MTU.") == rel
    post = frontmatter.loads((workspace / "knowledge" / rel).read_text(encoding="utf-8"))
    assert (str(post["created"]), str(post["updated"])) == ("2026-03-01", "2026-04-02")
    stored = kb.knowledge_store.get(rel)
    assert (stored.created, stored.updated) == ("2026-03-01", "2026-04-02")
    assert "MTU" in stored.body

    journal = kb.store("journal", "Hike day", "Walked far.")
    assert journal == "journal/2026-04-02-hike-day.md"
    assert kb.knowledge_store.get(journal).doc_type == "journal"
    assert not list((workspace / "knowledge").rglob("*.tmp"))  # temp files replaced


def test_store_never_overwrites_another_title_with_the_same_file_name(kb, workspace):
    """'C++ tips', 'C# tips' and 'C tips' all slug to c-tips.md (so do two
    long titles that share their first 80 characters): each store replaced
    the previous entry's file and index row, its content lost."""
    long = "a very long title about the deployment of the home automation server " * 2
    titles = ["C++ tips", "C# tips", "C tips", long + "part one", long + "part two"]
    rels = [kb.store("projects", t, f"content of {t}") for t in titles]
    assert len(set(rels)) == len(titles)
    assert rels[:3] == ["projects/c-tips.md", "projects/c-tips-2.md", "projects/c-tips-3.md"]
    for title, rel in zip(titles, rels, strict=True):
        stored = kb.knowledge_store.get(rel)
        assert (stored.title, stored.body.splitlines()[-1]) == (title, f"content of {title}")
        assert title in (workspace / "knowledge" / rel).read_text(encoding="utf-8")
    # the same title again still updates its own file, whichever name it got
    assert kb.store("projects", "C# tips", "newer C# content") == "projects/c-tips-2.md"
    assert kb.store("projects", "c++ TIPS", "newer C++ content") == "projects/c-tips.md"
    assert "newer C++" in kb.knowledge_store.get("projects/c-tips.md").body
    assert "content of C tips" in kb.knowledge_store.get("projects/c-tips-3.md").body
    assert len(kb.knowledge_store) == len(titles)


def test_store_never_overwrites_a_users_file_it_cannot_read(kb, workspace):
    broken = workspace / "knowledge" / "projects" / "deploy-notes.md"
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_text("---\ntitle: [unclosed\n---\nmy own notes\n", encoding="utf-8")
    assert kb.store("projects", "Deploy notes", "agent notes") == "projects/deploy-notes-2.md"
    assert "my own notes" in broken.read_text(encoding="utf-8")


def test_store_then_reindex_changes_nothing(kb):
    kb.store("domains", "Docker basics", "Images, containers, volumes.", tags="docker, ops")
    report = kb.reindex()
    assert (report.added, report.updated, report.unchanged, report.embedded) == (0, 0, 1, 0)


# -- FTS5 (seed Task A) --------------------------------------------------------


def test_fts_stemming(kb):
    kb.store("domains", "Morning routine", "I go running quickly before breakfast.")
    kb.store("domains", "Bread notes", "Flour, water, salt and patience.")
    text = kb.search("run quick")
    assert paths(text)[0] == "domains/morning-routine.md"
    hits = explained(kb, "run quick")
    # Porter stemming made 'run' meet 'running'; the fake embedder cannot do that.
    assert hits["domains/morning-routine.md"].explain["ranks"]["fts"] == 1
    assert hits["domains/bread-notes.md"].explain["ranks"]["fts"] is None


def test_fts_bm25_ordering(kb):
    kb.store("domains", "Cluster alpha", "kubernetes pods kubernetes nodes kubernetes services")
    kb.store("domains", "Cluster beta", "kubernetes pods and nodes and many services")
    hits = explained(kb, "kubernetes")
    assert hits["domains/cluster-alpha.md"].explain["ranks"]["fts"] == 1
    assert hits["domains/cluster-beta.md"].explain["ranks"]["fts"] == 2
    assert paths(kb.search("kubernetes"))[:2] == ["domains/cluster-alpha.md",
                                                 "domains/cluster-beta.md"]


def test_new_entry_found_after_store(kb, make_kb):
    kb.store("domains", "Git workflows", "Rebase before merging feature branches.")
    assert "domains/zigbee-pairing.md" not in paths(kb.search("zigbee pairing"))
    kb.store("domains", "Zigbee pairing", "Reset the bulb five times to pair it.")
    assert paths(kb.search("zigbee pairing"))[0] == "domains/zigbee-pairing.md"
    kb.close()
    assert paths(make_kb().search("zigbee"))[0] == "domains/zigbee-pairing.md"  # persisted


# -- RRF fusion, hybrid search (seed Task C) ---------------------------------------


def test_rrf_fusion_document_found_by_more_retrievers_wins(kb):
    # 'tagged' matches 'sourdough' by exact tag (frontmatter), in FTS (tags
    # column) and by vector; 'mentions' only in FTS and by vector, although
    # it says 'sourdough' three times in its body.
    kb.store("domains", "Kitchen notes", "Feed it flour and water daily.", tags=["sourdough"])
    kb.store("domains", "Bread log", "sourdough loaf, sourdough crumb, sourdough crust")
    kb.store("domains", "Garden notes", "Tomatoes need sun and water.")
    # Plain RRF (the vector standout off): the seed's rule.
    hits = explained(kb, "sourdough", vec_standout=0.0)
    tagged, mentions = hits["domains/kitchen-notes.md"], hits["domains/bread-log.md"]
    assert tagged.explain["ranks"]["frontmatter"] == 1
    assert mentions.explain["ranks"]["frontmatter"] is None
    assert mentions.explain["ranks"]["vector"] < tagged.explain["ranks"]["vector"]
    for hit in hits.values():  # entries: no boost, no decay -> score is plain RRF
        assert hit.score == pytest.approx(rrf(hit, standout=0.0))
    assert sorted(hits, key=lambda p: -hits[p].score)[:2] == ["domains/kitchen-notes.md",
                                                              "domains/bread-log.md"]
    # The shipped default adds the vector standout ('mentions' is rank 1 in
    # FTS and by vector, cosine 0.77 vs 0.35 with the fake embedder): the
    # scores follow the explained ranks, both stay the top two.
    default = explained(kb, "sourdough")
    for hit in default.values():
        assert hit.score == pytest.approx(rrf(hit))
    assert set(paths(kb.search("sourdough"))[:2]) == {"domains/kitchen-notes.md",
                                                      "domains/bread-log.md"}


def test_search_hybrid_term_only_in_body(kb):
    kb.store("projects", "Deploy notes", "Ship with systemd; restart on failure.")
    kb.store("projects", "Backup notes", "Restic snapshots every night to the NAS.")
    kb.store("projects", "Test notes", "pytest with fixtures and fakes.")
    text = kb.search("restic")
    assert paths(text)[0] == "projects/backup-notes.md"
    assert "Restic snapshots" in text.split("\n")[4]  # the snippet under the first hit


class SynonymEmbedder(FakeEmbedder):
    """FakeEmbedder plus a tiny synonym table: a stand-in for what a real model
    knows about meaning. FTS5 knows none of these synonyms."""

    SYNONYMS = {"automobile": "car", "vehicle": "car", "repair": "fix", "mend": "fix"}

    def _one(self, text: str):
        words = re.findall(r"\w+", text.lower())
        return super()._one(" ".join(self.SYNONYMS.get(w, w) for w in words))


def test_hybrid_search_by_meaning_when_fts_misses(make_kb):
    kb = make_kb(embedder=SynonymEmbedder(dim=64))
    kb.store("domains", "Car battery", "To fix a dead car battery, jump start the car.")
    kb.store("domains", "Bike chain", "Oil the chain after rain and check wear.")
    kb.store("domains", "Sourdough care", "Feed the starter flour and water daily.")
    hits = explained(kb, "automobile repair")
    assert all(h.explain["ranks"]["fts"] is None for h in hits.values())
    assert all(h.explain["ranks"]["frontmatter"] is None for h in hits.values())
    assert hits["domains/car-battery.md"].explain["ranks"]["vector"] == 1
    assert paths(kb.search("automobile repair"))[0] == "domains/car-battery.md"


def test_hype_question_finds_document_fts_misses(make_kb, fake_llm):
    fake_llm.answer = lambda prompt: (
        "How do I keep my bread culture alive?\nWhat is a levain?" if "starter" in prompt
        else "What is this about?")
    kb = make_kb(hype=True)
    kb.store("domains", "Sourdough care", "Feed the starter flour and water daily.")
    kb.store("domains", "Bike chain", "Oil the chain after rain and check wear.")
    hits = explained(kb, "keep bread culture alive")
    top = hits["domains/sourdough-care.md"]
    assert top.explain["ranks"]["fts"] is None
    assert top.explain["ranks"]["hype"] == 1  # the question vectors' own list
    assert top.explain["matched_question"] == "How do I keep my bread culture alive?"
    assert paths(kb.search("keep bread culture alive"))[0] == "domains/sourdough-care.md"


@pytest.mark.parametrize("env, calls", [("0", 0), ("1", 1)])
def test_hype_follows_kbstore_hype_unless_the_caller_says(make_kb, fake_llm, monkeypatch,
                                                          env, calls):
    monkeypatch.setenv("KBSTORE_HYPE", env)
    fake_llm.answer = lambda prompt: "What is a levain?"
    kb = make_kb(hype=None)  # picobot's default: the environment decides
    kb.store("domains", "Sourdough care", "Feed the starter flour and water daily.")
    assert len(fake_llm.calls) == calls


# -- type boost and recency decay (seed Task E) ------------------------------------


def test_type_boost_skills(kb, workspace):
    kb.store("domains", "Deploy checklist", "Roll out the service, watch the logs, then tag.",
             tags=["deploy"])
    skill = workspace / "skills" / "deploy-checklist" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: Deploy checklist\ntags: [deploy]\n---\n# Deploy checklist\n\n"
                     "Roll out the service, watch the logs, then tag.\n", encoding="utf-8")
    kb.reindex()
    # The type factors are off by default (measured: they beat clear evidence);
    # same text: the skill (indexed later) loses every tie.
    assert paths(kb.search("deploy checklist"))[:2] == [
        "domains/deploy-checklist.md", "skills/deploy-checklist/SKILL.md"]
    hits = explained(kb, "deploy checklist", boost_skill=1.2)
    entry, skill_hit = hits["domains/deploy-checklist.md"], hits["skills/deploy-checklist/SKILL.md"]
    # Set explicitly, the 1.2x boost still lifts it.
    assert all(skill_hit.explain["ranks"][k] > entry.explain["ranks"][k]
               for k in ("frontmatter", "fts", "vector"))
    assert skill_hit.score == pytest.approx(1.2 * rrf(skill_hit))
    assert entry.score == pytest.approx(rrf(entry))
    assert skill_hit.score > entry.score


def test_recency_decay_journal(kb, monkeypatch):
    today = dt.date.today()
    at(monkeypatch, today - dt.timedelta(days=90))
    old = kb.store("journal", "Tomato harvest", "Picked twelve tomatoes from the balcony.")
    at(monkeypatch, today)
    new = kb.store("journal", "Tomato harvest", "Picked twelve tomatoes from the balcony.")
    hits = explained(kb, "tomato harvest")
    # Same text: the old entry (indexed first) wins every tie, so only decay can
    # put the new one first.
    assert all(hits[old].explain["ranks"][k] < hits[new].explain["ranks"][k]
               for k in ("frontmatter", "fts", "vector"))
    # 90 days at a 30-day half-life, bounded: 1 - 0.05 x (1 - 1/8) (to within a
    # day of clock/timezone slack)
    assert hits[old].explain["decay"] == pytest.approx(1 - 0.05 * 0.875, rel=0.003)
    assert hits[new].explain["decay"] == pytest.approx(1.0, abs=0.003)
    assert hits[old].explain["boost"] == hits[new].explain["boost"] == 1.0
    assert hits[old].score == pytest.approx(rrf(hits[old]) * hits[old].explain["decay"])
    # rank 1 vs rank 2 in every list is a 4.8% gap at k=20: more than the
    # bounded factor's 4.4%, so the evidence keeps the old entry first ...
    assert paths(kb.search("tomato harvest"))[:2] == [old, new]
    # ... while the full decay (recency_weight=1: 1/8) would bury it
    full = explained(kb, "tomato harvest", recency_weight=1.0)
    assert full[old].explain["decay"] == pytest.approx(0.125, rel=0.03)
    assert full[new].score > full[old].score


def test_no_decay_on_non_journal(kb, monkeypatch):
    today = dt.date.today()
    at(monkeypatch, today - dt.timedelta(days=365))
    old = kb.store("projects", "Release process", "Tag, build, publish the wheel.")
    at(monkeypatch, today)
    new = kb.store("domains", "Release process", "Tag, build, publish the wheel.")
    hits = explained(kb, "release process")
    for path in (old, new):
        assert hits[path].explain["decay"] == 1.0
        assert hits[path].explain["boost"] == 1.0
        assert hits[path].score == pytest.approx(rrf(hits[path]))
    # A year-old entry indexed first keeps every tie: no decay pushes it down.
    assert paths(kb.search("release process"))[:2] == [old, new]


# -- HyPE (seed Task D) -----------------------------------------------------------


def _questions(kb: KnowledgeBase, path: str) -> list[str]:
    return questions_of(kb.knowledge_store, path)


def test_hype_questions_generated_on_store(make_kb, fake_llm):
    kb = make_kb(hype=True, model="test/cheap-model")
    rel = kb.store("domains", "Sourdough care", "Feed the starter flour and water daily.")
    assert len(fake_llm.calls) == 1
    assert fake_llm.calls[0]["model"] == "test/cheap-model"
    assert "Sourdough care" in fake_llm.calls[0]["messages"][0]["content"]
    assert _questions(kb, rel) == ["How do I use this?", "What is this about?",
                                   "When should I read this?"]


def test_hype_disabled_makes_no_llm_calls(make_kb, fake_llm):
    kb = make_kb(hype=False)
    rel = kb.store("domains", "Sourdough care", "Feed the starter flour and water daily.")
    kb.reindex()
    kb.search("sourdough")
    assert fake_llm.calls == []
    assert _questions(kb, rel) == []


def test_hype_cached_until_content_changes(make_kb, fake_llm):
    kb = make_kb(hype=True)
    rel = kb.store("domains", "Sourdough care", "Feed the starter flour and water daily.")
    assert len(fake_llm.calls) == 1
    kb.store("domains", "Sourdough care", "Feed the starter flour and water daily.")
    kb.search("sourdough")
    kb.reindex()
    kb.close()
    again = make_kb(hype=True)  # a new process: reconcile on first search
    again.search("sourdough")
    assert len(fake_llm.calls) == 1
    again.store("domains", "Sourdough care", "Feed the starter rye flour twice a day.")
    assert len(fake_llm.calls) == 2
    assert _questions(again, rel)


# -- crash safety and hostile input ---------------------------------------------------


def test_crash_between_file_write_and_index_is_repaired(kb, make_kb, workspace, monkeypatch):
    kb.store("domains", "Git workflows", "Rebase before merging feature branches.")

    def crash(self, docs, **kw):
        raise RuntimeError("simulated crash after the file write")

    with monkeypatch.context() as m:
        m.setattr(KnowledgeStore, "upsert_many", crash)
        with pytest.raises(RuntimeError):
            kb.store("domains", "Zigbee pairing", "Reset the bulb five times to pair it.")
    assert (workspace / "knowledge" / "domains" / "zigbee-pairing.md").is_file()
    assert kb.knowledge_store.get("domains/zigbee-pairing.md") is None
    # Same process: the next search reconciles first.
    assert paths(kb.search("zigbee"))[0] == "domains/zigbee-pairing.md"

    # A new process after a crash: its first search reconciles.
    with monkeypatch.context() as m:
        m.setattr(KnowledgeStore, "upsert_many", crash)
        with pytest.raises(RuntimeError):
            kb.store("domains", "Matter bridge", "Thread border router setup.")
    kb.close()
    fresh = make_kb()
    assert paths(fresh.search("matter bridge"))[0] == "domains/matter-bridge.md"


def test_sync_picks_up_edits_and_deletions_on_disk(kb, workspace):
    a = kb.store("domains", "Docker basics", "Images and containers.")
    b = kb.store("domains", "Git workflows", "Rebase before merging.")
    kb.search("docker")
    (workspace / "knowledge" / a).unlink()
    path_b = workspace / "knowledge" / b
    path_b.write_text(path_b.read_text(encoding="utf-8").replace("Rebase", "Bisect"),
                      encoding="utf-8")
    assert "1 updated, 1 deleted" in kb.sync()
    assert kb.knowledge_store.get(a) is None
    assert paths(kb.search("bisect"))[0] == b


@pytest.mark.parametrize("topic", ["../etc", "projects/../../x", "/tmp", "a/b", "..", ".",
                                   "proj\x00ects", "C:\\temp", "", "notes"])
def test_bad_topics_are_rejected(kb, workspace, topic):
    with pytest.raises(ValueError):
        kb.store(topic, "Harmless title", "body")
    assert not [p for p in workspace.parent.rglob("*.md") if p.name != "README.md"]


@pytest.mark.parametrize("title", ["../../etc/passwd", "/etc/passwd", "a\x00b",
                                   "..\\..\\windows", "~/.ssh/config", "C:\\evil", "   ", "!!!"])
def test_bad_titles_are_rejected(kb, workspace, title):
    with pytest.raises(ValueError):
        kb.store("projects", title, "body")
    assert not [p for p in workspace.parent.rglob("*.md") if p.name != "README.md"]


def test_nul_in_content_is_rejected_before_writing(kb, workspace):
    with pytest.raises(ValueError):
        kb.store("projects", "Fine title", "bad\x00body")
    assert not (workspace / "knowledge" / "projects" / "fine-title.md").exists()


def test_search_says_no_results_clearly(kb):
    assert kb.search("anything") == "No results for 'anything'."
    kb.store("projects", "Deploy notes", "systemd")
    assert kb.search("deploy", topic="user") == "No results for 'deploy' in topic 'user'."
    assert kb.search("   ").startswith("No results")
    assert scores(kb.search("deploy")) and math.isfinite(scores(kb.search("deploy"))[0])


def test_base_path_and_lazy_open(tmp_path, embedder, backend, location):  # type: ignore[no-untyped-def]
    kb = on_backend(KnowledgeBase(base_path=tmp_path / "kb", data_dir=tmp_path / "d",
                                  embedder=embedder, hype=False), location)
    kb.ensure_structure()
    assert not backend.exists(location)  # nothing opened yet
    rel = kb.store("user", "Coffee", "Prefers flat white.", tags=["coffee"])
    assert (tmp_path / "kb" / "user" / "coffee.md").is_file()
    assert backend.exists(location)
    assert paths(kb.search("coffee"))[0] == rel
    kb.close()


def test_a_briefly_missing_knowledge_folder_keeps_the_index(kb, workspace):  # type: ignore[no-untyped-def]
    """Formerly a search while workspace/knowledge was renamed (mid-sync,
    unmounted) deleted every document and its HyPE questions."""
    stored = [kb.store("domains", f"Note {n}", f"Body of note {n} about kayaks.")
              for n in range(6)]
    kb.close()
    (workspace / "knowledge").rename(workspace / "knowledge.syncing")
    assert paths(kb.search("kayaks"))  # reconciles with a folder without documents
    assert sorted(kb.knowledge_store.paths()) == sorted(stored)
    kb.close()
    (workspace / "knowledge.syncing").rename(workspace / "knowledge")
    (workspace / "knowledge" / stored[0]).unlink()  # an ordinary removal is applied
    assert "1 deleted" in kb.sync()
    assert sorted(kb.knowledge_store.paths()) == sorted(stored[1:])


def test_a_missing_workspace_is_not_indexed_and_keeps_the_index(make_kb, tmp_path, location,
                                                               embedder):  # type: ignore[no-untyped-def]
    kb = make_kb()
    rel = kb.store("projects", "Home server", "Runs picobot under systemd.")
    kb.close()
    gone = on_backend(KnowledgeBase(workspace=tmp_path / "nowhere", data_dir=tmp_path / "data",
                                    embedder=embedder, hype=False), location)
    assert gone.reindex() is None
    assert gone.sync().startswith("Nothing to index")
    assert paths(gone.search("systemd")) == [rel]
    gone.close()


def test_an_entry_over_the_size_limit_is_refused_and_the_stored_one_kept(make_kb) -> None:
    """picobot's store writes a file every later import reads: one over the
    2 MiB entry limit would be skipped forever, so it is refused up front."""
    from kbstore.errors import InvalidDocumentError

    kb = make_kb()
    rel = kb.store("projects", "Big plan", "the small version")
    file = kb.base / rel
    before = file.read_bytes()
    with pytest.raises(InvalidDocumentError, match="2097152-byte limit"):
        kb.store("projects", "Big plan", "word " * 500_000)
    assert file.read_bytes() == before
    assert paths(kb.search("small version"))[0] == rel
