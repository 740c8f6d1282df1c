"""Durable local state in one SQLite file: the session journal and the report spool.

Writes are grouped: the control path appends to memory, a flusher commits
every `flush_interval` in one transaction (WAL), so thousands of calls per
second cost a few fsyncs. The spool keeps every report until the server has
acknowledged it; the sender replays in id order.

A flush of a busy interval was up to 6 ms of event-loop time, the tail of the
control path's latency: now its documents are built (snapshots of live
sessions) and JSON-encoded on the loop a few at a time, commands getting
their turn in between; only SQLite, which releases the GIL, runs in the
writer thread. (Encoding there instead held the GIL against the loop, up to
the switch interval at a time.)
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
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
CREATE TABLE IF NOT EXISTS sampled (uid TEXT NOT NULL, leg INTEGER NOT NULL, v TEXT NOT NULL,
    PRIMARY KEY (uid, leg));
"""

Doc = dict[str, Any]
# What `take` hands to `write`: journal upserts (uid, JSON), journal deletes,
# spool rows (kind, JSON), sampler baselines (uid, leg, JSON or None: delete).
SampledKey = tuple[str, int]
Taken = tuple[
    list[tuple[str, str]],
    list[tuple[str]],
    list[tuple[str, str]],
    list[tuple[str, int, str | None]],
]
DOCS_PER_SLICE = 4  # reports encoded per event-loop turn (10-40 us each)
SAMPLED_PER_DOC = 8  # sampler baselines staged in a report's time (a short JSON list each)


class StoreClosed(RuntimeError):
    """A write reached the store after it was closed."""


def _json(doc: Doc) -> str:
    return json.dumps(doc, separators=(",", ":"), default=str)


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
        # Reports as built: fresh dicts nobody changes afterwards, so encoding
        # them later, in another thread, sees what was reported.
        self._spool: deque[tuple[str, Doc]] = deque()
        self._session_docs: dict[str, Callable[[], dict[str, Any]]] = {}
        # Taken from the buffers above, documents built, not yet handed over.
        self._staged_up: list[tuple[str, str]] = []
        self._staged_dl: list[tuple[str]] = []
        self._staged_spool: list[tuple[str, str]] = []
        # The sampler's last counters per (session, leg): committed with the
        # samples they are the baseline of, so a restarted agent's first
        # sample is an interval, not everything counted so far.
        self._sampled: dict[SampledKey, tuple[float, ...] | None] = {}
        self._staged_sampled: list[tuple[str, int, str | None]] = []
        self._lock = threading.Lock()  # the connection is shared with a writer thread
        # One writer thread: batches commit in the order they were handed over,
        # so an older journal row never lands over a newer one.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-writer")
        self._writing: dict[int, int] = {}  # handed-over batch (id) -> its rows, until written
        self._closed = False
        # Rows in the spool table, kept by write/ack: count(*) is a full scan,
        # and the sender asks after every flush.
        (self._depth,) = self.db.execute("SELECT count(*) FROM spool").fetchone()

    def close(self) -> None:
        self._writer.shutdown(wait=True)  # batches handed over are committed first
        self.flush()
        # Under the lock: closing a connection another thread is writing
        # through crashes the process inside SQLite.
        with self._lock:
            self.db.close()
            self._closed = True

    # ------------------------------------------------------------ buffered writes
    def put_session(self, uid: str, doc: Callable[[], dict[str, Any]]) -> None:
        self._sessions[uid] = doc

    def drop_session(self, uid: str) -> None:
        self._sessions[uid] = None

    def put_sampled(self, key: SampledKey, counters: tuple[int, ...]) -> None:
        # With when they were read: how long a leg's media went on after the
        # last read is estimated from it when the end was missed (app.py).
        self._sampled[key] = (*counters, round(time.time(), 3))

    def drop_sampled(self, key: SampledKey) -> None:
        self._sampled[key] = None

    def enqueue_session(self, uid: str, doc: Callable[[], dict[str, Any]]) -> None:
        """A session's current state, serialised once at the next flush."""
        self._session_docs[uid] = doc

    def session_queued(self, uid: str) -> bool:
        """The session's state is to be serialised at the next flush already
        (its document source reads the session then: nothing to add)."""
        return uid in self._session_docs

    def enqueue(self, kind: str, doc: dict[str, Any]) -> None:
        """A report (a new dict, not changed afterwards), encoded at the flush."""
        self._spool.append((kind, doc))

    @property
    def pending_writes(self) -> int:
        staged = len(self._staged_up) + len(self._staged_dl) + len(self._staged_spool)
        staged += len(self._staged_sampled) + len(self._sampled) + sum(self._writing.values())
        return len(self._sessions) + len(self._spool) + len(self._session_docs) + staged

    def _stage(self, limit: int | None) -> None:
        """Encode at most `limit` buffered reports (all: None) into the staging
        lists, in order: reports, then session states, then the journal.
        Documents are built now, on the event loop's thread: they read live
        sessions. Staged rows stay the store's until handed over: a flush cut
        short (the sender cancelled at shutdown) loses nothing."""
        n = 0
        spool, docs, journal = self._spool, self._session_docs, self._sessions
        while spool and (limit is None or n < limit):
            kind, doc = spool.popleft()
            self._staged_spool.append((kind, _json(doc)))
            n += 1
        while docs and (limit is None or n < limit):
            uid = next(iter(docs))
            self._staged_spool.append(("session", _json(docs.pop(uid)())))
            n += 1
            if uid in journal:
                # The session's journal row goes with its report: a restarted
                # agent continues from the `seq` the server has last seen.
                n += self._stage_journal(uid)
        while journal and (limit is None or n < limit):
            n += self._stage_journal(next(iter(journal)))
        if limit is None:
            self._stage_sampled(len(self._sampled))
        elif n < limit:
            self._stage_sampled((limit - n) * SAMPLED_PER_DOC)

    def _stage_sampled(self, k: int) -> None:
        """At most k sampler baselines staged (each key's latest value)."""
        sampled, staged = self._sampled, self._staged_sampled
        for _ in range(min(k, len(sampled))):
            (uid, leg), v = sampled.popitem()
            staged.append((uid, leg, None if v is None else json.dumps(v)))

    def _stage_journal(self, uid: str) -> int:
        d = self._sessions.pop(uid)
        if d is None:
            self._staged_dl.append((uid,))
            return 0
        self._staged_up.append((uid, _json(d())))
        return 1

    def _hand_over(self) -> Taken:
        out = (self._staged_up, self._staged_dl, self._staged_spool, self._staged_sampled)
        self._staged_up, self._staged_dl, self._staged_spool = [], [], []
        self._staged_sampled = []
        # Pending until `write` has committed it (it runs in another thread).
        self._writing[id(out)] = len(out[0]) + len(out[1]) + len(out[2]) + len(out[3])
        return out

    def take(self) -> Taken:
        """Hand over everything buffered."""
        self._stage(None)
        return self._hand_over()

    async def take_sliced(self) -> Taken:
        """`take`, a few reports per event-loop turn so a busy interval's
        flush never holds a command back for long. What arrives meanwhile
        waits for the next flush."""
        todo = len(self._spool) + len(self._session_docs) + len(self._sessions)
        todo += -(-len(self._sampled) // SAMPLED_PER_DOC)
        for _ in range(0, todo, DOCS_PER_SLICE):
            self._stage(DOCS_PER_SLICE)
            await asyncio.sleep(0)
        # Whatever came meanwhile ahead of the baselines: they go with the
        # samples they are the baseline of.
        while self._sampled:
            self._stage_sampled(DOCS_PER_SLICE * SAMPLED_PER_DOC)
            await asyncio.sleep(0)
        return self._hand_over()

    async def write_async(self, batch: Taken) -> None:
        """`write` in the store's writer thread, after every batch handed over before."""
        await asyncio.get_running_loop().run_in_executor(self._writer, self.write, batch)

    async def journal_ahead(self, rows: list[tuple[str, Callable[[], Doc]]]) -> None:
        """Write-ahead: these sessions' journal rows (uid, document source)
        committed before this returns, each with its queued report (the
        journal's `seq` goes with it), behind everything staged so far. The
        switch's entries of a call are written only after this: a `kill -9`
        at any instant leaves no entry the restarted agent does not know."""
        for uid, doc in rows:
            report = self._session_docs.pop(uid, None)
            if report is not None:
                self._staged_spool.append(("session", _json(report())))
            self._sessions.pop(uid, None)
            self._staged_up.append((uid, _json(doc())))
        await self.write_async(self._hand_over())

    def write(self, batch: Taken) -> None:
        """Commit one taken batch in one transaction (any thread; SQLite I/O
        releases the GIL, so the event loop keeps serving commands)."""
        up, dl, spool, sampled = batch
        try:
            if not (up or dl or spool or sampled):
                return
            with self._lock:
                if self._closed:
                    raise StoreClosed(f"{self.path}: write after close ({len(spool)} reports)")
                self._commit(up, dl, spool, sampled)
                self._depth += len(spool)
        finally:
            self._writing.pop(id(batch), None)

    def _commit(
        self,
        up: list[tuple[str, str]],
        dl: list[tuple[str]],
        spool: list[tuple[str, str]],
        sampled: list[tuple[str, int, str | None]],
    ) -> None:
        with self.db:
            self.db.execute("BEGIN")
            if up:
                self.db.executemany("INSERT OR REPLACE INTO sessions(uid, doc) VALUES (?, ?)", up)
            if dl:
                self.db.executemany("DELETE FROM sessions WHERE uid = ?", dl)
                self.db.executemany("DELETE FROM sampled WHERE uid = ?", dl)
            if spool:
                self.db.executemany("INSERT INTO spool(kind, doc) VALUES (?, ?)", spool)
            keep = [r for r in sampled if r[2] is not None]
            gone = [(uid, leg) for uid, leg, v in sampled if v is None]
            if keep:
                self.db.executemany(
                    "INSERT OR REPLACE INTO sampled(uid, leg, v) VALUES (?, ?, ?)", keep
                )
            if gone:
                self.db.executemany("DELETE FROM sampled WHERE uid = ? AND leg = ?", gone)

    def flush(self) -> None:
        self.write(self.take())

    # ------------------------------------------------------------ reads
    def sessions(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self.db.execute("SELECT doc FROM sessions").fetchall()
        return [json.loads(d) for (d,) in rows]

    def sampled(self) -> dict[SampledKey, tuple[int, ...]]:
        """The sampler's last counters per (session uid, leg), as committed."""
        with self._lock:
            rows = self.db.execute("SELECT uid, leg, v FROM sampled").fetchall()
        return {(uid, int(leg)): tuple(json.loads(v)[:4]) for uid, leg, v in rows}

    def sampled_at(self) -> dict[SampledKey, tuple[int, float]]:
        """(packets, when read) of the sampler's last counters, as committed."""
        with self._lock:
            rows = self.db.execute("SELECT uid, leg, v FROM sampled").fetchall()
        out: dict[SampledKey, tuple[int, float]] = {}
        for uid, leg, v in rows:
            got = json.loads(v)
            if len(got) > 4:
                out[(uid, int(leg))] = (int(got[0]), float(got[4]))
        return out

    def spool_head(self, limit: int) -> list[tuple[int, str, dict[str, Any]]]:
        with self._lock:
            rows = self.db.execute(
                "SELECT id, kind, doc FROM spool ORDER BY id LIMIT ?", (limit,)
            ).fetchall()
            if not rows:
                self._depth = 0  # the sender waits on the count: never one the table lacks
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

    def spool_committed(self) -> int:
        """Reports committed and not yet acknowledged: what the sender can send."""
        return int(self._depth)

    def spool_depth(self) -> int:
        queued = len(self._spool) + len(self._session_docs) + len(self._staged_spool)
        return int(self._depth) + queued

    def meta(self, key: str, default: str | None = None) -> str | None:
        with self._lock:
            row = self.db.execute("SELECT v FROM meta WHERE k = ?", (key,)).fetchone()
        return str(row[0]) if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self._lock, self.db:
            self.db.execute("INSERT OR REPLACE INTO meta(k, v) VALUES (?, ?)", (key, value))
