//! `RelaySessions` (switch/p4/controls/relay_sessions.p4): relay_addr,
//! relay, relay_guard and leg_rewrite, with their actions.

use std::sync::atomic::Ordering::Relaxed;

use super::{IngressMeta, Meta, Pipeline};
use crate::packet::{self, csum_update16, csum_update32, rd16, wr16, wr32};
use crate::tables::guard::{GuardAction, GuardKey};
use crate::tables::legs::Rewrite;
use crate::tables::relay::RelayAction;
use crate::tables::small::RelayAddrAction;

impl Pipeline {
    /// `RelaySessions.apply`. relay_addr is looked up only when relay misses:
    /// only then does its result matter (it has no counters), and a relay hit
    /// is the per-packet hot path.
    pub(super) fn relay_sessions(
        &self,
        frame: &mut [u8],
        p: &packet::Parsed,
        m: &Meta,
        md: &mut IngressMeta,
    ) {
        let Some(u) = p.udp else { return };
        if !u.valid_len {
            self.stats.udp_bad_length.fetch_add(1, Relaxed);
            return;
        }
        match self.relay.lookup(&md.flow, m.now_ms) {
            Some(RelayAction::Leg { leg, rtcp }) => self.relay_leg(md, leg, rtcp),
            // A NoAction entry is a hit that does nothing (not a miss).
            Some(RelayAction::NoAction) => {}
            None => {
                if self.small.load().relay_addr_lookup(p.dst, u.dst_port)
                    == RelayAddrAction::MarkRelay
                {
                    md.relay_dst = true; // mark_relay
                    self.relay_guard(md, m);
                }
            }
        }
        if md.relay_hit {
            // A missing leg_rewrite entry leaves the packet as it is: it goes
            // to the relay address, i.e. RTPProxy keeps relaying it.
            match self.legs.get(md.leg) {
                Some(rw) => self.rewrite(frame, p, &u, md, &rw),
                None => {
                    self.stats.leg_misses.fetch_add(1, Relaxed);
                }
            }
        }
    }

    /// `Ingress.relay_leg`.
    fn relay_leg(&self, md: &mut IngressMeta, leg: u32, rtcp: bool) {
        self.stats.relay_hits.fetch_add(1, Relaxed);
        md.relay_hit = true;
        md.leg = leg;
        md.rtcp = rtcp;
    }

    /// `relay_guard`, applied to a packet marked by relay_addr that missed relay.
    fn relay_guard(&self, md: &mut IngressMeta, m: &Meta) {
        let g = GuardKey {
            dst: md.flow.dst,
            dport: md.flow.dport,
        };
        if let Some(GuardAction::Drop { leg }) = self.guard.lookup(&g, m.now_ms) {
            // guard_drop(leg)
            self.guard_drops.count(leg);
            self.stats.guard_drops.fetch_add(1, Relaxed);
            md.guard_drop = true;
        }
    }

    /// `Ingress.rewrite` (leg_rewrite's action): both addresses and ports, the
    /// ports + 1 for RTCP; the UDP checksum updated incrementally (zero stays
    /// zero); leg_rewrite's direct counter counts the packet as it arrived.
    fn rewrite(
        &self,
        frame: &mut [u8],
        p: &packet::Parsed,
        u: &packet::Udp,
        md: &mut IngressMeta,
        rw: &Rewrite,
    ) {
        self.legs.count(md.leg, frame.len() as u32);
        let inc = u16::from(md.rtcp);
        let (sport, dport) = (rw.sport.wrapping_add(inc), rw.dport.wrapping_add(inc));
        let csum_off = u.off + 6;
        let mut c = rd16(frame, csum_off);
        if c != 0 {
            c = csum_update32(c, p.src, rw.src);
            c = csum_update32(c, p.dst, rw.dst);
            c = csum_update16(c, u.src_port, sport);
            c = csum_update16(c, u.dst_port, dport);
            // 0 means "no checksum" in UDP; its one's-complement twin is 0xffff.
            wr16(frame, csum_off, if c == 0 { 0xffff } else { c });
        }
        wr32(frame, p.l3 + 12, rw.src);
        wr32(frame, p.l3 + 16, rw.dst);
        wr16(frame, u.off, sport);
        wr16(frame, u.off + 2, dport);
        md.dst_addr = rw.dst;
        md.rewritten = true;
        self.stats.relay_rewrites.fetch_add(1, Relaxed);
    }
}
