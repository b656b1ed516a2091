"""A drop-in for picobot's ``KnowledgeBase`` (seed 000) backed by kbstore.

picobot keeps its knowledge as markdown files under ``workspace/knowledge``;
those files stay the source of truth. This class writes them exactly as
picobot does (YAML frontmatter: title, topic, tags, created, updated) and
indexes them in one SQLite file (default ``~/.picobot/data/kb.sqlite``).

Order of work in :meth:`KnowledgeBase.store`: the file is written first
(atomically), the index second. A crash in between leaves a file the index
does not know yet; the first search of every instance reconciles the index
with the folder by content hash, which repairs exactly that.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import unicodedata
from pathlib import Path
from typing import Any

from .backends import is_url
from .documents import MAX_FILE_BYTES, TOPICS, make_document, normalize_tags
from .embed import Embedder
from .errors import EmptyQueryError, InvalidDocumentError
from .files import atomic_write, render_markdown
from .ingest import parse_file
from .query import is_blank

__all__ = ["KnowledgeBase", "atomic_write", "render_markdown", "slugify"]
# Re-index rounds after a store(): another process may rewrite the same file
# between our write and our index; the last writer's file must win.
STORE_ROUNDS = 5
MAX_SAME_SLUG = 1000  # titles sharing one file name: c-tips.md, c-tips-2.md, ...

DEFAULT_DATA_DIR = Path("~/.picobot/data")
DEFAULT_WORKSPACE = Path("~/.picobot/workspace")
DB_NAME = "kb.sqlite"
# Used when no embedder is passed and the database has none recorded yet
# (None = nomic). A test suite that builds ``KnowledgeBase(workspace=tmp_path)``
# monkeypatches this and DEFAULT_DATA_DIR instead of touching every call.
DEFAULT_EMBEDDER: Embedder | str | None = None
MAX_RESULTS = 10
MAX_SLUG_CHARS = 80

TOPIC_README = {
    "self": "What I (the agent) have learned about how I work: habits, mistakes to avoid.",
    "user": "Facts about the user: preferences, people, routines.",
    "projects": "One file per project facet: decisions with rationale, commands that work.",
    "domains": "General know-how by subject, independent of any one project.",
    "journal": "Dated raw notes (YYYY-MM-DD-title.md); they fade in search over time.",
}

_SLUG_JUNK = re.compile(r"[\W_]+", re.UNICODE)
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def _today() -> dt.date:
    """Today's date for frontmatter (a function so tests can move the clock)."""
    return dt.date.today()


def slugify(title: str) -> str:
    """A file-name-safe slug: lower-case letters/digits (any script) joined by '-'."""
    slug = _SLUG_JUNK.sub("-", title.lower()).strip("-")
    if len(slug) > MAX_SLUG_CHARS:
        cut = slug[:MAX_SLUG_CHARS]
        slug = (cut.rsplit("-", 1)[0] if "-" in cut else cut).strip("-")
    if not slug:
        raise InvalidDocumentError(f"title {title!r} has no letters or digits to name a file")
    return slug


def check_topic(topic: Any) -> str:
    """The topic as a folder name; anything that could leave the knowledge
    folder (separators, '..', NUL, absolute paths) or is unknown is refused."""
    if not isinstance(topic, str) or not topic.strip():
        raise InvalidDocumentError("topic must be a non-empty string")
    topic = topic.strip()
    if ("\x00" in topic or "/" in topic or "\\" in topic or topic in (".", "..")
            or _DRIVE.match(topic)):
        raise InvalidDocumentError(f"topic {topic!r} would escape the knowledge folder")
    if topic not in TOPICS:
        # Only these folders are indexed; a file elsewhere would never be found.
        raise InvalidDocumentError(f"unknown topic {topic!r}; choose one of: {', '.join(TOPICS)}")
    return topic


def check_title(title: Any) -> str:
    """The title on one line. Path-like titles ('../x', '/etc/passwd', NUL)
    are refused outright rather than silently slugged into something else;
    an ordinary '/' inside a word ('TCP/IP') is fine and becomes '-'."""
    if not isinstance(title, str) or not title.strip():
        raise InvalidDocumentError("title must be a non-empty string")
    if "\x00" in title:
        raise InvalidDocumentError("title contains a NUL byte")
    try:  # checked here, or the body (which carries the title as its heading) is blamed
        title.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidDocumentError("title is not valid UTF-8 (lone surrogates)") from None
    # One spelling per title: 'é' composed and 'e'+U+0301 name the same file.
    title = " ".join(unicodedata.normalize("NFC", title).split())
    if title.startswith(("/", "\\", "~")) or _DRIVE.match(title) or any(
            part.strip() == ".." for part in re.split(r"[\\/]", title)):
        raise InvalidDocumentError(f"title {title!r} looks like a path leaving the knowledge "
                                   "folder")
    return title


def _existing_created(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        import frontmatter

        return frontmatter.loads(path.read_text(encoding="utf-8")).metadata.get("created")
    except Exception:  # an unreadable old file just gets a fresh date
        return None


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _as_on_disk(folder: Path, name: str) -> str:
    """``name`` as the folder spells it: a note made on macOS (or synced from
    there) has a decomposed name ('cafe' + U+0301), which Linux keeps as
    another file than the composed 'café.md' the slug gives."""
    if name.isascii():
        return name
    try:
        spellings = [e for e in os.listdir(folder) if e != name and _nfc(e) == name]
    except OSError:
        return name
    return name if os.path.lexists(folder / name) or not spellings else min(spellings)


class KnowledgeBase:
    """picobot's knowledge base: markdown files + a kbstore index.

    ``base_path`` is the knowledge folder itself; else ``workspace/knowledge``
    (and ``workspace/skills`` is indexed too). The database lives at
    ``data_dir/kb.sqlite`` unless ``db`` names the file. ``store`` is an
    already-open :class:`kbstore.KnowledgeStore` to index into instead (a
    server sharing its warm model); it stays open on :meth:`close`, its owner
    closes it. ``embedder`` overrides the default nomic model
    (``inference_mode`` 'local' or 'remote'); ``hype``/``model`` control
    HyPE question generation (``model`` is the litellm model name; ``hype``
    None: on unless ``KBSTORE_HYPE=0``, as for every command).
    """

    def __init__(self, base_path: str | os.PathLike[str] | None = None,
                 workspace: str | os.PathLike[str] | None = None,
                 data_dir: str | os.PathLike[str] | None = None,
                 inference_mode: str = "local", hype: bool | None = None,
                 model: str | None = None,
                 embedder: Embedder | str | None = None,
                 db: str | os.PathLike[str] | None = None, store: Any = None) -> None:
        if base_path is not None:
            self.base = Path(base_path).expanduser()
            self.root = self.base  # what reindex scans
        else:
            ws = Path(workspace).expanduser() if workspace is not None else \
                DEFAULT_WORKSPACE.expanduser()
            self.base = ws / "knowledge"
            self.root = ws
        self.data_dir = Path(data_dir).expanduser() if data_dir is not None else \
            DEFAULT_DATA_DIR.expanduser()
        # The index: a file (default data_dir/kb.sqlite) or a postgresql:// URL.
        self.db: str | Path = (store.location if store is not None else
                               str(db) if db is not None and is_url(db) else
                               Path(db).expanduser() if db is not None else
                               self.data_dir / DB_NAME)
        self.inference_mode = inference_mode
        self.hype = hype
        self.model = model
        self._embedder = embedder
        self._store: Any = store
        self._owns_store = store is None
        self._reconciled = False

    @property
    def db_path(self) -> Path:
        """The index file (for a file-backed index)."""
        return Path(self.db)

    # -- lifecycle ---------------------------------------------------------

    @property
    def knowledge_store(self) -> Any:
        """The underlying :class:`kbstore.KnowledgeStore`, opened on first use
        (opening may load the embedding model: only when really needed)."""
        if self._store is None:
            from .store import KnowledgeStore

            if isinstance(self.db, Path):
                self.db.parent.mkdir(parents=True, exist_ok=True)
            embedder = self._embedder if self._embedder is not None else DEFAULT_EMBEDDER
            self._store = KnowledgeStore.open(self.db, embedder, hype=self.hype,
                                              hype_model=self.model,
                                              inference_mode=self.inference_mode)
        return self._store

    def close(self) -> None:
        if self._store is not None and self._owns_store:
            self._store.close()
            self._store = None
        self._reconciled = False

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- picobot's API -----------------------------------------------------

    def ensure_structure(self) -> None:
        """Create the topic folders, each with a README.md (kept if present;
        READMEs are never indexed)."""
        for topic in TOPICS:
            folder = self.base / topic
            folder.mkdir(parents=True, exist_ok=True)
            readme = folder / "README.md"
            if not readme.exists():
                atomic_write(readme, f"# {topic}\n\n{TOPIC_README[topic]}\n"
                                     "Frontmatter: title, topic, tags, created, updated.\n")

    def store(self, topic: str, title: str, content: str,
              tags: list[str] | str | None = None) -> str:
        """Write ``<topic>/<slug>.md`` (journal: ``journal/<date>-<slug>.md``),
        then index it. Returns the document path relative to the knowledge
        folder. Storing the same title again updates the file, keeping
        ``created``; another title with the same slug gets ``<slug>-2.md``
        (a file is never written over with another title's entry)."""
        topic, title = check_topic(topic), check_title(title)
        if not isinstance(content, str):
            raise InvalidDocumentError("content must be a string")
        if "\x00" in content:
            raise InvalidDocumentError("content contains a NUL byte")
        tag_list = normalize_tags(tags)
        today = _today()
        stem = slugify(title)
        if topic == "journal" and not stem.startswith(today.isoformat()):
            stem = f"{today.isoformat()}-{stem}"
        body = content.strip()
        if not body.startswith("# "):
            body = f"# {title}\n\n{body}" if body else f"# {title}"
        for _ in range(MAX_SAME_SLUG):  # each miss means another writer took a name
            rel, target, new = self._file_for(topic, stem, title)
            created = None if new else _existing_created(target)
            created = created or today
            meta = {"title": title, "topic": topic, "tags": tag_list, "created": created,
                    "updated": today}
            # Refuse what the index would refuse before a file exists that every
            # later import would skip (e.g. a 5,000-character title).
            make_document(rel, title=title, body=body, tags=tag_list, created=created,
                          updated=today)
            text = render_markdown(meta, body)
            size = len(text.encode("utf-8"))
            if size > MAX_FILE_BYTES:  # import would skip the file
                raise InvalidDocumentError(f"the entry would be a {size}-byte file, over "
                                           f"the {MAX_FILE_BYTES}-byte limit of one entry")
            try:
                atomic_write(target, text, replace=not new)
                break
            except FileExistsError:  # another process took the name: look again
                continue
        else:
            raise InvalidDocumentError(f"could not find a free file name for {title!r} in "
                                       f"{self.base / topic}")
        try:
            self._index_file(target, rel)
        except BaseException:
            self._reconciled = False  # the next search repairs the index
            raise
        return rel

    def _file_for(self, topic: str, stem: str, title: str) -> tuple[str, Path, bool]:
        """(document path, file, is it new) for ``title``: the first of
        ``stem.md``, ``stem-2.md``, ... that is free or holds the same title
        (case and spacing aside). A file of another title -- 'C++ tips' and
        'C# tips' share a slug -- or one that cannot be read is never
        written over."""
        wanted = _nfc(title).casefold().split()
        for n in range(1, MAX_SAME_SLUG + 1):
            name = _as_on_disk(self.base / topic, f"{stem}.md" if n == 1 else f"{stem}-{n}.md")
            rel, target = f"{topic}/{name}", self.base / topic / name
            if not os.path.lexists(target):
                return rel, target, True
            try:
                if _nfc(parse_file(target, rel).title).casefold().split() == wanted:
                    return rel, target, False
            except (InvalidDocumentError, OSError):
                pass
        raise InvalidDocumentError(f"{MAX_SAME_SLUG} files in {self.base / topic} already "
                                   f"use the name {stem}.md; choose another title")

    def _index_file(self, target: Path, rel: str) -> None:
        """Index the file as it is on disk, then look again: if another
        process replaced it meanwhile (two agents storing the same title),
        index again, so the index never keeps the older version."""
        indexed = None
        for _ in range(STORE_ROUNDS):
            doc = parse_file(target, rel)
            if indexed is not None and doc.content_hash() == indexed:
                return
            self.knowledge_store.upsert_many([doc])
            indexed = doc.content_hash()

    def search(self, query: str, topic: str | None = None, *,
               min_similarity: float | None = None) -> str:
        """Hybrid search; the formatted text picobot hands its agent.
        ``min_similarity`` overrides the database's confidence floor."""
        if not isinstance(query, str) or is_blank(query):
            return "No results: the search query is empty."
        self._ensure_reconciled()
        floor = {} if min_similarity is None else {"min_similarity": min_similarity}
        try:
            hits = self.knowledge_store.search(query, topic=topic, limit=MAX_RESULTS, **floor)
        except EmptyQueryError:
            return "No results: the search query is empty."
        where = f" in topic '{topic}'" if topic else ""
        if not hits:
            return f"No results for '{query}'{where}."
        lines = [f"Found {len(hits)} result(s) for '{query}'{where}:", ""]
        for n, hit in enumerate(hits, start=1):
            tags = ", ".join(hit.tags) if hit.tags else "-"
            lines.append(f"{n}. {hit.title} ({hit.path})")
            lines.append(f"   tags: {tags} | score: {hit.score:.4f}")
            lines.append(f"   {hit.snippet}")
        return "\n".join(lines)

    def reindex(self) -> Any:
        """Reconcile the index with the folder by content hash: new and
        changed files are (re)embedded, unchanged ones cost nothing, deleted
        ones leave the index. Returns a kbstore ImportReport (None when the
        folder does not exist yet)."""
        if not self.root.is_dir():
            # A missing (e.g. unmounted) folder must not empty the index.
            return None
        # Safe default: a half-missing folder (knowledge/ renamed mid-sync)
        # keeps its documents; only ordinary removals are applied.
        report = self.knowledge_store.import_directory(self.root)
        self._reconciled = True
        return report

    def sync(self, remote: str | None = None) -> str:
        """Bring the index up to date after the files changed on disk.

        kbstore does no git: picobot keeps its own pull/merge/push code for
        ``remote`` and calls this (or :meth:`reindex`) afterwards.
        """
        report = self.reindex()
        if report is None:
            return f"Nothing to index: {self.root} does not exist."
        return (f"Index updated: {report.added} added, {report.updated} updated, "
                f"{report.deleted} deleted, {report.unchanged} unchanged.")

    def _ensure_reconciled(self) -> None:
        if not self._reconciled:
            self.reindex()
