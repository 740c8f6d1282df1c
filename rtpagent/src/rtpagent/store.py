"""Durable local state in one SQLite file: the session journal and the report spool.

Writes are grouped: the control path appends to memory, a flusher commits
every `flush_interval` in one transaction (WAL), so thousands of calls per
second cost a few fsyncs. The spool keeps every report until the server has
acknowledged it; the sender replays in id order.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (uid TEXT PRIMARY KEY, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS spool (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('session', 'sample', 'event')),
    doc TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
"""


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        # uid -> document source (None: delete); serialised at flush, so a
        # session changed by several commands in one interval costs one dump.
        self._sessions: dict[str, Callable[[], dict[str, Any]] | None] = {}
        self._spool: list[tuple[str, str]] = []
        self._session_docs: dict[str, Callable[[], dict[str, Any]]] = {}
        self._lock = threading.Lock()  # the connection is shared with a writer thread
        # Rows in the spool table, kept by write/ack: count(*) is a full scan,
        # and the sender asks after every flush.
        (self._depth,) = self.db.execute("SELECT count(*) FROM spool").fetchone()

    def close(self) -> None:
        self.flush()
        self.db.close()

    # ------------------------------------------------------------ buffered writes
    def put_session(self, uid: str, doc: Callable[[], dict[str, Any]]) -> None:
        self._sessions[uid] = doc

    def drop_session(self, uid: str) -> None:
        self._sessions[uid] = None

    def enqueue_session(self, uid: str, doc: Callable[[], dict[str, Any]]) -> None:
        """A session's current state, serialised once at the next flush."""
        self._session_docs[uid] = doc

    def enqueue(self, kind: str, doc: dict[str, Any]) -> None:
        self._spool.append((kind, json.dumps(doc, separators=(",", ":"), default=str)))

    @property
    def pending_writes(self) -> int:
        return len(self._sessions) + len(self._spool) + len(self._session_docs)

    def take(self) -> tuple[list[tuple[str, str]], list[tuple[str]], list[tuple[str, str]]]:
        """Serialise and hand over what is buffered (on the event loop's thread)."""
        sessions, self._sessions = self._sessions, {}
        spool, self._spool = self._spool, []
        docs, self._session_docs = self._session_docs, {}
        spool.extend(
            ("session", json.dumps(d(), separators=(",", ":"), default=str)) for d in docs.values()
        )
        up = [
            (u, json.dumps(d(), separators=(",", ":")))
            for u, d in sessions.items()
            if d is not None
        ]
        dl = [(u,) for u, d in sessions.items() if d is None]
        return up, dl, spool

    def write(
        self, batch: tuple[list[tuple[str, str]], list[tuple[str]], list[tuple[str, str]]]
    ) -> None:
        """Commit one taken batch in one transaction (any thread; SQLite I/O
        releases the GIL, so the event loop keeps serving commands)."""
        up, dl, spool = batch
        if not (up or dl or spool):
            return
        with self._lock, self.db:
            self.db.execute("BEGIN")
            if up:
                self.db.executemany("INSERT OR REPLACE INTO sessions(uid, doc) VALUES (?, ?)", up)
            if dl:
                self.db.executemany("DELETE FROM sessions WHERE uid = ?", dl)
            if spool:
                self.db.executemany("INSERT INTO spool(kind, doc) VALUES (?, ?)", spool)
        self._depth += len(spool)

    def flush(self) -> None:
        self.write(self.take())

    # ------------------------------------------------------------ reads
    def sessions(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self.db.execute("SELECT doc FROM sessions").fetchall()
        return [json.loads(d) for (d,) in rows]

    def spool_head(self, limit: int) -> list[tuple[int, str, dict[str, Any]]]:
        with self._lock:
            rows = self.db.execute(
                "SELECT id, kind, doc FROM spool ORDER BY id LIMIT ?", (limit,)
            ).fetchall()
        return [(i, k, json.loads(d)) for i, k, d in rows]

    def spool_ack(self, ids: Iterable[int]) -> None:
        ids = list(ids)
        if ids:
            with self._lock, self.db:
                self.db.execute("BEGIN")
                cur = self.db.execute(
                    "DELETE FROM spool WHERE id BETWEEN ? AND ?", (min(ids), max(ids))
                )
            self._depth -= max(0, cur.rowcount)

    def spool_depth(self) -> int:
        return int(self._depth) + len(self._spool) + len(self._session_docs)

    def meta(self, key: str, default: str | None = None) -> str | None:
        with self._lock:
            row = self.db.execute("SELECT v FROM meta WHERE k = ?", (key,)).fetchone()
        return str(row[0]) if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self._lock, self.db:
            self.db.execute("INSERT OR REPLACE INTO meta(k, v) VALUES (?, ?)", (key, value))
