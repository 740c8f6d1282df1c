"""Control-plane errors: table full -> RESOURCE_EXHAUSTED (and nothing left
behind), duplicates/absent keys, and malformed writes -> gRPC error codes while
the switch keeps forwarding and answering."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import bfrt_grpc.bfruntime_pb2 as pb
import bfrt_grpc.client as gc
import grpc
from bfrt_tables import register_field
from p4rbase import HOST_IP, RELAY_IP, P4RelayTest, forwarded, param, udp_packet
from p4relay_switch import Entry
from p4relay_switch import pipeline as pl

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
    t.assertGreaterEqual(t.tables.usage(pl.NEXTHOP), 4)


class TableFull(P4RelayTest):
    """Filling pipe.Ingress.relay to its size; one more is RESOURCE_EXHAUSTED."""

    def runTest(self) -> None:
        size = self.tables.size(pl.RELAY)
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
        self.tables.insert(pl.RELAY, entries, batch=512)
        self.assertEqual(self.tables.usage(pl.RELAY), size)
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
        with self.refused(grpc.StatusCode.RESOURCE_EXHAUSTED):
            self.tables.insert(pl.RELAY, [one_more])
        # a whole call: refused, and its leg_rewrite entries are rolled back
        legs_before = self.tables.usage(pl.LEG_REWRITE)
        with self.refused(grpc.StatusCode.RESOURCE_EXHAUSTED):
            self.calls.install(self.call(legs=(40, 41)))
        self.assertEqual(self.tables.usage(pl.LEG_REWRITE), legs_before)
        self.assertEqual(self.tables.usage(pl.RELAY), size)
        # deleting one makes room again
        self.tables.delete(pl.RELAY, [entries[0].key])
        self.tables.insert(pl.RELAY, [one_more])
        _alive(self)


class DuplicateAndAbsent(P4RelayTest):
    def runTest(self) -> None:
        nh = Entry(
            {pl.K_NEXTHOP_ID: 1},
            pl.A_FORWARD,
            {"port": 1, "src_mac": "02:00:00:00:00:01", "dst_mac": "02:00:00:00:00:02"},
        )
        with self.refused(grpc.StatusCode.ALREADY_EXISTS):
            self.tables.insert(pl.NEXTHOP, [nh])
        absent = Entry({pl.K_NEXTHOP_ID: 999}, pl.A_DROP)
        with self.refused(grpc.StatusCode.NOT_FOUND):
            self.tables.delete(pl.NEXTHOP, [absent.key])
        with self.refused(grpc.StatusCode.NOT_FOUND):
            self.tables.modify(pl.NEXTHOP, [absent])
        with self.refused(grpc.StatusCode.NOT_FOUND):
            self.calls.remove(self.call())
        with self.refused(grpc.StatusCode.NOT_FOUND):
            self.tables.read(pl.NEXTHOP, [{pl.K_NEXTHOP_ID: 999}])
        # a duplicate call is refused without touching the installed one
        c = self.call()
        self.calls.install(c)
        with self.refused(grpc.StatusCode.ALREADY_EXISTS):
            self.calls.install(c)
        self.assertEqual(self.tables.usage(pl.RELAY), 4)
        self.assertEqual(self.tables.usage(pl.LEG_REWRITE), 2)
        _alive(self)


class MalformedWrites(P4RelayTest):
    """Requests P4 Studio's client would never send, built by hand with its
    generated protobuf module and sent on its stub."""

    def write_raw(self, te: pb.TableEntry, kind: pb.Update.Type = pb.Update.INSERT) -> None:
        req = pb.WriteRequest(client_id=self.interface.client_id)
        req.target.device_id, req.target.pipe_id = 0, 0xFFFF
        req.updates.append(pb.Update(type=kind, entity=pb.Entity(table_entry=te)))
        try:
            self.interface.stub.Write(req, timeout=10)
        except grpc.RpcError as e:
            raise gc.BfruntimeReadWriteRpcException(e) from e

    def expect_reject(self, name: str, fn: Callable[[], None]) -> None:
        with self.refused(*REJECT_CODES, msg=name):
            fn()

    def runTest(self) -> None:
        nh = self.tables.table(pl.NEXTHOP).info
        lpm = self.tables.table(pl.IPV4_LPM).info
        ra = self.tables.table(pl.RELAY_ADDR).info
        reg = self.tables.table(pl.REG_PACKETS).info
        fwd = nh.action_id_get(pl.A_FORWARD)

        def param_id(name: str) -> int:
            return int(nh.data_field_id_get(name, pl.A_FORWARD))

        def nh_entry(
            key: bytes, data: list[pb.DataField] | None = None, action: int | None = None
        ) -> pb.TableEntry:
            te = pb.TableEntry(table_id=nh.id_get())
            te.key.fields.append(
                pb.KeyField(
                    field_id=nh.key_field_id_get(pl.K_NEXTHOP_ID),
                    exact=pb.KeyField.Exact(value=key),
                )
            )
            te.data.action_id = fwd if action is None else action
            if data is None:
                data = [
                    pb.DataField(field_id=param_id("port"), stream=b"\x00\x01"),
                    pb.DataField(field_id=param_id("src_mac"), stream=b"\x02" + b"\x00" * 5),
                    pb.DataField(field_id=param_id("dst_mac"), stream=b"\x02" + b"\x00" * 5),
                ]
            te.data.fields.extend(data)
            return te

        good_key = (500).to_bytes(2, "big")
        cases: dict[str, Callable[[], None]] = {
            "unknown table id": lambda: self.write_raw(pb.TableEntry(table_id=0x7FFFFFF)),
            "key value too wide": lambda: self.write_raw(nh_entry(b"\x00\x00\x01\xf4\x00")),
            "unknown key field id": lambda: self.write_raw(
                pb.TableEntry(
                    table_id=nh.id_get(),
                    key=pb.TableKey(
                        fields=[pb.KeyField(field_id=4242, exact=pb.KeyField.Exact(value=good_key))]
                    ),
                )
            ),
            "missing key": lambda: self.write_raw(pb.TableEntry(table_id=nh.id_get())),
            "unknown action id": lambda: self.write_raw(nh_entry(good_key, action=0x1234567)),
            "missing action parameter": lambda: self.write_raw(nh_entry(good_key, data=[])),
            "unknown data field id": lambda: self.write_raw(
                nh_entry(good_key, data=[pb.DataField(field_id=4242, stream=b"\x01")])
            ),
            "port value over 9 bits": lambda: self.write_raw(
                nh_entry(
                    good_key,
                    data=[
                        pb.DataField(field_id=param_id("port"), stream=b"\xff\xff"),
                        pb.DataField(field_id=param_id("src_mac"), stream=b"\x02" + b"\x00" * 5),
                        pb.DataField(field_id=param_id("dst_mac"), stream=b"\x02" + b"\x00" * 5),
                    ],
                )
            ),
            "LPM prefix 33": lambda: self.write_raw(
                pb.TableEntry(
                    table_id=lpm.id_get(),
                    key=pb.TableKey(
                        fields=[
                            pb.KeyField(
                                field_id=lpm.key_field_id_get(pl.K_DST_ADDR),
                                lpm=pb.KeyField.LPM(value=b"\xc6\x12\x09\x00", prefix_len=33),
                            )
                        ]
                    ),
                    data=pb.TableData(
                        action_id=lpm.action_id_get(pl.A_SET_NEXTHOP),
                        fields=[pb.DataField(field_id=1, stream=b"\x00\x01")],
                    ),
                )
            ),
            "exact match given for an LPM key": lambda: self.write_raw(
                pb.TableEntry(
                    table_id=lpm.id_get(),
                    key=pb.TableKey(
                        fields=[
                            pb.KeyField(
                                field_id=lpm.key_field_id_get(pl.K_DST_ADDR),
                                exact=pb.KeyField.Exact(value=b"\xc6\x12\x09\x00"),
                            )
                        ]
                    ),
                )
            ),
            "range low > high": lambda: self.write_raw(
                pb.TableEntry(
                    table_id=ra.id_get(),
                    key=pb.TableKey(
                        fields=[
                            pb.KeyField(
                                field_id=ra.key_field_id_get(pl.K_DST_ADDR),
                                exact=pb.KeyField.Exact(value=b"\xc6\x12\x00\x0b"),
                            ),
                            pb.KeyField(
                                field_id=ra.key_field_id_get(pl.K_DST_PORT),
                                range=pb.KeyField.Range(low=b"\x75\x30", high=b"\x4e\x20"),
                            ),
                            pb.KeyField(
                                field_id=ra.key_field_id_get(pl.K_PRIORITY),
                                exact=pb.KeyField.Exact(value=b"\x00\x00\x00\x00"),
                            ),
                        ]
                    ),
                    data=pb.TableData(action_id=ra.action_id_get(pl.A_MARK_RELAY)),
                )
            ),
            "register index out of range": lambda: self.write_raw(
                pb.TableEntry(
                    table_id=reg.id_get(),
                    key=pb.TableKey(
                        fields=[
                            pb.KeyField(
                                field_id=reg.key_field_id_get("$REGISTER_INDEX"),
                                exact=pb.KeyField.Exact(
                                    value=(reg.size_get() + 5).to_bytes(4, "big")
                                ),
                            )
                        ]
                    ),
                    data=pb.TableData(
                        fields=[
                            pb.DataField(
                                field_id=reg.data_field_id_get(register_field(pl.REG_PACKETS)),
                                stream=b"\0\0\0\1",
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
        with self.refused(grpc.StatusCode.NOT_FOUND):
            self.tables.read(pl.NEXTHOP, [{pl.K_NEXTHOP_ID: 500}])
        _alive(self)


class GarbageRpc(P4RelayTest):
    """Bytes that are not a WriteRequest, and a client that never bound."""

    def runTest(self) -> None:
        addr = f"{param('grpc_server', 'localhost')}:{param('bfrt_grpc_port', '50052')}"
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
                te = pb.TableEntry(table_id=self.tables.table(pl.NEXTHOP).info.id_get())
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
            self.assertGreaterEqual(self.tables.usage(pl.NEXTHOP), 4)
        _alive(self)
