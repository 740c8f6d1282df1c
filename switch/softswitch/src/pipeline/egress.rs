//! `Egress` (switch/p4/controls/egress.p4): the steps that act on a packet
//! at the head of its egress queue (`egress_head`), and those that see it
//! leave (`egress_depart`).

use super::rtp_clock::ms_clock;
use super::{Bridged, Departure, EgressPass, EgressVerdict, Pipeline};

impl Pipeline {
    /// `Egress.apply` at the head of `port`'s queue (switch/p4/controls/
    /// egress.p4, the steps that act on the packet): INT (the sink's report
    /// copy or strip, else this switch's hop), then iRED. `now_ns`: wall
    /// clock (the report's suppression interval).
    #[inline]
    pub fn egress_head(
        &self,
        port: u16,
        b: &Bridged,
        e: &mut EgressPass<'_>,
        now_ns: u64,
    ) -> EgressVerdict {
        // what the traffic manager hands Egress, at TNA's widths (tna.rs)
        e.deq_cells = self.tna.qdepth(e.deq_cells);
        e.enq_cells = self.tna.qdepth(e.enq_cells);
        e.queue_delay_ns = self.tna.deq_timedelta(e.queue_delay_ns);
        if let Some(r) = &b.int_report {
            return self.int_report(port, r, e, ms_clock(now_ns));
        }
        if b.int_sink {
            self.int_strip(port, b, e);
        } else {
            self.int_transit(port, b, e);
        }
        if self.ired(port, b, e.deq_cells, e.enq_cells) {
            EgressVerdict::Send
        } else {
            EgressVerdict::Drop
        }
    }

    /// `Egress.apply` (switch/p4/controls/egress.p4): the packet of `b` leaves
    /// its egress queue at `now_ns` (wall clock, ns since the Unix epoch, the
    /// egress timestamp); a relayed RTP packet goes through `rtp_quality`,
    /// every packet through `reroute_detect` (its delay, in ticks, from the
    /// ingress timestamp bridged with it to `now_ns`, the egress global
    /// timestamp).
    #[inline]
    pub fn egress_depart(&self, b: &Bridged, now_ns: u64, d: &Departure<'_>) {
        if b.relayed_rtp && !b.rtcp {
            self.rtp_quality(b, now_ns);
        }
        let delay = self
            .tna
            .delay_ticks(self.tna.tstamp(now_ns), b.rr_ingress_ts);
        self.reroute_detect(b, d.port, delay, ms_clock(now_ns), d.frame);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Rtp;
    use crate::pipeline::tests::setup;
    use crate::schema::Reg;
    use crate::tables::small::IredConfig;

    fn rtp_of_leg(leg: u32, rtcp: bool) -> Bridged {
        Bridged {
            relayed_rtp: true,
            leg,
            rtcp,
            rtp: Rtp {
                payload_type: 0,
                seq: 1,
                timestamp: 0,
            },
            ..Bridged::default()
        }
    }

    #[test]
    fn departure_measures_relayed_rtp_only() {
        let (p, _) = setup();
        let d = Departure::default();
        p.egress_depart(&rtp_of_leg(4, false), 5_000_000, &d);
        p.egress_depart(&rtp_of_leg(5, true), 5_000_000, &d);
        p.egress_depart(&Bridged::default(), 5_000_000, &d);
        assert_eq!(p.quality.read(Reg::Packets, 4), Some(1));
        assert_eq!(p.quality.read(Reg::LastSeen, 4), Some(5));
        assert_eq!(p.quality.read(Reg::Packets, 5), Some(0), "RTCP: no quality");
        assert_eq!(p.quality.read(Reg::Packets, 0), Some(0), "not relayed");
    }

    #[test]
    fn the_head_sends_unless_ireds_tail_drop_mode_drops() {
        let (p, _) = setup();
        let mut buf = [0u8; 128];
        let b = Bridged::default();
        let mut head = |port, deq, enq| {
            let mut e = EgressPass {
                deq_cells: deq,
                enq_cells: enq,
                queue_delay_ns: 0,
                buf: &mut buf[..],
                len: 64,
            };
            p.egress_head(port, &b, &mut e, 0)
        };
        assert_eq!(head(2, 900, 900), EgressVerdict::Send);
        let c = IredConfig {
            max_len_queue: 64,
            n_drop: 4,
            ewma_n: 1,
            tail_drop: true,
            protect: false,
        };
        p.small
            .update(|t| t.ired_port_write(2, Some(c), true))
            .unwrap();
        assert_eq!(head(2, 0, 63), EgressVerdict::Send);
        assert_eq!(head(2, 0, 64), EgressVerdict::Drop);
        assert_eq!(head(3, 0, 64), EgressVerdict::Send);
    }
}
