"""Bad sources for ``kbstore copy SRC DST --prune``: garbage, empty, text or
truncated files, a store with bytes overwritten, another program's SQLite
file, a schema from the future, a missing file or a folder, stores damaged
through SQL (a vector cut short or NaN, a bad path, a NUL or binary field,
another embedder's or no fingerprint, a table dropped), an empty store and
one holding a fifth of the destination -- among good sources.

*Accepted*: the copy exited 0, the destination holds exactly what the
source holds (plain SQL) minus the documents the report skipped, which kept
their old version. *Skipped with reason*: the command exited 1 with a
one-line reason and the destination is unchanged -- or, for a removal
refused as a mistake, holds the source's documents with nothing deleted.
*Unaccounted*: any other outcome; *crashes*: a traceback or an exit status
other than 0 and 1; *good lost*: a good source not accepted. The
destination must stay healthy throughout (plain-SQL checker, no NaN or
zero vector)."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import struct
from pathlib import Path
from typing import Any

from benchmarks.reliability_check import check_store, contents
from benchmarks.reliability_docs import make_docs, open_store
from benchmarks.reliability_fuzz import GOOD, _finish, _result, _sample, bad_vectors_stored

DST_DOCS = 50
FP32 = json.dumps({"dim": 32, "document_prefix": "", "model": "hashing-bow", "name": "fake",
                   "query_prefix": ""})
SQL_DAMAGE: list[tuple[str, tuple[Any, ...]]] = [
    ("UPDATE vector_data SET embedding = x'0000' WHERE vector_id = "
     "(SELECT min(vector_id) FROM vector_data)", ()),
    ("UPDATE vector_data SET embedding = ? WHERE vector_id = "
     "(SELECT max(vector_id) FROM vector_data)", (struct.pack("64f", *[float("nan")] * 64),)),
    ("UPDATE vector_data SET embedding = ? WHERE vector_id = "
     "(SELECT min(vector_id) FROM vector_data)", (struct.pack("64f", *[float("inf")] * 64),)),
    ("UPDATE vector_data SET embedding = zeroblob(256)", ()),
    ("UPDATE documents SET path = '../../etc/passwd' WHERE id = 1", ()),
    ("UPDATE documents SET path = '/abs/path.md' WHERE id = 2", ()),
    ("UPDATE documents SET body = ? WHERE id = 2", ("a\x00b",)),
    ("UPDATE documents SET title = x'ff00fe' WHERE id = 3", ()),
    ("UPDATE documents SET body = 12345 WHERE id = 4", ()),
    ("UPDATE documents SET body = ? WHERE id = 5", ("x" * 3_000_000,)),
    ("UPDATE meta SET value = ? WHERE key = 'embedder'", (FP32,)),
    ("UPDATE meta SET value = 'not json' WHERE key = 'embedder'", ()),
    ("DELETE FROM meta WHERE key = 'embedder'", ()),
    ("DROP TABLE documents_fts", ()),
    ("DROP TABLE hype_questions", ()),
    ("DROP TABLE meta", ()),
    ("DROP TABLE documents", ()),
    ("PRAGMA user_version = 99", ()),
    ("PRAGMA user_version = 1", ()),
    ("UPDATE derived SET content_hash = 'x'", ()),
]


def _sql_variant(template: Path, target: Path, statement: str, params: tuple[Any, ...]) -> None:
    from kbstore.backends.sqlite.connection import connect

    shutil.copyfile(template, target)
    conn = connect(target, mode="write")
    try:
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute(statement, params)
        conn.commit()
    finally:
        conn.close()


def _source(rng: random.Random, work: Path, k: int, good: Path, stores: dict[str, Path]
            ) -> tuple[Path, str]:
    """(a source for input ``k``, its kind)."""
    src = work / f"src-{k}.sqlite"
    kind = rng.choices(["good", "bytes", "sql", "store", "odd"], [20, 30, 30, 10, 10])[0]
    data = good.read_bytes()
    if kind == "good":
        shutil.copyfile(good, src)
    elif kind == "bytes":
        how = rng.choice(["garbage", "empty", "text", "truncated", "overwritten", "header"])
        if how == "garbage":
            blob = bytes(rng.randrange(256) for _ in range(rng.randint(1, 5000)))
        elif how == "empty":
            blob = b""
        elif how == "text":
            blob = b"title: not a database\n" * rng.randint(1, 50)
        elif how == "truncated":
            blob = data[:rng.randrange(1, len(data))]
        else:
            blob, lo = bytearray(data), 0 if how == "header" else 100
            hi = 100 if how == "header" else len(data)
            for _ in range(rng.randint(1, 40)):
                blob[rng.randrange(lo, hi)] = rng.randrange(256)
            blob = bytes(blob)
        src.write_bytes(blob)
        kind = f"bytes:{how}"
    elif kind == "sql":
        n = rng.randrange(len(SQL_DAMAGE))
        _sql_variant(good, src, *SQL_DAMAGE[n])
        kind = f"sql:{n}"
    elif kind == "store":
        name = rng.choice(sorted(stores))
        shutil.copyfile(stores[name], src)
        kind = f"store:{name}"
    else:
        how = rng.choice(["missing", "folder", "foreign"])
        if how == "folder":
            src = work / f"folder-{k}"
            src.mkdir()
        elif how == "foreign":
            conn = sqlite3.connect(src)
            conn.execute("CREATE TABLE documents (path TEXT, body TEXT)")
            conn.execute("INSERT INTO documents VALUES ('projects/doc-0001.md', 'x')")
            conn.commit()
            conn.close()
        kind = f"odd:{how}"
    return src, kind


def run(workdir: Path, inputs: int, seed: int = 0) -> dict[str, Any]:
    from click.testing import CliRunner

    from kbstore.cli import _register, cli

    _register()
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    template, good = workdir / "dst-template.sqlite", workdir / "good.sqlite"
    stores = {"empty": workdir / "empty.sqlite", "fifth": workdir / "fifth.sqlite"}
    with open_store(template, hype=False) as store:
        store.upsert_many(make_docs(range(DST_DOCS), "m0x0"))
    with open_store(good, hype=False) as store:  # the destination's last tenth missing
        store.upsert_many(make_docs(range(DST_DOCS * 9 // 10), GOOD))
    open_store(stores["empty"], hype=False).close()
    with open_store(stores["fifth"], hype=False) as store:
        store.upsert_many(make_docs(range(DST_DOCS // 5), GOOD))
    before = contents(template)
    stats = _result(inputs)
    stats["kinds"] = {}
    dst = workdir / "dst.sqlite"
    for k in range(inputs):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{dst}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(template, dst)
        src, kind = _source(rng, workdir, k, good, stores)
        try:
            held = contents(src)
        except Exception:
            held = None  # not readable with plain SQL either
        result = CliRunner().invoke(cli, ["copy", str(src), str(dst), "--prune", "--json"])
        verdict = _judge(result, held, before, contents(dst), dst)
        stats["kinds"].setdefault(kind.split(":")[0], {}).setdefault(verdict, 0)
        stats["kinds"][kind.split(":")[0]][verdict] += 1
        if verdict == "crash":
            stats["crashes"] += 1
        elif verdict in ("accepted", "skipped_with_reason"):
            stats[verdict] += 1
        else:
            stats["unaccounted"] += 1
        if verdict not in ("accepted", "skipped_with_reason"):
            _sample(stats, f"{kind}: {verdict}: exit {result.exit_code} "
                           f"{(result.stderr or '')[-200:]!r} {result.exception!r}")
        if kind == "good" and verdict != "accepted":
            stats["good_lost"] += 1
        damage = [f"{kind}: {k}={v}" for k, v in check_store(dst).items()
                  if v and k != "documents"]
        if damage or bad_vectors_stored(dst):
            stats["store_damage"] += damage or [f"{kind}: invalid vectors stored"]
        if src.is_dir():
            src.rmdir()
        else:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{src}{suffix}").unlink(missing_ok=True)
    return _finish(stats, dst)


def _judge(result: Any, held: dict[str, Any] | None, before: dict[str, Any],
           after: dict[str, Any], dst: Path) -> str:
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return "crash"
    err = result.stderr or ""
    if result.exit_code not in (0, 1) or "Traceback" in err:
        return "crash"
    if result.exit_code == 1:
        reason = err.strip().splitlines()[-1:] if err.strip() else []
        if not reason:
            return "refused without a reason"
        if after == before:
            return "skipped_with_reason"
        if held is not None and "kept " in err and after == {**before, **held}:
            return "skipped_with_reason"  # copied; the removal refused as a mistake
        return "refused, destination changed"
    if held is None:
        return "copied from a file plain SQL cannot read"
    report = json.loads(result.stdout.strip().splitlines()[-1])
    listed = [*report.get("skipped", []), *report.get("write", {}).get("skipped", [])]
    skipped = {s["path"] if isinstance(s, dict) else s for s in listed}
    want = {p: v for p, v in held.items() if p not in skipped}
    want.update({p: before[p] for p in skipped if p in before})
    return "accepted" if after == want else "copied, destination not the source's"
