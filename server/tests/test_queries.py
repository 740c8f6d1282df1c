"""Query API: session filters + keyset pagination, detail, CSV, queue series, events."""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any

import pytest
from conftest import T0, Auth, batch, iso, sample_item, session_item
from fastapi.testclient import TestClient


def ingest(client: TestClient, auth: Auth, **parts: Any) -> dict[str, Any]:
    r = client.post("/api/v1/ingest", json=batch(**parts), headers=auth.ingest)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


@pytest.fixture
def calls(client: TestClient, auth: Auth) -> list[dict[str, Any]]:
    """12 calls a minute apart: alternating offloaded, every third ended, two switches,
    calls 0-3 lossy (low MOS)."""
    items = []
    for i in range(12):
        s = session_item(
            f"call-{i:02d};t",
            started_at=iso(T0 + dt.timedelta(minutes=i)),
            offloaded=i % 2 == 0,
            offload_reason=None if i % 2 == 0 else "switch table full",
            state="ended" if i % 3 == 0 else "active",
            switch="sw1" if i < 6 else "sw2",
        )
        s["legs"][0]["src"]["addr"] = f"198.18.1.{10 + i}"
        items.append(s)
    samples = [
        sample_item(
            f"call-{i:02d};t",
            T0 + dt.timedelta(minutes=i),
            lost=20 if i < 4 else 0,
            packets=30 if i < 4 else 50,
        )
        for i in range(12)
    ]
    ingest(
        client, auth, agent={"name": "relay-1", "switch": "sw1"}, sessions=items, samples=samples
    )
    return items


def keys(page: dict[str, Any]) -> list[str]:
    return [s["session_key"] for s in page["items"]]


def get(client: TestClient, auth: Auth, path: str, **params: Any) -> Any:
    r = client.get(path, params=params, headers=auth.viewer)
    assert r.status_code == 200, r.text
    return r.json()


def test_keyset_pagination_walks_everything_newest_first(
    client: TestClient, auth: Auth, calls: Any
) -> None:
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 5}
        if cursor:
            params["cursor"] = cursor
        page = get(client, auth, "/api/v1/sessions", **params)
        seen += keys(page)
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == [f"call-{i:02d};t" for i in reversed(range(12))]


def test_pagination_is_stable_under_inserts(client: TestClient, auth: Auth, calls: Any) -> None:
    first = get(client, auth, "/api/v1/sessions", limit=4)
    # A newer call arrives between pages: keyset pages do not shift.
    ingest(
        client,
        auth,
        sessions=[session_item("newest;t", started_at=iso(T0 + dt.timedelta(hours=1)))],
    )
    second = get(client, auth, "/api/v1/sessions", limit=4, cursor=first["next_cursor"])
    assert keys(second) == [f"call-{i:02d};t" for i in (7, 6, 5, 4)]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"offloaded": "true"}, [10, 8, 6, 4, 2, 0]),
        ({"offloaded": "false", "state": "ended"}, [9, 3]),
        ({"state": ["ended", "setup"]}, [9, 6, 3, 0]),
        ({"switch": "sw2"}, [11, 10, 9, 8, 7, 6]),
        (
            {
                "started_from": iso(T0 + dt.timedelta(minutes=3)),
                "started_to": iso(T0 + dt.timedelta(minutes=5)),
            },
            [4, 3],
        ),
        ({"mos_max": 3.0}, [3, 2, 1, 0]),
        ({"mos_min": 4.0}, [11, 10, 9, 8, 7, 6, 5, 4]),
        ({"call_id": "call-05"}, [5]),
        ({"address": "198.18.1.17"}, [7]),
        ({"address": "198.18.2.10"}, list(reversed(range(12)))),
        ({"address": "203.0.113.1"}, []),
        ({"address": "198.18.0.10"}, []),  # the relay address is not a party
    ],
)
def test_filters(
    client: TestClient, auth: Auth, calls: Any, params: dict[str, Any], expected: list[int]
) -> None:
    page = get(client, auth, "/api/v1/sessions", limit=100, **params)
    assert keys(page) == [f"call-{i:02d};t" for i in expected]


@pytest.mark.parametrize(
    "params",
    [
        {"cursor": "not-a-cursor"},
        {"limit": 0},
        {"limit": 501},
        {"state": "exploded"},
        {"address": "not-an-ip"},
        {"mos_min": 7},
        {"started_from": "2026-11-21T10:00:00"},
    ],
)
def test_bad_query_params_are_422(client: TestClient, auth: Auth, params: dict[str, Any]) -> None:
    r = client.get("/api/v1/sessions", params=params, headers=auth.viewer)
    assert r.status_code == 422
    assert r.json()["detail"][0]["msg"]


def test_session_detail(client: TestClient, auth: Auth, calls: Any) -> None:
    key = "call-00;t"
    events = [
        {
            "event_id": "ev-detail-01",
            "type": "offload_installed",
            "ts": iso(T0),
            "session_key": key,
            "switch": "sw1",
        },
        {
            "event_id": "ev-detail-02",
            "type": "reroute",
            "ts": iso(T0 + dt.timedelta(seconds=5)),
            "session_key": key,
            "payload": {
                "flow": key,
                "from_path": [1, 2],
                "to_path": [1, 3],
                "trigger": "congestion",
            },
        },
    ]
    more = [
        sample_item(key, T0 + dt.timedelta(seconds=s), direction="callee_to_caller")
        for s in range(10)
    ]
    ingest(client, auth, samples=more, events=events)
    sid = get(client, auth, "/api/v1/sessions", call_id="call-00")["items"][0]["id"]
    d = get(client, auth, f"/api/v1/sessions/{sid}")
    assert d["session_key"] == key and d["switch"] == "sw1" and d["agent"] == "relay-1"
    assert {leg["direction"] for leg in d["legs"]} == {"caller_to_callee", "callee_to_caller"}
    leg = next(x for x in d["legs"] if x["direction"] == "caller_to_callee")
    assert leg["src"] == {"addr": "198.18.1.10", "port": 6000}
    assert leg["relay_in"] == {"addr": "198.18.0.10", "port": 20000}
    assert [e["type"] for e in d["events"]] == ["reroute", "offload_installed"]
    assert d["events"][0]["payload"]["trigger"] == "congestion"
    series = {s["direction"]: s for s in d["quality"]}
    assert len(series["callee_to_caller"]["points"]) == 10
    assert series["caller_to_callee"]["points"][0]["loss_pct"] == pytest.approx(40.0)
    assert client.get("/api/v1/sessions/999999", headers=auth.viewer).status_code == 404


def _reroute(eid: str, at: dt.datetime, flow: str, direction: str, **extra: Any) -> dict[str, Any]:
    back = direction == "to_primary"
    return {
        "event_id": eid,
        "type": "reroute",
        "ts": iso(at),
        "switch": extra.pop("switch", "s1"),
        "severity": "warning",
        "payload": {
            "flow": flow,
            "from_path": "nexthop 8 port 8" if back else "port 7",
            "to_path": "port 7" if back else "nexthop 8 port 8",
            "trigger": "primary clear" if back else "queue delay 2.4 ms > t_q 2 ms for 5 packets",
            "direction": direction,
            **extra,
        },
    }


def test_session_reroutes_and_path(client: TestClient, auth: Auth) -> None:
    """A call's reroutes are those of watched destinations holding its media
    destinations while it was up; its path per switch follows them."""
    start = T0 + dt.timedelta(hours=1)
    s = session_item("rr-call;t", started_at=iso(start), state="ended", switch="s1")
    s["ended_at"] = iso(start + dt.timedelta(seconds=60))

    def at(sec: int) -> dt.datetime:
        return start + dt.timedelta(seconds=sec)

    events = [
        # before the call: moved and back again -> the call starts on the primary
        _reroute("reroute-00", at(-30), "198.18.2.0/24", "to_backup"),
        _reroute("reroute-01", at(-20), "198.18.2.0/24", "to_primary"),
        # moved by the INT loop: the congestion was two hops down, at s3's port 2
        _reroute(
            "reroute-02",
            at(10),
            "198.18.2.0/24",
            "to_backup",
            detected_by="int_control_plane",
            hop_switch="s3",
            hop_port=2,
        ),
        _reroute("reroute-03", at(40), "198.18.2.0/24", "to_primary"),
        # another destination, a bad flow, a notice upstream, after the call: not its path
        _reroute("reroute-04", at(12), "198.18.9.0/24", "to_backup"),
        _reroute("reroute-05", at(13), "not a prefix", "to_backup"),
        _reroute("reroute-06", at(14), "198.18.2.0/24", "notify_upstream", switch="s2"),
        _reroute("reroute-07", at(90), "198.18.2.0/24", "to_backup"),
    ]
    ingest(client, auth, agent={"name": "relay-1", "switch": "s1"}, sessions=[s], events=events)
    sid = get(client, auth, "/api/v1/sessions", call_id="rr-call")["items"][0]["id"]
    d = get(client, auth, f"/api/v1/sessions/{sid}")
    assert [e["event_id"] for e in d["reroutes"]] == ["reroute-02", "reroute-06", "reroute-03"]
    ts = dt.datetime.fromisoformat
    path = [(p["switch"], p["path"], ts(p["since"]), ts(p["until"])) for p in d["path"]]
    assert path == [
        ("s1", "port 7", start, at(10)),
        ("s1", "nexthop 8 port 8", at(10), at(40)),
        ("s1", "port 7", at(40), at(60)),
    ]
    ids = {e["event_id"]: e["id"] for e in d["reroutes"]}
    assert [p["reroute_event_id"] for p in d["path"]][1:] == [ids["reroute-02"], ids["reroute-03"]]
    assert d["path"][1]["trigger"].startswith("queue delay")
    assert [p["congested_hop"] for p in d["path"]] == [None, "s3 port 2", None]


def test_session_path_starts_on_the_backup_after_an_earlier_move(
    client: TestClient, auth: Auth
) -> None:
    start = T0 + dt.timedelta(hours=2)
    s = session_item("rr-late;t", started_at=iso(start), state="active", switch="s1")
    ingest(
        client,
        auth,
        agent={"name": "relay-1", "switch": "s1"},
        sessions=[s],
        events=[
            _reroute("reroute-10", start - dt.timedelta(seconds=5), "198.18.2.10/32", "to_backup")
        ],
    )
    sid = get(client, auth, "/api/v1/sessions", call_id="rr-late")["items"][0]["id"]
    d = get(client, auth, f"/api/v1/sessions/{sid}")
    assert d["reroutes"] == []
    [seg] = d["path"]
    assert seg["path"] == "nexthop 8 port 8" and seg["until"] is None
    assert seg["flow"] == "198.18.2.10/32"
    assert seg["congested_hop"] == "s1 port 7"  # local detection: the switch's own port


def _int_path(at: dt.datetime, src: tuple[str, int], dst: tuple[str, int], *hops: Any) -> Any:
    """A path record as the collector sends it; hops (switch, in, out), the sink last."""
    return {
        "ts": iso(at),
        "src": {"addr": src[0], "port": src[1]},
        "dst": {"addr": dst[0], "port": dst[1]},
        "hops": [
            {"switch": h[0], "ingress_port": h[1], "egress_port": h[2]}
            if len(h) == 3
            else {"switch": h[0]}
            for h in hops
        ],
    }


def test_session_path_from_int_path_records(client: TestClient, auth: Auth) -> None:
    """A traced call's path comes from the INT path records of its legs' flows
    (as relayed: relay_out -> dst), not from reroute events; a record that
    repeats the path extends it; another flow's records are not its path."""
    start = T0 + dt.timedelta(hours=3)
    s = session_item("int-call;t", started_at=iso(start), state="ended", switch="s1")
    s["ended_at"] = iso(start + dt.timedelta(seconds=60))

    def at(sec: int) -> dt.datetime:
        return start + dt.timedelta(seconds=sec)

    relay, callee = ("198.18.0.10", 20002), ("198.18.2.10", 7000)
    direct = (("s1", 1, 3), ("s2",))
    around = (("s1", 1, 4), ("s3", 1, 2), ("s2",))
    paths = [
        _int_path(at(1), relay, callee, *direct),
        _int_path(at(5), relay, callee, *direct),  # the collector restarted: same path
        _int_path(at(20), relay, callee, *around),
        _int_path(at(30), relay, ("198.18.2.11", 7000), *direct),  # another call's flow
        _int_path(at(90), relay, callee, *direct),  # after the call
    ]
    r = ingest(
        client,
        auth,
        agent={"name": "relay-1", "switch": "s1"},
        sessions=[s],
        paths=paths,
        events=[_reroute("reroute-20", at(20), "198.18.2.0/24", "to_backup")],
    )
    assert (r["paths_stored"], r["paths_duplicate"]) == (5, 0)
    assert ingest(client, auth, paths=paths[:1])["paths_duplicate"] == 1
    sid = get(client, auth, "/api/v1/sessions", call_id="int-call")["items"][0]["id"]
    d = get(client, auth, f"/api/v1/sessions/{sid}")
    ts = dt.datetime.fromisoformat
    got = [(p["source"], p["switch"], p["path"], ts(p["since"]), ts(p["until"])) for p in d["path"]]
    assert got == [
        ("int", "s2", "s1 (1>3) > s2", at(1), at(20)),
        ("int", "s2", "s1 (1>4) > s3 (1>2) > s2", at(20), at(60)),
    ]
    assert {p["flow"] for p in d["path"]} == {"198.18.0.10:20002 -> 198.18.2.10:7000"}
    assert [p["trigger"] for p in d["path"]] == [None, "path change"]
    assert d["path"][1]["hops"][1] == {"switch": "s3", "ingress_port": 1, "egress_port": 2}
    # the reroute is still listed among the call's reroutes
    assert [e["event_id"] for e in d["reroutes"]] == ["reroute-20"]
    # every record, newest first; by address
    listed = get(client, auth, "/api/v1/paths", addr="198.18.2.11")
    assert [(p["dst"]["addr"], p["sink"]) for p in listed] == [("198.18.2.11", "s2")]
    assert len(get(client, auth, "/api/v1/paths", since=iso(at(0)), until=iso(at(60)))) == 4


@pytest.mark.parametrize(
    "bad",
    [
        {"hops": []},
        {"hops": [{"switch": "s1", "ingress_port": 70000}]},
        {"hops": [{"switch": ""}]},
        {"src": {"addr": "not an address", "port": 1}},
        {"extra": 1},
    ],
)
def test_bad_path_records_are_refused(client: TestClient, auth: Auth, bad: dict[str, Any]) -> None:
    item = {**_int_path(T0, ("198.18.0.10", 1), ("198.18.2.10", 2), ("s2",)), **bad}
    r = client.post("/api/v1/ingest", json=batch(paths=[item]), headers=auth.ingest)
    assert r.status_code == 422, r.text


def test_session_parties(client: TestClient, auth: Auth, calls: Any) -> None:
    """Caller/callee: source and destination of the caller->callee leg."""
    v6 = session_item("v6;1", started_at=iso(T0 + dt.timedelta(hours=1)))
    v6["legs"][0]["src"] = {"addr": "2001:db8::10", "port": 6002}
    v6["legs"][0]["dst"] = {"addr": "2001:db8::20", "port": 7002}
    ingest(client, auth, sessions=[v6, session_item("nolegs;1", legs=[])])
    items = {s["call_id"]: s for s in get(client, auth, "/api/v1/sessions", limit=50)["items"]}
    assert items["call-03"]["caller"] == "198.18.1.13:6000"
    assert items["call-03"]["callee"] == "198.18.2.10:7000"
    assert (items["v6"]["caller"], items["v6"]["callee"]) == (
        "[2001:db8::10]:6002",
        "[2001:db8::20]:7002",
    )
    assert (items["nolegs"]["caller"], items["nolegs"]["callee"]) == (None, None)
    d = get(client, auth, f"/api/v1/sessions/{items['call-05']['id']}")
    assert (d["caller"], d["callee"]) == ("198.18.1.15:6000", "198.18.2.10:7000")
    rows = list(
        csv.DictReader(
            io.StringIO(
                client.get(
                    "/api/v1/sessions/export.csv", params={"call_id": "call-07"}, headers=auth.read
                ).text
            )
        )
    )
    assert [(r["caller"], r["callee"]) for r in rows] == [("198.18.1.17:6000", "198.18.2.10:7000")]


def _legs(caller: tuple[str, int], relay_in: str, relay_out: str, callee: tuple[str, int]) -> Any:
    """Both legs of a call: caller -> relay_in ... relay_out -> callee and back."""
    return [
        {
            "direction": "caller_to_callee",
            "src": {"addr": caller[0], "port": caller[1]},
            "relay_in": {"addr": relay_in, "port": 20000},
            "relay_out": {"addr": relay_out, "port": 20002},
            "dst": {"addr": callee[0], "port": callee[1]},
            "installed": True,
        },
        {
            "direction": "callee_to_caller",
            "src": {"addr": callee[0], "port": callee[1]},
            "relay_in": {"addr": relay_out, "port": 20002},
            "relay_out": {"addr": relay_in, "port": 20000},
            "dst": {"addr": caller[0], "port": caller[1]},
            "installed": True,
        },
    ]


@pytest.fixture
def dual_stack(client: TestClient, auth: Auth, calls: Any) -> None:
    """Beside the IPv4 calls: an IPv6 call, a bridged one (IPv4 caller, IPv6
    callee) and an IPv6 call from another prefix."""
    at = T0 + dt.timedelta(hours=1)
    ingest(
        client,
        auth,
        sessions=[
            session_item(
                "v6;1",
                started_at=iso(at),
                legs=_legs(
                    ("fd00:198:18:1::10", 6000),
                    "fd00:198:18::10",
                    "fd00:198:18::10",
                    ("fd00:198:18:2::10", 7000),
                ),
            ),
            session_item(
                "bridged;1",
                started_at=iso(at + dt.timedelta(minutes=1)),
                offloaded=False,
                offload_reason="bridged",
                legs=_legs(
                    ("198.18.1.10", 6002),
                    "198.18.0.10",
                    "fd00:198:18::10",
                    ("fd00:198:18:2::10", 7002),
                ),
            ),
            session_item(
                "doc;1",
                started_at=iso(at + dt.timedelta(minutes=2)),
                legs=_legs(
                    ("2001:db8:0:1::10", 6004),
                    "fd00:198:18::10",
                    "fd00:198:18::10",
                    ("2001:db8::20", 7004),
                ),
            ),
        ],
    )


# (params, call ids newest first); one ingest for all (each test pays a clean database)
IPV6_FILTERS: list[tuple[dict[str, Any], list[str]]] = [
    # any spelling of an IPv6 address finds it
    ({"address": "fd00:198:18:1:0:0:0:10"}, ["v6"]),
    ({"address": "FD00:198:18:2::10"}, ["bridged", "v6"]),
    ({"address": "2001:db8::20"}, ["doc"]),
    ({"address": "fd00:198:18::10"}, []),  # the relay's IPv6 address is not a party
    ({"prefix": "fd00::/8"}, ["bridged", "v6"]),
    ({"prefix": "fd00:198:18:1::/64"}, ["v6"]),
    ({"prefix": "2001:db8::/32"}, ["doc"]),
    ({"prefix": "::/0"}, ["doc", "bridged", "v6"]),
    ({"prefix": "198.18.1.10/32", "started_from": iso(T0 + dt.timedelta(hours=1))}, ["bridged"]),
    ({"prefix": "fd00::/8", "offloaded": "false"}, ["bridged"]),
    ({"prefix": "198.18.1.16/31"}, ["call-07", "call-06"]),
    ({"prefix": "198.18.1.17/24", "limit": 3}, ["bridged", "call-11", "call-10"]),  # host bits
    ({"prefix": "198.18.0.10/32"}, []),  # the relay's IPv4 address is not a party
]
BAD_ADDRESS_PARAMS = [
    {"address": "198.18.1.0/24"},
    {"address": "fe80::1%eth0"},
    {"prefix": "not-a-prefix"},
    {"prefix": "198.18.1.0/33"},
    {"prefix": "fd00::/129"},
    {"prefix": "fe80::1%eth0/64"},
]


def test_ipv6_and_prefix_filters(client: TestClient, auth: Auth, dual_stack: None) -> None:
    for params, expected in IPV6_FILTERS:
        page = get(client, auth, "/api/v1/sessions", **{"limit": 100, **params})
        assert [s["call_id"] for s in page["items"]] == expected, params
    for params in BAD_ADDRESS_PARAMS:
        r = client.get("/api/v1/sessions", params=params, headers=auth.viewer)
        assert r.status_code == 422, params
        assert r.json()["detail"][0]["msg"], params


def test_ipv6_parties_in_list_detail_and_csv(
    client: TestClient, auth: Auth, dual_stack: None
) -> None:
    items = {s["call_id"]: s for s in get(client, auth, "/api/v1/sessions", limit=100)["items"]}
    assert (items["bridged"]["caller"], items["bridged"]["callee"]) == (
        "198.18.1.10:6002",
        "[fd00:198:18:2::10]:7002",
    )
    d = get(client, auth, f"/api/v1/sessions/{items['bridged']['id']}")
    leg = next(x for x in d["legs"] if x["direction"] == "caller_to_callee")
    assert (leg["relay_in"]["addr"], leg["relay_out"]["addr"]) == ("198.18.0.10", "fd00:198:18::10")
    assert d["offload_reason"] == "bridged"
    r = client.get("/api/v1/sessions/export.csv", params={"prefix": "fd00::/16"}, headers=auth.read)
    assert r.status_code == 200, r.text
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [(row["call_id"], row["caller"], row["callee"]) for row in rows] == [
        ("bridged", "198.18.1.10:6002", "[fd00:198:18:2::10]:7002"),
        ("v6", "[fd00:198:18:1::10]:6000", "[fd00:198:18:2::10]:7000"),
    ]


def test_quality_series_downsampled(client: TestClient, auth: Auth, calls: Any) -> None:
    key = "call-11;t"
    t = T0 + dt.timedelta(minutes=11)
    ingest(
        client,
        auth,
        samples=[sample_item(key, t + dt.timedelta(seconds=s), lost=s % 2) for s in range(1, 60)],
    )
    sid = get(client, auth, "/api/v1/sessions", call_id="call-11")["items"][0]["id"]
    series = get(client, auth, f"/api/v1/sessions/{sid}/quality", resolution_s=10)
    pts = series[0]["points"]
    assert series[0]["resolution_s"] == 10
    assert len(pts) == 6
    assert sum(p["packets"] for p in pts) == 50 * 60
    assert sum(p["lost"] for p in pts) == 30


def test_csv_export(client: TestClient, auth: Auth, calls: Any) -> None:
    r = client.get("/api/v1/sessions/export.csv", params={"offloaded": "false"}, headers=auth.read)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [row["session_key"] for row in rows] == [f"call-{i:02d};t" for i in (11, 9, 7, 5, 3, 1)]
    assert rows[0]["offload_reason"] == "switch table full"
    assert rows[0]["started_at"] == iso(T0 + dt.timedelta(minutes=11))


def test_csv_export_neutralises_formulas(client: TestClient, auth: Auth) -> None:
    ingest(client, auth, sessions=[session_item("=HYPERLINK(1);x", call_id="=cmd|' /C calc'!A0")])
    rows = list(
        csv.DictReader(
            io.StringIO(client.get("/api/v1/sessions/export.csv", headers=auth.read).text)
        )
    )
    assert rows[0]["call_id"].startswith("'=")


def test_queue_series_downsampled(client: TestClient, auth: Auth) -> None:
    qs = [
        {
            "switch": "sw1",
            "dev_port": p,
            "ts": iso(T0 + dt.timedelta(seconds=s)),
            "depth_pkts": s,
            "queue_delay_us": 10.0 * s,
            "utilisation": 0.5,
            "drops": 1,
            # iRED on port 2 only: its queue average rides along with the depth.
            **({"ired_qavg_bytes": 80 * s} if p == 2 else {}),
        }
        for s in range(120)
        for p in (1, 2)
    ]
    ingest(client, auth, queue_samples=qs)
    sw = get(client, auth, "/api/v1/switches")[0]
    series = get(
        client,
        auth,
        f"/api/v1/switches/{sw['id']}/queues",
        **{"from": iso(T0), "to": iso(T0 + dt.timedelta(minutes=2)), "resolution_s": 60},
    )
    assert [(s["dev_port"], len(s["points"])) for s in series] == [(1, 2), (2, 2)]
    p0 = series[0]["points"][0]
    assert p0["depth_pkts"] == pytest.approx(29.5)
    assert p0["depth_max_pkts"] == 59
    assert p0["drops"] == 60
    assert p0["ired_qavg_bytes"] is None  # iRED off on port 1
    assert series[1]["points"][0]["ired_qavg_bytes"] == pytest.approx(80 * 29.5)
    one = get(
        client,
        auth,
        f"/api/v1/switches/{sw['id']}/queues",
        **{"from": iso(T0), "to": iso(T0 + dt.timedelta(minutes=2)), "dev_port": 2},
    )
    assert [s["dev_port"] for s in one] == [2]
    assert len(one[0]["points"]) == 120  # 1 s buckets
    assert [p["ired_qavg_bytes"] for p in one[0]["points"][:3]] == [0, 80, 160]
    # A long window is coarsened to at most 1000 points.
    wide = get(
        client,
        auth,
        f"/api/v1/switches/{sw['id']}/queues",
        **{"from": iso(T0 - dt.timedelta(days=7)), "to": iso(T0 + dt.timedelta(days=7))},
    )
    assert wide[0]["resolution_s"] >= 14 * 86400 / 1000
    bad = client.get(
        f"/api/v1/switches/{sw['id']}/queues",
        params={"from": iso(T0), "to": iso(T0)},
        headers=auth.viewer,
    )
    assert bad.status_code == 422
    assert client.get("/api/v1/switches/4242/queues", headers=auth.viewer).status_code == 404


def test_hop_series_puts_every_switch_side_by_side(client: TestClient, auth: Auth) -> None:
    """The fleet's queues per hop: INT samples (bytes and delay, no packet count)
    of two switches in one answer, one series per switch, port and queue."""
    qs = [
        {
            "switch": sw,
            "dev_port": p,
            "ts": iso(T0 + dt.timedelta(seconds=s)),
            "depth_bytes": 80 * (s + k),
            "queue_delay_us": 5.0 * s,
        }
        for s in range(60)
        for k, (sw, p) in enumerate((("s1", 7), ("s2", 8), ("s3", 2)))
    ]
    ingest(client, auth, queue_samples=qs)
    window = {"from": iso(T0), "to": iso(T0 + dt.timedelta(minutes=1)), "resolution_s": 30}
    hops = get(client, auth, "/api/v1/queues", **window)
    assert [(h["switch"], h["dev_port"], len(h["points"])) for h in hops] == [
        ("s1", 7, 2),
        ("s2", 8, 2),
        ("s3", 2, 2),
    ]
    assert hops[1]["points"][0]["depth_bytes"] == pytest.approx(80 * (14.5 + 1))
    assert hops[0]["points"][0]["depth_pkts"] is None
    one = get(
        client,
        auth,
        f"/api/v1/switches/{get(client, auth, '/api/v1/switches')[1]['id']}/queues",
        **window,
    )
    assert [h["switch"] for h in one] == ["s2"]
    bad = client.get("/api/v1/queues", params={"from": iso(T0), "to": iso(T0)}, headers=auth.viewer)
    assert bad.status_code == 422
    assert client.get("/api/v1/queues").status_code == 401


def test_events_feed(client: TestClient, auth: Auth) -> None:
    evs = [
        {
            "event_id": f"ev-feed-{i:03d}",
            "type": "congestion_onset" if i % 2 else "ired_drop",
            "ts": iso(T0 + dt.timedelta(seconds=i)),
            "switch": "sw1",
            "severity": "warning",
            "payload": {"dev_port": 1, "drops": i},
        }
        for i in range(7)
    ]
    ingest(client, auth, events=evs)
    page1 = get(client, auth, "/api/v1/events", limit=3)
    page2 = get(client, auth, "/api/v1/events", limit=3, cursor=page1["next_cursor"])
    page3 = get(client, auth, "/api/v1/events", limit=3, cursor=page2["next_cursor"])
    ids = [e["event_id"] for p in (page1, page2, page3) for e in p["items"]]
    assert ids == [f"ev-feed-{i:03d}" for i in reversed(range(7))]
    assert page3["next_cursor"] is None
    only = get(client, auth, "/api/v1/events", type="ired_drop")
    assert {e["type"] for e in only["items"]} == {"ired_drop"}
    assert (
        len(get(client, auth, "/api/v1/events", since=iso(T0 + dt.timedelta(seconds=5)))["items"])
        == 2
    )
    assert get(client, auth, "/api/v1/events", switch="nope")["items"] == []


def test_switches_ports_agents(client: TestClient, auth: Auth) -> None:
    ingest(
        client,
        auth,
        agent={
            "name": "relay-7",
            "rtpproxy": "udp:127.0.0.1:22223",
            "switch": "sw5",
            "version": "1.2",
        },
        switch={
            "name": "sw5",
            "grpc_address": "198.19.0.1:50052",
            "ports": [{"dev_port": 3, "name": "p4r-sw-3", "up": True}],
        },
    )
    sw = get(client, auth, "/api/v1/switches")
    assert sw[0]["name"] == "sw5" and sw[0]["ports"][0]["name"] == "p4r-sw-3" and sw[0]["last_seen"]
    assert (
        get(client, auth, f"/api/v1/switches/{sw[0]['id']}")["grpc_address"] == "198.19.0.1:50052"
    )
    agents = get(client, auth, "/api/v1/agents")
    assert agents[0]["switch"] == "sw5" and agents[0]["rtpproxy"] == "udp:127.0.0.1:22223"


def test_admin_registers_switch_for_collector(client: TestClient, auth: Auth) -> None:
    r = client.post(
        "/api/v1/switches",
        json={"name": "tofino-1", "grpc_address": "10.0.0.5:50052"},
        headers=auth.admin,
    )
    assert r.status_code == 201
    assert (
        client.post(
            "/api/v1/switches", json={"name": "x", "grpc_address": "y"}, headers=auth.viewer
        ).status_code
        == 403
    )
    listed = client.get("/api/v1/ingest/switches", headers=auth.ingest).json()
    assert [s["name"] for s in listed] == ["tofino-1"]
