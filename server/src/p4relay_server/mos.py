"""MOS by the ITU-T G.107 E-model (simplified transmission planning form).

    R = R0 - Is - Id - Ie,eff + A,   with R0 - Is = 93.2 for G.107 default values
    Ie,eff = Ie + (95 - Ie) * Ppl / (Ppl / BurstR + Bpl)          (G.107 §3.6)
    Id     = Idd(Ta), Ta = one-way mouth-to-ear delay (ms)          (G.107 §3.4)
    MOS    = 1 + 0.035 R + R (R - 60)(100 - R) 7e-6, clamped to 1..4.5 (Annex B)

Codec Ie/Bpl come from ITU-T G.113 Appendix I (Tables I.1 and I.3). Delay is
the network one-way delay plus the codec's packetisation and a jitter buffer of
twice the measured jitter (a common planning assumption; the E-model has no
jitter term of its own). Echo terms use the G.107 defaults (TELR 65 dB), which
make Idte ~ 0 for the delays we see, so Id reduces to Idd.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

R_DEFAULT = 93.2  # R0 - Is with all G.107 default parameters


@dataclass(frozen=True)
class CodecImpairment:
    ie: float  # equipment impairment factor
    bpl: float  # packet-loss robustness factor
    frame_ms: float  # packetisation + look-ahead delay added to Ta


# G.113 Appendix I: G.711 Ie=0, Bpl=4.3 without PLC, Bpl=25.1 with the
# G.711 Appendix I PLC; G.729A+VAD Ie=11, Bpl=19.0; G.723.1+VAD (6.3 kbit/s)
# Ie=15, Bpl=16.1; GSM-EFR Ie=5, Bpl=10.0.
_G711_NO_PLC = CodecImpairment(ie=0.0, bpl=4.3, frame_ms=20.0)
_G711_PLC = CodecImpairment(ie=0.0, bpl=25.1, frame_ms=20.0)
_CODECS: dict[str, CodecImpairment] = {
    "G729": CodecImpairment(ie=11.0, bpl=19.0, frame_ms=25.0),
    "G723": CodecImpairment(ie=15.0, bpl=16.1, frame_ms=67.5),
    "GSM-EFR": CodecImpairment(ie=5.0, bpl=10.0, frame_ms=20.0),
}
_G711_NAMES = {"PCMU", "PCMA", "G711", "G711U", "G711A"}


@functools.lru_cache(maxsize=256)
def codec_impairment(codec: str | None, plc: bool = True) -> CodecImpairment | None:
    """Ie/Bpl for a codec name (RTP encoding name, case-insensitive); None if unknown.
    A missing codec means G.711, the codec of the relayed calls by default."""
    name = (codec or "PCMU").upper().replace("/8000", "")
    if name in _G711_NAMES:
        return _G711_PLC if plc else _G711_NO_PLC
    return _CODECS.get(name)


def ie_eff(ie: float, bpl: float, ppl: float, burst_r: float = 1.0) -> float:
    """Effective equipment impairment for packet loss `ppl` in percent (G.107 eq. 7-29)."""
    if not 0.0 <= ppl <= 100.0:
        raise ValueError(f"packet loss must be 0..100 %, got {ppl}")
    if burst_r < 1.0:
        raise ValueError(f"burst ratio must be >= 1, got {burst_r}")
    return ie + (95.0 - ie) * ppl / (ppl / burst_r + bpl)


def delay_impairment(ta_ms: float) -> float:
    """Idd for absolute one-way delay `ta_ms` (G.107 eq. 7-27): 0 up to 100 ms."""
    if ta_ms <= 100.0:
        return 0.0
    x = math.log10(ta_ms / 100.0) / math.log10(2.0)
    return 25.0 * float((1 + x**6) ** (1 / 6) - 3 * (1 + (x / 3) ** 6) ** (1 / 6) + 2)


def r_to_mos(r: float) -> float:
    """G.107 Annex B."""
    if r <= 0:
        return 1.0
    if r >= 100:
        return 4.5
    # The polynomial dips just below 1 for R < ~6.5; MOS is 1..4.5 by definition.
    return max(1.0, 1 + 0.035 * r + r * (r - 60) * (100 - r) * 7e-6)


def r_factor(
    codec: CodecImpairment,
    loss_pct: float = 0.0,
    burst_r: float = 1.0,
    delay_ms: float = 0.0,
    jitter_ms: float = 0.0,
    advantage: float = 0.0,
) -> float:
    ta = delay_ms + codec.frame_ms + 2.0 * jitter_ms
    return (
        R_DEFAULT
        - delay_impairment(ta)
        - ie_eff(codec.ie, codec.bpl, loss_pct, burst_r)
        + advantage
    )


def mos(
    codec: str | None,
    *,
    packets: int,
    lost: int,
    jitter_ms: float = 0.0,
    delay_ms: float | None = None,
    burst_ratio: float | None = None,
    plc: bool = True,
) -> tuple[float, float] | None:
    """(R, MOS) for one interval's counters, or None for an unknown codec or an
    interval with no packets expected."""
    imp = codec_impairment(codec, plc)
    expected = packets + lost
    if imp is None or expected <= 0:
        return None
    loss_pct = 100.0 * lost / expected
    r = r_factor(
        imp,
        loss_pct=loss_pct,
        burst_r=burst_ratio or 1.0,
        delay_ms=delay_ms or 0.0,
        jitter_ms=jitter_ms,
    )
    return r, r_to_mos(r)
