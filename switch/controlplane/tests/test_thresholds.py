"""The configuration refuses thresholds the switch cannot measure, naming the
limit (p4relay_switch.limits, from switch/contract.toml)."""

from __future__ import annotations

from pathlib import Path

import pytest
from p4relay_controlplane.config import ConfigError, load

BASE = 'switch = "s"\ngrpc_address = "127.0.0.1:1"\n'


def _load(tmp_path: Path, text: str) -> None:
    p = tmp_path / "c.toml"
    p.write_text(BASE + text)
    load(p)


@pytest.mark.parametrize(
    ("hop", "limit"),
    [
        ("onset_us = 1000\nclear_us = 250", "tna_deq_timedelta_bits = 18"),
        ("onset_us = 200\nclear_us = 250", "must not exceed"),
        ("onset_cells = 1048576\nclear_cells = 10", "tna_qdepth_bits = 19"),
        ("onset_cells = 600\nclear_cells = 524288", "tna_qdepth_bits = 19"),
    ],
)
def test_int_hop_beyond_what_the_switch_measures(tmp_path: Path, hop: str, limit: str) -> None:
    with pytest.raises(ConfigError, match=limit):
        _load(tmp_path, f"[int]\nswitch_id = 1\n[[int.hops]]\nport = 2\n{hop}\n")


def test_int_hop_within_the_limits(tmp_path: Path) -> None:
    for hop in (
        "onset_us = 262.143\nclear_us = 100",  # the last ns deq_timedelta shows
        "onset_cells = 524287\nclear_cells = 0",
        "onset_cells = 250\nclear_cells = 62",  # hop latency not used (0)
    ):
        _load(tmp_path, f"[int]\nswitch_id = 1\n[[int.hops]]\nport = 2\n{hop}\n")


def test_reroute_t_q_is_measured_in_ticks(tmp_path: Path) -> None:
    cls = "[reroute]\n[[reroute.classes]]\nflow_class = 1\nhold_ms = 1\n"
    with pytest.raises(ConfigError, match="reroute_delay_shift = 16"):
        _load(tmp_path, cls + "t_q_us = 20\nm = 2\n")  # below one 65.536 us tick
    _load(tmp_path, cls + "t_q_us = 20\nm = 0\n")  # m = 0: never triggers, t_q unused
    _load(tmp_path, cls + "t_q_us = 50000\nm = 2\n")  # 50 ms: within the 32-bit ticks
