//! The XDP fast path: relay hits forwarded in the kernel (bpf/fastpath.bpf.c).
//!
//! The user-space pipeline stays the definition of behaviour and the owner of
//! every table; this module mirrors what the XDP program needs into its maps
//! (relay entries with a leg action; legs with their route resolved; port
//! states) whenever a Write changes them, before the Write returns, so the
//! kernel never acts on an entry the control plane has removed. A relay entry
//! missing from the kernel's map (map full, not yet mirrored) is simply
//! relayed by user space. Counters the kernel keeps are added to ours on every
//! read; the quality registers are one shared memory.

mod sys;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::ffi::c_int;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::config::XdpMode;
use crate::pipeline::mirror::{
    FastPathMaps, FastPathStatus, LegRoute, LegRoute6, PipelineCounts, PortCounts, Relay6Tuple,
};
use crate::tables::relay::RelayKey;
use crate::tables::small6::{Relay6AddrAction, Relay6AddrKey};
use crate::xdp_abi::{
    ConfigVal, Leg6RouteC, LegCount, LegQuality, LegRouteC, PortVal, Relay6KeyC, RelayKeyC,
    RelayVal, MAX_PORTS, XSK_QUEUES,
};
use anyhow::{Context, Result};

static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fastpath.bpf.o"));
const PROGRAM: &str = "p4relay_fastpath";
const PROBE: &str = "p4relay_probe";

/// The XDP attach flags of a resolved mode (`Off` never attaches; `Auto`
/// is resolved to native or generic before attaching).
fn xdp_flags(mode: XdpMode) -> u32 {
    match mode {
        XdpMode::Native => sys::XDP_FLAGS_DRV_MODE,
        _ => sys::XDP_FLAGS_SKB_MODE,
    }
}

/// An interface with no device behind it (veth, bridge, tunnel): native XDP
/// redirect into it works only where its peer takes the frames (veth: the
/// peer runs NAPI, i.e. has GRO on or an XDP program), which
/// `FastPath::native_tx_reaches` checks.
pub fn is_virtual(ifname: &str) -> bool {
    !std::path::Path::new(&format!("/sys/class/net/{ifname}/device")).exists()
}

impl From<LegRoute> for LegRouteC {
    fn from(r: LegRoute) -> Self {
        LegRouteC {
            src: r.src,
            dst: r.dst,
            sport: r.sport,
            dport: r.dport,
            port: r.port,
            smac: r.smac,
            dmac: r.dmac,
            valid: u32::from(r.valid),
        }
    }
}

impl Leg6RouteC {
    /// The kernel's value of `leg`'s IPv6 route, generation `gen`.
    fn of(leg: u32, r: &LegRoute6, gen: u32) -> Self {
        Leg6RouteC {
            src: r.src.to_be_bytes(),
            dst: r.dst.to_be_bytes(),
            sport: r.sport,
            dport: r.dport,
            port: r.port,
            smac: r.smac,
            dmac: r.dmac,
            leg,
            valid: gen,
        }
    }
}

/// A relay6 value's `slot` with no cell: the program passes its hits to user space.
const NO_CELL: u32 = u32::MAX;

/// The `legs6` array's cells: a leg holds one while it has an IPv6 rewrite
/// or a kernel relay6 entry points to it (`refs`), so an entry's `slot`
/// never names a cell another leg took meanwhile. Cells are handed out
/// from a free list (a hashed leg -> cell map is what the array replaces in
/// the program; here, off the packet path, a std HashMap is enough).
struct Cells6 {
    by_leg: std::collections::HashMap<u32, Cell6>,
    free: Vec<u32>,
    next: u32,
    cap: u32,
}

#[derive(Clone, Copy)]
struct Cell6 {
    slot: u32,
    refs: u32,
    rewrite: bool,
}

impl Cells6 {
    fn new(cap: u32) -> Cells6 {
        Cells6 {
            by_leg: std::collections::HashMap::new(),
            free: Vec::new(),
            next: 0,
            cap,
        }
    }

    /// `leg`'s cell, taken if it has none (None: all are taken).
    fn take(&mut self, leg: u32) -> Option<&mut Cell6> {
        if !self.by_leg.contains_key(&leg) {
            let slot = match self.free.pop() {
                Some(s) => s,
                None if self.next < self.cap => {
                    self.next += 1;
                    self.next - 1
                }
                None => return None,
            };
            self.by_leg.insert(
                leg,
                Cell6 {
                    slot,
                    refs: 0,
                    rewrite: false,
                },
            );
        }
        self.by_leg.get_mut(&leg)
    }

    /// One relay6 entry more on `leg`: its cell, or NO_CELL.
    fn acquire(&mut self, leg: u32) -> u32 {
        self.take(leg).map_or(NO_CELL, |c| {
            c.refs += 1;
            c.slot
        })
    }

    /// One relay6 entry less on `leg` (whose cell it carried).
    fn release(&mut self, leg: u32, slot: u32) {
        if let Some(c) = self.by_leg.get_mut(&leg) {
            if c.slot == slot && c.refs > 0 {
                c.refs -= 1;
                self.drop_unused(leg);
            }
        }
    }

    /// Returns `leg`'s cell to the free list if nothing holds it.
    fn drop_unused(&mut self, leg: u32) {
        if let Some(c) = self.by_leg.get(&leg) {
            if c.refs == 0 && !c.rewrite {
                self.free.push(c.slot);
                self.by_leg.remove(&leg);
            }
        }
    }
}

fn key6_c(t: &Relay6Tuple) -> Relay6KeyC {
    Relay6KeyC {
        src: t.src.to_be_bytes(),
        dst: t.dst.to_be_bytes(),
        sport: t.sport,
        dport: t.dport,
        port: u32::from(t.port),
    }
}

/// The sizes of the fast path's maps.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Kernel relay entries (allocated as used).
    pub relay: u32,
    /// Legs (the per-leg arrays).
    pub legs: u32,
    /// Kernel IPv6 relay entries (allocated as used).
    pub relay6: u32,
    /// IPv6 leg rewrites: cells of the `legs6` array.
    pub legs6: u32,
}

impl Sizes {
    /// `relay` relay entries over `legs` legs; IPv6 as many.
    pub fn v4(relay: u32, legs: u32) -> Sizes {
        Sizes {
            relay,
            legs,
            relay6: relay,
            legs6: legs,
        }
    }
}

pub struct FastPath {
    /// The mode the ports are attached in (`Auto` until they are).
    mode: parking_lot::Mutex<XdpMode>,
    _obj: sys::Object,
    prog: c_int,
    probe: c_int,
    probe_target: c_int,
    relay: c_int,
    legs: c_int,
    leg_counts: c_int,
    relay6: c_int,
    legs6: c_int,
    ports: c_int,
    ifports: c_int,
    config: c_int,
    xsks: c_int,
    quality: &'static [LegQuality],
    /// Relay entries the kernel map refused (full): relayed by user space.
    pub relay_full: AtomicU64,
    pub relay_mirrored: AtomicU64,
    /// Relay entries in the kernel's map (Writes are serialised; only they
    /// add or remove entries).
    relay_entries: AtomicU64,
    /// Legs the kernel map refused (beyond its size).
    pub legs_full: AtomicU64,
    /// IPv6 relay entries in the kernel's map.
    relay6_entries: AtomicU64,
    /// Which leg holds which `legs6` cell.
    cells6: parking_lot::Mutex<Cells6>,
    /// The relay6_addr the IPv6 entries were resolved with (None: never).
    relay6_addr: parking_lot::Mutex<Option<BTreeMap<Relay6AddrKey, Relay6AddrAction>>>,
    /// The legs whose cell in the kernel's `legs` array is valid, one bit
    /// each (the array has no keys to list).
    legs_valid: parking_lot::Mutex<Vec<u64>>,
    /// The last generation written into a `legs` cell's `valid`.
    leg_gen: std::sync::atomic::AtomicU32,
    links: parking_lot::Mutex<Vec<(u32, c_int)>>,
    /// Ports whose interface drops frames redirected in native mode: the
    /// program never sends to them (user space does).
    no_native_tx: parking_lot::Mutex<Vec<u32>>,
    /// Native mode, veth ports the program sends to: (port, interface, its
    /// TX count, the veth's queued XDP frames) at the last check.
    native_veths: parking_lot::Mutex<Vec<(u32, String, u64, u64)>>,
}

fn key_c(k: &RelayKey) -> RelayKeyC {
    RelayKeyC {
        src: k.src,
        dst: k.dst,
        sport: k.sport,
        dport: k.dport,
        port: u32::from(k.port),
    }
}

impl FastPath {
    /// Loads the program and creates its maps (`relay_entries` kernel relay
    /// entries, allocated as used; `legs` legs; IPv6 as many).
    pub fn load(
        mode: XdpMode,
        relay_entries: u32,
        legs: u32,
        clock_hz: u32,
        jitter_shift: u32,
    ) -> Result<FastPath> {
        FastPath::load_sized(mode, Sizes::v4(relay_entries, legs), clock_hz, jitter_shift)
    }

    /// Loads the program and creates its maps at `sizes`.
    pub fn load_sized(
        mode: XdpMode,
        sizes: Sizes,
        clock_hz: u32,
        jitter_shift: u32,
    ) -> Result<FastPath> {
        let Sizes {
            relay: relay_entries,
            legs,
            relay6,
            legs6,
        } = sizes;
        let obj = sys::Object::open(OBJECT).context("open the XDP object")?;
        obj.size_map("relay", relay_entries.max(1), true)?;
        obj.size_map("relay6", relay6.max(1), true)?;
        obj.size_map("legs6", legs6.max(1), false)?;
        obj.size_map("legs", legs.max(1), false)?;
        obj.size_map("quality", legs.max(1), false)?;
        obj.size_map("leg_counts", legs.max(1), false)?;
        obj.load()
            .context("load the XDP program (needs CAP_BPF/CAP_NET_ADMIN and a kernel with BPF)")?;
        let quality_fd = obj.map_fd("quality")?;
        let quality = mmap_quality(quality_fd, legs.max(1) as usize)?;
        let fp = FastPath {
            mode: parking_lot::Mutex::new(mode),
            prog: obj.prog_fd(PROGRAM)?,
            probe: obj.prog_fd(PROBE)?,
            probe_target: obj.map_fd("probe_target")?,
            relay: obj.map_fd("relay")?,
            legs: obj.map_fd("legs")?,
            leg_counts: obj.map_fd("leg_counts")?,
            relay6: obj.map_fd("relay6")?,
            legs6: obj.map_fd("legs6")?,
            ports: obj.map_fd("ports")?,
            ifports: obj.map_fd("ifports")?,
            config: obj.map_fd("config")?,
            xsks: obj.map_fd("xsks")?,
            quality,
            _obj: obj,
            relay_full: AtomicU64::new(0),
            relay_mirrored: AtomicU64::new(0),
            relay_entries: AtomicU64::new(0),
            legs_full: AtomicU64::new(0),
            relay6_entries: AtomicU64::new(0),
            cells6: parking_lot::Mutex::new(Cells6::new(legs6.max(1))),
            relay6_addr: parking_lot::Mutex::new(None),
            legs_valid: parking_lot::Mutex::new(vec![0; (legs.max(1) as usize).div_ceil(64)]),
            leg_gen: std::sync::atomic::AtomicU32::new(0),
            links: parking_lot::Mutex::new(Vec::new()),
            no_native_tx: parking_lot::Mutex::new(Vec::new()),
            native_veths: parking_lot::Mutex::new(Vec::new()),
        };
        let c = ConfigVal {
            clock_hz,
            jitter_shift,
            ..ConfigVal::default()
        };
        sys::update(fp.config, &0u32, &c, sys::BPF_ANY)?;
        fp.refresh_clock();
        Ok(fp)
    }

    /// Attaches the program to a port's interface in `mode` (native or
    /// generic; detached when we exit or by `detach_all`).
    pub fn attach(&self, port: u32, ifname: &str, mode: XdpMode) -> Result<()> {
        let ifindex = ifindex_of(ifname)?;
        self.register_port(port, ifindex)?;
        let link = sys::xdp_link(self.prog, ifindex, xdp_flags(mode))
            .with_context(|| format!("attach XDP ({mode:?}) to {ifname}"))?;
        self.links.lock().push((port, link));
        *self.mode.lock() = mode;
        if mode == XdpMode::Native {
            if let Ok(x) = veth_xdp_xmit(ifname) {
                let tx = self.port_counts(port).tx_packets;
                self.native_veths
                    .lock()
                    .push((port, ifname.to_string(), tx, x));
            }
        }
        Ok(())
    }

    /// Native mode on veth: the ports whose peer stopped taking redirected
    /// frames since the last call (GRO turned off there: the program sent
    /// to the port, the veth queued none of it). From then on the program
    /// leaves their relay hits to user space. Called periodically.
    pub fn check_native_tx(&self) -> Vec<(u32, String)> {
        // Sends in flight between the two reads are at most a NAPI batch.
        const IN_FLIGHT: u64 = 64;
        let mut broken = Vec::new();
        for (port, ifname, tx0, x0) in self.native_veths.lock().iter_mut() {
            let Ok(x) = veth_xdp_xmit(ifname) else {
                continue;
            };
            let tx = self.port_counts(*port).tx_packets;
            if tx.wrapping_sub(*tx0) > IN_FLIGHT && x == *x0 {
                broken.push((*port, ifname.clone()));
            }
            (*tx0, *x0) = (tx, x);
        }
        for (port, _) in &broken {
            self.refuse_native_tx(*port);
        }
        self.native_veths
            .lock()
            .retain(|(p, ..)| !broken.iter().any(|(b, _)| b == p));
        broken
    }

    /// Detaches the program from every port (closing a link detaches it).
    pub fn detach_all(&self) {
        for (_, link) in self.links.lock().drain(..) {
            // SAFETY: a link fd we own and no longer use.
            unsafe { libc::close(link) };
        }
    }

    /// The mode the ports are attached in.
    pub fn mode(&self) -> XdpMode {
        *self.mode.lock()
    }

    /// Dev port `port` is interface `ifindex` (both directions).
    fn register_port(&self, port: u32, ifindex: u32) -> io::Result<()> {
        sys::update(self.ifports, &ifindex, &port, sys::BPF_ANY)?;
        let mut p: PortVal = sys::lookup(self.ports, &port).unwrap_or_default();
        p.ifindex = ifindex;
        sys::update(self.ports, &port, &p, sys::BPF_ANY)
    }

    /// The kernel stamps packets with CLOCK_MONOTONIC; the registers and
    /// idle timers use wall-clock time. Refreshed periodically (NTP slews).
    pub fn refresh_clock(&self) {
        let off = crate::sys::now_real_ns().wrapping_sub(crate::sys::now_mono_ns());
        if let Some(mut c) = sys::lookup::<_, ConfigVal>(self.config, &0u32) {
            c.wall_offset_ns = off;
            let _ = sys::update(self.config, &0u32, &c, sys::BPF_EXIST);
        }
    }

    pub fn links(&self) -> usize {
        self.links.lock().len()
    }

    /// Whether a frame redirected into `ifname` the way native XDP redirects
    /// reaches the other end (veth: its peer runs NAPI; the kernel drops it
    /// otherwise). Sends one probe frame (IEEE 802 local experimental
    /// ethertype to the link-local group no bridge forwards; the peer's stack
    /// drops it as an unknown protocol) and reads the veth's XDP transmit
    /// counter. An interface that is not a veth is an error.
    pub fn native_tx_reaches(&self, ifname: &str) -> Result<bool> {
        let ifindex = ifindex_of(ifname)?;
        sys::update(self.probe_target, &0u32, &ifindex, sys::BPF_ANY)?;
        let mut frame = vec![0u8; 60];
        frame[..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e]);
        frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0]);
        frame[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        frame[14..38].copy_from_slice(b"p4relay native XDP probe");
        let before = veth_xdp_xmit(ifname)?;
        // The run flushes its redirects before it returns.
        sys::run_live(self.probe, &frame)
            .with_context(|| format!("run the native XDP probe into {ifname}"))?;
        Ok(veth_xdp_xmit(ifname)? != before)
    }

    /// The program hands packets routed to `port` to user space instead of
    /// redirecting them (its interface drops native redirects).
    pub fn refuse_native_tx(&self, port: u32) {
        let mut no = self.no_native_tx.lock();
        if !no.contains(&port) {
            no.push(port);
        }
        if let Some(mut p) = sys::lookup::<_, PortVal>(self.ports, &port) {
            p.fast = 0;
            let _ = sys::update(self.ports, &port, &p, sys::BPF_EXIST);
        }
    }
}

impl FastPathMaps for FastPath {
    /// The quality registers' memory, shared with the kernel.
    fn quality(&self) -> &'static [LegQuality] {
        self.quality
    }

    /// A port may receive (`enabled`) and send (`fast`: enabled, unshaped,
    /// link up) on this path. Keeps its counters.
    fn set_port(&self, port: u32, enabled: bool, fast: bool) {
        if port >= MAX_PORTS {
            return;
        }
        let fast = fast && !self.no_native_tx.lock().contains(&port);
        if let Some(mut p) = sys::lookup::<_, PortVal>(self.ports, &port) {
            let (e, f) = (u32::from(enabled), u32::from(fast));
            if p.enabled != e || p.fast != f {
                p.enabled = e;
                p.fast = f;
                // Racing increments of this port's counters are lost here;
                // this runs only when a port's state changes.
                let _ = sys::update(self.ports, &port, &p, sys::BPF_EXIST);
            }
        }
    }

    /// Port binding of a port (`$PORT_METADATA`): the kernel keys relay on
    /// the unbound port where it is off, as the pipeline does.
    fn set_port_unbound(&self, port: u32, unbound: bool) {
        if port >= MAX_PORTS {
            return;
        }
        if let Some(mut p) = sys::lookup::<_, PortVal>(self.ports, &port) {
            if p.unbound != u32::from(unbound) {
                p.unbound = u32::from(unbound);
                let _ = sys::update(self.ports, &port, &p, sys::BPF_EXIST);
            }
        }
    }

    fn port_counts(&self, port: u32) -> PortCounts {
        let p: PortVal = sys::lookup(self.ports, &port).unwrap_or_default();
        PortCounts {
            rx_packets: p.rx_packets,
            rx_bytes: p.rx_bytes,
            tx_packets: p.tx_packets,
            tx_bytes: p.tx_bytes,
        }
    }

    fn pipeline_counts(&self) -> PipelineCounts {
        let c: ConfigVal = sys::lookup(self.config, &0u32).unwrap_or_default();
        PipelineCounts {
            relay_hits: c.relay_hits,
            relay_rewrites: c.relay_rewrites,
            rtp_packets: c.rtp_packets,
            relay6_rewrites: c.relay6_rewrites,
        }
    }

    /// Mirrors one relay entry: `Some((leg, rtcp))` installs or re-points it
    /// (its last hit kept), `None` removes it.
    fn mirror_relay(&self, k: &RelayKey, leg: Option<(u32, bool)>) {
        let kc = key_c(k);
        match leg {
            Some((leg, rtcp)) => {
                let cur: Option<RelayVal> = sys::lookup(self.relay, &kc);
                let mut v = cur.unwrap_or_default();
                if cur.is_some() && v.leg == leg && v.rtcp == u32::from(rtcp) {
                    return;
                }
                v.leg = leg;
                v.rtcp = u32::from(rtcp);
                match sys::update(self.relay, &kc, &v, sys::BPF_ANY) {
                    Ok(()) => {
                        self.relay_mirrored.fetch_add(1, Relaxed);
                        if cur.is_none() {
                            self.relay_entries.fetch_add(1, Relaxed);
                        }
                    }
                    Err(e) => {
                        // Full (E2BIG) or out of memory: user space relays it.
                        if self.relay_full.fetch_add(1, Relaxed) == 0 {
                            tracing::warn!(
                                error = %e,
                                entries = self.relay_entries.load(Relaxed),
                                "XDP relay map full: further relay entries spill to the user-space pipeline (p4relay_xdp_relay_spilled_entries; raise --xdp-entries)"
                            );
                        }
                    }
                }
            }
            None => {
                if sys::delete(self.relay, &kc).is_ok() {
                    self.relay_entries.fetch_sub(1, Relaxed);
                }
            }
        }
    }

    /// When the kernel last relayed a packet of this entry.
    fn relay_last_hit(&self, k: &RelayKey) -> Option<u32> {
        let v: RelayVal = sys::lookup(self.relay, &key_c(k))?;
        (v.last_hit_ms != 0).then_some(v.last_hit_ms)
    }

    /// Every entry's last kernel hit (a full Read): one pass over the kernel's
    /// map, bounded by --xdp-entries, instead of a lookup per switch entry.
    fn all_relay_last_hits(&self) -> HashMap<RelayKey, u32> {
        sys::keys::<RelayKeyC>(self.relay)
            .into_iter()
            .filter_map(|kc| {
                let v: RelayVal = sys::lookup(self.relay, &kc)?;
                if v.last_hit_ms == 0 {
                    return None;
                }
                let k = RelayKey {
                    src: kc.src,
                    dst: kc.dst,
                    sport: kc.sport,
                    dport: kc.dport,
                    port: kc.port as u16,
                };
                Some((k, v.last_hit_ms))
            })
            .collect()
    }

    fn leg_counts(&self, leg: u32) -> (u64, u64) {
        sys::lookup::<_, LegCount>(self.leg_counts, &leg).map_or((0, 0), |c| (c.pkts, c.bytes))
    }

    fn zero_leg_counts(&self, leg: u32) {
        // An array map: the cell exists for every leg in range.
        let _ = sys::update(self.leg_counts, &leg, &LegCount::default(), sys::BPF_EXIST);
    }

    fn clear_relay(&self) {
        for k in sys::keys::<RelayKeyC>(self.relay) {
            let _ = sys::delete(self.relay, &k);
        }
        self.relay_entries.store(0, Relaxed);
    }

    /// Mirrors one leg: a valid route is stored, anything else cleared (the
    /// kernel then passes the leg's packets to user space). A cell the
    /// program may be reading is rewritten in three steps, each a whole-value
    /// copy: `valid` cleared (the fields as they are), the new fields, then
    /// a new generation in `valid`; the program keeps a copy only if it read
    /// the same non-zero generation before and after it.
    fn mirror_leg(&self, leg: u32, r: LegRoute) {
        let mut new = LegRouteC::from(r);
        let mut valid = self.legs_valid.lock();
        let Some(word) = valid.get_mut(leg as usize / 64) else {
            if new.valid != 0 {
                // Beyond the array: this leg's packets are relayed in user space.
                self.legs_full.fetch_add(1, Relaxed);
            }
            return;
        };
        let bit = 1u64 << (leg % 64);
        let Some(mut cur) = sys::lookup::<_, LegRouteC>(self.legs, &leg) else {
            if new.valid != 0 {
                self.legs_full.fetch_add(1, Relaxed);
            }
            return;
        };
        let want = new.valid != 0;
        new.valid = 0;
        if want && cur.valid != 0 && (LegRouteC { valid: 0, ..cur }) == new {
            *word |= bit;
            return;
        }
        if cur.valid != 0 {
            cur.valid = 0;
            if sys::update(self.legs, &leg, &cur, sys::BPF_EXIST).is_err() {
                return;
            }
            *word &= !bit;
        }
        if !want {
            return;
        }
        let mut g = self.leg_gen.fetch_add(1, Relaxed).wrapping_add(1);
        if g == 0 {
            g = self.leg_gen.fetch_add(1, Relaxed).wrapping_add(1);
        }
        let ok = sys::update(self.legs, &leg, &new, sys::BPF_EXIST).is_ok() && {
            new.valid = g;
            sys::update(self.legs, &leg, &new, sys::BPF_EXIST).is_ok()
        };
        if ok {
            *word |= bit;
        } else {
            self.legs_full.fetch_add(1, Relaxed);
        }
    }

    /// Legs the kernel holds.
    fn mirrored_legs(&self) -> Vec<u32> {
        let valid = self.legs_valid.lock();
        let mut out = Vec::new();
        for (i, &w) in valid.iter().enumerate() {
            let mut w = w;
            while w != 0 {
                out.push(i as u32 * 64 + w.trailing_zeros());
                w &= w - 1;
            }
        }
        out
    }

    fn status(&self) -> FastPathStatus {
        FastPathStatus {
            ports: self.links() as u64,
            relay_mirrored: self.relay_mirrored.load(Relaxed),
            relay_entries: self.relay_entries.load(Relaxed),
            relay_full: self.relay_full.load(Relaxed),
            legs_full: self.legs_full.load(Relaxed),
            relay6_entries: self.relay6_entries.load(Relaxed),
        }
    }

    /// Mirrors one IPv6 relay entry: its value carries its leg's `legs6`
    /// cell, taken here if the leg has none yet (all taken: NO_CELL, and
    /// user space relays the entry's packets).
    fn mirror_relay6(&self, t: &Relay6Tuple, leg: Option<(u32, bool)>) {
        let kc = key6_c(t);
        let mut cells = self.cells6.lock();
        let cur: Option<RelayVal> = sys::lookup(self.relay6, &kc);
        match leg {
            Some((leg, rtcp)) => {
                let mut v = cur.unwrap_or_default();
                if cur.is_some() && v.leg == leg && v.rtcp == u32::from(rtcp) {
                    return;
                }
                v.leg = leg;
                v.rtcp = u32::from(rtcp);
                v.slot = cells.acquire(leg);
                match sys::update(self.relay6, &kc, &v, sys::BPF_ANY) {
                    Ok(()) => {
                        self.relay_mirrored.fetch_add(1, Relaxed);
                        match cur {
                            Some(c) => cells.release(c.leg, c.slot),
                            None => {
                                self.relay6_entries.fetch_add(1, Relaxed);
                            }
                        }
                    }
                    Err(e) => {
                        cells.release(leg, v.slot);
                        if self.relay_full.fetch_add(1, Relaxed) == 0 {
                            tracing::warn!(
                                error = %e,
                                entries = self.relay6_entries.load(Relaxed),
                                "XDP relay6 map full: further IPv6 relay entries spill to the user-space pipeline (p4relay_xdp_relay_full_total)"
                            );
                        }
                    }
                }
            }
            None => {
                if let Some(c) = cur {
                    if sys::delete(self.relay6, &kc).is_ok() {
                        self.relay6_entries.fetch_sub(1, Relaxed);
                        cells.release(c.leg, c.slot);
                    }
                }
            }
        }
    }

    fn clear_relay6(&self) {
        let mut cells = self.cells6.lock();
        for k in sys::keys::<Relay6KeyC>(self.relay6) {
            if let Some(c) = sys::lookup::<_, RelayVal>(self.relay6, &k) {
                if sys::delete(self.relay6, &k).is_ok() {
                    cells.release(c.leg, c.slot);
                }
            }
        }
        self.relay6_entries.store(0, Relaxed);
    }

    fn relay6_last_hit(&self, t: &Relay6Tuple) -> Option<u32> {
        let v: RelayVal = sys::lookup(self.relay6, &key6_c(t))?;
        (v.last_hit_ms != 0).then_some(v.last_hit_ms)
    }

    fn all_relay6_last_hits(&self) -> Vec<(Relay6Tuple, u32)> {
        sys::keys::<Relay6KeyC>(self.relay6)
            .into_iter()
            .filter_map(|kc| {
                let v: RelayVal = sys::lookup(self.relay6, &kc)?;
                if v.last_hit_ms == 0 {
                    return None;
                }
                let t = Relay6Tuple {
                    src: u128::from_be_bytes(kc.src),
                    dst: u128::from_be_bytes(kc.dst),
                    sport: kc.sport,
                    dport: kc.dport,
                    port: kc.port as u16,
                };
                Some((t, v.last_hit_ms))
            })
            .collect()
    }

    /// Mirrors one leg's IPv6 rewrite into its `legs6` cell (taken if the
    /// leg has none), rewritten in place in three steps as a `legs` cell
    /// (mirror_leg): `valid` cleared, the new fields, a new generation. A
    /// leg without a rewrite keeps its cell only while relay6 entries point
    /// to it.
    fn mirror_leg6(&self, leg: u32, r: LegRoute6) {
        let mut cells = self.cells6.lock();
        if !r.valid {
            let Some(c) = cells.by_leg.get_mut(&leg) else {
                return;
            };
            if c.rewrite {
                c.rewrite = false;
                let slot = c.slot;
                if let Some(mut cur) = sys::lookup::<_, Leg6RouteC>(self.legs6, &slot) {
                    cur.valid = 0;
                    let _ = sys::update(self.legs6, &slot, &cur, sys::BPF_EXIST);
                }
                cells.drop_unused(leg);
            }
            return;
        }
        let Some(c) = cells.take(leg) else {
            // All cells taken: this leg's packets are relayed in user space.
            self.legs_full.fetch_add(1, Relaxed);
            return;
        };
        c.rewrite = true;
        let slot = c.slot;
        let Some(mut cur) = sys::lookup::<_, Leg6RouteC>(self.legs6, &slot) else {
            self.legs_full.fetch_add(1, Relaxed);
            return;
        };
        if cur.valid != 0 && Leg6RouteC::of(leg, &r, cur.valid) == cur {
            return;
        }
        if cur.valid != 0 {
            cur.valid = 0;
            if sys::update(self.legs6, &slot, &cur, sys::BPF_EXIST).is_err() {
                return;
            }
        }
        let mut g = self.leg_gen.fetch_add(1, Relaxed).wrapping_add(1);
        if g == 0 {
            g = self.leg_gen.fetch_add(1, Relaxed).wrapping_add(1);
        }
        let ok = sys::update(
            self.legs6,
            &slot,
            &Leg6RouteC::of(leg, &r, 0),
            sys::BPF_EXIST,
        )
        .is_ok()
            && sys::update(
                self.legs6,
                &slot,
                &Leg6RouteC::of(leg, &r, g),
                sys::BPF_EXIST,
            )
            .is_ok();
        if !ok {
            self.legs_full.fetch_add(1, Relaxed);
        }
    }

    fn mirrored_legs6(&self) -> Vec<u32> {
        let cells = self.cells6.lock();
        let mut legs: Vec<u32> = cells
            .by_leg
            .iter()
            .filter(|(_, c)| c.rewrite)
            .map(|(&l, _)| l)
            .collect();
        legs.sort_unstable();
        legs
    }

    fn relay6_addr_changed(&self, addrs: &BTreeMap<Relay6AddrKey, Relay6AddrAction>) -> bool {
        let mut last = self.relay6_addr.lock();
        if last.as_ref() == Some(addrs) {
            return false;
        }
        *last = Some(addrs.clone());
        true
    }
}

/// The user-space pipeline's AF_XDP sockets, one per port and RX queue.
impl crate::dataplane::XskMap for FastPath {
    fn insert(&self, port: u32, queue: u32, fd: std::os::fd::RawFd) -> io::Result<()> {
        if port >= MAX_PORTS || queue >= XSK_QUEUES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("port {port} queue {queue}: beyond the xsks map"),
            ));
        }
        sys::update(
            self.xsks,
            &(port * XSK_QUEUES + queue),
            &(fd as u32),
            sys::BPF_ANY,
        )
    }

    fn remove(&self, port: u32, queue: u32) {
        let _ = sys::delete(self.xsks, &(port * XSK_QUEUES + queue));
    }

    fn native(&self) -> bool {
        self.mode() == XdpMode::Native
    }
}

/// One SIOCETHTOOL request on `ifname` (in the calling thread's network
/// namespace); `buf` starts with the command and receives the answer.
fn ethtool(ifname: &str, buf: &mut [u64]) -> Result<()> {
    #[repr(C)]
    struct IfReq {
        name: [u8; libc::IFNAMSIZ],
        data: *mut u64,
        _pad: [u8; 16],
    }
    anyhow::ensure!(ifname.len() < libc::IFNAMSIZ, "{ifname}: name too long");
    let mut r = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: buf.as_mut_ptr(),
        _pad: [0; 16],
    };
    r.name[..ifname.len()].copy_from_slice(ifname.as_bytes());
    // SAFETY: a socket for the ioctl, closed below; `buf` is as large as
    // the command's answer (the callers size it).
    let rc = unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return Err(io::Error::last_os_error()).context("socket");
        }
        let rc = libc::ioctl(s, 0x8946, &mut r);
        libc::close(s);
        rc
    };
    if rc != 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("ethtool on {ifname}"));
    }
    Ok(())
}

/// Frames natively redirected into a veth that it queued to its peer: the
/// sum of its `tx_queue_N_xdp_xmit` ethtool counters (counted as they are
/// queued; a frame the peer cannot take is not).
fn veth_xdp_xmit(ifname: &str) -> Result<u64> {
    const GDRVINFO: u32 = 0x03;
    const GSTRINGS: u32 = 0x1b;
    const GSTATS: u32 = 0x1d;
    const ETH_SS_STATS: u32 = 1;
    const GSTRING_LEN: usize = 32;
    // The requests are C structs of u32 fields then data: built and read as
    // bytes in a u64-aligned buffer.
    fn put(buf: &mut [u64], at: usize, v: u32) {
        // SAFETY: in bounds of `buf` (callers size it), plain bytes.
        let b =
            unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), buf.len() * 8) };
        b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }
    fn bytes(buf: &[u64]) -> &[u8] {
        // SAFETY: plain bytes of an initialised buffer.
        unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), buf.len() * 8) }
    }
    // struct ethtool_drvinfo: 196 bytes, n_stats the u32 at byte 180.
    let mut info = [0u64; 25];
    put(&mut info, 0, GDRVINFO);
    ethtool(ifname, &mut info)?;
    let n = u32::from_ne_bytes(bytes(&info)[180..184].try_into()?) as usize;
    anyhow::ensure!(n > 0 && n < 4096, "{ifname}: {n} ethtool counters");
    // struct ethtool_gstrings: cmd, string_set, len, then the names.
    let mut names = vec![0u64; (12 + n * GSTRING_LEN).div_ceil(8)];
    put(&mut names, 0, GSTRINGS);
    put(&mut names, 4, ETH_SS_STATS);
    put(&mut names, 8, n as u32);
    ethtool(ifname, &mut names)?;
    // struct ethtool_stats: cmd, n_stats, then the u64 values.
    let mut stats = vec![0u64; 1 + n];
    put(&mut stats, 0, GSTATS);
    put(&mut stats, 4, n as u32);
    ethtool(ifname, &mut stats)?;
    let mut total = None;
    let names = &bytes(&names)[12..12 + n * GSTRING_LEN];
    for (i, name) in names.chunks(GSTRING_LEN).enumerate() {
        let name = name.split(|&b| b == 0).next().unwrap_or_default();
        if name.starts_with(b"tx_queue_") && name.ends_with(b"_xdp_xmit") {
            *total.get_or_insert(0) += stats[1 + i];
        }
    }
    total.with_context(|| format!("{ifname}: no XDP transmit counters (not a veth)"))
}

fn ifindex_of(ifname: &str) -> Result<u32> {
    let n = std::ffi::CString::new(ifname).context("interface name")?;
    // SAFETY: valid C string.
    let i = unsafe { libc::if_nametoindex(n.as_ptr()) };
    if i == 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("interface {ifname}"));
    }
    Ok(i)
}

/// Maps the `quality` array (BPF_F_MMAPABLE) for the life of the process.
fn mmap_quality(fd: c_int, legs: usize) -> Result<&'static [LegQuality]> {
    let bytes = legs * std::mem::size_of::<LegQuality>();
    let page = 4096;
    let len = bytes.div_ceil(page) * page;
    let p = crate::sys::map_shared(fd, len).context("mmap the quality registers")?;
    // SAFETY: `legs` zero-initialised 32-byte elements (array maps are
    // zeroed; LegQuality is all atomics, valid at zero), page aligned.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<LegQuality>(), legs) })
}
