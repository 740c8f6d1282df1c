"""RTPProxy's accounting records: its own account of every session it ended.

RTPProxy's `acct_csv` module appends one CSV row per session at its end
(`rtpproxy_acct.csv`): call-id, session tag, set-up and tear-down times, the
first and last RTP packet of each side, and what it received and relayed.
It is the evidence of a session's end the agent did not see (a `D` sent to
RTPProxy directly while the agent was away, a timeout), of the packets
RTPProxy relayed itself (before an offload, in a fallback), and of calls
created while the agent was away (`--rtpproxy-acct`).

The file is followed from the offset journalled in the state file, so rows
written while the agent was stopped are read at its start. A shorter file
than the offset (rotated) is read from its start. A row that does not parse
is counted and skipped; a partial last line waits for its end.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass

import structlog
from prometheus_client import Counter

log = structlog.get_logger("rtpagent.acct")

ROWS = Counter("rtpagent_rtpproxy_acct_rows_total", "RTPProxy accounting rows read", ["result"])
READ_MAX = 4 << 20  # bytes per read: a long backlog is taken in turns


@dataclass(frozen=True, slots=True)
class AcctRecord:
    """One ended RTPProxy session. Side `a` is the caller's (the agent's
    stream 1), side `o` the callee's (stream 0). Times are Unix seconds;
    0.0: no such packet."""

    call_id: str
    tag: str
    setup_ts: float
    teardown_ts: float
    first_rtp_o: float
    last_rtp_o: float
    first_rtp_a: float
    last_rtp_a: float
    npkts_a: int
    npkts_o: int
    relayed: int  # RTP and RTCP RTPProxy relayed itself

    @property
    def media_stopped(self) -> float | None:
        last = max(self.last_rtp_o, self.last_rtp_a)
        return last if last > 0 else None

    def relayed_by_stream(self) -> tuple[int, int]:
        """What RTPProxy relayed, split over the agent's streams (0: from the
        callee, 1: from the caller) as it received them."""
        got = self.npkts_a + self.npkts_o
        from_caller = round(self.relayed * self.npkts_a / got) if got else 0
        return self.relayed - from_caller, from_caller


def parse(header: list[str], row: list[str]) -> AcctRecord:
    """One row by the file's own header. Raises ValueError/KeyError."""
    if len(row) != len(header):
        raise ValueError(f"{len(row)} fields, the header has {len(header)}")
    f = dict(zip(header, row, strict=True))
    return AcctRecord(
        call_id=f["call_id"],
        tag=f["from_tag"],
        setup_ts=float(f["setup_ts"]),
        teardown_ts=float(f["teardown_ts"]),
        first_rtp_o=float(f["first_rtp_ts_ino"]),
        last_rtp_o=float(f["last_rtp_ts_ino"]),
        first_rtp_a=float(f["first_rtp_ts_ina"]),
        last_rtp_a=float(f["last_rtp_ts_ina"]),
        npkts_a=int(f["rtp_npkts_ina"]),
        npkts_o=int(f["rtp_npkts_ino"]),
        relayed=int(f["rtp_nrelayed"]) + int(f["rtcp_nrelayed"]),
    )


class AcctFile:
    """Follows the accounting CSV from a byte offset."""

    def __init__(self, path: str, offset: int | None) -> None:
        self.path = path
        # None: the first run: rows already there are older than the agent's knowledge.
        self.offset = offset
        self.header: list[str] | None = None

    def read(self) -> list[AcctRecord]:
        """Rows appended since the last read (complete lines only)."""
        try:
            with open(self.path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                self.header = self.header or _header(fh)
                if self.header is None:
                    return []
                if self.offset is None:
                    self.offset = size
                if size < self.offset:  # rotated or truncated: a new file
                    log.info("rtpproxy_acct_rotated", path=self.path, size=size)
                    self.offset = 0
                if size == self.offset:
                    return []
                fh.seek(self.offset)
                data = fh.read(READ_MAX)
        except FileNotFoundError:
            if self.offset is None:
                self.offset = 0  # RTPProxy creates it: every row is new
            return []
        except OSError as exc:
            log.warning("rtpproxy_acct_unreadable", path=self.path, error=str(exc))
            return []
        end = data.rfind(b"\n") + 1  # a partial last line waits for its end
        chunk, start = data[:end], self.offset
        self.offset += end
        out: list[AcctRecord] = []
        for row in csv.reader(io.StringIO(chunk.decode("utf-8", "replace"))):
            if not row or (start == 0 and row == self.header):
                continue
            try:
                out.append(parse(self.header, row))
                ROWS.labels("read").inc()
            except (ValueError, KeyError) as exc:
                ROWS.labels("unreadable").inc()
                log.warning("rtpproxy_acct_row_unreadable", error=str(exc), row=",".join(row)[:200])
        return out


def _header(fh: io.BufferedReader) -> list[str] | None:
    fh.seek(0)
    line = fh.readline()
    if not line.endswith(b"\n"):
        return None
    fields = next(csv.reader([line.decode("utf-8", "replace")]), [])
    return fields if "call_id" in fields and "teardown_ts" in fields else None
