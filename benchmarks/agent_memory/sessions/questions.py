"""Questions about one conversation, each with its evidence sessions.

Types (README.md): single, paraphrase, multi, date, month, relative, latest,
superseded, absent. Grades: 3 = the session holds the answer; 1 = an older
session of the same storyline (latest: every earlier stage or mention;
superseded: the session with the fact that no longer holds).
"""

from __future__ import annotations

import datetime as dt
import random
from typing import TYPE_CHECKING, Any

from benchmarks.agent_memory.sessions.events import EVENTS, MULTI
from benchmarks.agent_memory.sessions.threads import HABITS, THREADS

if TYPE_CHECKING:
    from benchmarks.agent_memory.sessions.build import Item, Persona

QUOTA = {"single": 12, "paraphrase": 6, "multi": 5, "date": 5, "month": 3, "relative": 3,
         "latest": 5, "superseded": 5, "absent": 5}
WINDOW_TOKENS = 256  # MiniLM's window, [CLS] and [SEP] included

DATE_QUESTIONS = ["What did {Name} and I talk about on {d}?", "What did we discuss on {d}?",
                  "What did {Name} tell me on {d}?", "What was going on with {Name} on {d}?",
                  "Remind me what came up in the session on {d}."]
MONTH_QUESTIONS = ["What happened with {Name} in {m}?", "What did {Name} and I talk about "
                   "in {m}?", "What was {Name} up to in {m}?", "Anything notable from {m}?"]
RELATIVE = [  # phrase, window in days before `now` (inclusive bounds)
    ("yesterday", 1, 1), ("last week", 1, 7), ("over the past week", 1, 7),
    ("a couple of weeks ago", 10, 18), ("around a month ago", 24, 38),
    ("two months ago", 52, 70), ("around three months ago", 80, 100),
]
RELATIVE_QUESTIONS = ["What did {Name} get up to {r}?", "What did we talk about {r}?",
                      "What was {Name} up to {r}?", "What happened with {Name} {r}?"]
# Out-of-memory questions a user could plausibly ask; skipped for a persona
# whose sessions contain any of the keywords.
ABSENT = [
    ("What is the name of {Name}'s piano teacher?", ["piano"]),
    ("How did {Name}'s driving test go?", ["driving test"]),
    ("When did {Name} go skiing?", ["ski"]),
    ("What did {Name} think of the opera?", ["opera"]),
    ("Which car did {Name} end up buying?", ["new car", "bought a car"]),
    ("What happened at {Name}'s jury service?", ["jury"]),
    ("How much did {Name}'s tattoo cost?", ["tattoo"]),
    ("Where did {Name} go scuba diving?", ["diving", "scuba"]),
    ("What is {Name}'s cousin in Australia called?", ["australia"]),
    ("Does {Name} have a nut allergy?", ["allerg"]),
    ("Which yoga studio does {Name} go to?", ["yoga"]),
    ("What did {Name} win in the raffle?", ["raffle"]),
    ("When did {Name} break {her} arm?", ["arm "]),
    ("What was the name of {Name}'s childhood pet?", ["childhood"]),
    ("What did {Name} dress up as for Halloween?", ["halloween"]),
    ("What is {Name}'s favourite cocktail?", ["cocktail"]),
    ("When did {Name} take up knitting?", ["knit"]),
    ("How did {Name}'s camping trip in the Highlands go?", ["camping", "highlands"]),
    ("What did {Name}'s landlord say about the rent increase?", ["rent increase"]),
    ("Which marathon did {Name} run in the Alps?", ["alps"]),
]


def now_after(last: dt.date, rng: random.Random) -> dt.date:
    r = rng.random()
    days = rng.randint(1, 7) if r < 0.45 else rng.randint(8, 45) if r < 0.8 \
        else rng.randint(46, 120)
    return last + dt.timedelta(days=days)


class Builder:
    def __init__(self, person: Persona, tokenizer: Any) -> None:
        self.person, self.tok = person, tokenizer
        self.rng = random.Random(person.rng.random())
        self.kb = person.p["kb"]
        self.sessions = person.sessions
        self.last = self.sessions[-1].date
        self.text = "\n".join(s.title + " " + s.body for s in self.sessions).lower()
        self.out: list[dict[str, Any]] = []
        self.rels: list[tuple[str, str, int]] = []
        self.asked: set[str] = set()

    def q(self, template: str, slots: dict[str, Any]) -> str:
        from benchmarks.agent_memory.sessions.build import fill

        return fill(template, {**self.person.third, **slots}, self.person.p["cur"])

    def add(self, kind: str, text: str, rels: dict[int, int], now: dt.date | None = None,
            answer: Item | None = None, source: str = "") -> bool:
        if text in self.asked:
            return False
        self.asked.add(text)
        qid = f"{self.kb}-{len(self.out) + 1:03d}"
        row: dict[str, Any] = {"id": qid, "kb": self.kb, "text": text, "type": kind,
                               "now": (now or now_after(self.last, self.rng)).isoformat()}
        if answer is not None and self.tok is not None:
            row["answer_position"] = self.position(answer)
        row["source"] = source
        self.out.append(row)
        for index, grade in sorted(rels.items()):
            self.rels.append((qid, self.sessions[index].path, grade))
        return True

    def position(self, it: Item) -> str:
        """inside / beyond: does the item end within the embedder's window of
        kbstore's embedding input (title. Tags: ... . body)?"""
        from kbstore.embed import embedding_text

        s = self.sessions[it.session]
        end = s.spans[it.key][1]
        n = len(self.tok.encode(embedding_text(s.title, s.tags, s.body[:end])).ids)
        return "inside" if n <= WINDOW_TOKENS else "beyond"

    def first_ok(self, templates: list[str], slots: dict[str, Any]) -> str | None:
        from benchmarks.agent_memory.sessions.build import MissingSlotError

        for t in self.rng.sample(templates, len(templates)):
            try:
                return self.q(t, slots)
            except MissingSlotError:
                continue
        return None

    # -- per type ----------------------------------------------------------

    def facts(self, kind: str, key: str, quota: int, avoid: set[str]) -> set[str]:
        items = [it for it in self.person.items if it.questions.get(key)
                 and it.key not in avoid]
        self.rng.shuffle(items)
        recent_cut = self.sessions[int(len(self.sessions) * 0.8)].date
        recent = [it for it in items if self.sessions[it.session].date >= recent_cut]
        first = recent[:max(1, quota // 4)]  # some evidence from the last weeks
        ordered = first + [it for it in items if it not in first]
        used: set[str] = set()
        for it in ordered:
            if len(used) >= quota:
                break
            templates = [t for t in it.questions[key] if self.unambiguous(it, t)]
            text = self.first_ok(templates, it.slots) if templates else None
            if text and self.add(kind, text, {it.session: 3}, answer=it, source=it.key):
                used.add(it.key)
        return used

    def unambiguous(self, it: Item, template: str) -> bool:
        """Does the question single out this item among items of its kind?
        It does when no other item of the kind has the same values for the
        slots the question names (none named: the only item of its kind)."""
        import string

        named = {f.split("[")[0] for _, f, _, _ in string.Formatter().parse(template) if f}
        named &= set(it.slots) - {"friend_any"}
        if not it.key.startswith("event:"):  # a storyline stage or habit mention is unique
            return True
        twins = [o for o in self.person.items if o.kind == it.kind and o is not it]
        return not any(all(o.slots.get(k) == it.slots.get(k) for k in named) for o in twins)

    def multi(self) -> None:
        by_cat: dict[str, list[Item]] = {}
        for it in self.person.items:
            if it.category:
                by_cat.setdefault(it.category, []).append(it)
        cats = [c for c, its in sorted(by_cat.items()) if len({it.session for it in its}) >= 2]
        for cat in self.rng.sample(cats, min(QUOTA["multi"], len(cats))):
            text = self.first_ok(MULTI[cat], {})
            if text:
                self.add("multi", text, {it.session: 3 for it in by_cat[cat]},
                         source=f"category:{cat}")

    def dates(self) -> None:
        from benchmarks.agent_memory.sessions.build import human_date

        for s in self.rng.sample(self.sessions, QUOTA["date"]):
            d = human_date(s.date, self.rng.choice([0, 1, 3, 4, 0, 1]))
            self.add("date", self.q(self.rng.choice(DATE_QUESTIONS), {"d": d}), {s.index: 3},
                     source=f"date:{s.date}")

    def months(self) -> None:
        months: dict[tuple[int, int], list[int]] = {}
        for s in self.sessions:
            months.setdefault((s.date.year, s.date.month), []).append(s.index)
        ok = [m for m, idx in sorted(months.items()) if 1 <= len(idx) <= 3]
        for year, month in self.rng.sample(ok, min(QUOTA["month"], len(ok))):
            now = now_after(self.last, self.rng)
            label = dt.date(year, month, 1).strftime("%B %Y")
            # A bare month name means its latest occurrence before `now`.
            latest_year = now.year if month < now.month else now.year - 1
            if year == latest_year and self.rng.random() < 0.4:
                label = dt.date(year, month, 1).strftime("%B")
            self.add("month", self.q(self.rng.choice(MONTH_QUESTIONS), {"m": label}),
                     {i: 3 for i in months[(year, month)]}, now=now,
                     source=f"month:{year}-{month:02d}")

    def relative(self) -> None:
        options = []
        for phrase, lo, hi in RELATIVE:
            for offset in range(1, 61):
                now = self.last + dt.timedelta(days=offset)
                hit = [s.index for s in self.sessions if lo <= (now - s.date).days <= hi]
                if 1 <= len(hit) <= 3:
                    options.append((phrase, now, hit))
        self.rng.shuffle(options)
        seen: set[str] = set()
        for phrase, now, hit in options:
            if len(seen) >= QUOTA["relative"] or phrase in seen:
                continue
            text = self.q(self.rng.choice(RELATIVE_QUESTIONS), {"r": phrase})
            if self.add("relative", text, {i: 3 for i in hit}, now=now,
                        source=f"relative:{phrase}"):
                seen.add(phrase)

    def latest(self) -> None:
        cands = []
        for name, items in self.person.thread_stages.items():
            spec = THREADS[name]
            if spec["latest"] and len(items) >= 2:
                cands.append((spec["latest"], items, f"thread:{name}"))
        for name, items in self.person.habit_items.items():
            cands.append((HABITS[name]["latest"], items, f"habit:{name}"))
        self.rng.shuffle(cands)
        for templates, items, source in cands[:QUOTA["latest"]]:
            newest = max(items, key=lambda it: self.sessions[it.session].date)
            text = self.first_ok(templates, newest.slots)
            rels = {it.session: 1 for it in items}
            rels[newest.session] = 3
            if text:
                self.add("latest", text, rels, answer=newest, source=source)

    def superseded(self) -> None:
        cands = []
        for name, items in self.person.thread_stages.items():
            for spec in THREADS[name]["superseded"]:
                if max(spec["new"] + spec["old"]) < len(items):
                    cands.append((spec, items, name))
        self.rng.shuffle(cands)
        for spec, items, name in cands[:QUOTA["superseded"]]:
            rels = {items[i].session: 1 for i in spec["old"]}
            rels.update({items[i].session: 3 for i in spec["new"]})
            text = self.first_ok(spec["q"], items[0].slots)
            if text:
                self.add("superseded", text, rels, answer=items[max(spec["new"])],
                         source=f"thread:{name}:{spec['new']}")

    def absent(self) -> None:
        from benchmarks.agent_memory.sessions.pools import POOLS

        made = 0
        for kind in self.person.unused_kinds:
            spec = EVENTS[kind]
            slots = {"friend_any": self.person.p["friends"][0]}
            for name, pool in spec["slots"].items():
                values = ([v for v in self.person.p["friends"]] if pool == "friend"
                          else [v for v in POOLS[pool] if str(v).lower()[:12] not in self.text])
                slots[name] = self.rng.choice(values)
            text = self.first_ok(spec["single"], slots)
            if text and made < 2 and self.add("absent", text, {}, source=f"unused:{kind}"):
                made += 1
        generic = [(t, kw) for t, kw in ABSENT if not any(k in self.text for k in kw)]
        self.rng.shuffle(generic)
        for template, _ in generic[:QUOTA["absent"] - made]:
            self.add("absent", self.q(template, {}), {}, source="generic")


def make_questions(person: Persona, tokenizer: Any = None
                   ) -> tuple[list[dict[str, Any]], list[tuple[str, str, int]]]:
    b = Builder(person, tokenizer)
    used = b.facts("single", "single", QUOTA["single"], set())
    b.facts("paraphrase", "para", QUOTA["paraphrase"], used)
    b.multi()
    b.dates()
    b.months()
    b.relative()
    b.latest()
    b.superseded()
    b.absent()
    return b.out, b.rels
