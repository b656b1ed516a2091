"""Query latency through the MCP server (warm model) vs a cold CLI search.

    python -m benchmarks.mcp_latency                  # 100 queries, sample KB, MiniLM
    python -m benchmarks.mcp_latency --queries 20     # a quicker look

The bundled sample knowledge base is indexed with the offline MiniLM model
into a temporary file. Then, in one run and interleaved query by query:

- `kbstore mcp` over stdio, driven by the MCP SDK's client: the round trip of
  a `search` tool call (JSON-RPC, query embedding with the already-loaded
  model, the search statement, the structured result);
- the same over streamable HTTP on 127.0.0.1;
- a cold `kbstore search --json` process per query, as a shell user or an
  agent without MCP runs it: interpreter start, imports, opening the file,
  loading the model, one search;
- in-process `KnowledgeStore.search` with a warm model, the floor.

Each query's hit paths are compared between the MCP server and the CLI: both
run the same search, so they must agree. Results:
benchmarks/results/mcp_latency.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
KBSTORE = [sys.executable, "-m", "kbstore"]


def sample_workspace() -> Path:
    return Path(str(resources.files("kbstore.sample_kb")))


def make_queries(n: int) -> list[str]:
    """Deterministic queries from the sample KB: titles, tag lists and the
    opening words of each body, cycled to ``n``."""
    from kbstore.ingest import parse_file, scan_workspace

    docs = [parse_file(file, rel) for rel, file, reason in scan_workspace(sample_workspace())
            if file is not None and not reason]
    titles = [d.title for d in docs]
    tags = [" ".join(d.tags) for d in docs if d.tags]
    openings = []
    for d in docs:
        words = re.sub(r"[#*`>_|-]+", " ", re.sub(r"^#.*\n", "", d.body.strip())).split()
        openings.append(" ".join(words[:8]))
    pool = [q for q in titles + tags + openings if q.strip()]
    return [pool[i % len(pool)] for i in range(n)]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": statistics.median(ms), "p90_ms": pct(ms, 0.9),
            "mean_ms": statistics.fmean(ms), "n": len(ms)}


def cold_cli(db: Path, query: str) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run([*KBSTORE, "search", "--db", str(db), "--limit", "10", "--json",
                           "--", query], capture_output=True, text=True, check=True)
    took = (time.perf_counter() - t0) * 1000
    return took, [json.loads(line)["path"] for line in proc.stdout.splitlines() if line]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def measure(db: Path, queries: list[str], log: Any) -> dict[str, Any]:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from kbstore import KnowledgeStore

    server_args = ["-m", "kbstore", "mcp", "--db", str(db), "--no-hype", "--quiet"]
    port = free_port()
    http = subprocess.Popen([sys.executable, *server_args, "--http", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=log)
    times: dict[str, list[float]] = {"mcp_stdio": [], "mcp_http": [], "cli_cold": [],
                                     "in_process": []}
    agree = 0
    try:
        t0 = time.perf_counter()
        params = StdioServerParameters(command=sys.executable, args=server_args)
        async with Client(stdio_client(params, errlog=log)) as stdio:
            await stdio.list_tools()
            stdio_start = time.perf_counter() - t0
            url = f"http://127.0.0.1:{port}/mcp"
            for _ in range(200):  # wait for the HTTP server to bind
                try:
                    async with Client(url) as probe:
                        await probe.list_tools()
                    break
                except Exception:
                    await anyio.sleep(0.2)
            async with Client(url) as web:
                with KnowledgeStore.open(db, "minilm", hype=False) as store:
                    store.search("warm up")
                    for n, query in enumerate(queries, start=1):
                        t = time.perf_counter()
                        result = await stdio.call_tool("search", {"query": query, "limit": 10})
                        times["mcp_stdio"].append((time.perf_counter() - t) * 1000)
                        t = time.perf_counter()
                        await web.call_tool("search", {"query": query, "limit": 10})
                        times["mcp_http"].append((time.perf_counter() - t) * 1000)
                        cli_ms, cli_paths = cold_cli(db, query)
                        times["cli_cold"].append(cli_ms)
                        t = time.perf_counter()
                        store.search(query, limit=10)
                        times["in_process"].append((time.perf_counter() - t) * 1000)
                        mcp_paths = [h["path"] for h in result.structured_content["hits"]]
                        agree += mcp_paths == cli_paths
                        if n % 20 == 0:
                            print(f"  {n}/{len(queries)} queries", file=sys.stderr)
    finally:
        http.terminate()
        http.wait(timeout=30)
    out: dict[str, Any] = {name: summary(ms) for name, ms in times.items()}
    out["stdio_server_start_s"] = stdio_start
    out["same_hits_mcp_vs_cli"] = agree
    return out


def write_report(data: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "mcp_latency.json").write_text(json.dumps(data, indent=2) + "\n")
    r = data["results"]
    cold, warm = r["cli_cold"]["p50_ms"], r["mcp_stdio"]["p50_ms"]
    rows = [("MCP server, stdio (warm model)", "mcp_stdio"),
            ("MCP server, streamable HTTP (warm model)", "mcp_http"),
            ("cold `kbstore search --json` process", "cli_cold"),
            ("in-process `KnowledgeStore.search` (warm)", "in_process")]
    lines = [
        "# Query latency: MCP server (warm model) vs cold CLI search",
        "",
        f"Machine: {data['machine']}. {data['queries']} queries over the bundled sample "
        f"knowledge base ({data['documents']} documents), embedder MiniLM (offline int8 ONNX), "
        "limit 10, no HyPE. All four measured in one run, interleaved query by query "
        "(`python -m benchmarks.mcp_latency`); read the ratios, not the absolute times: the "
        f"machine is shared (1-minute load average {data['load_average'][0]} at the start, "
        f"{data['load_average'][1]} at the end, on {os.cpu_count()} cores).",
        "",
        "| path | p50 | p90 | mean |",
        "|---|---|---|---|",
        *[f"| {label} | {r[key]['p50_ms']:.1f} ms | {r[key]['p90_ms']:.1f} ms | "
          f"{r[key]['mean_ms']:.1f} ms |" for label, key in rows],
        "",
        f"**Cold CLI / warm MCP (stdio), p50: {cold / warm:.0f}x** "
        f"({cold:.0f} ms vs {warm:.1f} ms); over HTTP: "
        f"{cold / r['mcp_http']['p50_ms']:.0f}x.",
        "",
        f"- The MCP server pays the model load once: its start (spawn to first `tools/list` "
        f"answer) took {r['stdio_server_start_s']:.1f} s, about "
        f"{r['stdio_server_start_s'] * 1000 / cold:.1f} cold CLI searches.",
        f"- MCP round trip over the search itself (stdio p50 - in-process p50): "
        f"{warm - r['in_process']['p50_ms']:.1f} ms (JSON-RPC framing, a worker thread, "
        "the structured result).",
        f"- Same hits from the MCP server and the CLI: {r['same_hits_mcp_vs_cli']} of "
        f"{data['queries']} queries.",
        "",
    ]
    (RESULTS / "mcp_latency.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()

    import anyio

    from kbstore import KnowledgeStore

    queries = make_queries(args.queries)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sample.sqlite"
        with KnowledgeStore.open(db, "minilm", hype=False) as store:
            report = store.import_directory(sample_workspace())
        with (Path(tmp) / "servers.log").open("w") as log:
            results = anyio.run(measure, db, queries, log)
    data = {"machine": f"{os.cpu_count()} cores, {platform.platform()}, Python "
                       f"{platform.python_version()}",
            "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
            "queries": len(queries), "documents": report.added, "results": results,
            "when": time.strftime("%Y-%m-%d %H:%M")}
    write_report(data)
    print((RESULTS / "mcp_latency.md").read_text())


if __name__ == "__main__":
    main()
