"""The CLI's log of runs: ``logs.db``, a SQLite database in the data directory
(``$XDG_DATA_HOME/nacelle/logs.db``, else ``~/.local/share/nacelle/logs.db``), and
the reads and writes ``nacelle logs`` and a prompt run make of it.

What is kept, one row of ``responses`` per run: when it started (UTC, ISO 8601), the
prompt (the text the user sent), the answer's text, the backend and model, the
tokens (input, output, cache read, cache write, reasoning), the cost when the model
is priced (NULL when it is not, so an unknown cost never reads as free), the
duration, why the run stopped (or the error that ended it), the session name and,
for an interactive session, an id shared by its prompts; a run ``nacelle resume``
went on with is marked ``resumed`` and has no prompt of its own. Each tool call is a row of
``tool_calls``: its name, its input (cut at 10,000 characters), the first 1,000
characters of its result and whether the model read a failure. Nothing of a request
is kept but what the user wrote and the model answered: no headers, no keys.

The schema is versioned with ``PRAGMA user_version``: :data:`MIGRATIONS` is applied
in order, from the version a file has, inside one ``BEGIN IMMEDIATE`` transaction,
so two processes opening an old file migrate it once. A file from a newer nacelle
(a version past the list) is refused rather than written, since its shape is not
known. This is the rule ``llm`` follows with its own migrations list
(https://llm.datasette.io/en/stable/logging.html).

Search. Where the sqlite3 module's SQLite has FTS5 (tested at run time by making a
virtual table in memory), ``responses_fts`` indexes the prompt and the answer as an
external-content table (https://sqlite.org/fts5.html#external_content_tables); each
word of a query must match (each is quoted, so punctuation is never FTS syntax).
Without FTS5 the same query is a case-insensitive ``LIKE`` per word over the prompt
and the answer: slower on a large log, the same rows. A file written by a SQLite
without FTS5 after the index was made marks the index stale; the next search with
FTS5 rebuilds it. The index is a cache of the table, never a migration, so a file
moves between builds either way.

Two runs at once. Writes go through the write-ahead log (``journal_mode=WAL``) with
a 10-second busy timeout, so a second writer waits for the first instead of failing;
each run is one short transaction. ``synchronous=NORMAL``, SQLite's advice for WAL
(https://sqlite.org/pragma.html#pragma_synchronous): a power cut may lose the last
runs written, never the file.

A file that is not a database, a truncated one, or one missing a table raises
:class:`LogsError` with one line naming the file and how to move it aside; the
caller shows it (a run goes on with a warning; ``nacelle logs`` exits 1).

Imports the standard library and the leaves ``errors`` and ``_files``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .._files import private_directory
from ..errors import NacelleError

if TYPE_CHECKING:
    import sqlite3

__all__ = ["Call", "Entry", "LogsError", "MIGRATIONS", "connect", "count", "entries",
           "has_fts5", "record"]

INPUT_CHARS = 10_000
RESULT_CHARS = 1_000
BUSY_SECONDS = 10.0


class LogsError(NacelleError):
    """The log database cannot be read or written: damaged, or made by a newer nacelle."""


def _v1(db: "sqlite3.Connection") -> None:
    db.execute("""
        CREATE TABLE responses (
            id INTEGER PRIMARY KEY,
            datetime_utc TEXT NOT NULL,
            prompt TEXT NOT NULL,
            response TEXT NOT NULL,
            backend TEXT NOT NULL,
            model TEXT NOT NULL,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cost REAL,
            duration_ms INTEGER NOT NULL DEFAULT 0,
            stop TEXT,
            error TEXT,
            session TEXT
        )""")
    db.execute("""
        CREATE TABLE tool_calls (
            id INTEGER PRIMARY KEY,
            response_id INTEGER NOT NULL REFERENCES responses(id) ON DELETE CASCADE,
            call_id TEXT NOT NULL,
            name TEXT NOT NULL,
            input TEXT NOT NULL,
            result TEXT NOT NULL,
            failed INTEGER NOT NULL DEFAULT 0
        )""")


def _v2(db: "sqlite3.Connection") -> None:
    # Cache and reasoning tokens, the interactive session's id, the lookups by
    # response, and a table for the log's own state (the search index's freshness).
    for column in ("cache_read_tokens", "cache_creation_tokens", "reasoning_tokens"):
        db.execute(f"ALTER TABLE responses ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE responses ADD COLUMN conversation_id TEXT")
    db.execute("CREATE INDEX tool_calls_by_response ON tool_calls(response_id)")
    db.execute("CREATE INDEX responses_by_conversation ON responses(conversation_id)")
    db.execute("CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


def _v3(db: "sqlite3.Connection") -> None:
    # ``nacelle resume`` goes on with a paused run: a row with no prompt of its own.
    db.execute("ALTER TABLE responses ADD COLUMN resumed INTEGER NOT NULL DEFAULT 0")


#: The schema's history: the function at index i takes a file from version i to i+1.
MIGRATIONS: Tuple[Callable[["sqlite3.Connection"], None], ...] = (_v1, _v2, _v3)

_fts5: Optional[bool] = None


def has_fts5() -> bool:
    """Whether this Python's SQLite can make an FTS5 table (asked once)."""
    global _fts5
    if _fts5 is None:
        import sqlite3

        try:
            sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE t USING fts5(x)")
            _fts5 = True
        except sqlite3.Error:
            _fts5 = False
    return _fts5


@dataclass(frozen=True)
class Call:
    """One tool call of a logged run."""

    call_id: str
    name: str
    input: str
    result: str = ""
    failed: bool = False


@dataclass(frozen=True)
class Entry:
    """One run, as it is written."""

    datetime_utc: str
    prompt: str
    response: str
    backend: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    cost: Optional[float] = None
    duration_ms: int = 0
    stop: Optional[str] = None
    error: Optional[str] = None
    session: Optional[str] = None
    conversation_id: Optional[str] = None
    tool_calls: Tuple[Call, ...] = field(default=())
    resumed: bool = False


def _damaged(path: str, err: BaseException) -> LogsError:
    reason = " ".join(str(err).split()) or type(err).__name__
    if _busy(err):
        return LogsError(f"the log database {path} is busy ({reason}); try again")
    aside = f"mv {shlex.quote(path)} {shlex.quote(path + '.damaged')}"
    return LogsError(f"the log database {path} cannot be used ({reason}); move it aside "
                     f"({aside}) and a new one is made at the next run")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


@contextlib.contextmanager
def _transaction(db: "sqlite3.Connection") -> Iterator[None]:
    """One write transaction, taken at once (``BEGIN IMMEDIATE``) so a second writer
    waits on the busy timeout here rather than failing to upgrade a read lock."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _migrate(db: "sqlite3.Connection", path: str) -> None:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version == len(MIGRATIONS):
        return
    with _transaction(db):
        version = db.execute("PRAGMA user_version").fetchone()[0]  # another may have run
        if version > len(MIGRATIONS):
            raise LogsError(f"the log database {path} has schema version {version}, made by a "
                            f"newer nacelle (this one knows {len(MIGRATIONS)}); upgrade, or "
                            f"move it aside (mv {shlex.quote(path)} "
                            f"{shlex.quote(path + '.newer')})")
        for migration in MIGRATIONS[version:]:
            migration(db)
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")


def connect(path: str, *, create: bool = True) -> "sqlite3.Connection":
    """The database at ``path``, migrated to the current schema; made (in a private
    directory, the file 0600) when missing and ``create``. Raises :class:`LogsError`."""
    import sqlite3

    if create:
        private_directory(os.path.dirname(os.path.abspath(path)))
        if not os.path.exists(path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    # Two runs opening a new file at once both ask to switch it to WAL, each holding a
    # shared lock and wanting the exclusive one: SQLite answers one of them "database
    # is locked" at once, without the busy handler, since waiting could not help
    # (https://www.sqlite.org/c3ref/busy_handler.html, on deadlock). The loser opens
    # again a moment later, within the same busy timeout.
    deadline = time.monotonic() + BUSY_SECONDS
    pause = 0.01
    while True:
        db: Optional[sqlite3.Connection] = None
        try:
            db = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            _migrate(db, path)
            for table in ("responses", "tool_calls", "state"):  # a table dropped since
                db.execute(f"SELECT 1 FROM {table} LIMIT 0")
            return db
        except sqlite3.OperationalError as err:
            if db is not None:
                db.close()
            if _busy(err) and time.monotonic() + pause < deadline:
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
                continue
            raise _damaged(path, err) from None
        except sqlite3.Error as err:
            if db is not None:
                db.close()
            raise _damaged(path, err) from None
        except BaseException:
            if db is not None:
                db.close()
            raise


def _busy(err: BaseException) -> bool:
    reason = str(err)
    return "locked" in reason or "busy" in reason


def _fts_table(db: "sqlite3.Connection") -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE name = 'responses_fts'").fetchone() \
        is not None


def _index_current(db: "sqlite3.Connection") -> bool:
    return _fts_table(db) and db.execute(
        "SELECT 1 FROM state WHERE key = 'fts_stale'").fetchone() is None


def _ensure_index(db: "sqlite3.Connection") -> None:
    """Make the search index, or rebuild a stale one (inside a write transaction)."""
    if not _fts_table(db):
        db.execute("CREATE VIRTUAL TABLE responses_fts USING fts5(prompt, response, "
                   "content='responses', content_rowid='id')")
        db.execute("INSERT INTO responses_fts(responses_fts) VALUES ('rebuild')")
    elif db.execute("SELECT 1 FROM state WHERE key = 'fts_stale'").fetchone() is not None:
        db.execute("INSERT INTO responses_fts(responses_fts) VALUES ('rebuild')")
    db.execute("DELETE FROM state WHERE key = 'fts_stale'")


def record(path: str, entry: Entry) -> int:
    """Append ``entry`` to the log at ``path`` (made if missing); its id. A write SQLite
    refuses without waiting (busy or locked; see :func:`connect`) is made again, whole,
    within the busy timeout: its transaction was rolled back, so nothing is written twice."""
    deadline = time.monotonic() + BUSY_SECONDS
    pause = 0.01
    while True:
        try:
            return _record_once(path, entry)
        except _Busy as busy:
            if time.monotonic() + pause >= deadline:
                raise _damaged(path, busy.err) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


class _Busy(Exception):
    def __init__(self, err: BaseException) -> None:
        super().__init__(str(err))
        self.err = err


def _record_once(path: str, entry: Entry) -> int:
    import sqlite3

    db = connect(path)
    try:
        with _transaction(db):
            cursor = db.execute(
                "INSERT INTO responses (datetime_utc, prompt, response, backend, model, "
                "input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, "
                "reasoning_tokens, cost, duration_ms, stop, error, session, conversation_id, "
                "resumed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (entry.datetime_utc, entry.prompt, entry.response, entry.backend, entry.model,
                 entry.input_tokens, entry.output_tokens, entry.cache_read_tokens,
                 entry.cache_creation_tokens, entry.reasoning_tokens, entry.cost,
                 entry.duration_ms, entry.stop, entry.error, entry.session,
                 entry.conversation_id, int(entry.resumed)))
            row = int(cursor.lastrowid or 0)
            db.executemany(
                "INSERT INTO tool_calls (response_id, call_id, name, input, result, failed) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(row, c.call_id, c.name, _cut(c.input, INPUT_CHARS), _cut(c.result, RESULT_CHARS),
                  int(c.failed)) for c in entry.tool_calls])
            if has_fts5():
                if not _index_current(db):
                    _ensure_index(db)
                db.execute("INSERT INTO responses_fts(rowid, prompt, response) VALUES (?, ?, ?)",
                           (row, entry.prompt, entry.response))
            elif _fts_table(db):  # an index this SQLite cannot update: rebuilt later
                db.execute("INSERT OR REPLACE INTO state VALUES ('fts_stale', '1')")
        return row
    except sqlite3.OperationalError as err:
        if _busy(err):
            raise _Busy(err) from None
        raise _damaged(path, err) from None
    except sqlite3.Error as err:
        raise _damaged(path, err) from None
    finally:
        db.close()


def _fts_query(words: Sequence[str]) -> str:
    return " ".join('"' + word.replace('"', '""') + '"' for word in words)


def _like(word: str) -> str:
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _where(db: "sqlite3.Connection", query: str, model: Optional[str]
           ) -> Tuple[str, List[Any]]:
    clauses: List[str] = []
    values: List[Any] = []
    words = query.split()
    if words and has_fts5():
        if not _index_current(db):
            with _transaction(db):
                _ensure_index(db)
        clauses.append("id IN (SELECT rowid FROM responses_fts WHERE responses_fts MATCH ?)")
        values.append(_fts_query(words))
    elif words:
        for word in words:
            clauses.append("(prompt LIKE ? ESCAPE '\\' OR response LIKE ? ESCAPE '\\')")
            values += [_like(word), _like(word)]
    if model:
        clauses.append("model = ?")
        values.append(model)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", values


def entries(path: str, *, limit: int = 3, query: str = "", model: Optional[str] = None
            ) -> List[Dict[str, Any]]:
    """The latest ``limit`` runs (0: all) matching ``query`` and ``model``, oldest
    first, each as ``nacelle logs --json`` shows it. Raises :class:`LogsError`."""
    import sqlite3

    db = connect(path)
    try:
        db.row_factory = sqlite3.Row
        where, values = _where(db, query, model)
        sql = f"SELECT * FROM responses{where} ORDER BY id DESC"
        if limit:
            sql += " LIMIT ?"
            values.append(limit)
        rows = db.execute(sql, values).fetchall()[::-1]
        calls: Dict[int, List[Dict[str, Any]]] = {row["id"]: [] for row in rows}
        for start in range(0, len(rows), 500):  # SQLite's default cap on variables is 999
            ids = [row["id"] for row in rows[start:start + 500]]
            for call in db.execute(
                    "SELECT * FROM tool_calls WHERE response_id IN "
                    f"({', '.join('?' * len(ids))}) ORDER BY id", ids):
                calls[call["response_id"]].append({
                    "call_id": call["call_id"], "name": call["name"], "input": call["input"],
                    "result": call["result"], "failed": bool(call["failed"])})
        return [_shape(row, calls[row["id"]]) for row in rows]
    except sqlite3.Error as err:
        raise _damaged(path, err) from None
    finally:
        db.close()


def _shape(row: Any, calls: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {
        "id": row["id"], "datetime_utc": row["datetime_utc"], "prompt": row["prompt"],
        "response": row["response"], "backend": row["backend"], "model": row["model"],
        "usage": {key: row[key] for key in (
            "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens",
            "reasoning_tokens")},
        "cost": row["cost"], "duration_ms": row["duration_ms"], "stop": row["stop"],
        "error": row["error"], "session": row["session"],
        "conversation_id": row["conversation_id"], "resumed": bool(row["resumed"]),
        "tool_calls": calls}


def count(path: str) -> int:
    """How many runs the log holds (0 when there is no file). Raises :class:`LogsError`."""
    import sqlite3

    if not os.path.exists(path):
        return 0
    db = connect(path, create=False)
    try:
        return int(db.execute("SELECT count(*) FROM responses").fetchone()[0])
    except sqlite3.Error as err:
        raise _damaged(path, err) from None
    finally:
        db.close()
