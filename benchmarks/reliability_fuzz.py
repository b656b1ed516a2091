"""Random bad inputs for every importer: markdown files (frontmatter,
encodings), JSONL records, npz files and LLM answers.

Each bad item must cost that item only, with a reason in the report; nothing
may raise anything but kbstore's own error with a reason (for a whole npz
file, which is one item); good items around the bad ones must be stored;
and the store must stay healthy (the plain-SQL checker, and no NaN, infinite
or zero vector stored). The hostile-query fuzzer is
:func:`benchmarks.reliability_scenarios.run_query_fuzz`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import struct
import subprocess
import sys
import types
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.reliability_check import check_store, reading
from benchmarks.reliability_docs import DIM, doc_path, is_postgres, new_store
from kbstore import FakeEmbedder, KBStoreError, KnowledgeStore
from kbstore.documents import make_document

GOOD = "m7x1"  # the marker of the good items among the bad ones


def _result(inputs: int) -> dict[str, Any]:
    return {"inputs": inputs, "accepted": 0, "skipped_with_reason": 0, "unaccounted": 0,
            "crashes": 0, "good_lost": 0, "store_damage": [], "samples": []}


def _sample(stats: dict[str, Any], text: str) -> None:
    if len(stats["samples"]) < 10:
        stats["samples"].append(text[:300])


def bad_vectors_stored(db: Path | str) -> int:
    """NaN, infinite, zero or wrong-size vectors in the file."""
    if is_postgres(db):
        from benchmarks.reliability_check_pg import bad_vectors_stored as on_postgres

        return on_postgres(str(db))
    with reading(db) as conn:
        dim = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'embedder'"
                                      ).fetchone()[0])["dim"]
        bad = 0
        for (blob,) in conn.execute("SELECT embedding FROM vector_data"):
            vec = np.frombuffer(blob, dtype=np.float32) if len(blob) % 4 == 0 else None
            bad += vec is None or vec.shape != (dim,) or not np.all(np.isfinite(vec)) \
                or not vec.any()
    return bad


def _finish(stats: dict[str, Any], db: Path | str) -> dict[str, Any]:
    counts = check_store(db)
    stats["store_damage"] = [f"{k}={v}" for k, v in counts.items() if v and k != "documents"]
    if bad_vectors_stored(db):
        stats["store_damage"].append(f"{bad_vectors_stored(db)} invalid vectors stored")
    return stats


# -- markdown files ------------------------------------------------------------------------


def _good_file(k: int) -> bytes:
    return (f"---\ntitle: good {k} {GOOD}\ntags: [fuzz]\n---\nA good note {k}. {GOOD}\n"
            ).encode()


BAD_FILES: list[Callable[[random.Random], bytes]] = [
    lambda r: b"---\ntitle: [unclosed\n---\nbody",
    lambda r: b"---\ntitle: bad date\ncreated: 2024-02-30\n---\nbody",
    lambda r: b"---\ntitle: bad month\nupdated: 2024-13-01\n---\nbody",
    lambda r: b"---\ntitle: !!int abc\n---\nbody",
    lambda r: b"---\ntitle: x\ntags: !!set {a, b}\n---\nbody",
    lambda r: b"---\n!!python/object/apply:os.system [\"echo pwned\"]\n---\nbody",
    lambda r: b"---\ntitle: !!binary aGVsbG8=\n---\nbody",
    lambda r: "\ufeff---\ntitle: bom\n---\nbody".encode(),
    lambda r: "---\ntitle: caf\xe9\n---\nlatin-1 body \xe9".encode("latin-1"),
    lambda r: "---\ntitle: utf16\n---\nbody".encode("utf-16"),
    lambda r: b"---\ntitle: nul\x00here\n---\nbody \x00 with NUL",
    lambda r: (b"---\na: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
               b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
               b"title: *d\n---\nbody"),
    lambda r: b"---\ntitle: " + b"T" * r.randint(10_000, 200_000) + b"\n---\nbody",
    lambda r: b"---\ntitle: " + b"[" * 5000 + b"\n---\nbody",
    lambda r: b"---\ntags: 5\n---\nbody",
    lambda r: b"---\ntags: {a: 1}\n---\nbody",
    lambda r: b"---\ntitle: 123\ntags: [1, null, [2]]\n---\nbody",
    lambda r: b"---\ntitle: null\n---\nbody",
    lambda r: b"---\ntitle: [a, b]\n---\nbody",
    lambda r: b"",
    lambda r: b"---",
    lambda r: b"---\n---",
    lambda r: b"---\ntitle: never closed\nbody",
    lambda r: bytes(r.randrange(256) for _ in range(r.randint(1, 3000))),
    lambda r: b'---\ntitle: "\\ud800 lone"\n---\nbody',
    lambda r: b"---\ntitle: ctrl \x1b[31m red\n---\nbody \x07\x08",
    lambda r: b"---\ntitle: big\n---\n" + b"x" * r.randint(1_000_000, 3_000_000),
    lambda r: b"---\r\ntitle: crlf\r\n---\r\nbody\r\n",
    lambda r: b"---\ntitle: a\ntitle: b\n---\nbody",
    lambda r: b"---\ncreated: 99999-01-01\nupdated: -5\n---\nbody",
    lambda r: b"---\ntopic: ../../etc\ndoc_type: 7\n---\nbody",
]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    if data and rng.random() < 0.3:
        cut = rng.randrange(len(data))
        return data[:cut] + bytes(rng.randrange(256) for _ in range(rng.randint(0, 8))) \
            + data[cut:]
    return data


def fuzz_files(workdir: Path, inputs: int, seed: int = 0) -> dict[str, Any]:
    """``inputs`` files (a fifth of them good) imported in rounds of 50."""
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    db, ws = new_store(workdir, "files"), workdir / "ws"
    stats = _result(inputs)
    with KnowledgeStore.open(db, FakeEmbedder(DIM), hype=False) as store:
        for start in range(0, inputs, 50):
            folder = ws / "knowledge" / "projects"
            if folder.exists():
                for f in folder.iterdir():
                    f.unlink()
            folder.mkdir(parents=True, exist_ok=True)
            good = set()
            names = {}
            for k in range(start, min(inputs, start + 50)):
                rel_path = f"projects/f-{k:05d}.md"
                if k % 5 == 0:
                    data = _good_file(k)
                    good.add(rel_path)
                else:
                    data = _mutate(rng, rng.choice(BAD_FILES)(rng))
                (folder / f"f-{k:05d}.md").write_bytes(data)
                names[rel_path] = k
            try:
                report = store.import_directory(ws, prune=False)
            except Exception as exc:
                stats["crashes"] += len(names)
                _sample(stats, f"import raised {type(exc).__name__}: {exc}")
                continue
            skipped = {s.path: s.reason for s in report.skipped}
            stored: set[str] = set(store.paths())
            for path in names:
                if path in stored:
                    stats["accepted"] += 1
                    doc = store.get(path)
                    if path in good and GOOD not in (doc.title if doc else ""):
                        stats["good_lost"] += 1
                elif skipped.get(path, "").strip():
                    stats["skipped_with_reason"] += 1
                    stats["good_lost"] += path in good
                else:
                    stats["unaccounted"] += 1
                    _sample(stats, f"{path}: neither stored nor skipped")
        stats["longest_title"] = max((len(d.title) for d in store.documents()), default=0)
    return _finish(stats, db)


# -- JSONL records -----------------------------------------------------------------------------


def _jsonl_line(rng: random.Random, k: int) -> tuple[str, bool]:
    """(one line, is it a good record)."""
    path = f"projects/j-{k:05d}.md"
    base: dict[str, Any] = {"path": path, "title": f"record {k}", "body": f"body of {k}",
                            "tags": ["fuzz"]}
    if k % 5 == 0:
        return json.dumps({**base, "title": f"good {k} {GOOD}"}), True
    fp = FakeEmbedder(DIM).fingerprint()
    vec = [1.0 / DIM ** 0.5] * DIM

    def vectors(doc: Any) -> dict[str, Any]:
        return {**base, "vectors": {"fingerprint": fp, "doc": doc}}

    bad: list[Callable[[], Any]] = [
        lambda: "not json {",
        lambda: "[1, 2, 3]",
        lambda: '"just a string"',
        lambda: {k2: v for k2, v in base.items() if k2 != "path"},
        lambda: {k2: v for k2, v in base.items() if k2 != "body"},
        lambda: {**base, "title": 5},
        lambda: {**base, "body": None},
        lambda: {**base, "tags": 5},
        lambda: {**base, "tags": [1, {"a": 2}]},
        lambda: {**base, "questions": 5},
        lambda: {**base, "questions": [1, None]},
        lambda: {**base, "questions": ["q?"] * 1000},
        lambda: {**base, "questions": ["x" * 20_000 + "?"]},
        lambda: {**base, "vectors": {}},
        lambda: {**base, "vectors": []},
        lambda: {**base, "vectors": {"fingerprint": fp, "doc": {}}},
        lambda: {**base, "vectors": {"fingerprint": fp, "doc": "x"}},
        lambda: vectors([float("nan")] * DIM),
        lambda: vectors([float("inf")] + vec[1:]),
        lambda: vectors([0.0] * DIM),
        lambda: vectors(vec[:5]),
        lambda: vectors([1e308] * DIM),
        lambda: vectors([True] * DIM),
        lambda: {**base, "questions": ["q1?", "q2?"],
                 "vectors": {"fingerprint": fp, "questions": [[float("nan")] * DIM, vec]}},
        lambda: {**base, "vectors": {"fingerprint": {"name": "other"}, "doc": vec}},
        lambda: {**base, "extra": []},
        lambda: {**base, "created": "2024-02-30"},
        lambda: {**base, "updated": 20240101},
        lambda: {**base, "path": "../../etc/passwd"},
        lambda: {**base, "path": ""},
        lambda: {**base, "path": "/abs/file.md"},
        lambda: {**base, "path": 7},
        lambda: {**base, "title": "T" * rng.randint(100_000, 2_000_000)},
        lambda: {**base, "body": "B" * rng.randint(1_000_000, 6_000_000)},
        lambda: '{"path": "' + path + '", "title": "lone \\ud800", "body": "x"}',
        lambda: '{"path": "' + path + '", "title": "nul \\u0000", "body": "x\\u0000"}',
        lambda: "[" * 100_000 + "]" * 100_000,
        lambda: '{"path": "' + path + '", "title": "t", "body": "b", "vectors": {"doc": NaN}}',
        lambda: {**base, "topic": ["x"], "doc_type": 3},
        lambda: b"\xff\xfe not utf-8".decode("latin-1"),
    ]
    value = rng.choice(bad)()
    return (value if isinstance(value, str) else json.dumps(value)), False


def fuzz_jsonl(workdir: Path, inputs: int, seed: int = 0) -> dict[str, Any]:
    """``inputs`` records (a fifth good), imported in files of 100 lines."""
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    db = new_store(workdir, "jsonl")
    stats = _result(inputs)
    with KnowledgeStore.open(db, FakeEmbedder(DIM), hype=False) as store:
        from kbstore.exchange import import_jsonl

        for start in range(0, inputs, 100):
            file = workdir / f"records-{start}.jsonl"
            lines = [(_jsonl_line(rng, k), k) for k in range(start, min(inputs, start + 100))]
            with open(file, "w", encoding="utf-8", errors="surrogatepass") as fh:
                for (line, _), _k in lines:
                    fh.write(line.replace("\n", " ") + "\n")
            try:
                report = import_jsonl(store, file)
            except Exception as exc:
                stats["crashes"] += len(lines)
                _sample(stats, f"import_jsonl raised {type(exc).__name__}: {exc}")
                continue
            skipped = {s.path: s.reason for s in report.skipped}
            for lineno, ((_, good), k) in enumerate(lines, start=1):
                path = f"projects/j-{k:05d}.md"
                doc = store.get(path)
                if skipped.get(f"{file}:{lineno}", "").strip():
                    stats["skipped_with_reason"] += 1
                    stats["good_lost"] += good
                elif doc is not None:
                    stats["accepted"] += 1
                    stats["good_lost"] += good and GOOD not in doc.title
                else:
                    stats["unaccounted"] += 1
                    _sample(stats, f"line {lineno} ({k}): neither stored nor skipped")
    return _finish(stats, db)


# -- npz files -----------------------------------------------------------------------------


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=True)
    return buf.getvalue()


def _npz(members: dict[str, bytes], compress: bool = False) -> bytes:
    buf = io.BytesIO()
    mode = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(buf, "w", mode) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buf.getvalue()


def _bomb(declared_mb: int) -> bytes:
    """A deflated .npy of zeros that expands to ``declared_mb`` MB, written
    in chunks (never held in memory)."""
    buf = io.BytesIO()
    rows = declared_mb * 1024 * 1024 // (4 * 256)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (rows, 256)})
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive, \
            archive.open("vectors.npy", "w", force_zip64=True) as member:
        member.write(header.getvalue())
        chunk = bytes(1024 * 1024)
        for _ in range(declared_mb):
            member.write(chunk)
    return buf.getvalue()


def _npz_input(rng: random.Random, docs: list[Any], k: int) -> tuple[bytes, bool, bool]:
    """(file bytes, allow_pickle, is it a good file)."""
    import hashlib

    from kbstore.embed import embedding_text

    ids = np.array([d.path for d in docs])
    hashes = np.array([hashlib.md5(d.body.encode()).hexdigest() for d in docs])
    vecs = FakeEmbedder(DIM).embed_documents(
        [embedding_text(d.title, d.tags, d.body) for d in docs])

    def arrays(**over: Any) -> bytes:
        base = {"vectors": vecs, "doc_ids": ids, "content_hashes": hashes}
        base.update(over)
        return _npz({f"{key}.npy": _npy_bytes(np.asarray(v)) for key, v in base.items()
                     if v is not None})

    if k % 5 == 0:
        return arrays(), False, True
    nan = vecs.copy()
    nan[rng.randrange(len(docs))] = np.nan
    choices: list[Callable[[], tuple[bytes, bool]]] = [
        lambda: (arrays(vectors=nan), False),
        lambda: (arrays(vectors=np.zeros_like(vecs)), False),
        lambda: (arrays(vectors=np.full_like(vecs, np.inf)), False),
        lambda: (arrays(vectors=vecs[:, :32]), False),
        lambda: (arrays(vectors=vecs.reshape(-1)), False),
        lambda: (arrays(vectors=vecs.reshape(len(docs), 8, -1)), False),
        lambda: (arrays(vectors=vecs.astype(np.float16)), False),
        lambda: (arrays(vectors=(vecs * 100).astype(np.int8)), False),
        lambda: (arrays(vectors=vecs.astype(np.complex64)), False),
        lambda: (arrays(vectors=np.array([["a"] * DIM] * len(docs))), False),
        lambda: (arrays(vectors=vecs[:-1]), False),
        lambda: (arrays(doc_ids=None), False),
        lambda: (arrays(doc_ids=np.arange(len(docs))), False),
        lambda: (arrays(doc_ids=np.array(["../../etc/passwd"] * len(docs))), False),
        lambda: (arrays(doc_ids=np.array(["x" * 100_000] * len(docs))), False),
        lambda: (arrays(content_hashes=np.array(["nope"] * len(docs))), False),
        lambda: (arrays(hype_doc_ids=ids[:2], hype_questions=np.array(["q?"])), False),
        lambda: (arrays(hype_doc_ids=ids[:2], hype_questions=np.array(["q?", "r?"]),
                        hype_vectors=np.zeros((3, 7))), False),
        lambda: (arrays(hype_doc_ids=ids[:2], hype_questions=np.array(["\x00?", "x" * 9999]),
                        hype_vectors=np.full((2, DIM), np.nan)), False),
        lambda: (arrays(vectors=np.array([object()] * len(docs), dtype=object)), False),
        lambda: (arrays(vectors=np.array([{"a": 1}] * len(docs), dtype=object)), True),
        lambda: (b"\x80\x04K\x01." + bytes(rng.randrange(256) for _ in range(50)), True),
        lambda: (bytes(rng.randrange(256) for _ in range(rng.randint(0, 5000))), False),
        lambda: (arrays()[:rng.randint(1, 200)], False),
        lambda: (_npz({"vectors.npy": b"not an npy", "doc_ids.npy": b"\x93NUMPY"}), False),
        lambda: (_npz({"readme.txt": b"hello"}), False),
        lambda: (_bomb(rng.choice((100, 300))), False),
        lambda: (_npz({"vectors.npy": _npy_bytes(vecs)[:128] + b"\x00" * 16,
                       "doc_ids.npy": _npy_bytes(ids),
                       "content_hashes.npy": _npy_bytes(hashes)}), False),
        lambda: (_fake_header(), False),
    ]
    data, pickle = rng.choice(choices)()
    return data, pickle, False


def _fake_header() -> bytes:
    """A .npy header claiming a 400 GB array over a few bytes."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (10**8, 1024)})
    return _npz({"vectors.npy": header.getvalue() + struct.pack("<f", 1.0) * 4,
                 "doc_ids.npy": _npy_bytes(np.array(["a"])),
                 "content_hashes.npy": _npy_bytes(np.array(["b"]))})


def fuzz_npz(workdir: Path, inputs: int, seed: int = 0) -> dict[str, Any]:
    """Runs :func:`_fuzz_npz_here` in a child whose address space is capped
    (2 GiB): a decompression bomb that got through would fail there, not
    take the machine."""
    from benchmarks.reliability_paths import ROOT

    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", "import sys; from benchmarks import "
                           "reliability_fuzz as f; f._npz_child(*sys.argv[1:])",
                           str(workdir), str(inputs), str(seed)], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=3600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        stats = _result(inputs)
        stats["crashes"] = inputs
        _sample(stats, f"npz child exited {proc.returncode}: {proc.stderr[-500:]}")
        return stats
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def _npz_child(workdir: str, inputs: str, seed: str) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    print(json.dumps(_fuzz_npz_here(Path(workdir), int(inputs), int(seed))), flush=True)


def _fuzz_npz_here(workdir: Path, inputs: int, seed: int) -> dict[str, Any]:
    from benchmarks.reliability_path_inputs import write_workspace
    from kbstore.exchange_npz import import_npz
    from kbstore.ingest import parse_file

    rng = random.Random(seed)
    db, ws = new_store(workdir, "npz"), workdir / "ws"
    write_workspace(ws, range(20), GOOD)
    folder = ws / "knowledge" / "projects"
    docs = [parse_file(folder / f"doc-{i:04d}.md", doc_path(i)) for i in range(20)]
    stats = _result(inputs)
    with KnowledgeStore.open(db, FakeEmbedder(DIM), hype=False) as store:
        for k in range(inputs):
            data, pickle, good = _npz_input(rng, docs, k)
            file = workdir / f"input-{k}.npz"
            file.write_bytes(data)
            try:
                import_npz(store, ws, file, allow_pickle=pickle, prune=False,
                           trust_vectors=True)  # the vectors are what is fuzzed
                stats["accepted"] += 1
            except (KBStoreError, ValueError) as exc:  # refused, with a reason
                if str(exc).strip():
                    stats["skipped_with_reason"] += 1
                else:
                    stats["unaccounted"] += 1
                stats["good_lost"] += good
                if good:
                    _sample(stats, f"good npz {k} refused: {exc}")
            except BaseException as exc:  # noqa: BLE001 - MemoryError, a bomb, anything
                stats["crashes"] += 1
                _sample(stats, f"input {k}: {type(exc).__name__}: {str(exc)[:200]}")
            finally:
                file.unlink()
        stats["documents_after"] = len(store)
    return _finish(stats, db)


# -- LLM answers ---------------------------------------------------------------------------


def _answers(rng: random.Random) -> list[tuple[Any, bool]]:
    """(what the stand-in LLM does for one document, is it a good answer)."""
    ns = types.SimpleNamespace

    def reply(content: Any) -> Any:
        return ns(choices=[ns(message=ns(content=content))])

    def raises(exc: BaseException) -> Any:
        def fail() -> Any:
            raise exc
        return fail

    return [
        (lambda: reply("What is it?\nHow do I use it?"), True),
        (lambda: reply(bytes(rng.randrange(256) for _ in range(300)).decode("latin-1")), False),
        (lambda: reply("\ud800 what is this?\nAnd \udfff this?"), False),
        (lambda: reply("How?\n" * 200_000), False),
        (lambda: reply("Q" * rng.randint(1_000_000, 8_000_000)), False),
        (lambda: reply("\n".join(f"question {i}?" for i in range(10_000))), False),
        (lambda: reply(None), False),
        (lambda: reply(42), False),
        (lambda: reply({"questions": ["a?"]}), False),
        (lambda: reply(["a?", "b?"]), False),
        (lambda: ns(choices=[]), False),
        (lambda: object(), False),
        (lambda: reply("Here are some questions:\n\n"), False),
        (lambda: reply("?!?!\n...\n---"), False),
        (lambda: reply("nul\x00 inside?\nbell \x07?"), False),
        (lambda: reply("```\n1. What is it?\n2. **Why**?\n```"), False),
        (lambda: reply("מה זה?\nما هذا؟\n\u202eevil?"), False),
        (lambda: reply("x" * 301 + "?"), False),
        (raises(ValueError("malformed JSON from provider")), False),
        (raises(KeyError("choices")), False),
        (raises(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad")), False),
    ]


@contextlib.contextmanager
def stand_in_litellm(answer_for: Callable[[str], Any]) -> Any:
    """Puts a module named litellm whose completion() answers from
    ``answer_for(prompt)`` (a thunk: return a response or raise)."""
    module = types.ModuleType("litellm")
    module.completion = lambda **kw: answer_for(kw["messages"][0]["content"])()  # type: ignore[attr-defined]
    module.suppress_debug_info = True  # type: ignore[attr-defined]
    real = sys.modules.get("litellm")
    sys.modules["litellm"] = module
    try:
        yield
    finally:
        if real is not None:
            sys.modules["litellm"] = real
        else:
            sys.modules.pop("litellm", None)


def fuzz_llm(workdir: Path, inputs: int, seed: int = 0) -> dict[str, Any]:
    """``inputs`` documents, each answered by a random (mostly bad) LLM
    answer, through `kbstore hype`'s job in rounds of 50."""
    from kbstore.hype_jobs import run_hype

    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    db = new_store(workdir, "llm")
    stats = _result(inputs)
    table = _answers(rng)
    plan = {k: table[0] if k % 3 == 0 else rng.choice(table) for k in range(inputs)}
    aborted = False
    # Answers that surface as exceptions look like an outage to HyPE's
    # breaker: three in a row stop the batch (and a batch of only failures
    # stops the run). What it did not ask is left pending for the next run:
    # counted apart, as are good documents it left pending that way.
    stats["left_pending_by_breaker"] = stats["good_left_pending"] = 0

    def answer_for(prompt: str) -> Any:
        k = int(prompt.split("llm-doc ", 1)[1].split()[0])
        return plan[k][0]

    with KnowledgeStore.open(db, FakeEmbedder(DIM), hype=False) as store, \
            stand_in_litellm(answer_for):
        store.hype.backoff, store.hype.retries = 0, 0
        for start in range(0, inputs, 50):
            store.upsert_many([make_document(f"projects/l-{k:05d}.md",
                                             title=f"llm-doc {k} note",
                                             body=f"llm-doc {k} body text")
                               for k in range(start, min(inputs, start + 50))])
            try:
                aborted |= bool(run_hype(store, "pending", concurrency=1)["aborted"])
            except Exception as exc:
                stats["crashes"] += min(inputs, start + 50) - start
                _sample(stats, f"run_hype raised {type(exc).__name__}: {exc}")
    with reading(db) as conn:
        rows = {r[0]: (r[1], r[2]) for r in conn.execute(
            "SELECT d.path, h.status, h.error FROM documents d LEFT JOIN derived h "
            "ON h.doc_id = d.id AND h.kind = 'hype_questions'")}
        questions = [r[0] for r in conn.execute("SELECT question FROM hype_questions")]
    for k in range(inputs):
        status, error = rows.get(f"projects/l-{k:05d}.md", (None, None))
        good = plan[k][1]
        if status == "ok":
            stats["accepted"] += 1
        elif status == "pending" and (error or "").strip():
            stats["skipped_with_reason"] += 1
            stats["good_left_pending"] += good  # the breaker stopped it with bad ones
        elif status is None and aborted:
            stats["left_pending_by_breaker"] += 1
            stats["good_left_pending"] += good
        else:
            stats["unaccounted"] += 1
            _sample(stats, f"l-{k:05d}: status {status}")
    bad_questions = [q for q in questions if len(q) > 300 or "\x00" in q
                     or any(ord(c) < 32 for c in q)]
    stats = _finish(stats, db)
    if bad_questions:
        stats["store_damage"].append(f"{len(bad_questions)} unstorable questions stored")
    return stats


def fuzz_delete_many(workdir: Path, inputs: int, seed: int = 0) -> dict[str, Any]:
    """benchmarks/reliability_fuzz_delete.py (it uses this module's helpers)."""
    from benchmarks.reliability_fuzz_delete import run

    return run(workdir, inputs, seed)


def fuzz_copy_source(workdir: Path, inputs: int, seed: int = 0) -> dict[str, Any]:
    """benchmarks/reliability_fuzz_copy.py: bad sources for copy --prune."""
    from benchmarks.reliability_fuzz_copy import run

    return run(workdir, inputs, seed)


FUZZERS: dict[str, Callable[[Path, int], dict[str, Any]]] = {
    "files": fuzz_files, "jsonl": fuzz_jsonl, "npz": fuzz_npz, "llm_answers": fuzz_llm,
    "delete_many": fuzz_delete_many, "copy_source": fuzz_copy_source,
}
