"""Control-plane errors: table full -> RESOURCE_EXHAUSTED (and nothing left
behind), duplicates/absent keys, and malformed writes -> gRPC error codes while
the switch keeps forwarding and answering."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import grpc
from p4rbase import HOST_IP, RELAY_IP, P4RelayTest, forwarded, param, udp_packet
from p4relay_switch import (
    Entry,
    EntryExistsError,
    NotFoundError,
    SwitchError,
    TableFullError,
)
from p4relay_switch import pipeline as pl
from p4relay_switch.proto import bfruntime_pb2 as pb

FILL_BASE = int(ipaddress.IPv4Address("198.18.128.0"))  # distinct sources, one per entry
REJECT_CODES = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.FAILED_PRECONDITION,
}


def _alive(t: P4RelayTest) -> None:
    ok = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=1, dport=2)
    t.send(1, ok)
    t.expect(forwarded(ok, 2), 2)
    t.assertGreaterEqual(t.sw.run(t.client.usage(pl.NEXTHOP)), 4)


class TableFull(P4RelayTest):
    """Filling pipe.Ingress.relay to its size; one more is RESOURCE_EXHAUSTED."""

    def runTest(self) -> None:
        size = self.client.schema.table(pl.RELAY).size
        expected = param("relay_entries", None)
        if expected is not None:
            self.assertEqual(size, int(expected))
        entries = [
            Entry(
                {
                    pl.K_SRC_ADDR: FILL_BASE + i,
                    pl.K_DST_ADDR: RELAY_IP,
                    pl.K_SRC_PORT: 1000,
                    pl.K_DST_PORT: 30000,
                    pl.K_BOUND_PORT: self.dev[1],
                },
                pl.A_RELAY_LEG,
                {"leg": 0, "rtcp": 0},
            )
            for i in range(size)
        ]
        self.sw.run(self.client.insert(pl.RELAY, entries, batch=512), timeout_s=120)
        self.assertEqual(self.sw.run(self.client.usage(pl.RELAY)), size)
        one_more = Entry(
            {
                pl.K_SRC_ADDR: "198.18.6.1",
                pl.K_DST_ADDR: RELAY_IP,
                pl.K_SRC_PORT: 1,
                pl.K_DST_PORT: 1,
                pl.K_BOUND_PORT: self.dev[1],
            },
            pl.A_RELAY_LEG,
            {"leg": 0, "rtcp": 0},
        )
        with self.assertRaises(TableFullError) as cm:
            self.sw.run(self.client.insert(pl.RELAY, [one_more]))
        self.assertEqual(cm.exception.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        # a whole call: refused, and its leg_rewrite entries are rolled back
        legs_before = self.sw.run(self.client.usage(pl.LEG_REWRITE))
        with self.assertRaises(TableFullError):
            self.sw.run(self.p.install_call(self.call(legs=(40, 41))))
        self.assertEqual(self.sw.run(self.client.usage(pl.LEG_REWRITE)), legs_before)
        self.assertEqual(self.sw.run(self.client.usage(pl.RELAY)), size)
        # deleting one makes room again
        self.sw.run(self.client.delete(pl.RELAY, [Entry(entries[0].key)]))
        self.sw.run(self.client.insert(pl.RELAY, [one_more]))
        _alive(self)


class DuplicateAndAbsent(P4RelayTest):
    def runTest(self) -> None:
        nh = Entry(
            {pl.K_NEXTHOP_ID: 1},
            pl.A_FORWARD,
            {"port": 1, "src_mac": "02:00:00:00:00:01", "dst_mac": "02:00:00:00:00:02"},
        )
        with self.assertRaises(EntryExistsError):
            self.sw.run(self.client.insert(pl.NEXTHOP, [nh]))
        absent = Entry({pl.K_NEXTHOP_ID: 999}, pl.A_DROP)
        with self.assertRaises(NotFoundError):
            self.sw.run(self.client.delete(pl.NEXTHOP, [absent]))
        with self.assertRaises(NotFoundError):
            self.sw.run(self.client.modify(pl.NEXTHOP, [absent]))
        with self.assertRaises(NotFoundError):
            self.sw.run(self.p.remove_call(self.call()))
        with self.assertRaises(NotFoundError):
            self.sw.run(self.client.read(pl.NEXTHOP, [{pl.K_NEXTHOP_ID: 999}]))
        # a duplicate call is refused without touching the installed one
        c = self.call()
        self.sw.run(self.p.install_call(c))
        with self.assertRaises(EntryExistsError):
            self.sw.run(self.p.install_call(c))
        self.assertEqual(self.sw.run(self.client.usage(pl.RELAY)), 4)
        self.assertEqual(self.sw.run(self.client.usage(pl.LEG_REWRITE)), 2)
        _alive(self)


class MalformedWrites(P4RelayTest):
    """Requests our client would never send, built by hand at the protobuf level."""

    def write_raw(self, te: pb.TableEntry, kind: pb.Update.Type = pb.Update.INSERT) -> None:
        update = pb.Update(type=kind, entity=pb.Entity(table_entry=te))
        self.sw.run(self.client.write([update]))

    def expect_reject(self, name: str, fn: Callable[[], None]) -> None:
        with self.assertRaises(SwitchError, msg=name) as cm:
            fn()
        self.assertIn(cm.exception.code, REJECT_CODES, f"{name}: {cm.exception}")

    def runTest(self) -> None:
        s = self.client.schema
        nh = s.table(pl.NEXTHOP)
        lpm = s.table(pl.IPV4_LPM)
        ra = s.table(pl.RELAY_ADDR)
        reg = s.table(pl.REG_PACKETS)
        fwd = nh.action(pl.A_FORWARD)
        k_nh = nh.key(pl.K_NEXTHOP_ID)

        def nh_entry(
            key: bytes, data: list[pb.DataField] | None = None, action: int | None = None
        ) -> pb.TableEntry:
            te = pb.TableEntry(table_id=nh.id)
            te.key.fields.append(pb.KeyField(field_id=k_nh.id, exact=pb.KeyField.Exact(value=key)))
            te.data.action_id = fwd.id if action is None else action
            if data is None:
                data = [
                    pb.DataField(field_id=fwd.param("port").id, stream=b"\x00\x01"),
                    pb.DataField(field_id=fwd.param("src_mac").id, stream=b"\x02" + b"\x00" * 5),
                    pb.DataField(field_id=fwd.param("dst_mac").id, stream=b"\x02" + b"\x00" * 5),
                ]
            te.data.fields.extend(data)
            return te

        good_key = (500).to_bytes(2, "big")
        cases: dict[str, Callable[[], None]] = {
            "unknown table id": lambda: self.write_raw(pb.TableEntry(table_id=0x7FFFFFF)),
            "key value too wide": lambda: self.write_raw(nh_entry(b"\x00\x00\x01\xf4\x00")),
            "unknown key field id": lambda: self.write_raw(
                pb.TableEntry(
                    table_id=nh.id,
                    key=pb.TableKey(
                        fields=[pb.KeyField(field_id=4242, exact=pb.KeyField.Exact(value=good_key))]
                    ),
                )
            ),
            "missing key": lambda: self.write_raw(pb.TableEntry(table_id=nh.id)),
            "unknown action id": lambda: self.write_raw(nh_entry(good_key, action=0x1234567)),
            "missing action parameter": lambda: self.write_raw(nh_entry(good_key, data=[])),
            "unknown data field id": lambda: self.write_raw(
                nh_entry(good_key, data=[pb.DataField(field_id=4242, stream=b"\x01")])
            ),
            "port value over 9 bits": lambda: self.write_raw(
                nh_entry(
                    good_key,
                    data=[
                        pb.DataField(field_id=fwd.param("port").id, stream=b"\xff\xff"),
                        pb.DataField(
                            field_id=fwd.param("src_mac").id, stream=b"\x02" + b"\x00" * 5
                        ),
                        pb.DataField(
                            field_id=fwd.param("dst_mac").id, stream=b"\x02" + b"\x00" * 5
                        ),
                    ],
                )
            ),
            "LPM prefix 33": lambda: self.write_raw(
                pb.TableEntry(
                    table_id=lpm.id,
                    key=pb.TableKey(
                        fields=[
                            pb.KeyField(
                                field_id=lpm.key(pl.K_DST_ADDR).id,
                                lpm=pb.KeyField.LPM(value=b"\xc6\x12\x09\x00", prefix_len=33),
                            )
                        ]
                    ),
                    data=pb.TableData(
                        action_id=lpm.action(pl.A_SET_NEXTHOP).id,
                        fields=[pb.DataField(field_id=1, stream=b"\x00\x01")],
                    ),
                )
            ),
            "exact match given for an LPM key": lambda: self.write_raw(
                pb.TableEntry(
                    table_id=lpm.id,
                    key=pb.TableKey(
                        fields=[
                            pb.KeyField(
                                field_id=lpm.key(pl.K_DST_ADDR).id,
                                exact=pb.KeyField.Exact(value=b"\xc6\x12\x09\x00"),
                            )
                        ]
                    ),
                )
            ),
            "range low > high": lambda: self.write_raw(
                pb.TableEntry(
                    table_id=ra.id,
                    key=pb.TableKey(
                        fields=[
                            pb.KeyField(
                                field_id=ra.key(pl.K_DST_ADDR).id,
                                exact=pb.KeyField.Exact(value=b"\xc6\x12\x00\x0b"),
                            ),
                            pb.KeyField(
                                field_id=ra.key(pl.K_DST_PORT).id,
                                range=pb.KeyField.Range(low=b"\x75\x30", high=b"\x4e\x20"),
                            ),
                            pb.KeyField(
                                field_id=ra.key(pl.K_PRIORITY).id,
                                exact=pb.KeyField.Exact(value=b"\x00\x00\x00\x00"),
                            ),
                        ]
                    ),
                    data=pb.TableData(action_id=ra.action(pl.A_MARK_RELAY).id),
                )
            ),
            "register index out of range": lambda: self.write_raw(
                pb.TableEntry(
                    table_id=reg.id,
                    key=pb.TableKey(
                        fields=[
                            pb.KeyField(
                                field_id=reg.key("$REGISTER_INDEX").id,
                                exact=pb.KeyField.Exact(value=(reg.size + 5).to_bytes(4, "big")),
                            )
                        ]
                    ),
                    data=pb.TableData(
                        fields=[
                            pb.DataField(
                                field_id=next(iter(reg.data.values())).id, stream=b"\0\0\0\1"
                            )
                        ]
                    ),
                ),
                kind=pb.Update.MODIFY,
            ),
            "update type UNSPECIFIED": lambda: self.write_raw(
                nh_entry(good_key), kind=pb.Update.UNSPECIFIED
            ),
        }
        for name, fn in cases.items():
            self.expect_reject(name, fn)
        # nothing of the above was written
        with self.assertRaises(NotFoundError):
            self.sw.run(self.client.read(pl.NEXTHOP, [{pl.K_NEXTHOP_ID: 500}]))
        _alive(self)


class GarbageRpc(P4RelayTest):
    """Bytes that are not a WriteRequest, and a client that never bound."""

    def runTest(self) -> None:
        addr = str(param("grpc_addr", "127.0.0.1:50052"))
        with grpc.insecure_channel(addr) as ch:
            write = ch.unary_unary(
                "/bfrt_proto.BfRuntime/Write",
                request_serializer=lambda b: b,
                response_deserializer=lambda b: b,
            )
            for junk in (b"\xff\xff\xff\xff", b"\x1a\x05\x08"):  # bad varint; truncated field
                with self.assertRaises(grpc.RpcError) as cm:
                    write(junk, timeout=5)
                self.assertNotEqual(cm.exception.code(), grpc.StatusCode.OK)
            # well-formed but from a client id that never subscribed/bound and
            # names no program (bf_switchd accepts one that names the program)
            stub_write = ch.unary_unary(
                "/bfrt_proto.BfRuntime/Write",
                request_serializer=pb.WriteRequest.SerializeToString,
                response_deserializer=pb.WriteResponse.FromString,
            )
            with self.assertRaises(grpc.RpcError):
                nh = self.client.schema.table(pl.NEXTHOP)
                te = pb.TableEntry(table_id=nh.id)
                stub_write(
                    pb.WriteRequest(
                        client_id=4242,
                        p4_name="",
                        updates=[
                            pb.Update(type=pb.Update.DELETE, entity=pb.Entity(table_entry=te))
                        ],
                    ),
                    timeout=5,
                )
            # the bound client's entries are still there
            self.assertGreaterEqual(self.sw.run(self.client.usage(pl.NEXTHOP)), 4)
        _alive(self)
