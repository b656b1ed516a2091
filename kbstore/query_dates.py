"""Dates and "latest" questions in a query (backend-neutral query analysis).

:func:`date_ranges` finds explicit dates ("on 16 June 2023", "2023-06-16",
"June 16"), months ("in March", "March 2024"), years ("in 2023"), seasons
("last summer") and relative dates ("yesterday", "last week", "3 days ago",
"on Tuesday", "last month", "in the last 2 weeks") and turns each into a
half-open range of days [start, end). Relative dates are measured from the
request's ``now``; a month or day without a year is its latest occurrence up
to ``now``. The search statement matches these ranges against documents'
``created`` and ``updated`` dates (its ``date`` list).

:func:`wants_latest` spots questions about the newest state of something
("when did we last deploy", "the most recent backup", "what is Maya's
current job", "does she still...", "any news on the boiler", "where did
they go in the end").

:func:`relative_words` are the words that only say *when* ("yesterday",
"ago", "last week"): they are dropped from the full-text query, where they
would match any document that happens to use them.
"""

from __future__ import annotations

import datetime as dt
import re

MONTHS = {name: i for i, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
    ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
    ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
    ("december", "dec")), start=1) for name in names}
# Month names that are also common words: a month only next to a day, a year
# or a preposition ("in may", "may 2024", "march 3").
_AMBIGUOUS = {"may", "mar", "jan", "jun", "dec", "oct", "aug", "sep", "sept", "nov", "feb",
              "apr", "jul", "march"}
WEEKDAYS = {d: i for i, d in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday",
                                        "saturday", "sunday"))}
SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11),
           "winter": (12, 2)}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
            "couple": 2, "few": 3, "several": 3}
_UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "month": 30, "months": 30,
          "year": 365, "years": 365}

Range = tuple[str, str]  # ISO dates, start inclusive, end exclusive

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d{2})"
_NUM = r"(\d{1,3}|" + "|".join(_NUMBERS) + r")"
_UNIT = r"(days?|weeks?|months?|years?)"
_RE = {
    "iso": re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"),
    "slash": re.compile(r"\b(\d{1,2})/(\d{1,2})/((?:19|20)\d{2})\b"),  # day/month/year
    "day_month": re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_MONTH})\.?(?:,?\s+{_YEAR})?\b"),
    "month_day": re.compile(rf"\b({_MONTH})\.?\s+{_DAY}(?:,?\s+{_YEAR})?\b(?!\s*(?:am|pm|:))"),
    "month_year": re.compile(rf"\b({_MONTH})\.?,?\s+(?:of\s+)?{_YEAR}\b"),
    "month": re.compile(rf"\b(?:(in|during|since|of|from|until|early|late|mid|last|this)\s+)?"
                        rf"(?:the\s+)?(?:month\s+of\s+)?({_MONTH})\b"),
    "year": re.compile(rf"\b(?:(in|during|since|of|from|until|early|late)\s+)?{_YEAR}\b"),
    "ago": re.compile(rf"\b{_NUM}\s+(?:of\s+)?{_UNIT}\s+ago\b"),
    "within": re.compile(rf"\b(?:in|over|during|within)\s+the\s+(?:last|past)\s+"
                         rf"(?:{_NUM}\s+)?{_UNIT}\b"),
    "rel": re.compile(r"\b(the\s+day\s+before\s+yesterday|yesterday|today|tonight|"
                      r"this\s+morning|this\s+afternoon|this\s+evening|last\s+night|"
                      r"(?:last|this|past|previous)\s+(?:week|weekend|month|year)|"
                      r"earlier\s+this\s+(?:week|month|year))\b"),
    "weekday": re.compile(r"\b(?:(last|this|past|on)\s+)?(monday|tuesday|wednesday|thursday|"
                          r"friday|saturday|sunday)\b"),
    "season": re.compile(r"\b(last|this|in\s+the|during\s+the|over\s+the)\s+"
                         r"(spring|summer|autumn|fall|winter)\b"),
}


def _iso(day: dt.date) -> str:
    return day.isoformat()


def _day(day: dt.date) -> Range:
    return _iso(day), _iso(day + dt.timedelta(days=1))


def _span(start: dt.date, end: dt.date) -> Range:
    """[start, end] inclusive of both days."""
    return _iso(start), _iso(end + dt.timedelta(days=1))


def _month(year: int, month: int) -> Range:
    start = dt.date(year, month, 1)
    end = dt.date(year + (month == 12), month % 12 + 1, 1)
    return _iso(start), _iso(end)


def _latest_month(today: dt.date, month: int) -> int:
    """The year of the latest ``month`` that has begun by ``today``."""
    return today.year if month <= today.month else today.year - 1


def _safe_date(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def _latest_day(today: dt.date, month: int, day: int) -> dt.date | None:
    this_year = _safe_date(today.year, month, day)
    if this_year is not None and this_year <= today:
        return this_year
    return _safe_date(today.year - 1, month, day)


def _number(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS.get(word, 1)


def _relative(phrase: str, today: dt.date) -> Range | None:
    words = phrase.split()
    monday = today - dt.timedelta(days=today.weekday())
    if phrase == "yesterday":
        return _day(today - dt.timedelta(days=1))
    if phrase == "last night":  # written up the night itself or the next morning
        return _span(today - dt.timedelta(days=1), today)
    if words[0] in ("today", "tonight") or phrase.startswith("this ") and words[1] in (
            "morning", "afternoon", "evening"):
        return _day(today)
    if phrase.startswith("the day before"):
        return _day(today - dt.timedelta(days=2))
    unit = words[-1]
    if words[0] == "earlier" or words[0] == "this":
        if unit == "week":
            return _span(monday, today)
        if unit == "weekend":
            saturday = monday + dt.timedelta(days=5)
            return _span(saturday, saturday + dt.timedelta(days=1))
        if unit == "month":
            return _span(today.replace(day=1), today)
        return _span(today.replace(month=1, day=1), today)
    if words[0] == "past":  # a rolling window
        return _span(today - dt.timedelta(days=_UNITS.get(unit, 7)), today)
    # last / previous: the calendar period before this one. "Last week" is
    # said of both the calendar week before this one and the past seven days:
    # the range covers both (the date list is one vote in the fusion).
    if unit == "week":
        return _span(min(monday - dt.timedelta(days=8), today - dt.timedelta(days=7)), today)
    if unit == "weekend":
        saturday = monday - dt.timedelta(days=2)
        return _span(saturday, saturday + dt.timedelta(days=1))
    if unit == "month":
        last = today.replace(day=1) - dt.timedelta(days=1)
        return _month(last.year, last.month)
    return _span(dt.date(today.year - 1, 1, 1), dt.date(today.year - 1, 12, 31))


def _ago(n: int, unit: str, today: dt.date) -> Range:
    """"N units ago" is approximate: the day N units back, give or take a
    third of a unit (a day for days, two days for weeks, ten for months);
    years: that calendar year."""
    days = _UNITS[unit]
    center = today - dt.timedelta(days=n * days)
    if days == 365:
        return _span(dt.date(center.year, 1, 1), dt.date(center.year, 12, 31))
    slack = dt.timedelta(days=max(1, days // 3))
    return _span(center - slack, min(center + slack, today))


def _weekday(which: str | None, name: str, today: dt.date) -> Range:
    back = (today.weekday() - WEEKDAYS[name]) % 7
    if which == "last" and back == 0:
        back = 7
    return _day(today - dt.timedelta(days=back))


def _season(which: str, name: str, today: dt.date) -> Range:
    """The latest such season begun by ``today`` ("this", "in the"), or for
    "last" the one before it if today is still inside it."""
    first, last = SEASONS[name]
    spans = []
    for year in (today.year - 2, today.year - 1, today.year):
        start = dt.date(year, first, 1)
        end_year = year + 1 if last < first else year
        end = dt.date(end_year + (last == 12), last % 12 + 1, 1) - dt.timedelta(days=1)
        spans.append((start, end))
    begun = [s for s in spans if s[0] <= today]
    pick = begun[-1]
    if which == "last" and pick[1] >= today and len(begun) > 1:
        pick = begun[-2]
    return _span(*pick)


def date_ranges(text: str, now: dt.date) -> list[Range]:
    """Every date range the query names, as [start, end) ISO days."""
    query = " ".join(text.lower().split())
    taken: list[tuple[int, int]] = []
    out: list[Range] = []

    def free(m: re.Match[str]) -> bool:
        return not any(m.start() < e and s < m.end() for s, e in taken)

    def add(m: re.Match[str], rng: Range | None) -> None:
        taken.append((m.start(), m.end()))
        if rng is not None and rng not in out:
            out.append(rng)

    for m in _RE["iso"].finditer(query):
        day = _safe_date(int(m[1]), int(m[2]), int(m[3]))
        add(m, _day(day) if day else None)
    for m in _RE["slash"].finditer(query):
        if free(m):
            day = _safe_date(int(m[3]), int(m[2]), int(m[1]))
            add(m, _day(day) if day else None)
    for key in ("day_month", "month_day"):
        for m in _RE[key].finditer(query):
            if not free(m):
                continue
            day_s, month_s, year_s = (m[1], m[2], m[3]) if key == "day_month" else (
                m[2], m[1], m[3])
            month_n, day_n = MONTHS[month_s], int(day_s)
            found = _safe_date(int(year_s), month_n, day_n) if year_s else _latest_day(
                now, month_n, day_n)
            add(m, _day(found) if found else None)
    for m in _RE["month_year"].finditer(query):
        if free(m):
            add(m, _month(int(m[2]), MONTHS[m[1]]))
    for m in _RE["within"].finditer(query):
        if free(m):
            n = _number(m[1]) if m[1] else 1
            add(m, _span(now - dt.timedelta(days=n * _UNITS[m[2]]), now))
    for m in _RE["ago"].finditer(query):
        if free(m):
            add(m, _ago(_number(m[1]), m[2], now))
    for m in _RE["rel"].finditer(query):
        if free(m):
            add(m, _relative(m[1], now))
    for m in _RE["season"].finditer(query):
        if free(m):
            add(m, _season(m[1].split()[0], m[2], now))
    for m in _RE["weekday"].finditer(query):
        if free(m):
            add(m, _weekday(m[1], m[2], now))
    for m in _RE["month"].finditer(query):
        if not free(m):
            continue
        prep, name = m[1], m[2]
        if name in _AMBIGUOUS and prep is None:
            continue
        month = MONTHS[name]
        if prep == "this":
            year = now.year
        elif prep == "last":
            year = now.year - 1 if month >= now.month else now.year
        else:
            year = _latest_month(now, month)
        rng = _month(year, month)
        if prep == "since":
            rng = (rng[0], _iso(now + dt.timedelta(days=1)))
        add(m, rng)
    for m in _RE["year"].finditer(query):
        if free(m):
            year = int(m[2])
            rng = _span(dt.date(year, 1, 1), dt.date(year, 12, 31))
            if m[1] == "since":
                rng = (rng[0], _iso(now + dt.timedelta(days=1)))
            add(m, rng)
    return out


_LATEST = re.compile(
    r"\b(latest|newest|most\s+recent(?:ly)?|recent(?:ly)?|lately|last\s+time|currently|current|"
    r"nowadays|these\s+days|right\s+now|at\s+the\s+moment|any\s*more|still|so\s+far|"
    r"up\s+to\s+date|as\s+of\s+now|now|in\s+the\s+end|"
    # "any news on X", "any update about X": a question about where X stands
    r"any\s+(?:news|updates?|progress)|what(?:'s|\s+is)\s+new\s+(?:with|on)|"
    r"how\s+(?:did|does)\b[^?.!]*\bturn(?:ed)?\s+out)\b"
    r"|\b(?:when|what|where|how|who)\b[^?.!]*\b(?:did|was|were|have|has)\b[^?.!]*\blast\b"
    # "how is X doing / going / coming along": a question about the current state
    r"|\bhow(?:'s|\s+is|\s+are|\s+has|\s+have)\b[^?.!]*\b(?:doing|going(?!\s+to\b)|coming\s+along|"
    r"getting\s+on|getting\s+along|holding\s+up|progressing|settling)\b"
    r"|\blast\s+(?!(?:week|weekend|month|year|night|spring|summer|autumn|fall|winter|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|\d)\b)[a-z]+")


# Words of the "latest" cues that say when, not what: a "latest" question's
# topical words are its full-text words without these (and without the
# person's name, which BM25 weighs ~0 when most entries hold it), so an entry
# that only shares "latest", "currently" or a name with the question is not
# on its topic (search.sql, latest_topical).
LATEST_CUE_WORDS = frozenset("""latest newest most recent recently lately last time currently
current nowadays these days right now moment anymore any more still so far up to date as of end
news update updates progress turn turned out doing going coming along getting holding progressing
settling""".split())


_LAST_PERIOD = re.compile(
    r"\blast\s+(?:week|weekend|month|year|night|spring|summer|autumn|fall|winter|monday|"
    r"tuesday|wednesday|thursday|friday|saturday|sunday|\d+)\b|\b(?:in|over|during|within)"
    r"\s+the\s+(?:last|past)\b")


def wants_latest(text: str) -> bool:
    """True for a question about the newest entry on something ("last week"
    and other periods are dates, not this)."""
    query = _LAST_PERIOD.sub(" ", " ".join(text.lower().split()))
    return _LATEST.search(query) is not None


_RELATIVE_WORDS = frozenset("""yesterday today tonight ago last past previous earlier week
weeks weekend month months year years day days morning afternoon evening night""".split())


def relative_words(text: str, now: dt.date) -> set[str]:
    """Words of the query's relative date phrases (not its explicit dates)."""
    query = " ".join(text.lower().split())
    out: set[str] = set()
    for key in ("ago", "within", "rel", "weekday", "season"):
        for m in _RE[key].finditer(query):
            out |= {w for w in m[0].split() if w in _RELATIVE_WORDS}
    return out
