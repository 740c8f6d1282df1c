//! Egress port queue: a real FIFO of `depth` packets drained at the port's
//! line rate, so queue depth and queueing delay are measured, not modelled.
//! Admission as the traffic manager's: a packet is tail-dropped when the slots
//! are full or when the queue already holds its cell limit (`--port-queue-cells`,
//! the queue's buffer limit on Tofino); a refused packet takes no slot and no
//! line time and is in no later packet's enq_qdepth. What the queue admits
//! stays in it until it leaves, whatever egress will do with it, as on the
//! ASIC, where the egress pipeline only sees a packet after the traffic
//! manager has dequeued it. Each slot keeps the packet's bridged metadata and the
//! queue depth it found (enq_qdepth, cells). When it reaches the head, the
//! caller's `egress` sees it with both depths and its queueing delay, and
//! may rewrite it in its slot (INT) or drop it without spending line time
//! (iRED); then `depart` once it is handed to the TX ring, or dropped by
//! `egress` (egress quality registers).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use super::aqm::Aqm;
use crate::config::AqmConfig;
use crate::pipeline::{Bridged, EgressPass, EgressVerdict};

/// Slot size: the largest frame the switch carries (the RX ring frame size).
pub const SLOT: usize = 2048;
/// Bytes on the wire besides the frame: FCS 4 + preamble/SFD 8 + inter-frame gap 12.
pub const WIRE_OVERHEAD: u64 = 24;
/// Tofino1 buffer cell size, for `tf1.tm.counter.queue` usage in cells.
pub const CELL_BYTES: usize = 80;
/// Line time the shaper may catch up after a late wake-up: its worker serves
/// the queue in batches (up to the RX coalescing interval apart) and, on a
/// busy host, may wait a few ms for a CPU; the port keeps its average rate
/// through both, in bursts of at most this much line time.
pub const MAX_CATCHUP_NS: u64 = 5_000_000;

/// Where drained frames go (the port's TX ring; a Vec in tests).
pub trait TxSink {
    fn put(&mut self, frame: &[u8]) -> bool;
    fn flush(&mut self);
}

/// Counters readable without the queue lock (metrics, BfRt reads).
#[derive(Debug, Default)]
pub struct EgressStats {
    pub tx_packets: AtomicU64,
    pub tx_bytes: AtomicU64,
    pub tail_drops: AtomicU64,
    /// Dropped at the head by Egress (iRED's tail-drop mode).
    pub egress_drops: AtomicU64,
    /// Dropped at the head by the port's AQM (`--port-aqm`).
    pub aqm_drops: AtomicU64,
    pub depth_pkts: AtomicU32,
    pub depth_bytes: AtomicU64,
    pub watermark_cells: AtomicU32,
    /// Queueing delay of the last packet sent, ns.
    pub last_delay_ns: AtomicU64,
    /// Line rate, bits/s; 0 = unshaped. Written by the control plane.
    pub rate_bps: AtomicU64,
}

fn cells(len: usize) -> usize {
    len.div_ceil(CELL_BYTES)
}

pub struct Fifo {
    buf: Vec<u8>,
    lens: Vec<u16>,
    enq_ns: Vec<u64>,
    /// Cells queued ahead of the packet when it arrived (enq_qdepth).
    enq_cells: Vec<u32>,
    /// `egress` already kept the packet (a full TX ring made it wait).
    egressed: Vec<bool>,
    bridged: Vec<Bridged>,
    head: usize,
    len: usize,
    cells: usize,
    next_free_ns: u64,
    /// Admission limit in cells: a packet arriving to this many or more is refused.
    limit_cells: usize,
    aqm: Option<Aqm>,
}

impl Fifo {
    pub fn new(depth: usize) -> Fifo {
        Fifo {
            buf: vec![0; depth * SLOT],
            lens: vec![0; depth],
            enq_ns: vec![0; depth],
            enq_cells: vec![0; depth],
            egressed: vec![false; depth],
            bridged: vec![Bridged::default(); depth],
            head: 0,
            len: 0,
            cells: 0,
            next_free_ns: 0,
            limit_cells: usize::MAX,
            aqm: None,
        }
    }

    /// The queue's buffer limit, cells (None: only the slots limit it). The
    /// traffic manager's rule: admitted while the queue holds fewer cells
    /// than the limit, so the last packet admitted may end past it.
    pub fn with_limit_cells(mut self, limit: Option<u32>) -> Fifo {
        self.limit_cells = limit.map_or(usize::MAX, |l| l as usize);
        self
    }

    /// The queue with an egress-drop AQM deciding as packets leave.
    pub fn with_aqm(mut self, cfg: Option<AqmConfig>) -> Fifo {
        self.aqm = cfg.map(Aqm::new);
        self
    }

    pub fn depth(&self) -> usize {
        self.lens.len()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Enqueue at tail; false (tail drop, counted) when the slots are full
    /// or the queue holds its cell limit.
    pub fn push(&mut self, frame: &[u8], b: Bridged, now_ns: u64, st: &EgressStats) -> bool {
        if self.len == self.depth() || self.cells >= self.limit_cells || frame.len() > SLOT {
            st.tail_drops.fetch_add(1, Relaxed);
            return false;
        }
        if self.len == 0 && self.next_free_ns < now_ns {
            // An idle link banks no credit.
            self.next_free_ns = now_ns;
        }
        let i = (self.head + self.len) % self.depth();
        self.buf[i * SLOT..i * SLOT + frame.len()].copy_from_slice(frame);
        self.lens[i] = frame.len() as u16;
        self.enq_ns[i] = now_ns;
        self.enq_cells[i] = self.cells as u32;
        self.egressed[i] = false;
        self.bridged[i] = b;
        self.len += 1;
        self.cells += cells(frame.len());
        st.depth_pkts.store(self.len as u32, Relaxed);
        st.depth_bytes.fetch_add(frame.len() as u64, Relaxed);
        st.watermark_cells.fetch_max(self.cells as u32, Relaxed);
        true
    }

    /// Moves what the line rate allows by `now_ns` into `tx` (the caller
    /// flushes it, outside the queue lock). Returns the time the next queued
    /// packet may leave (for the worker's wake-up), if any remain, and whether
    /// anything was moved. `egress(bridged, pass)` runs once per packet at
    /// the head (`EgressPass`: deq/enq depth, queueing delay, the frame in
    /// its slot, which it may rewrite) and decides whether it goes on (Drop:
    /// no line time spent; Consume: a copy that ends there, no departure);
    /// `depart` sees each moved packet's bridged metadata, its queueing
    /// delay (ns) and the frame.
    pub fn drain(
        &mut self,
        now_ns: u64,
        tx: &mut impl TxSink,
        st: &EgressStats,
        mut egress: impl FnMut(&Bridged, &mut EgressPass<'_>) -> EgressVerdict,
        mut depart: impl FnMut(&Bridged, u64, &[u8]),
    ) -> (Option<u64>, bool) {
        let rate = st.rate_bps.load(Relaxed);
        let mut sent = false;
        let mut wake = None;
        while self.len > 0 {
            if rate > 0 && now_ns < self.next_free_ns {
                wake = Some(self.next_free_ns);
                break;
            }
            let i = self.head;
            let mut n = usize::from(self.lens[i]);
            if !self.egressed[i] {
                if let Some(aqm) = self.aqm.as_mut() {
                    let sojourn = now_ns.saturating_sub(self.enq_ns[i]);
                    if aqm.drop_at_dequeue(now_ns, sojourn, st.depth_bytes.load(Relaxed)) {
                        // The traffic manager drops it: the pipeline never sees it.
                        st.aqm_drops.fetch_add(1, Relaxed);
                        st.depth_bytes.fetch_sub(n as u64, Relaxed);
                        self.pop(n);
                        continue;
                    }
                }
                let mut pass = EgressPass {
                    deq_cells: (self.cells - cells(n)) as u32,
                    enq_cells: self.enq_cells[i],
                    queue_delay_ns: now_ns.saturating_sub(self.enq_ns[i]),
                    buf: &mut self.buf[i * SLOT..(i + 1) * SLOT],
                    len: n,
                };
                let verdict = egress(&self.bridged[i], &mut pass);
                if pass.len != n {
                    // the queue holds what it took in: account the new length
                    let m = pass.len;
                    self.cells = self.cells - cells(n) + cells(m);
                    if m > n {
                        st.depth_bytes.fetch_add((m - n) as u64, Relaxed);
                    } else {
                        st.depth_bytes.fetch_sub((n - m) as u64, Relaxed);
                    }
                    self.lens[i] = m as u16;
                    n = m;
                }
                if verdict == EgressVerdict::Consume {
                    st.depth_bytes.fetch_sub(n as u64, Relaxed);
                    self.pop(n);
                    continue;
                }
                if verdict == EgressVerdict::Drop {
                    // Tofino's Egress runs RtpQuality before this drop takes
                    // effect: the packet counts as departed there too.
                    depart(
                        &self.bridged[i],
                        now_ns.saturating_sub(self.enq_ns[i]),
                        &self.buf[i * SLOT..i * SLOT + n],
                    );
                    st.egress_drops.fetch_add(1, Relaxed);
                    st.depth_bytes.fetch_sub(n as u64, Relaxed);
                    self.pop(n);
                    continue;
                }
                self.egressed[i] = true;
            }
            if !tx.put(&self.buf[i * SLOT..i * SLOT + n]) {
                // TX ring full: retry shortly.
                wake = Some(now_ns + 20_000);
                break;
            }
            sent = true;
            depart(
                &self.bridged[i],
                now_ns.saturating_sub(self.enq_ns[i]),
                &self.buf[i * SLOT..i * SLOT + n],
            );
            if let Some(tx_ns) = ((n as u64 + WIRE_OVERHEAD) * 8 * 1_000_000_000).checked_div(rate)
            {
                let start = self.next_free_ns.max(now_ns.saturating_sub(MAX_CATCHUP_NS));
                self.next_free_ns = start + tx_ns;
            }
            st.last_delay_ns
                .store(now_ns.saturating_sub(self.enq_ns[i]), Relaxed);
            st.tx_packets.fetch_add(1, Relaxed);
            st.tx_bytes.fetch_add(n as u64, Relaxed);
            st.depth_bytes.fetch_sub(n as u64, Relaxed);
            self.pop(n);
        }
        st.depth_pkts.store(self.len as u32, Relaxed);
        (wake, sent)
    }

    /// Removes the head packet (`n` bytes).
    fn pop(&mut self, n: usize) {
        self.head = (self.head + 1) % self.depth();
        self.len -= 1;
        self.cells -= cells(n);
    }

    pub fn cells(&self) -> usize {
        self.cells
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Sink {
        frames: Vec<Vec<u8>>,
        room: usize,
    }
    impl TxSink for Sink {
        fn put(&mut self, f: &[u8]) -> bool {
            if self.frames.len() >= self.room {
                return false;
            }
            self.frames.push(f.to_vec());
            true
        }
        fn flush(&mut self) {}
    }

    #[test]
    fn fifo_order_tail_drop_and_ring_backpressure() {
        let st = EgressStats::default();
        let mut q = Fifo::new(3);
        for i in 0..5u8 {
            q.push(&[i; 100], Bridged::default(), 0, &st);
        }
        assert_eq!(st.tail_drops.load(Relaxed), 2);
        assert_eq!(st.depth_pkts.load(Relaxed), 3);
        assert_eq!(st.watermark_cells.load(Relaxed), 6);
        let mut s = Sink {
            room: 2,
            ..Sink::default()
        };
        assert!(q
            .drain(10, &mut s, &st, |_, _| EgressVerdict::Send, |_, _, _| {})
            .0
            .is_some());
        assert_eq!(q.len(), 1);
        s.room = 10;
        assert_eq!(
            q.drain(20, &mut s, &st, |_, _| EgressVerdict::Send, |_, _, _| {})
                .0,
            None
        );
        assert_eq!(
            s.frames.iter().map(|f| f[0]).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(st.last_delay_ns.load(Relaxed), 20);
        assert_eq!(st.tx_packets.load(Relaxed), 3);
    }

    /// Each packet's enq_qdepth, in the order they reach egress.
    fn enq_depths(q: &mut Fifo, st: &EgressStats, drop_first: usize) -> Vec<u32> {
        let mut seen = Vec::new();
        let mut s = Sink {
            room: usize::MAX,
            ..Sink::default()
        };
        q.drain(
            0,
            &mut s,
            st,
            |_, e| {
                seen.push(e.enq_cells);
                if seen.len() <= drop_first {
                    EgressVerdict::Drop
                } else {
                    EgressVerdict::Send
                }
            },
            |_, _, _| {},
        );
        seen
    }

    #[test]
    fn the_cell_limit_refuses_at_admission_and_a_refused_packet_is_in_no_depth() {
        let st = EgressStats::default();
        // 100-byte frames are 2 cells; a limit of 10 cells admits 5 (0, 2, .., 8 ahead)
        let mut q = Fifo::new(64).with_limit_cells(Some(10));
        let admitted: Vec<bool> = (0..7)
            .map(|_| q.push(&[0; 100], Bridged::default(), 0, &st))
            .collect();
        assert_eq!(admitted, [true, true, true, true, true, false, false]);
        assert_eq!(st.tail_drops.load(Relaxed), 2);
        assert_eq!((q.len(), q.cells()), (5, 10));
        assert_eq!(st.depth_bytes.load(Relaxed), 500);
        assert_eq!(st.watermark_cells.load(Relaxed), 10);
        // the refused packets took no place: the queue empties after the 5
        assert_eq!(enq_depths(&mut q, &st, 0), [0, 2, 4, 6, 8]);
        assert_eq!(st.tx_packets.load(Relaxed), 5);
        // room again once packets have left
        assert!(q.push(&[0; 100], Bridged::default(), 0, &st));
        assert_eq!(enq_depths(&mut q, &st, 0), [0]);
    }

    #[test]
    fn the_last_packet_admitted_may_end_past_the_limit() {
        let st = EgressStats::default();
        // 160-byte frames are 2 cells: 0 < 3 and 2 < 3 are admitted, 4 >= 3 is not
        let mut q = Fifo::new(64).with_limit_cells(Some(3));
        for want in [true, true, false] {
            assert_eq!(q.push(&[0; 160], Bridged::default(), 0, &st), want);
        }
        assert_eq!(q.cells(), 4);
        // without a limit only the slots bound the queue
        let mut q = Fifo::new(4).with_limit_cells(None);
        let n = (0..6)
            .filter(|_| q.push(&[0; 160], Bridged::default(), 0, &st))
            .count();
        assert_eq!(n, 4);
    }

    #[test]
    fn packets_egress_drops_hold_their_place_until_they_leave() {
        // As on the ASIC: the traffic manager queues what it admits; a drop
        // decided in egress (iRED's tail-drop mode) comes after the packet
        // waited, so it counts in the enq_qdepth of every packet behind it.
        let st = EgressStats::default();
        let mut q = Fifo::new(64);
        for _ in 0..4 {
            q.push(&[0; 100], Bridged::default(), 0, &st);
        }
        assert_eq!(enq_depths(&mut q, &st, 2), [0, 2, 4, 6]);
        assert_eq!(st.egress_drops.load(Relaxed), 2);
        assert_eq!(st.tx_packets.load(Relaxed), 2);
    }

    #[test]
    fn departures_carry_bridged_metadata_and_tail_drops_never_depart() {
        let st = EgressStats::default();
        let mut q = Fifo::new(2);
        for leg in 0..4u32 {
            let b = Bridged {
                relayed_rtp: true,
                leg,
                ..Bridged::default()
            };
            q.push(&[0; 60], b, 0, &st);
        }
        let mut s = Sink {
            room: 10,
            ..Sink::default()
        };
        let mut departed = vec![];
        q.drain(
            1,
            &mut s,
            &st,
            |_, _| EgressVerdict::Send,
            |b, _, _| departed.push(b.leg),
        );
        assert_eq!(departed, vec![0, 1]);
        assert_eq!(st.tail_drops.load(Relaxed), 2);
        // a packet the TX ring refuses has not left yet
        q.push(
            &[0; 60],
            Bridged {
                leg: 9,
                ..Bridged::default()
            },
            2,
            &st,
        );
        s.room = 2;
        q.drain(
            3,
            &mut s,
            &st,
            |_, _| EgressVerdict::Send,
            |b, _, _| departed.push(b.leg),
        );
        assert_eq!(departed, vec![0, 1]);
        s.room = 3;
        q.drain(
            4,
            &mut s,
            &st,
            |_, _| EgressVerdict::Send,
            |b, _, _| departed.push(b.leg),
        );
        assert_eq!(departed, vec![0, 1, 9]);
    }

    #[test]
    fn the_ports_aqm_drops_at_the_head_before_egress() {
        let st = EgressStats::default();
        // 1 Mbit/s, 1225-byte frames: (1225+24)*8 ≈ 10 ms each, so 50 queued
        // packets wait up to half a second, far over CoDel's 5 ms target.
        st.rate_bps.store(1_000_000, Relaxed);
        let mut q = Fifo::new(100).with_aqm(Some(AqmConfig::parse("codel").unwrap()));
        let t0 = 1_000_000_000u64;
        for _ in 0..50 {
            q.push(&[0; 1225], Bridged::default(), t0, &st);
        }
        let mut s = Sink {
            room: 100,
            ..Sink::default()
        };
        let (mut seen, mut departed) = (0u64, 0u64);
        let mut t = t0;
        while !q.is_empty() {
            q.drain(
                t,
                &mut s,
                &st,
                |_, _| {
                    seen += 1;
                    EgressVerdict::Send
                },
                |_, _, _| departed += 1,
            );
            t += 1_000_000;
        }
        let dropped = st.aqm_drops.load(Relaxed);
        assert!(dropped > 0, "{dropped}");
        // dropped packets never reach Egress nor depart, and use no line time
        assert_eq!(seen, 50 - dropped);
        assert_eq!(departed, 50 - dropped);
        assert_eq!(st.tx_packets.load(Relaxed), 50 - dropped);
        assert_eq!(st.depth_bytes.load(Relaxed), 0);
    }

    #[test]
    fn shaper_paces_at_line_rate() {
        let st = EgressStats::default();
        // 1 Mbit/s, 101-byte frames: (101+24)*8 = 1000 bits = 1 ms each
        st.rate_bps.store(1_000_000, Relaxed);
        let mut q = Fifo::new(100);
        let t0 = 5_000_000_000u64;
        for _ in 0..10 {
            q.push(&[0; 101], Bridged::default(), t0, &st);
        }
        let mut s = Sink {
            room: 100,
            ..Sink::default()
        };
        assert_eq!(
            q.drain(t0, &mut s, &st, |_, _| EgressVerdict::Send, |_, _, _| {})
                .0,
            Some(t0 + 1_000_000)
        );
        assert_eq!(s.frames.len(), 1);
        assert_eq!(
            q.drain(
                t0 + 500_000,
                &mut s,
                &st,
                |_, _| EgressVerdict::Send,
                |_, _, _| {}
            )
            .0,
            Some(t0 + 1_000_000)
        );
        assert_eq!(s.frames.len(), 1);
        // a late wake-up sends every packet whose slot has come (1, 2 and 3
        // ms), keeping the average rate
        q.drain(
            t0 + 3_000_000,
            &mut s,
            &st,
            |_, _| EgressVerdict::Send,
            |_, _, _| {},
        );
        assert_eq!(s.frames.len(), 4);
        for ms in 4..=10 {
            q.drain(
                t0 + ms * 1_000_000,
                &mut s,
                &st,
                |_, _| EgressVerdict::Send,
                |_, _, _| {},
            );
            assert_eq!(s.frames.len() as u64, (ms + 1).min(10));
        }
        assert!(q.is_empty());
        // a backlog catches up at most MAX_CATCHUP_NS of line time at once
        let t1 = t0 + 100_000_000;
        for _ in 0..20 {
            q.push(&[0; 101], Bridged::default(), t1, &st);
        }
        q.drain(t1, &mut s, &st, |_, _| EgressVerdict::Send, |_, _, _| {});
        assert_eq!(s.frames.len(), 11);
        let late = t1 + MAX_CATCHUP_NS + 10_000_000;
        q.drain(late, &mut s, &st, |_, _| EgressVerdict::Send, |_, _, _| {});
        assert_eq!(s.frames.len() as u64, 11 + MAX_CATCHUP_NS / 1_000_000 + 1);
        assert_eq!(q.len() as u64, 20 - 1 - MAX_CATCHUP_NS / 1_000_000 - 1);
    }

    fn send_all(q: &mut Fifo, now: u64, st: &EgressStats) -> Vec<Vec<u8>> {
        let mut s = Sink {
            room: usize::MAX,
            ..Sink::default()
        };
        q.drain(now, &mut s, st, |_, _| EgressVerdict::Send, |_, _, _| {});
        s.frames
    }

    #[test]
    fn a_frame_beyond_the_slot_is_a_tail_drop_and_one_that_fits_is_kept_whole() {
        let st = EgressStats::default();
        let mut q = Fifo::new(4);
        assert!(!q.push(&[1; SLOT + 1], Bridged::default(), 0, &st));
        assert_eq!(st.tail_drops.load(Relaxed), 1);
        assert!(q.push(&[2; SLOT], Bridged::default(), 0, &st));
        assert_eq!(send_all(&mut q, 0, &st), vec![vec![2; SLOT]]);
    }

    #[test]
    fn depths_are_in_80_byte_cells_rounded_up() {
        let st = EgressStats::default();
        let mut q = Fifo::new(8);
        for len in [1, 80, 81, 160] {
            q.push(&vec![0; len], Bridged::default(), 0, &st);
        }
        // 1 + 1 + 2 + 2 cells
        assert_eq!(q.cells(), 6);
        assert_eq!(st.watermark_cells.load(Relaxed), 6);
        assert_eq!(st.depth_bytes.load(Relaxed), 1 + 80 + 81 + 160);
        let mut seen = Vec::new();
        let mut s = Sink {
            room: usize::MAX,
            ..Sink::default()
        };
        q.drain(
            0,
            &mut s,
            &st,
            |_, e| {
                seen.push((e.enq_cells, e.deq_cells));
                EgressVerdict::Send
            },
            |_, _, _| {},
        );
        // enq: cells ahead on arrival; deq: cells behind at the head
        assert_eq!(seen, vec![(0, 5), (1, 4), (2, 2), (4, 0)]);
        assert_eq!((q.cells(), st.depth_bytes.load(Relaxed)), (0, 0));
        assert_eq!(st.watermark_cells.load(Relaxed), 6, "the watermark stays");
    }

    #[test]
    fn egress_may_grow_or_shrink_a_frame_and_consume_a_copy() {
        let st = EgressStats::default();
        let mut q = Fifo::new(4);
        q.push(&[1; 100], Bridged::default(), 0, &st);
        q.push(&[2; 100], Bridged::default(), 0, &st);
        q.push(&[3; 100], Bridged::default(), 0, &st);
        let mut departed = Vec::new();
        let mut s = Sink {
            room: usize::MAX,
            ..Sink::default()
        };
        q.drain(
            0,
            &mut s,
            &st,
            |_, e| match e.buf[0] {
                1 => {
                    // INT inserted: 100 -> 180 bytes in the slot
                    e.buf[100..180].fill(9);
                    e.len = 180;
                    EgressVerdict::Send
                }
                2 => EgressVerdict::Consume,
                _ => {
                    e.len = 40;
                    EgressVerdict::Send
                }
            },
            |_, _, f| departed.push(f.len()),
        );
        assert_eq!(
            s.frames.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![180, 40]
        );
        assert_eq!(&s.frames[0][100..], &[9; 80][..]);
        assert_eq!(departed, vec![180, 40], "a consumed copy never departs");
        assert_eq!(st.tx_bytes.load(Relaxed), 220);
        assert_eq!((q.cells(), st.depth_bytes.load(Relaxed)), (0, 0));
    }

    #[test]
    fn an_egress_drop_still_departs_but_is_not_sent() {
        let st = EgressStats::default();
        let mut q = Fifo::new(2);
        let b = Bridged {
            leg: 7,
            ..Bridged::default()
        };
        q.push(&[1; 64], b, 1_000, &st);
        let mut departed = Vec::new();
        let mut s = Sink {
            room: usize::MAX,
            ..Sink::default()
        };
        q.drain(
            3_000,
            &mut s,
            &st,
            |_, _| EgressVerdict::Drop,
            |b, delay, _| departed.push((b.leg, delay)),
        );
        assert!(s.frames.is_empty());
        assert_eq!(departed, vec![(7, 2_000)]);
        assert_eq!(st.egress_drops.load(Relaxed), 1);
        assert_eq!(st.tx_packets.load(Relaxed), 0);
    }

    #[test]
    fn the_ring_wraps_around_in_order() {
        let st = EgressStats::default();
        let mut q = Fifo::new(3);
        let mut out = Vec::new();
        for round in 0..5u8 {
            q.push(&[round * 2; 10], Bridged::default(), 0, &st);
            q.push(&[round * 2 + 1; 10], Bridged::default(), 0, &st);
            out.extend(send_all(&mut q, 0, &st).into_iter().map(|f| f[0]));
        }
        assert_eq!(out, (0..10).collect::<Vec<u8>>());
        assert_eq!(st.tail_drops.load(Relaxed), 0);
    }

    #[test]
    fn an_idle_shaped_link_banks_no_credit() {
        let st = EgressStats::default();
        // 1 Mbit/s: a 101-byte frame takes 1 ms of line time
        st.rate_bps.store(1_000_000, Relaxed);
        let mut q = Fifo::new(10);
        q.push(&[0; 101], Bridged::default(), 0, &st);
        assert_eq!(send_all(&mut q, 0, &st).len(), 1);
        // idle for a second, then three at once: one now, the next a frame time later
        let t = 1_000_000_000;
        for _ in 0..3 {
            q.push(&[0; 101], Bridged::default(), t, &st);
        }
        assert_eq!(send_all(&mut q, t, &st).len(), 1);
        assert_eq!(send_all(&mut q, t + 999_999, &st).len(), 0);
        assert_eq!(send_all(&mut q, t + 1_000_000, &st).len(), 1);
    }
}
