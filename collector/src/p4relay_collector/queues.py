"""From two readings of a port to one queue sample.

Per port's egress queue, over the interval between two polls:
- depth: usage cells x 80 bytes (Tofino1's cell size; the softswitch counts the same way);
- queueing delay: depth x 8 / line rate (what a packet arriving now waits);
- utilisation: transmitted octets over the interval / line rate;
- drops: growth of the queue's drop counter (a counter that went down was reset).
The line rate is the port's shaping rate when set, else its $SPEED.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from p4relay_collector.wire import QueueSample

CELL_BYTES = 80
SPEED_BPS: dict[str, float] = {
    "BF_SPEED_1G": 1e9,
    "BF_SPEED_10G": 10e9,
    "BF_SPEED_25G": 25e9,
    "BF_SPEED_40G": 40e9,
    "BF_SPEED_50G": 50e9,
    "BF_SPEED_100G": 100e9,
    "BF_SPEED_200G": 200e9,
    "BF_SPEED_400G": 400e9,
}


@dataclass(frozen=True, slots=True)
class PortReading:
    """One port as read in one poll: its counters as the switch holds them."""

    dev_port: int
    name: str | None
    up: bool | None
    line_rate_bps: float | None
    tx_packets: int
    tx_bytes: int
    usage_cells: int
    queue_drops: int


def line_rate(speed: str | None, shaping_kbps: int | None) -> float | None:
    """The port's shaping rate when set (kbit/s), else its $SPEED, in bit/s."""
    if shaping_kbps:
        return shaping_kbps * 1000.0
    return SPEED_BPS.get(speed) if speed else None


def derive_sample(
    switch: str,
    prev: PortReading | None,
    cur: PortReading,
    dt_s: float,
    ts: dt.datetime,
    ired_qavg_bytes: int | None = None,
) -> QueueSample:
    """A queue sample from two readings `dt_s` apart (prev None: first poll), with
    iRED's queue average on the port when iRED is on there."""
    depth_bytes = cur.usage_cells * CELL_BYTES
    rate = cur.line_rate_bps
    delay = depth_bytes * 8 / rate * 1e6 if rate else None
    util: float | None = None
    drops = 0
    tx_p: int | None = None
    tx_b: int | None = None
    if prev is not None and dt_s > 0:
        tx_b = _delta(prev.tx_bytes, cur.tx_bytes)
        tx_p = _delta(prev.tx_packets, cur.tx_packets)
        drops = _delta(prev.queue_drops, cur.queue_drops)
        if rate:
            util = min(1.0, tx_b * 8 / (dt_s * rate))
    return QueueSample(
        switch=switch,
        dev_port=cur.dev_port,
        queue=0,
        ts=ts,
        depth_bytes=depth_bytes,
        queue_delay_us=delay,
        utilisation=util,
        drops=drops,
        tx_packets=tx_p,
        tx_bytes=tx_b,
        ired_qavg_bytes=ired_qavg_bytes,
    )


def _delta(prev: int, cur: int) -> int:
    return cur - prev if cur >= prev else cur  # the counter was reset
