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
        if let Some(r) = &b.int_report {
            return self.int_report(port, r, e, ms_clock(now_ns));
        }
        if b.int_sink {
            self.int_strip(b, e);
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
    /// every packet through `reroute_detect`.
    #[inline]
    pub fn egress_depart(&self, b: &Bridged, now_ns: u64, d: &Departure<'_>) {
        if b.relayed_rtp && !b.rtcp {
            self.rtp_quality(b, now_ns);
        }
        self.reroute_detect(b, d.port, d.queue_delay_ns, ms_clock(now_ns), d.frame);
    }
}
