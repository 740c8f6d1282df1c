"""BfRt behaviour of bf_switchd (P4 Studio's bf_rt_server_impl.cpp), point by
point, on the wire: raw `bfrt_proto` messages through the stubs P4 Studio's
`bfrt_grpc` package generates, no client library in between, so what a client
can observe is checked as it is.

- a `DigestListAck` ends the stream with UNIMPLEMENTED "Not yet implemented";
- field ids as bf-p4c assigns them ($ENTRY_TTL 65543, $ENTRY_HIT_STATE 65544
  on tables with idle timeout, $REGISTER_INDEX 65557, $MATCH_PRIORITY an
  optional uint32, one id per action across tables), equal to the compiler's
  bf-rt.json when the repository's copy is at hand;
- a failed Write is UNKNOWN "Write Error Status" whose details are one
  `bfrt_proto.Error` per update up to the last failure (successes included as
  empty Errors); a failed Read is UNKNOWN "Read Error Status" the same way,
  after the entities that could be read;
- a keyless read returns every entry and then the default entry;
- Read/Write from a client that names `p4_name` without a stream subscription;
- DATAPLANE_ATOMIC is UNIMPLEMENTED;
- ObjectId reads resolve names to ids, HandleId reads give an entry's handle,
  by which a TableEntry read finds the entry.
"""

from __future__ import annotations

import ipaddress
import json
import os
import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import bfrt_grpc.bfruntime_pb2 as pb
import bfrt_grpc.bfruntime_pb2_grpc as pbg
import grpc
from google.rpc import status_pb2
from p4rbase import RELAY_IP, P4RelayTest, param
from p4relay_switch import names
from p4relay_switch import pipeline as pl

P4_NAME = "p4relay"
COMPILER_BFRT_JSON = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "p4", "bfrt", "standard.bf-rt.json"
)
SRC = int(ipaddress.IPv4Address("198.18.1.10"))
DST = int(ipaddress.IPv4Address(RELAY_IP))


def be(value: int, bits: int) -> bytes:
    return value.to_bytes((bits + 7) // 8, "big")


class Raw:
    """The BfRt service on the wire, and the program's bfrt.json."""

    def __init__(self) -> None:
        addr = f"{param('grpc_server', 'localhost')}:{param('bfrt_grpc_port', '50052')}"
        self.channel = grpc.insecure_channel(addr)
        self.stub: Any = pbg.BfRuntimeStub(self.channel)
        cfg = self.stub.GetForwardingPipelineConfig(
            pb.GetForwardingPipelineConfigRequest(device_id=0, client_id=99), timeout=10
        )
        self.bfrt: dict[str, Any] = json.loads(cfg.config[0].bfruntime_info)
        self.tables = {t["name"]: t for t in self.bfrt["tables"]}

    def close(self) -> None:
        self.channel.close()

    def table(self, name: str) -> dict[str, Any]:
        t: dict[str, Any] = self.tables[name]
        return t

    def key_id(self, table: str, name: str) -> int:
        return int(next(k["id"] for k in self.table(table)["key"] if k["name"] == name))

    def action(self, table: str, name: str) -> dict[str, Any]:
        return next(a for a in self.table(table)["action_specs"] if a["name"] == name)

    def data_field(self, table: str, name: str) -> dict[str, Any]:
        return next(
            d["singleton"] for d in self.table(table)["data"] if d["singleton"]["name"] == name
        )

    # ------------------------------------------------------------ relay entries

    def relay_key(self, sport: int) -> pb.TableKey:
        t = pl.RELAY

        def exact(name: str, v: int, bits: int) -> pb.KeyField:
            return pb.KeyField(
                field_id=self.key_id(t, name), exact=pb.KeyField.Exact(value=be(v, bits))
            )

        return pb.TableKey(
            fields=[
                exact("hdr.ipv4.src_addr", SRC, 32),
                exact("hdr.ipv4.dst_addr", DST, 32),
                exact("hdr.udp.src_port", sport, 16),
                exact("hdr.udp.dst_port", 20000, 16),
                exact("ig_md.bound_port", 1, 9),
            ]
        )

    def relay_entry(self, sport: int, leg: int = 1) -> pb.TableEntry:
        a = self.action(pl.RELAY, "Ingress.relay_leg")
        ids = {d["name"]: d["id"] for d in a["data"]}
        return pb.TableEntry(
            table_id=self.table(pl.RELAY)["id"],
            key=self.relay_key(sport),
            data=pb.TableData(
                action_id=a["id"],
                fields=[
                    pb.DataField(field_id=ids["leg"], stream=be(leg, 21)),
                    pb.DataField(field_id=ids["rtcp"], stream=be(0, 1)),
                ],
            ),
        )

    def write(
        self,
        updates: Sequence[pb.Update],
        *,
        client_id: int,
        p4_name: str = P4_NAME,
        atomicity: pb.WriteRequest.Atomicity = pb.WriteRequest.CONTINUE_ON_ERROR,
    ) -> None:
        self.stub.Write(
            pb.WriteRequest(
                target=pb.TargetDevice(device_id=0, pipe_id=0xFFFF),
                client_id=client_id,
                updates=updates,
                atomicity=atomicity,
                p4_name=p4_name,
            ),
            timeout=10,
        )

    def read(
        self, entities: Sequence[pb.Entity], *, client_id: int, p4_name: str = P4_NAME
    ) -> tuple[list[pb.Entity], grpc.RpcError | None]:
        """The entities the Read returned and the error it ended with (if any)."""
        got: list[pb.Entity] = []
        try:
            for r in self.stub.Read(
                pb.ReadRequest(
                    target=pb.TargetDevice(device_id=0, pipe_id=0xFFFF),
                    client_id=client_id,
                    entities=entities,
                    p4_name=p4_name,
                ),
                timeout=10,
            ):
                got.extend(r.entities)
        except grpc.RpcError as e:
            return got, e
        return got, None


def insert(te: pb.TableEntry) -> pb.Update:
    return pb.Update(type=pb.Update.INSERT, entity=pb.Entity(table_entry=te))


def details(e: grpc.RpcError) -> list[pb.Error]:
    """The `bfrt_proto.Error` details of a failed call."""
    raw = next(
        (v for k, v in (e.trailing_metadata() or ()) if k == "grpc-status-details-bin"), None
    )
    assert raw is not None, "no grpc-status-details-bin trailer"
    st = status_pb2.Status.FromString(raw)
    out = []
    for anyv in st.details:
        err = pb.Error()
        assert anyv.Unpack(err), anyv.type_url
        out.append(err)
    return out


class Conformance(P4RelayTest):
    """The suite's switch set up as usual (its client subscribed and bound);
    the checks go through a raw channel with client ids of their own that
    name the program (independent clients)."""

    def setUp(self) -> None:
        P4RelayTest.setUp(self)
        self.raw = Raw()

    def tearDown(self) -> None:
        self.raw.close()
        P4RelayTest.tearDown(self)

    def relay_entries(self, client_id: int = 3) -> list[pb.TableEntry]:
        got, err = self.raw.read(
            [pb.Entity(table_entry=pb.TableEntry(table_id=self.raw.table(pl.RELAY)["id"]))],
            client_id=client_id,
        )
        self.assertIsNone(err)
        return [e.table_entry for e in got if not e.table_entry.is_default_entry]


class DigestAckNotImplemented(Conformance):
    """bf_switchd answers a DigestListAck with BF_NOT_SUPPORTED "Not yet
    implemented", ending the stream (and the subscription with it)."""

    def stream(
        self, client_id: int
    ) -> tuple[queue.Queue[pb.StreamMessageRequest | None], Iterator[Any]]:
        q: queue.Queue[pb.StreamMessageRequest | None] = queue.Queue()

        def requests() -> Iterator[pb.StreamMessageRequest]:
            while True:
                m = q.get()
                if m is None:
                    return
                yield m

        responses = self.raw.stub.StreamChannel(requests(), timeout=10)
        q.put(
            pb.StreamMessageRequest(
                client_id=client_id,
                subscribe=pb.Subscribe(
                    device_id=0,
                    notifications=pb.Subscribe.Notifications(enable_learn_notifications=True),
                ),
            )
        )
        return q, responses

    def runTest(self) -> None:
        q, responses = self.stream(11)
        first = next(responses)
        self.assertEqual(first.subscribe.status.code, 0)
        q.put(
            pb.StreamMessageRequest(
                client_id=11, digest_ack=pb.DigestListAck(digest_id=1, list_id=1)
            )
        )
        with self.assertRaises(grpc.RpcError) as cm:
            for _ in responses:
                pass
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertIn("Not yet implemented", cm.exception.details())
        q.put(None)
        # The id is free again: a new stream subscribes with it.
        q2, responses2 = self.stream(11)
        self.assertEqual(next(responses2).subscribe.status.code, 0)
        q2.put(None)
        threading.Thread(target=lambda: list(responses2), daemon=True).start()


def one_at_a_time(name: str) -> int:
    """Jenkins' one-at-a-time hash, which bf-p4c's object ids are made of."""
    h = 0
    for c in name.encode():
        h = (h + c) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    return (h + (h << 15)) & 0xFFFFFFFF


class FieldIdsAsBfP4c(Conformance):
    """Reserved field ids, types and action ids as bf-p4c assigns them."""

    def runTest(self) -> None:
        r = self.raw
        ttl = r.data_field(pl.RELAY, "$ENTRY_TTL")
        self.assertEqual((ttl["id"], ttl["type"]["type"]), (65543, "uint32"))
        hit = r.data_field(pl.RELAY, "$ENTRY_HIT_STATE")
        self.assertEqual(hit["id"], 65544)
        self.assertEqual(hit["type"], {"type": "string", "choices": ["ENTRY_IDLE", "ENTRY_ACTIVE"]})
        for name, t in r.tables.items():
            if t["table_type"] == "Register":
                self.assertEqual(
                    [(k["name"], k["id"]) for k in t["key"]], [("$REGISTER_INDEX", 65557)], name
                )
        prio = next(k for k in r.table(pl.RELAY_ADDR)["key"] if k["name"] == "$MATCH_PRIORITY")
        self.assertEqual(
            (prio["id"], prio["type"], prio["mandatory"]), (65537, {"type": "uint32"}, False)
        )
        # One id per action, whichever table lists it.
        ids: dict[str, set[int]] = {}
        for t in r.tables.values():
            for a in t.get("action_specs", []):
                ids.setdefault(a["name"], set()).add(a["id"])
        for name, s in ids.items():
            self.assertEqual(len(s), 1, f"{name}: {s}")
        # The compiler's ids, when the repository's bf-rt.json is at hand.
        if os.path.exists(COMPILER_BFRT_JSON):
            with open(COMPILER_BFRT_JSON) as f:
                compiled = {t["name"]: t for t in json.load(f)["tables"]}
            ipv6 = {
                pl.IPV6_LPM,
                pl.RELAY6_ADDR,
                pl.RELAY6,
                pl.RELAY_GUARD6,
                pl.LEG_REWRITE6,
                names.REROUTE_WATCH6,
                names.INT_WATCH6,
            }
            for name, t in r.tables.items():
                if name not in compiled and (
                    name in ipv6
                    or name.startswith(("pipe.Ingress.learn_filter6", "pipe.Ingress.learning6."))
                ):
                    continue  # a Tofino 1 build without IPv6 (docs/design/ipv6.md)
                lower = name.removesuffix(pl.QUALITY_HI_SUFFIX)
                if name not in compiled and lower in compiled:
                    # a split quality register's upper half (large-t2): bf-p4c's
                    # id, its type's top byte and the name's one-at-a-time hash
                    want = compiled[lower]["id"] & 0xFF000000 | one_at_a_time(name) & 0xFFFFFF
                    self.assertEqual(t["id"], want, name)
                    continue
                self.assertEqual(t["id"], compiled[name]["id"], name)
                for a in t.get("action_specs", []):
                    c = next(x for x in compiled[name]["action_specs"] if x["name"] == a["name"])
                    self.assertEqual(a["id"], c["id"], f"{name} {a['name']}")
        # $MATCH_PRIORITY is optional: an entry without it is accepted (priority 0).
        ra = r.table(pl.RELAY_ADDR)
        key = pb.TableKey(
            fields=[
                pb.KeyField(
                    field_id=r.key_id(pl.RELAY_ADDR, "hdr.ipv4.dst_addr"),
                    exact=pb.KeyField.Exact(value=be(int(ipaddress.IPv4Address("198.18.9.9")), 32)),
                ),
                pb.KeyField(
                    field_id=r.key_id(pl.RELAY_ADDR, "hdr.udp.dst_port"),
                    range=pb.KeyField.Range(low=be(40000, 16), high=be(40010, 16)),
                ),
            ]
        )
        te = pb.TableEntry(
            table_id=ra["id"],
            key=key,
            data=pb.TableData(action_id=r.action(pl.RELAY_ADDR, "Ingress.mark_relay")["id"]),
        )
        r.write([insert(te)], client_id=3)
        r.write([pb.Update(type=pb.Update.DELETE, entity=pb.Entity(table_entry=te))], client_id=3)


class WriteErrorStatus(Conformance):
    """CONTINUE_ON_ERROR [ok, duplicate, ok, ok]: UNKNOWN "Write Error Status",
    details [success, ALREADY_EXISTS] (up to the last failure); the others written.
    ROLLBACK_ON_ERROR [ok, duplicate]: same shape, nothing written."""

    def runTest(self) -> None:
        r = self.raw
        r.write([insert(r.relay_entry(5000))], client_id=3)
        batch = [insert(r.relay_entry(p)) for p in (5001, 5000, 5002, 5003)]
        with self.assertRaises(grpc.RpcError) as cm:
            r.write(batch, client_id=3)
        e = cm.exception
        self.assertEqual(e.code(), grpc.StatusCode.UNKNOWN)
        self.assertEqual(e.details(), "Write Error Status")
        d = details(e)
        self.assertEqual(
            [x.canonical_code for x in d], [0, grpc.StatusCode.ALREADY_EXISTS.value[0]]
        )
        self.assertEqual(d[0], pb.Error())
        self.assertTrue(d[1].message)
        self.assertEqual(len(self.relay_entries()), 4)
        with self.assertRaises(grpc.RpcError) as cm:
            r.write(
                [insert(r.relay_entry(5004)), insert(r.relay_entry(5000))],
                client_id=3,
                atomicity=pb.WriteRequest.ROLLBACK_ON_ERROR,
            )
        e = cm.exception
        self.assertEqual((e.code(), e.details()), (grpc.StatusCode.UNKNOWN, "Write Error Status"))
        self.assertEqual(
            [x.canonical_code for x in details(e)], [0, grpc.StatusCode.ALREADY_EXISTS.value[0]]
        )
        self.assertEqual(len(self.relay_entries()), 4)


class ReadErrorStatus(Conformance):
    """A Read of [present entry, absent entry]: the present one is returned,
    then UNKNOWN "Read Error Status" with details [success, NOT_FOUND]."""

    def runTest(self) -> None:
        r = self.raw
        r.write([insert(r.relay_entry(5100))], client_id=3)
        tid = r.table(pl.RELAY)["id"]
        got, err = r.read(
            [
                pb.Entity(table_entry=pb.TableEntry(table_id=tid, key=r.relay_key(5100))),
                pb.Entity(table_entry=pb.TableEntry(table_id=tid, key=r.relay_key(5101))),
            ],
            client_id=3,
        )
        self.assertEqual(len(got), 1)
        self.assertEqual(got[0].table_entry.key, r.relay_key(5100))
        assert err is not None
        self.assertEqual(
            (err.code(), err.details()), (grpc.StatusCode.UNKNOWN, "Read Error Status")
        )
        self.assertEqual(
            [x.canonical_code for x in details(err)], [0, grpc.StatusCode.NOT_FOUND.value[0]]
        )


class WildcardReadHasDefaultEntry(Conformance):
    """A keyless TableEntry read returns every entry, then the default entry;
    a register (no default entry) returns its cells only."""

    def runTest(self) -> None:
        r = self.raw
        r.write([insert(r.relay_entry(p)) for p in (5200, 5201)], client_id=3)
        got, err = r.read(
            [pb.Entity(table_entry=pb.TableEntry(table_id=r.table(pl.RELAY)["id"]))], client_id=3
        )
        self.assertIsNone(err)
        self.assertEqual(len(got), 3)
        last = got[-1].table_entry
        self.assertTrue(last.is_default_entry)
        self.assertFalse(last.HasField("key"))
        self.assertEqual(last.data.action_id, r.action(pl.RELAY, "NoAction")["id"])
        self.assertFalse(any(e.table_entry.is_default_entry for e in got[:-1]))
        nh, err = r.read(
            [pb.Entity(table_entry=pb.TableEntry(table_id=r.table(pl.NEXTHOP)["id"]))], client_id=3
        )
        self.assertIsNone(err)
        self.assertEqual(sum(e.table_entry.is_default_entry for e in nh), 1)
        self.assertEqual(
            nh[-1].table_entry.data.action_id, r.action(pl.NEXTHOP, "Ingress.drop")["id"]
        )
        reg = r.table("pipe.Ingress.learn_filter")
        cells, err = r.read([pb.Entity(table_entry=pb.TableEntry(table_id=reg["id"]))], client_id=3)
        self.assertIsNone(err)
        self.assertEqual(len(cells), reg["size"])
        self.assertFalse(any(e.table_entry.is_default_entry for e in cells))


class IndependentClient(Conformance):
    """A client that never subscribed may Read and Write when it names the
    program; without the name (and unbound) it may not."""

    def runTest(self) -> None:
        r = self.raw
        r.write([insert(r.relay_entry(5300))], client_id=21)
        got, err = r.read(
            [
                pb.Entity(
                    table_entry=pb.TableEntry(
                        table_id=r.table(pl.RELAY)["id"], key=r.relay_key(5300)
                    )
                )
            ],
            client_id=22,
        )
        self.assertIsNone(err)
        self.assertEqual(len(got), 1)
        with self.assertRaises(grpc.RpcError) as cm:
            r.write([insert(r.relay_entry(5301))], client_id=23, p4_name="")
        self.assertNotEqual(cm.exception.code(), grpc.StatusCode.OK)
        with self.assertRaises(grpc.RpcError):
            r.write([insert(r.relay_entry(5302))], client_id=23, p4_name="not_loaded")
        self.assertEqual(len(self.relay_entries()), 1)


class DataplaneAtomicUnimplemented(Conformance):
    """DATAPLANE_ATOMIC: UNIMPLEMENTED, nothing written."""

    def runTest(self) -> None:
        r = self.raw
        with self.assertRaises(grpc.RpcError) as cm:
            r.write(
                [insert(r.relay_entry(5400))],
                client_id=3,
                atomicity=pb.WriteRequest.DATAPLANE_ATOMIC,
            )
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertEqual(self.relay_entries(), [])


class ObjectIdAndHandleReads(Conformance):
    """ObjectId: table, action, key field, data field and learn field names
    resolve to their bfrt.json ids. HandleId: an entry's handle, by which a
    TableEntry read returns the entry; an absent key has no handle."""

    def object_id(self, obj: pb.ObjectId) -> int:
        got, err = self.raw.read([pb.Entity(object_id=obj)], client_id=3)
        self.assertIsNone(err)
        return int(got[0].object_id.id)

    def runTest(self) -> None:
        r = self.raw
        T = pb.ObjectId.TableObject
        relay = r.table(pl.RELAY)
        self.assertEqual(
            self.object_id(pb.ObjectId(table_object=T(table_name=pl.RELAY))), relay["id"]
        )
        leg = r.action(pl.RELAY, "Ingress.relay_leg")
        self.assertEqual(
            self.object_id(
                pb.ObjectId(
                    table_object=T(
                        table_name=pl.RELAY,
                        action_name=pb.ObjectId.ActionName(action="Ingress.relay_leg"),
                    )
                )
            ),
            leg["id"],
        )
        self.assertEqual(
            self.object_id(
                pb.ObjectId(
                    table_object=T(
                        table_name=pl.RELAY,
                        key_field_name=pb.ObjectId.KeyFieldName(field="hdr.udp.dst_port"),
                    )
                )
            ),
            r.key_id(pl.RELAY, "hdr.udp.dst_port"),
        )
        self.assertEqual(
            self.object_id(
                pb.ObjectId(
                    table_object=T(
                        table_name=pl.RELAY,
                        data_field_name=pb.ObjectId.DataFieldName(field="$ENTRY_TTL"),
                    )
                )
            ),
            65543,
        )
        self.assertEqual(
            self.object_id(
                pb.ObjectId(
                    table_object=T(
                        table_name=pl.RELAY,
                        data_field_name=pb.ObjectId.DataFieldName(
                            action="Ingress.relay_leg", field="rtcp"
                        ),
                    )
                )
            ),
            next(d["id"] for d in leg["data"] if d["name"] == "rtcp"),
        )
        learn = r.bfrt["learn_filters"][0]
        self.assertEqual(
            self.object_id(
                pb.ObjectId(
                    learn_object=pb.ObjectId.LearnObject(
                        learn_name=learn["name"],
                        data_field_name=pb.ObjectId.DataFieldName(field="ingress_port"),
                    )
                )
            ),
            next(f["id"] for f in learn["fields"] if f["name"] == "ingress_port"),
        )
        _, err = r.read(
            [pb.Entity(object_id=pb.ObjectId(table_object=T(table_name="pipe.Ingress.nope")))],
            client_id=3,
        )
        assert err is not None
        self.assertEqual(err.code(), grpc.StatusCode.UNKNOWN)
        self.assertEqual(
            [x.canonical_code for x in details(err)], [grpc.StatusCode.NOT_FOUND.value[0]]
        )
        # Handles.
        r.write([insert(r.relay_entry(5500, leg=7))], client_id=3)
        got, err = r.read(
            [pb.Entity(handle=pb.HandleId(table_id=relay["id"], key=r.relay_key(5500)))],
            client_id=3,
        )
        self.assertIsNone(err)
        handle = got[0].handle
        self.assertEqual(handle.table_id, relay["id"])
        self.assertTrue(handle.HasField("handle_id"))
        got, err = r.read(
            [
                pb.Entity(
                    table_entry=pb.TableEntry(table_id=relay["id"], handle_id=handle.handle_id)
                )
            ],
            client_id=3,
        )
        self.assertIsNone(err)
        self.assertEqual(got[0].table_entry.key, r.relay_key(5500))
        self.assertEqual(got[0].table_entry.data.action_id, leg["id"])
        _, err = r.read(
            [pb.Entity(handle=pb.HandleId(table_id=relay["id"], key=r.relay_key(5501)))],
            client_id=3,
        )
        assert err is not None
        self.assertEqual(
            [x.canonical_code for x in details(err)], [grpc.StatusCode.NOT_FOUND.value[0]]
        )
