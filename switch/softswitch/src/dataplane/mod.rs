//! The forwarding data plane: ports, egress FIFOs, and one worker thread per
//! core. Packets reach user space through AF_XDP sockets (`xsk.rs`: the XDP
//! program redirects them to one socket per port and RX queue, each served
//! by one worker) or, where AF_XDP cannot attach, AF_PACKET rings (`ring.rs`:
//! each worker has its own RX ring on every port; a PACKET_FANOUT_HASH group
//! per port keeps a flow on one worker). A worker runs the pipeline in place
//! on the received frame and enqueues it into the egress port's FIFO;
//! whichever worker holds a port's TX lock drains the FIFO at line rate into
//! that port's TX ring (the port's AF_XDP socket or AF_PACKET TX ring).

pub mod aqm;
pub mod egress;
pub mod ring;
#[cfg(test)]
mod tests;
pub mod xsk;

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{bail, Context, Result};
use parking_lot::Mutex;

use crate::config::{Config, UserIo};
use crate::pipeline::{Departure, DropReason, Meta, Pipeline, Verdict};
use crate::sys::{now_mono_ns, now_real_ns, sleep_until};
use egress::{EgressStats, Fifo, TxSink};
use ring::{Ring, RxFrame};
use xsk::{XskMode, XskRx, XskTx};

const TX_FRAMES: usize = 512;
/// Frames taken from one RX ring per pass before the egress queues are served.
const RX_BATCH: usize = 256;
const MAX_QUEUE_DEPTH: u32 = 65536;

#[derive(Debug, Default)]
pub struct PortStats {
    pub rx_packets: AtomicU64,
    pub rx_bytes: AtomicU64,
    /// Frames the kernel dropped because a worker's RX ring was full (the
    /// worker did not get the CPU in time).
    pub rx_ring_drops: AtomicU64,
    /// Longest a frame waited in an RX ring before a worker took it, ns.
    pub max_rx_wait_ns: AtomicU64,
    pub drops: [AtomicU64; DropReason::ALL.len()],
    /// Frames received or routed while the port was disabled ($PORT_ENABLE false).
    pub disabled_drops: AtomicU64,
    pub egress: EgressStats,
}

/// A worker's receive queue: an AF_PACKET RX ring or an AF_XDP socket.
pub trait RxQueue {
    /// The next received frame, if any; `release` hands it back.
    fn next(&mut self) -> Option<RxFrame<'_>>;
    fn release(&mut self);
    /// End of a batch: hand the released frames back to the kernel.
    fn done(&mut self) {}
    /// Frames the kernel dropped for this queue since the last call.
    fn drops(&mut self) -> u64;
    /// Pollable for arrivals.
    fn fd(&self) -> RawFd;
}

impl RxQueue for Ring {
    #[inline]
    fn next(&mut self) -> Option<RxFrame<'_>> {
        self.rx_next()
    }
    #[inline]
    fn release(&mut self) {
        self.rx_release()
    }
    fn drops(&mut self) -> u64 {
        self.rx_drops()
    }
    fn fd(&self) -> RawFd {
        Ring::fd(self)
    }
}

enum Rx {
    Packet(Ring),
    Xsk(XskRx),
}

impl Rx {
    fn queue(&mut self) -> &mut dyn RxQueue {
        match self {
            Rx::Packet(r) => r,
            Rx::Xsk(x) => x,
        }
    }
}

/// A port's transmit ring.
pub enum Tx {
    Packet(Ring),
    Xsk(XskTx),
}

impl TxSink for Tx {
    #[inline]
    fn put(&mut self, frame: &[u8]) -> bool {
        match self {
            Tx::Packet(r) => r.tx_put(frame),
            Tx::Xsk(x) => x.put(frame),
        }
    }
    fn flush(&mut self) {
        let r = match self {
            Tx::Packet(r) => r.tx_flush(),
            Tx::Xsk(x) => x.flush(),
        };
        if let Err(e) = r {
            tracing::warn!(error = %e, "TX ring flush failed");
        }
    }
}

/// What the data plane receives and sends on (`--user-io`, resolved).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    AfXdp(XskMode),
    AfPacket,
}

impl Io {
    /// As `p4relay_dataplane_io` labels it.
    pub fn label(self) -> &'static str {
        match self {
            Io::AfXdp(XskMode::ZeroCopy) => "af_xdp_zerocopy",
            Io::AfXdp(XskMode::Copy) => "af_xdp_copy",
            Io::AfPacket => "af_packet",
        }
    }
}

/// Where the AF_XDP sockets are registered: the XDP program's `xsks` map.
pub trait XskMap: Send + Sync {
    /// Port `port`'s RX queue `queue` goes to socket `fd`.
    fn insert(&self, port: u32, queue: u32, fd: RawFd) -> std::io::Result<()>;
    /// Back to the kernel stack (AF_PACKET) for that queue.
    fn remove(&self, port: u32, queue: u32);
    /// The program runs on every port in driver mode (zero-copy may work).
    fn native(&self) -> bool;
}

/// How the data plane gets its packets: `UserIo` resolved against what the
/// host offers. `xsk` is the XDP program's socket map when the program runs
/// on every port (AF_XDP possible), with the reason when it is not.
pub fn choose_io(want: UserIo, xsk: &Result<&dyn XskMap, String>) -> Result<Option<String>> {
    match (want, xsk) {
        (UserIo::AfPacket, _) => Ok(Some("--user-io af-packet".into())),
        (_, Ok(_)) => Ok(None),
        (UserIo::AfXdp, Err(why)) => bail!("--user-io af-xdp: AF_XDP not possible: {why}"),
        (UserIo::Auto, Err(why)) => Ok(Some(why.clone())),
    }
}

pub struct Port {
    pub id: u32,
    pub ifname: String,
    pub enabled: AtomicBool,
    pub stats: PortStats,
    /// The egress queue: enqueuers hold this only to copy one frame in.
    fifo: Mutex<Fifo>,
    /// The TX ring; whoever holds it drains the queue (one drainer keeps the
    /// order) and calls send() without blocking enqueuers.
    tx: Mutex<Tx>,
}

impl Port {
    pub fn link_up(&self) -> bool {
        std::fs::read_to_string(format!("/sys/class/net/{}/operstate", self.ifname))
            .map(|s| s.trim() != "down")
            .unwrap_or(false)
    }

    /// Queue occupancy in Tofino cells (80 bytes).
    pub fn queue_cells(&self) -> usize {
        self.fifo.lock().cells()
    }
}

pub struct Dataplane {
    pub ports: Arc<Vec<Port>>,
    /// What the ports receive and send on.
    pub io: Io,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
}

/// Every port's TX ring and the RX queues the workers share out.
type Rings = (Vec<Tx>, Vec<Vec<(usize, Rx)>>);

/// AF_XDP sockets on every RX queue of every port, registered in `map`
/// (the TX half of each port's queue-0 socket is its TX ring), or the first
/// failure with nothing left registered. Sockets go to workers in turn.
fn open_xsk(config: &Config, map: &dyn XskMap) -> Result<(Rings, XskMode)> {
    let frames = config.rx_ring_frames.next_power_of_two();
    let mut txs = Vec::new();
    let mut rxs = Vec::new();
    let mut registered = Vec::new();
    let mut mode = XskMode::ZeroCopy;
    let r = (|| -> Result<()> {
        for (pi, (&id, pc)) in config.ports.iter().enumerate() {
            let ifindex = ring::ifindex(&pc.ifname)? as u32;
            let queues = xsk::rx_queues(&pc.ifname);
            if queues > 64 {
                bail!("{}: {queues} RX queues, AF_XDP serves up to 64", pc.ifname);
            }
            for q in 0..queues {
                let (rx, tx, m) = xsk::open(&pc.ifname, ifindex, q, frames, map.native())
                    .with_context(|| format!("port {id} ({})", pc.ifname))?;
                map.insert(id, q, rx.raw_fd()).with_context(|| {
                    format!("port {id} ({}): register its AF_XDP socket", pc.ifname)
                })?;
                registered.push((id, q));
                if m == XskMode::Copy {
                    mode = XskMode::Copy;
                }
                if q == 0 {
                    txs.push(Tx::Xsk(tx));
                }
                rxs.push((pi, Rx::Xsk(rx)));
            }
        }
        Ok(())
    })();
    if let Err(e) = r {
        for (id, q) in registered {
            map.remove(id, q);
        }
        return Err(e);
    }
    let workers = config.workers.min(rxs.len()).max(1);
    let mut sets: Vec<Vec<(usize, Rx)>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, rx) in rxs.into_iter().enumerate() {
        sets[i % workers].push(rx);
    }
    Ok(((txs, sets), mode))
}

/// AF_PACKET rings: a TX ring per port, an RX ring per worker and port.
fn open_packet(config: &Config) -> Result<Rings> {
    let mut txs = Vec::new();
    for (&id, pc) in &config.ports {
        let ring = Ring::tx(&pc.ifname, TX_FRAMES)
            .with_context(|| format!("port {id} ({})", pc.ifname))?;
        txs.push(Tx::Packet(ring));
    }
    let group_base = (std::process::id() as u16).wrapping_mul(64);
    let mut sets: Vec<Vec<(usize, Rx)>> = (0..config.workers).map(|_| Vec::new()).collect();
    for (pi, (&id, pc)) in config.ports.iter().enumerate() {
        for set in sets.iter_mut() {
            let fanout = (config.workers > 1).then(|| group_base.wrapping_add(id as u16));
            let ring = Ring::rx(&pc.ifname, config.rx_ring_frames as usize, fanout)
                .with_context(|| format!("port {id} ({})", pc.ifname))?;
            set.push((pi, Rx::Packet(ring)));
        }
    }
    Ok((txs, sets))
}

impl Dataplane {
    /// Opens every port's sockets and starts the workers. `xsk`: the XDP
    /// program's socket map where the program runs on every port, else why
    /// not; `config.user_io` then decides between AF_XDP and AF_PACKET
    /// (auto: AF_XDP where it attaches, else AF_PACKET; the choice is logged).
    pub fn start(
        config: &Config,
        pipeline: Arc<Pipeline>,
        xsk: Result<&dyn XskMap, String>,
    ) -> Result<Dataplane> {
        let depth = config.queue_depth.min(MAX_QUEUE_DEPTH) as usize;
        let mut why_not = choose_io(config.user_io, &xsk)?;
        let mut opened = None;
        if let (None, Ok(map)) = (&why_not, &xsk) {
            match open_xsk(config, *map) {
                Ok((rings, mode)) => opened = Some((rings, Io::AfXdp(mode))),
                Err(e) if config.user_io == UserIo::AfXdp => {
                    return Err(e.context("--user-io af-xdp"));
                }
                Err(e) => why_not = Some(format!("{e:#}")),
            }
        }
        let ((txs, rx_sets), io) = match opened {
            Some(o) => o,
            None => (open_packet(config)?, Io::AfPacket),
        };
        let mut ports = Vec::new();
        for ((&id, pc), tx) in config.ports.iter().zip(txs) {
            let stats = PortStats::default();
            stats.egress.rate_bps.store(pc.rate_bps, Relaxed);
            if let Some(aqm) = pc.aqm {
                tracing::info!(port = id, aqm = %aqm, "egress AQM on the port's queue");
            }
            if let Some(cells) = pc.queue_cells {
                tracing::info!(port = id, cells, "buffer limit of the port's queue");
            }
            ports.push(Port {
                id,
                ifname: pc.ifname.clone(),
                enabled: AtomicBool::new(true),
                stats,
                fifo: Mutex::new(
                    Fifo::new(depth)
                        .with_aqm(pc.aqm)
                        .with_limit_cells(pc.queue_cells),
                ),
                tx: Mutex::new(tx),
            });
        }
        let ports = Arc::new(ports);
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        for (w, rings) in rx_sets.into_iter().enumerate() {
            let worker = Worker {
                rings,
                ports: ports.clone(),
                pipeline: pipeline.clone(),
                stop: stop.clone(),
                port_index: port_index(&ports),
                coalesce_ns: u64::from(config.rx_coalesce_us) * 1000,
                nice: config.worker_nice,
            };
            workers.push(
                std::thread::Builder::new()
                    .name(format!("fwd-{w}"))
                    .spawn(move || worker.run())?,
            );
        }
        match &why_not {
            None => tracing::info!(io = io.label(), "user-space path: AF_XDP sockets"),
            Some(why) => {
                tracing::info!(io = io.label(), reason = %why, "user-space path: AF_PACKET rings")
            }
        }
        tracing::info!(
            ports = ports.len(),
            workers = workers.len(),
            queue_depth = depth,
            "data plane running"
        );
        Ok(Dataplane {
            ports,
            io,
            stop,
            workers,
        })
    }

    pub fn port(&self, id: u32) -> Option<&Port> {
        self.ports.iter().find(|p| p.id == id)
    }

    pub fn stop(self) {
        self.stop.store(true, Relaxed);
        for w in self.workers {
            let _ = w.join();
        }
    }
}

fn port_index(ports: &[Port]) -> [u8; 64] {
    let mut idx = [u8::MAX; 64];
    for (i, p) in ports.iter().enumerate() {
        if p.id < 64 {
            idx[p.id as usize] = i as u8;
        }
    }
    idx
}

struct Worker {
    rings: Vec<(usize, Rx)>,
    ports: Arc<Vec<Port>>,
    pipeline: Arc<Pipeline>,
    stop: Arc<AtomicBool>,
    port_index: [u8; 64],
    coalesce_ns: u64,
    /// Asked for at start (`--worker-nice`).
    nice: i32,
}

impl Worker {
    /// The forwarding loop. Every pass drains the RX rings (up to `RX_BATCH`
    /// frames each), then moves what the ports' line rates allow from their
    /// FIFOs into the TX rings, one send() per port and pass. Waking up costs
    /// far more than forwarding a frame (a context switch, in a VM a halt and
    /// an IPI), so while packets keep arriving the worker does not block in
    /// ppoll (which would wake it per frame) but sleeps up to `coalesce_ns`
    /// to gather a batch, like a NIC's interrupt moderation. A packet that
    /// arrives alone (none in the previous `coalesce_ns`) wakes it at once.
    /// A shaped queue is served at the same granularity: its packets leave
    /// in batches at most `coalesce_ns` after their slots, the shaper
    /// catching up the line time (egress.rs), rather than one wake-up each.
    fn run(mut self) {
        self.set_priority();
        let mut pollfds: Vec<libc::pollfd> = self
            .rings
            .iter_mut()
            .map(|(_, r)| libc::pollfd {
                fd: r.queue().fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let mut scratch = vec![0u8; ring::FRAME_SIZE + 4];
        let mut pending = vec![false; self.ports.len()];
        let mut last_stats = now_mono_ns();
        let mut last_work = 0u64;
        while !self.stop.load(Relaxed) {
            let t = now_mono_ns();
            if t - last_stats > 100_000_000 {
                last_stats = t;
                for (pi, ring) in &mut self.rings {
                    let d = ring.queue().drops();
                    if d > 0 {
                        self.ports[*pi].stats.rx_ring_drops.fetch_add(d, Relaxed);
                    }
                }
            }
            let mut work = 0;
            let mut more = false;
            for ri in 0..self.rings.len() {
                let n = self.rx_batch(ri, &mut scratch, &mut pending);
                more |= n == RX_BATCH;
                work += n;
            }
            let now = now_mono_ns();
            let mut wake = self.drain_egress(now, &mut pending);
            if self.int_copies(&mut pending) {
                wake = Some(now);
            }
            if self.recirculate(&mut pending) {
                // notices sent upstream wait in a queue now
                wake = Some(now);
            }
            if more {
                continue;
            }
            if work > 0 {
                let flowing = work > 1 || now.saturating_sub(last_work) < self.coalesce_ns;
                last_work = now;
                if flowing && self.coalesce_ns > 0 {
                    let until = now + self.coalesce_ns;
                    sleep_until(wake.map_or(until, |w| w.min(until)));
                }
                continue;
            }
            // Idle: sleep until a frame arrives or a queued packet may leave.
            let timeout_ns = wake.map_or(100_000_000, |t| {
                t.saturating_sub(now_mono_ns()).min(100_000_000)
            });
            if timeout_ns == 0 {
                continue;
            }
            let ts = libc::timespec {
                tv_sec: (timeout_ns / 1_000_000_000) as i64,
                tv_nsec: (timeout_ns % 1_000_000_000) as i64,
            };
            // SAFETY: pollfds is a valid array of the given length.
            unsafe {
                libc::ppoll(
                    pollfds.as_mut_ptr(),
                    pollfds.len() as libc::nfds_t,
                    &ts,
                    std::ptr::null(),
                )
            };
        }
    }

    /// Asks the scheduler for `nice` (this thread only); refused without
    /// CAP_SYS_NICE, which is logged and otherwise harmless.
    fn set_priority(&self) {
        // SAFETY: plain syscalls on this thread's own id.
        let r = unsafe {
            let tid = libc::gettid() as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, self.nice)
        };
        if r != 0 {
            tracing::warn!(
                nice = self.nice,
                error = %std::io::Error::last_os_error(),
                "forwarding worker keeps the default priority"
            );
        }
    }

    /// Moves what each port's line rate allows from its FIFO into its TX
    /// ring and kicks the ring once. Returns when a queued packet may next
    /// leave, if one is waiting.
    fn drain_egress(&self, now: u64, pending: &mut [bool]) -> Option<u64> {
        // Departure time of what drains now: the egress quality registers' clock.
        let now_real = now_real_ns();
        let mut wake: Option<u64> = None;
        for (pi, port) in self.ports.iter().enumerate() {
            if let Some(mut ring) = port.tx.try_lock() {
                let (next, sent) = {
                    let mut fifo = port.fifo.lock();
                    if fifo.is_empty() {
                        pending[pi] = false;
                        continue;
                    }
                    // The packet leaves its egress queue here (and only here):
                    // the Egress control's quality registers see it now.
                    let id = port.id as u16;
                    fifo.drain(
                        now,
                        &mut *ring,
                        &port.stats.egress,
                        |b, e| self.pipeline.egress_head(id, b, e, now_real),
                        |b, delay, frame| {
                            let d = Departure {
                                port: id,
                                queue_delay_ns: delay,
                                frame,
                            };
                            self.pipeline.egress_depart(b, now_real, &d)
                        },
                    )
                };
                if sent {
                    ring.flush();
                }
                if let Some(t) = next {
                    // Not before the coalescing granularity (see `run`).
                    let t = t.max(now + self.coalesce_ns.min(egress::MAX_CATCHUP_NS / 4));
                    wake = Some(wake.map_or(t, |w: u64| w.min(t)));
                }
            } else if pending[pi] {
                // Another worker is draining it; look again soon.
                wake = Some(now + 50_000);
            }
            pending[pi] = false;
        }
        // The decisions' feedback copies reach Ingress (recirculation).
        self.pipeline.ired_feedback();
        wake
    }

    /// Congestion notices the egress made (reroute.rs): their pass through
    /// ingress from the recirculation port; one sent upstream is queued on
    /// its port. True if one was queued.
    fn recirculate(&self, pending: &mut [bool]) -> bool {
        let mut queued = false;
        while let Some(mut frame) = self.pipeline.take_notice() {
            let ts = now_real_ns();
            let meta = Meta {
                ingress_port: crate::pipeline::reroute::RECIRC_PORT,
                now_ns: ts,
                now_ms: (ts / 1_000_000) as u32,
            };
            let (verdict, bridged) = self.pipeline.ingress(&mut frame, &meta);
            if let Verdict::Forward(port) = verdict {
                let oi = self.port_index[usize::from(port) & 63];
                if let Some(out) = self.ports.get(usize::from(oi)) {
                    if out.enabled.load(Relaxed) {
                        out.fifo
                            .lock()
                            .push(&frame, bridged, now_mono_ns(), &out.stats.egress);
                        pending[usize::from(oi)] = true;
                        queued = true;
                    } else {
                        out.stats.disabled_drops.fetch_add(1, Relaxed);
                    }
                }
            }
        }
        queued
    }

    /// The sinks' report copies (int_source.rs): queued on the report port,
    /// whose egress pass decides whether each becomes a telemetry report.
    /// True if one was queued.
    fn int_copies(&self, pending: &mut [bool]) -> bool {
        let mut queued = false;
        while let Some((port, frame, bridged)) = self.pipeline.take_int_copy() {
            let oi = self.port_index[usize::from(port) & 63];
            if let Some(out) = self.ports.get(usize::from(oi)) {
                if out.enabled.load(Relaxed) {
                    out.fifo
                        .lock()
                        .push(&frame, bridged, now_mono_ns(), &out.stats.egress);
                    pending[usize::from(oi)] = true;
                    queued = true;
                } else {
                    out.stats.disabled_drops.fetch_add(1, Relaxed);
                }
            }
        }
        queued
    }

    fn rx_batch(&mut self, ri: usize, scratch: &mut [u8], pending: &mut [bool]) -> usize {
        let (pi, rx) = &mut self.rings[ri];
        let ctx = RxCtx {
            ports: &self.ports,
            pipeline: &self.pipeline,
            port_index: &self.port_index,
        };
        match rx {
            Rx::Packet(r) => ctx.batch(*pi, r, scratch, pending),
            Rx::Xsk(x) => ctx.batch(*pi, x, scratch, pending),
        }
    }
}

/// What a worker's RX pass reads besides its queue.
struct RxCtx<'a> {
    ports: &'a [Port],
    pipeline: &'a Pipeline,
    port_index: &'a [u8; 64],
}

impl RxCtx<'_> {
    /// Up to `RX_BATCH` frames from one queue of port `pi` through the
    /// pipeline into their egress FIFOs.
    fn batch<Q: RxQueue>(
        &self,
        pi: usize,
        ring: &mut Q,
        scratch: &mut [u8],
        pending: &mut [bool],
    ) -> usize {
        let in_port = &self.ports[pi];
        let st = &in_port.stats;
        let mut n = 0;
        let mut bytes = 0u64;
        // One clock read per batch: the enqueue time of its packets.
        let mut enq_ns = 0;
        let mut batch_ns = 0;
        while n < RX_BATCH {
            let Some(f) = ring.next() else { break };
            n += 1;
            bytes += f.data.len() as u64;
            if !in_port.enabled.load(Relaxed) {
                st.disabled_drops.fetch_add(1, Relaxed);
                ring.release();
                continue;
            }
            if f.truncated {
                st.drops[DropReason::Truncated.index()].fetch_add(1, Relaxed);
                ring.release();
                continue;
            }
            // AF_XDP frames carry no kernel timestamp: the batch's arrival time.
            let ts = if f.ts_ns == 0 {
                if batch_ns == 0 {
                    batch_ns = now_real_ns();
                }
                batch_ns
            } else {
                f.ts_ns
            };
            if enq_ns == 0 {
                enq_ns = now_mono_ns();
                if f.ts_ns != 0 {
                    st.max_rx_wait_ns
                        .fetch_max(now_real_ns().saturating_sub(ts), Relaxed);
                }
            }
            let meta = Meta {
                ingress_port: in_port.id as u16,
                now_ns: ts,
                now_ms: (ts / 1_000_000) as u32,
            };
            // The kernel strips a VLAN tag into the ring header; put it back.
            let frame: &mut [u8] = match f.vlan {
                Some((tpid, tci)) if f.data.len() >= 12 => {
                    let len = f.data.len() + 4;
                    scratch[..12].copy_from_slice(&f.data[..12]);
                    scratch[12..14].copy_from_slice(&tpid.to_be_bytes());
                    scratch[14..16].copy_from_slice(&tci.to_be_bytes());
                    scratch[16..len].copy_from_slice(&f.data[12..]);
                    &mut scratch[..len]
                }
                _ => f.data,
            };
            let (verdict, bridged) = self.pipeline.ingress(frame, &meta);
            match verdict {
                Verdict::Forward(port) => {
                    let oi = self.port_index[usize::from(port) & 63];
                    if let Some(out) = self.ports.get(usize::from(oi)) {
                        if out.enabled.load(Relaxed) {
                            out.fifo
                                .lock()
                                .push(frame, bridged, enq_ns, &out.stats.egress);
                            pending[usize::from(oi)] = true;
                        } else {
                            out.stats.disabled_drops.fetch_add(1, Relaxed);
                        }
                    } else {
                        st.drops[DropReason::NoSuchPort.index()].fetch_add(1, Relaxed);
                    }
                }
                Verdict::Drop(r) => {
                    st.drops[r.index()].fetch_add(1, Relaxed);
                }
            }
            ring.release();
        }
        ring.done();
        if n > 0 {
            // Counted per batch: these cache lines are shared by all workers.
            st.rx_packets.fetch_add(n as u64, Relaxed);
            st.rx_bytes.fetch_add(bytes, Relaxed);
        }
        n
    }
}
