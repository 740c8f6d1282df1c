"""E-model reference points: ITU-T G.107 defaults, G.113 Appendix I Ie/Bpl."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from p4relay_server import mos as m


def test_g711_without_impairment_is_4_4() -> None:
    # G.107 default parameters give R = 93.2, MOS 4.41 (the relay paper's "G.711 max ~4.4").
    r, score = m.mos("PCMU", packets=500, lost=0) or (0, 0)
    assert r == pytest.approx(93.2)
    assert score == pytest.approx(4.41, abs=0.005)


@pytest.mark.parametrize(
    ("codec", "plc", "ie", "bpl"),
    [
        ("PCMU", False, 0.0, 4.3),  # G.113 App. I: G.711 without PLC
        ("PCMA", True, 0.0, 25.1),  # G.711 with App. I PLC
        ("G729", True, 11.0, 19.0),  # G.729A + VAD
        ("G723", True, 15.0, 16.1),  # G.723.1 6.3 kbit/s + VAD
    ],
)
def test_codec_table(codec: str, plc: bool, ie: float, bpl: float) -> None:
    imp = m.codec_impairment(codec, plc)
    assert imp is not None
    assert (imp.ie, imp.bpl) == (ie, bpl)


def test_ie_eff_formula_points() -> None:
    # Ie,eff = Ie + (95 - Ie) * Ppl / (Ppl / BurstR + Bpl)
    assert m.ie_eff(0, 4.3, 0) == 0
    assert m.ie_eff(0, 4.3, 1.0) == pytest.approx(95 / 5.3)  # 17.92
    assert m.ie_eff(0, 25.1, 1.0) == pytest.approx(95 / 26.1)  # 3.64
    assert m.ie_eff(0, 25.1, 2.0, burst_r=2.0) == pytest.approx(95 * 2 / (1 + 25.1))
    assert m.ie_eff(11, 19.0, 0) == 11
    assert m.ie_eff(0, 4.3, 100) == pytest.approx(95 * 100 / 104.3)


def test_plc_and_burstiness_change_mos_the_right_way() -> None:
    no_plc = m.mos("PCMU", packets=99, lost=1, plc=False)
    plc = m.mos("PCMU", packets=99, lost=1, plc=True)
    bursty = m.mos("PCMU", packets=99, lost=1, plc=True, burst_ratio=4.0)
    assert no_plc and plc and bursty
    assert no_plc[0] == pytest.approx(93.2 - 95 / 5.3)
    assert plc[1] > bursty[1] > no_plc[1]


def test_r_to_mos_annex_b() -> None:
    assert m.r_to_mos(0) == 1.0
    assert m.r_to_mos(-5) == 1.0
    assert m.r_to_mos(100) == 4.5
    assert m.r_to_mos(50) == pytest.approx(2.575)
    assert m.r_to_mos(70) == pytest.approx(3.597)
    assert m.r_to_mos(80) == pytest.approx(4.024)


def test_delay_impairment() -> None:
    assert m.delay_impairment(100) == 0
    # Idd at 400 ms (X = 2): 25 * ((1 + 64)^(1/6) - 3 (1 + (2/3)^6)^(1/6) + 2)
    x = 2.0
    want = 25 * ((1 + x**6) ** (1 / 6) - 3 * (1 + (x / 3) ** 6) ** (1 / 6) + 2)
    assert m.delay_impairment(400) == pytest.approx(want)
    assert m.delay_impairment(800) > m.delay_impairment(400) > m.delay_impairment(200) > 0


def test_jitter_and_delay_lower_mos() -> None:
    base = m.mos("PCMU", packets=100, lost=0)
    late = m.mos("PCMU", packets=100, lost=0, delay_ms=300)
    jittery = m.mos("PCMU", packets=100, lost=0, jitter_ms=80, delay_ms=100)
    assert base and late and jittery
    assert late[1] < base[1]
    assert jittery[1] < base[1]


def test_unknown_codec_and_empty_interval_have_no_mos() -> None:
    assert m.mos("telephone-event", packets=10, lost=0) is None
    assert m.mos("PCMU", packets=0, lost=0) is None
    assert m.codec_impairment(None) == m.codec_impairment("PCMU")


def test_invalid_inputs_raise() -> None:
    with pytest.raises(ValueError):
        m.ie_eff(0, 4.3, 101)
    with pytest.raises(ValueError):
        m.ie_eff(0, 4.3, 1, burst_r=0.5)


@given(
    packets=st.integers(0, 10**6),
    lost=st.integers(0, 10**6),
    jitter=st.floats(0, 60_000),
    delay=st.floats(0, 60_000),
    burst=st.floats(1, 1000),
    plc=st.booleans(),
)
def test_mos_always_in_range(
    packets: int, lost: int, jitter: float, delay: float, burst: float, plc: bool
) -> None:
    q = m.mos(
        "PCMA",
        packets=packets,
        lost=lost,
        jitter_ms=jitter,
        delay_ms=delay,
        burst_ratio=burst,
        plc=plc,
    )
    if packets + lost == 0:
        assert q is None
        return
    assert q is not None
    assert math.isfinite(q[0])
    assert 1.0 <= q[1] <= 4.5
