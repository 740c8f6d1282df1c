"""The program's objects driven the way P4 Studio's own example tests drive
theirs (p4-examples `tna_register`, `tna_counter`, `tna_digest`,
`tna_idletimeout`), call for call, so what a P4 Studio user writes against
bf_switchd works here as there: a register cell added with `entry_add` and
read back as one value per pipe; a direct counter set by a MODIFY that names
only the counter and read by naming its fields; a learn digest's target pipe;
an entry's hit state in poll mode; per-update errors in the response
(`error_in_resp`, `tna_exact_match`); `clear_all_tables`."""

from __future__ import annotations

from typing import Any

import bfrt_grpc.bfruntime_pb2 as bfruntime_pb2
import bfrt_grpc.client as gc
import grpc
from bfrt_tables import flow_key, register_field
from learning import LearnBase
from p4rbase import HOST_IP, RELAY_IP, P4RelayTest, forwarded, rtp_payload, udp_packet
from p4relay_switch import pipeline as pl
from p4testutils.bfrt_utils import get_num_pipes
from scapy.layers.inet import IP


def rtp_a(seq: int) -> Any:
    """Caller A's RTP packet to the relay (relayed to B by the default call)."""
    return udp_packet(
        in_port=1,
        src=HOST_IP[1],
        dst=RELAY_IP,
        sport=6000,
        dport=20000,
        payload=rtp_payload(seq, seq * 160),
        ip_id=seq,
    )


class RegisterAsTnaRegister(P4RelayTest):
    """tna_register: a cell written with entry_add reads back from the
    hardware as one value per pipe; the data plane counts on from it."""

    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call)
        leg = call.a_to_b.leg
        num_pipes = get_num_pipes(self.bfrt_info.table_get("device_configuration"))
        reg = self.bfrt_info.table_get(pl.REG_PACKETS)
        field = register_field(pl.REG_PACKETS)
        key = [reg.make_key([gc.KeyTuple("$REGISTER_INDEX", leg)])]
        reg.entry_add(self.target, key, [reg.make_data([gc.DataTuple(field, 1000)])])
        data, _ = next(reg.entry_get(self.target, key, {"from_hw": True}))
        self.assertEqual(data.to_dict()[field], [1000] * num_pipes)
        # one relayed RTP packet of the leg: the cell counts on from 1000
        pkt = rtp_a(1)
        self.send(1, pkt)
        self.expect(forwarded(pkt, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000), 2)
        data, _ = next(reg.entry_get(self.target, key, {"from_hw": True}))
        self.assertEqual(sum(data.to_dict()[field]), 1001)


class DirectCounterAsTnaCounter(P4RelayTest):
    """tna_counter: a MODIFY naming the entry's action and only the counter
    sets the counter and keeps the action's parameters; a read naming the
    counter fields returns those fields."""

    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call)
        leg = call.a_to_b.leg
        t = self.bfrt_info.table_get(pl.LEG_REWRITE)
        key = [t.make_key([gc.KeyTuple(pl.K_LEG, leg)])]
        t.entry_mod(
            self.target,
            key,
            [
                t.make_data(
                    [gc.DataTuple(pl.COUNTER_BYTES, 4000), gc.DataTuple(pl.COUNTER_PKTS, 20)],
                    pl.A_REWRITE,
                )
            ],
        )
        wanted = t.make_data(
            [gc.DataTuple(pl.COUNTER_BYTES), gc.DataTuple(pl.COUNTER_PKTS)], pl.A_REWRITE, get=True
        )
        data, _ = next(t.entry_get(self.target, key, {"from_hw": True}, wanted))
        d = data.to_dict()
        self.assertEqual((d[pl.COUNTER_PKTS], d[pl.COUNTER_BYTES]), (20, 4000))
        self.assertEqual(
            set(d) - {"action_name", "is_default_entry"}, {pl.COUNTER_PKTS, pl.COUNTER_BYTES}
        )
        # the rewrite is intact: the leg still relays, and counts on
        pkt = rtp_a(1)
        self.send(1, pkt)
        self.expect(forwarded(pkt, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000), 2)
        data, _ = next(t.entry_get(self.target, key, {"from_hw": True}, wanted))
        d = data.to_dict()
        self.assertEqual(d[pl.COUNTER_PKTS], 21)
        self.assertIn(d[pl.COUNTER_BYTES], (4000 + len(pkt), 4000 + len(pkt) + 4))


class LearnDigestAsTnaDigest(LearnBase):
    """tna_digest: the digest's target pipe is the ingress port's pipe, and
    make_data_list gives the learned fields."""

    def runTest(self) -> None:
        pkt = udp_packet(in_port=4, src=HOST_IP[4], dst=RELAY_IP, sport=4500, dport=20030)
        self.send(4, pkt)
        self.expect(forwarded(pkt, 3), 3)
        digest = self.interface.digest_get(timeout=2)
        self.assertEqual(digest.target.pipe_id, self.dev[4] >> 7)
        learn = self.bfrt_info.learn_get(pl.LEARN_DIGEST)
        got = [d.to_dict() for d in learn.make_data_list(digest)]
        self.assertEqual(len(got), 1)
        self.assertEqual(
            {k: got[0][k] for k in ("src_port", "dst_port", "ingress_port")},
            {"src_port": 4500, "dst_port": 20030, "ingress_port": self.dev[4]},
        )


class HitStateAsTnaIdletimeout(P4RelayTest):
    """tna_idletimeout (poll mode): a relay entry reads ENTRY_IDLE, then
    ENTRY_ACTIVE after a packet and UpdateHitState, then ENTRY_IDLE again
    (the state is cleared by the read)."""

    def tearDown(self) -> None:
        try:
            self.tables.clear(pl.RELAY)
            self.tables.table(pl.RELAY).attribute_idle_time_set(
                self.target,
                enable=True,
                idle_table_mode=bfruntime_pb2.IdleTable.IDLE_TABLE_NOTIFY_MODE,
                ttl_query_interval=200,
                min_ttl=1000,
            )
        finally:
            super().tearDown()

    def hit_state(self, t: Any, key: list[Any]) -> str:
        wanted = t.make_data([gc.DataTuple("$ENTRY_HIT_STATE")], get=True)
        data, _ = next(t.entry_get(self.target, key, {"from_hw": False}, wanted))
        state: str = data.to_dict()["$ENTRY_HIT_STATE"]
        return state

    def runTest(self) -> None:
        t = self.bfrt_info.table_get(pl.RELAY)
        self.tables.clear(pl.RELAY)
        t.attribute_idle_time_set(self.target, True, bfruntime_pb2.IdleTable.IDLE_TABLE_POLL_MODE)
        call = self.call()
        self.calls.install(call)
        k = flow_key(call.a_to_b.flow_key())
        key = [self.tables.key(pl.RELAY, k)]
        self.assertEqual(self.hit_state(t, key), "ENTRY_IDLE")
        pkt = rtp_a(1)
        self.send(1, pkt)
        self.expect(forwarded(pkt, 2, src=RELAY_IP, dst=HOST_IP[2], sport=20002, dport=7000), 2)
        t.operations_execute(self.target, "UpdateHitState")
        self.assertEqual(self.hit_state(t, key), "ENTRY_ACTIVE")
        t.operations_execute(self.target, "UpdateHitState")
        self.assertEqual(self.hit_state(t, key), "ENTRY_IDLE")


class WriteErrorsInResponse(P4RelayTest):
    """tna_exact_match: with the `error_in_resp` request metadata a Write that
    partly fails is answered, its failed updates listed in the response
    (bfrt_grpc raises them as BfruntimeErrorInResponseException); the others
    are applied."""

    def runTest(self) -> None:
        call = self.call()
        self.calls.install(call)
        present = call.a_to_b.flow_key()
        absent = present._replace(src_port=present.src_port + 100)
        t = self.bfrt_info.table_get(pl.RELAY)
        keys = [self.tables.key(pl.RELAY, flow_key(k)) for k in (present, absent)]
        with self.assertRaises(gc.BfruntimeErrorInResponseException) as cm:
            for _ in t.entry_del(self.target, keys, metadata=[("error_in_resp", "1")]):
                pass
        got = [(i, e.canonical_code) for i, e in cm.exception.sub_errors_get()]
        self.assertEqual(got, [(1, grpc.StatusCode.NOT_FOUND.value[0])])
        self.assertEqual(self.tables.usage(pl.RELAY), 3)


class ClearAllTables(P4RelayTest):
    """bfrt_grpc's clear_all_tables, which is get_and_set_pipeline_config (the
    program's warm init, done when WARM_INIT_FINISHED comes on the stream),
    leaves the program's tables empty: nothing is routed until entries are
    written again."""

    def runTest(self) -> None:
        self.calls.install(self.call())
        # clear_all_tables itself returns nothing: the call it makes says
        # whether the warm init finished.
        self.assertTrue(self.interface.get_and_set_pipeline_config())
        for t in (pl.RELAY, pl.LEG_REWRITE, pl.RELAY_ADDR, pl.IPV4_LPM, pl.NEXTHOP):
            self.assertEqual(self.tables.usage(t), 0, t)
        pkt = udp_packet(in_port=1, src=HOST_IP[1], dst=HOST_IP[2], sport=1, dport=2)
        self.send(1, pkt)
        self.expect_nothing()
        # the switch takes entries again
        self.add_host_routes()
        self.send(1, pkt)
        self.expect(forwarded(pkt, 2), 2)
        self.assertEqual(pkt[IP].dst, HOST_IP[2])
