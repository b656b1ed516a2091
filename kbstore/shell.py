"""A sqlite3-shell script that runs kbstore's search statement by hand, so a
user can see (and tweak) exactly how a ranking came about."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from . import db as _db
from .search import build_params


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (int, float)):
        return repr(float(value)) if isinstance(value, float) else str(value)
    return "'" + str(value).replace("'", "''") + "'"


def shell_script(store: Any, query: str, *, topic: str | None = None, limit: int = 10,
                 **settings: Any) -> str:
    vector = store.embedder.embed_queries([query])[0]
    params = build_params(query, vector, topic=topic, limit=limit, **settings)
    # The shell takes the query vector as a JSON array (vec_f32 parses it).
    params["qvec"] = json.dumps([round(float(x), 7) for x in vector])
    sql_file = resources.files("kbstore.sql").joinpath("search.sql")
    lines = [
        f"-- kbstore search for {query!r}: run with  sqlite3 {store.path} < this-file",
        f".load {_db.vec_path()}",
        ".parameter init",
    ]
    # Rows in the shell's parameter table: plain SQL literals, no shell quoting.
    for key, value in sorted(params.items()):
        lines.append("INSERT OR REPLACE INTO temp.sqlite_parameters (key, value) "
                     f"VALUES ({_literal(':' + key)}, {_literal(value)});")
    lines += [".mode box", f".read {sql_file}", ""]
    return "\n".join(lines)
