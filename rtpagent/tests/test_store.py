"""The store's flush: documents built in slices on the event loop, nothing lost."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from pathlib import Path

import pytest
from p4relay_testsupport import wait_until
from rtpagent.store import DOCS_PER_SLICE, Store, StoreClosed, Taken


async def test_sliced_flush_keeps_order_and_loses_nothing_when_cut_short(tmp_path: Path) -> None:
    st = Store(tmp_path / "state.sqlite")
    n = 3 * DOCS_PER_SLICE
    for i in range(n):
        st.enqueue("event", {"e": i})
        st.enqueue_session(f"u{i}", functools.partial(dict, s=i))
        st.put_session(f"u{i}", functools.partial(dict, j=i))
    t = asyncio.ensure_future(st.take_sliced())
    await asyncio.sleep(0)  # the first slice is built, then the sender is cancelled
    t.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await t
    assert st.pending_writes == 3 * n  # staged or buffered, all still the store's
    st.flush()
    rows = st.spool_head(1000)
    assert [d for _, k, d in rows] == [{"e": i} for i in range(n)] + [{"s": i} for i in range(n)]
    assert sorted(d["j"] for d in st.sessions()) == list(range(n))
    # A whole sliced flush hands over everything, in order.
    st.enqueue("event", {"e": n})
    st.enqueue_session("u0", lambda: {"s": n})
    st.drop_session("u1")
    st.write(await st.take_sliced())
    assert [d for _, k, d in st.spool_head(1000)][-2:] == [{"e": n}, {"s": n}]
    assert len(st.sessions()) == n - 1
    st.close()


def test_close_waits_for_a_write_in_another_thread(tmp_path: Path) -> None:
    """The sender commits in a worker thread; the agent closing the store at
    shutdown meanwhile must wait for it (closing under SQLite's feet crashes
    the process), and a write after close is refused by name."""
    st = Store(tmp_path / "state.sqlite")
    n = 200_000
    batch: Taken = ([], [], [("event", '{"e":1}')] * n, [])
    writer = threading.Thread(target=st.write, args=(batch,))
    writer.start()
    wait_until(st._lock.locked, within=5.0, interval=0.001, what="the writer holds the connection")
    st.close()
    writer.join()
    with pytest.raises(StoreClosed):
        st.write(batch)
    again = Store(tmp_path / "state.sqlite")
    assert again.spool_depth() == n
    again.close()
