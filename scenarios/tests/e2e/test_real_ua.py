"""Real phones (baresip) through the SIP server, rtpagent, RTPProxy and the switch.

Two baresip user agents, one on the UAC host and one on the UAS host (the
SIP trunk's address; the stack's SIPp UAS is stopped for this module), each
sending its own tone. Each call is placed through each SIP server, the parties
put each other on hold and re-INVITE from both sides, and what arrived at each
phone is checked: its peer's tone, the time it played, no pause but the
hold's, no packet missing; the server's loss per direction must be what the
receivers counted, the call one session (a callee's re-INVITE must not open a
second one), and its legs' removal recorded.

A phone killed with SIGKILL leaves its peer talking into the void: rtpagent
reports one-way media (`one_way_media`) within its --one-way-after-s plus 2 s,
the server marks the call, and the console shows it (Playwright on the live
server: webui/e2e/one-way.live.ts).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from p4relay_scenarios import topology
from p4relay_scenarios.phones import Audio, Phone, received_audio, start_capture
from p4relay_scenarios.stack import ROOT, SERVER_URL, Stack
from p4relay_testsupport import wait_until

pytestmark = pytest.mark.timeout(300)

# rtpagent's default --one-way-after-s (the stack leaves it as shipped).
ONE_WAY_AFTER_S = 5.0
TALK_S = 3.0
HOLD_S = 2.0
# A hold's pause as the far end hears it: the hold's length plus signalling.
HOLD_SLACK_S = 1.5
WEBUI = ROOT / "webui"


@pytest.fixture(scope="module")
def phones(base_stack: Stack) -> Iterator[tuple[Phone, Phone]]:
    """Phone `a` on the UAC host (440 Hz) and `b` on the UAS host (660 Hz):
    the SIP servers send calls to the UAS host, and relay the UAS host's own
    calls to the host their Request-URI names."""
    if shutil.which("baresip") is None:
        pytest.fail("baresip not installed (make setup: baresip-core)")
    sup = base_stack.sup
    sup.stop("sipp-uas")  # the UAS host's SIP port is phone b's
    run = base_stack.cfg.run_dir
    a = Phone("a", topology.UAC, 440, run)
    b = Phone("b", topology.UAS, 660, run)
    for p in (a, b):
        p.start(sup)
    yield a, b
    for p in (a, b):
        sup.stop(p.proc)
    base_stack.sipp_uas()  # the shared stack's UAS, for the modules that follow


def wait_for(what: str, fn: Callable[[], Any], within: float = 20.0) -> Any:
    box: dict[str, Any] = {}

    def pred() -> bool:
        box["v"] = fn()
        return bool(box["v"])

    wait_until(pred, within=within, interval=0.25, what=what)
    return box["v"]


def connected(x: Phone, y: Phone) -> None:
    wait_for("the call up at both phones", lambda: x.calls() == 1 and y.calls() == 1)


def hung_up(x: Phone, y: Phone) -> None:
    wait_for("the call gone at both phones", lambda: x.calls() == 0 and y.calls() == 0)


def server_call(stack: Stack, since: dt.datetime) -> list[dict[str, Any]]:
    """The server's sessions started since `since` (one call at a time here)."""
    api = stack.api()
    try:
        return [s for s in api.sessions() if dt.datetime.fromisoformat(s["started_at"]) >= since]
    finally:
        api.close()


def ended_detail(stack: Stack, since: dt.datetime) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The call's sessions once ended, and the detail of its (only) one."""
    sessions = wait_for(
        "the call ended at the server",
        lambda: (s := server_call(stack, since)) and all(x["state"] == "ended" for x in s) and s,
        within=30.0,
    )
    api = stack.api()
    try:
        detail = api.session(sessions[0]["id"])
    finally:
        api.close()
    return sessions, detail


def server_loss(detail: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """(packets, lost) per direction over the session's samples."""
    out: dict[str, tuple[int, int]] = {}
    for series in detail["quality"]:
        pk = sum(p["packets"] for p in series["points"])
        lost = sum(p["lost"] for p in series["points"])
        prev = out.get(series["direction"], (0, 0))
        out[series["direction"]] = (prev[0] + pk, prev[1] + lost)
    return out


def check_heard(
    audio: Audio, tone_hz: int, talk_s: float, pauses: list[tuple[float, float]], who: str
) -> None:
    """`who` heard the tone for about `talk_s`, all of it, without a pause but
    those in `pauses` (start, end: a hold)."""
    assert audio.tone_hz is not None and abs(audio.tone_hz - tone_hz) < 5, (who, audio.tone_hz)
    assert audio.tone_share > 0.8, (who, audio.tone_share)
    assert audio.lost == 0, (who, [(s.ssrc, s.lost) for s in audio.streams])
    assert talk_s - 1.0 <= audio.seconds <= talk_s + 3.0, (who, audio.seconds, talk_s)
    for start, length in audio.gaps:
        assert any(
            lo - 0.5 <= start and start + length <= hi + HOLD_SLACK_S for lo, hi in pauses
        ), f"{who}: a {length:.2f} s pause at {start:.2f} outside the holds {pauses}"


def call(
    stack: Stack,
    caller: Phone,
    callee: Phone,
    actions: list[tuple[str, Phone]],
    tag: str,
) -> dict[str, Any]:
    """One call: `caller` dials, talk, then each (command, phone) in turn with
    talk between, the caller hangs up. Checks both phones' audio and the
    server's record; returns the figures."""
    sup = stack.sup
    out = stack.cfg.run_dir / "phones" / tag
    out.mkdir(parents=True, exist_ok=True)
    caps = {p.name: start_capture(sup, p, out / f"{p.name}.pcap") for p in (caller, callee)}
    since = dt.datetime.now(dt.UTC)
    caller.dial(callee)
    connected(caller, callee)
    t0 = time.time()
    time.sleep(TALK_S)  # the call's length is what is measured: talk time, not a wait
    pauses: list[tuple[float, float]] = []
    held: dict[str, float] = {}
    for cmd, who in actions:
        who.command(cmd)
        if cmd == "hold":
            held[who.name] = time.time()
            time.sleep(HOLD_S)  # the hold's length (the scenario), not a wait
        else:
            if cmd == "resume":
                pauses.append((held.pop(who.name), time.time()))
            time.sleep(TALK_S)  # talk time between the actions (the scenario)
    caller.command("hangup")
    hung_up(caller, callee)
    talked = time.time() - t0 - sum(hi - lo for lo, hi in pauses)
    for name in caps.values():
        sup.stop(name)
    heard = {p.name: received_audio(out / f"{p.name}.pcap", p.rtp_ports) for p in (caller, callee)}
    # The callee hears the caller's tone, the caller the callee's.
    check_heard(heard[callee.name], caller.tone_hz, talked, pauses, f"{tag}: {callee.name}")
    check_heard(heard[caller.name], callee.tone_hz, talked, pauses, f"{tag}: {caller.name}")
    sessions, detail = ended_detail(stack, since)
    # One RTPProxy session for the call: a callee's re-INVITE must update it.
    assert len(sessions) == 1, [(s["session_key"], s["state"]) for s in sessions]
    loss = server_loss(detail)
    assert loss.get("caller_to_callee", (0, 0))[1] == heard[callee.name].lost
    assert loss.get("callee_to_caller", (0, 0))[1] == heard[caller.name].lost
    assert detail["offloaded"], detail["offload_reason"]
    assert detail["legs"] and all(
        leg["removed_at"] is not None and leg["switch_leg"] is not None for leg in detail["legs"]
    ), detail["legs"]
    figures = {
        "case": tag,
        "sip": stack.cfg.sip,
        "talked_s": round(talked, 2),
        "holds": [(round(hi - lo, 2)) for lo, hi in pauses],
        "heard": {
            n: {
                "tone_hz": round(a.tone_hz or 0.0, 1),
                "seconds": round(a.seconds, 2),
                "lost": a.lost,
                "gaps_s": [round(g[1], 2) for g in a.gaps],
            }
            for n, a in heard.items()
        },
        "server": {d: {"packets": p, "lost": lost} for d, (p, lost) in loss.items()},
        "mos_avg": detail["mos_avg"],
    }
    print(json.dumps(figures))  # the figures each case stands on, in the test log
    return figures


@pytest.mark.each_sip_server
def test_callee_holds_and_reinvites(stack: Stack, phones: tuple[Phone, Phone]) -> None:
    """a calls b; b (the callee) holds and resumes, then re-INVITEs, then a does."""
    a, b = phones
    call(
        stack,
        a,
        b,
        [("hold", b), ("resume", b), ("reinvite", b), ("reinvite", a)],
        f"callee-{stack.cfg.sip}",
    )


@pytest.mark.each_sip_server
def test_call_from_the_trunk_side(stack: Stack, phones: tuple[Phone, Phone]) -> None:
    """b (on the trunk's host) calls a; a (the callee) re-INVITEs, b holds and resumes."""
    a, b = phones
    call(
        stack,
        b,
        a,
        [("reinvite", a), ("hold", b), ("resume", b), ("hold", a), ("resume", a)],
        f"trunk-{stack.cfg.sip}",
    )


def test_one_way_media_when_a_phone_dies(stack: Stack, phones: tuple[Phone, Phone]) -> None:
    """a calls b, b is killed (SIGKILL): a talks into the void. one_way_media
    (callee_to_caller silent) within --one-way-after-s + 2 s; the session is
    marked and its silent direction has no quality; the console shows it."""
    a, b = phones
    sup = stack.sup
    since = dt.datetime.now(dt.UTC)
    a.dial(b)
    connected(a, b)
    sessions = wait_for(
        "the call offloaded",
        lambda: (s := server_call(stack, since)) and s[0]["offloaded"] and s,
    )
    time.sleep(TALK_S)  # media both ways first: the silence must start at the kill
    proc = sup.procs[b.proc]
    os.killpg(proc.popen.pid, 9)
    killed = dt.datetime.now(dt.UTC)
    proc.popen.wait(5)
    api = stack.api()
    try:
        events = wait_for(
            "one_way_media at the server",
            lambda: [
                e for e in api.events("one_way_media") if e["session_id"] == sessions[0]["id"]
            ],
            within=ONE_WAY_AFTER_S + 10,
        )
        detail = api.session(sessions[0]["id"])
    finally:
        api.close()
    ev = events[0]
    took = (dt.datetime.fromisoformat(ev["ts"]) - killed).total_seconds()
    assert ev["payload"]["direction"] == "callee_to_caller", ev
    assert ev["severity"] == "warning"
    assert took <= ONE_WAY_AFTER_S + 2.0, f"one_way_media {took:.2f} s after the kill"
    assert detail["one_way"] == "callee_to_caller"
    # The silent direction has no quality after the kill; the other one flows.
    after = {
        s["direction"]: [
            p
            for p in s["points"]
            if dt.datetime.fromisoformat(p["ts"]) > killed + dt.timedelta(seconds=1)
        ]
        for s in detail["quality"]
    }
    assert all(p["packets"] == 0 and p["mos"] is None for p in after.get("callee_to_caller", []))
    assert sum(p["packets"] for p in after["caller_to_callee"]) > 0
    print(json.dumps({"case": "one-way", "event_after_s": round(took, 2), "event": ev["payload"]}))
    console(stack, detail["id"], detail["call_id"], "callee_to_caller")
    a.command("hangup")
    wait_for("a's call gone", lambda: a.calls() == 0)
    _sessions_done, done = ended_detail(stack, since)
    assert all(leg["removed_at"] is not None for leg in done["legs"]), done["legs"]
    b.start(sup)  # the module's phones stay up for the cases after this one


def console(stack: Stack, session_id: int, call_id: str, silent: str) -> None:
    """The console on the live server, in Chromium (playwright-core): the
    Overview lists the call under one-way media, the session page says which
    direction has no media (webui/e2e/one-way.live.ts)."""
    assert stack.creds is not None
    vitest = WEBUI / "node_modules" / ".bin" / "vitest"
    if not vitest.exists() or not (WEBUI / "dist" / "index.html").exists():
        pytest.fail("the console is not built (make setup; npm run build in webui)")
    env = {
        **os.environ,
        "P4RELAY_LIVE_URL": SERVER_URL,
        "P4RELAY_LIVE_USER": stack.creds.admin_user,
        "P4RELAY_LIVE_PASSWORD": stack.creds.admin_password,
        "P4RELAY_LIVE_SESSION": str(session_id),
        "P4RELAY_LIVE_CALL_ID": call_id,
        "P4RELAY_LIVE_SILENT": silent,
    }
    r = subprocess.run(
        [str(vitest), "run", "--config", "vitest.live.config.ts", "e2e/one-way.live.ts"],
        cwd=WEBUI,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert r.returncode == 0, f"console check failed:\n{r.stdout[-4000:]}\n{r.stderr[-2000:]}"
