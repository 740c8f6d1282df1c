//! AF_XDP sockets (XSK): the user-space pipeline's packets without the
//! kernel stack. The XDP program redirects every packet it does not relay
//! itself to the socket of its port and RX queue (`xsks` map); the kernel
//! copies it into this socket's UMEM (zero-copy where the driver allows) and
//! a worker runs the pipeline on it in place. Transmission writes frames into
//! the UMEM's TX half and kicks the socket once per batch.
//!
//! Raw libc rather than libxdp: its ring accessors are inline C (nothing to
//! link from Rust), libbpf 1.x dropped them, and the setup is a few syscalls.
//!
//! UMEM layout: `rx_frames` chunks owned by the fill/RX rings (a received
//! chunk goes back to the fill ring when the worker is done with it), then
//! `TX_FRAMES` chunks owned by the TX/completion rings (a free list).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use super::ring::RxFrame;
use super::RxQueue;

const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;
const XDP_PGOFF_RX_RING: i64 = 0;
const XDP_PGOFF_TX_RING: i64 = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: i64 = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_RING_NEED_WAKEUP: u32 = 1;

/// UMEM chunk: a page, so a frame of up to 3,840 bytes (after the kernel's
/// 256-byte XDP headroom) arrives whole, and the pipeline counts one above
/// the egress slot as truncated, as the AF_PACKET ring does.
pub const CHUNK: usize = 4096;
/// TX chunks per socket (and TX/completion ring size).
pub const TX_FRAMES: u32 = 512;
/// Largest frame the pipeline takes (the egress FIFO's slot).
const MAX_FRAME: usize = super::egress::SLOT;

#[repr(C)]
#[derive(Default)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

/// `struct xdp_umem_reg` (with `flags` and `tx_metadata_len`, both 0).
#[repr(C)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct XdpDesc {
    addr: u64,
    len: u32,
    options: u32,
}

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Default)]
struct XdpStats {
    rx_dropped: u64,
    rx_invalid_descs: u64,
    tx_invalid_descs: u64,
    rx_ring_full: u64,
    rx_fill_ring_empty_descs: u64,
    tx_ring_empty_descs: u64,
}

/// A memory mapping owned by the socket.
struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from a successful mmap.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The socket and everything mapped from it; shared by its RX and TX halves
/// (each ring has one user: the RX worker or the port's TX lock holder).
struct Shared {
    // Dropped in order: rings and UMEM unmapped, then the socket closed.
    _rings: Vec<Map>,
    umem: Map,
    fd: OwnedFd,
}

// SAFETY: the mappings are plain shared memory; each ring is used by one
// thread (RX half or TX half), coordinated with the kernel by its indexes.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

/// One single-producer/single-consumer ring shared with the kernel.
struct Ring<T> {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut T,
    mask: u32,
    /// Our side's index (producer for fill/TX, consumer for RX/completion).
    local: u32,
    /// The kernel's side as last read.
    cached: u32,
}

// SAFETY: see Shared; a Ring is owned by one half and moves with it.
unsafe impl<T> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    fn size(&self) -> u32 {
        self.mask + 1
    }

    /// Entries the kernel has produced that we have not consumed.
    fn available(&mut self) -> u32 {
        if self.cached == self.local {
            // SAFETY: producer points into the ring mapping.
            self.cached = unsafe { (*self.producer).load(Ordering::Acquire) };
        }
        self.cached.wrapping_sub(self.local)
    }

    /// Free slots for us to produce into.
    fn free(&mut self) -> u32 {
        let mut free = self.size() - self.local.wrapping_sub(self.cached);
        if free == 0 {
            // SAFETY: consumer points into the ring mapping.
            self.cached = unsafe { (*self.consumer).load(Ordering::Acquire) };
            free = self.size() - self.local.wrapping_sub(self.cached);
        }
        free
    }

    fn get(&self, i: u32) -> T {
        // SAFETY: masked index inside the ring's descriptor array.
        unsafe { *self.desc.add((i & self.mask) as usize) }
    }

    fn set(&mut self, i: u32, v: T) {
        // SAFETY: masked index inside the ring's descriptor array.
        unsafe { *self.desc.add((i & self.mask) as usize) = v }
    }

    /// Publishes what we produced.
    fn publish_producer(&self) {
        // SAFETY: producer points into the ring mapping.
        unsafe { (*self.producer).store(self.local, Ordering::Release) }
    }

    /// Publishes what we consumed.
    fn publish_consumer(&self) {
        // SAFETY: consumer points into the ring mapping.
        unsafe { (*self.consumer).store(self.local, Ordering::Release) }
    }

    /// The kernel's consumer index (TX: what it has taken).
    fn kernel_consumer(&self) -> u32 {
        // SAFETY: consumer points into the ring mapping.
        unsafe { (*self.consumer).load(Ordering::Acquire) }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: flags points into the ring mapping.
        unsafe { (*self.flags).load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0 }
    }
}

fn setsockopt<T>(fd: RawFd, opt: libc::c_int, val: &T, what: &str) -> Result<()> {
    // SAFETY: val points to a live T of the given size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            SOL_XDP,
            opt,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r != 0 {
        bail!("setsockopt {what}: {}", io::Error::last_os_error());
    }
    Ok(())
}

fn map_ring<T>(fd: RawFd, off: &RingOffset, entries: u32, pgoff: i64) -> Result<(Map, Ring<T>)> {
    let len = off.desc as usize + entries as usize * std::mem::size_of::<T>();
    // SAFETY: a fresh shared mapping of the socket's ring; no Rust memory aliased.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            pgoff,
        )
    };
    if p == libc::MAP_FAILED {
        bail!("mmap AF_XDP ring: {}", io::Error::last_os_error());
    }
    let base = p.cast::<u8>();
    // SAFETY: the offsets the kernel gave lie inside the mapping.
    let ring = unsafe {
        Ring {
            producer: base.add(off.producer as usize).cast(),
            consumer: base.add(off.consumer as usize).cast(),
            flags: base.add(off.flags as usize).cast(),
            desc: base.add(off.desc as usize).cast(),
            mask: entries - 1,
            local: 0,
            cached: 0,
        }
    };
    Ok((Map { ptr: base, len }, ring))
}

/// How the socket's frames reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XskMode {
    /// The kernel copies each frame into the UMEM (veth, generic XDP).
    Copy,
    /// The NIC's DMA writes into the UMEM.
    ZeroCopy,
}

/// Opens an AF_XDP socket on `ifindex`'s RX queue `queue`, with
/// `rx_frames` (a power of two) receive chunks; tries zero-copy first when
/// `try_zero_copy` (the program is attached in driver mode).
pub fn open(
    ifname: &str,
    ifindex: u32,
    queue: u32,
    rx_frames: u32,
    try_zero_copy: bool,
) -> Result<(XskRx, XskTx, XskMode)> {
    assert!(rx_frames.is_power_of_two() && TX_FRAMES.is_power_of_two());
    // SAFETY: plain socket(2).
    let raw = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        bail!(
            "AF_XDP socket (kernel with CONFIG_XDP_SOCKETS, CAP_NET_RAW): {}",
            io::Error::last_os_error()
        );
    }
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let frames = (rx_frames + TX_FRAMES) as usize;
    let umem_len = frames * CHUNK;
    // SAFETY: a fresh anonymous mapping.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            umem_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        bail!("UMEM of {umem_len} bytes: {}", io::Error::last_os_error());
    }
    let umem = Map {
        ptr: p.cast(),
        len: umem_len,
    };
    let reg = UmemReg {
        addr: umem.ptr as u64,
        len: umem_len as u64,
        chunk_size: CHUNK as u32,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    setsockopt(raw, XDP_UMEM_REG, &reg, "XDP_UMEM_REG")?;
    setsockopt(raw, XDP_UMEM_FILL_RING, &rx_frames, "XDP_UMEM_FILL_RING")?;
    setsockopt(
        raw,
        XDP_UMEM_COMPLETION_RING,
        &TX_FRAMES,
        "XDP_UMEM_COMPLETION_RING",
    )?;
    setsockopt(raw, XDP_RX_RING, &rx_frames, "XDP_RX_RING")?;
    setsockopt(raw, XDP_TX_RING, &TX_FRAMES, "XDP_TX_RING")?;
    // Copy mode sends 32 frames per sendto() unless the kernel takes a
    // budget (XDP_MAX_TX_SKB_BUDGET, recent kernels): the whole ring per call
    // then. Older kernels refuse the option; `flush` kicks once per 32 frames.
    if let Err(e) = setsockopt(
        raw,
        XDP_MAX_TX_SKB_BUDGET,
        &TX_FRAMES,
        "XDP_MAX_TX_SKB_BUDGET",
    ) {
        tracing::debug!(error = %e, "AF_XDP copy mode sends 32 frames per kick");
    }
    let mut off = MmapOffsets::default();
    let mut olen = std::mem::size_of::<MmapOffsets>() as libc::socklen_t;
    // SAFETY: off is a writable buffer of olen bytes.
    let r = unsafe {
        libc::getsockopt(
            raw,
            SOL_XDP,
            XDP_MMAP_OFFSETS,
            (&mut off as *mut MmapOffsets).cast(),
            &mut olen,
        )
    };
    if r != 0 {
        bail!("XDP_MMAP_OFFSETS: {}", io::Error::last_os_error());
    }
    let (rx_map, rx) = map_ring::<XdpDesc>(raw, &off.rx, rx_frames, XDP_PGOFF_RX_RING)?;
    let (tx_map, tx) = map_ring::<XdpDesc>(raw, &off.tx, TX_FRAMES, XDP_PGOFF_TX_RING)?;
    let (fr_map, mut fill) = map_ring::<u64>(raw, &off.fr, rx_frames, XDP_UMEM_PGOFF_FILL_RING)?;
    let (cr_map, comp) = map_ring::<u64>(raw, &off.cr, TX_FRAMES, XDP_UMEM_PGOFF_COMPLETION_RING)?;
    // Every RX chunk starts with the kernel.
    for i in 0..rx_frames {
        fill.set(i, u64::from(i) * CHUNK as u64);
    }
    fill.local = rx_frames;
    fill.publish_producer();

    let mut mode = XskMode::Copy;
    let bound = if try_zero_copy {
        match bind(raw, ifindex, queue, XDP_ZEROCOPY | XDP_USE_NEED_WAKEUP) {
            Ok(()) => {
                mode = XskMode::ZeroCopy;
                Ok(())
            }
            Err(_) => bind(raw, ifindex, queue, XDP_COPY | XDP_USE_NEED_WAKEUP),
        }
    } else {
        bind(raw, ifindex, queue, XDP_COPY | XDP_USE_NEED_WAKEUP)
    };
    bound.with_context(|| format!("bind AF_XDP socket to {ifname} queue {queue}"))?;
    let shared = Arc::new(Shared {
        _rings: vec![rx_map, tx_map, fr_map, cr_map],
        umem,
        fd,
    });
    let tx_base = u64::from(rx_frames) * CHUNK as u64;
    let rxh = XskRx {
        shared: shared.clone(),
        rx,
        fill,
        cur: None,
        last_drops: 0,
    };
    let txh = XskTx {
        shared,
        tx,
        comp,
        free: (0..u64::from(TX_FRAMES))
            .map(|i| tx_base + i * CHUNK as u64)
            .collect(),
        zero_copy: mode == XskMode::ZeroCopy,
    };
    Ok((rxh, txh, mode))
}

fn bind(fd: RawFd, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
    let sa = SockaddrXdp {
        family: AF_XDP as u16,
        flags,
        ifindex,
        queue_id: queue,
        shared_umem_fd: 0,
    };
    // SAFETY: sa is a valid sockaddr_xdp of the given size.
    let r = unsafe {
        libc::bind(
            fd,
            (&sa as *const SockaddrXdp).cast(),
            std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The socket's receive half: RX and fill rings (one worker).
pub struct XskRx {
    shared: Arc<Shared>,
    rx: Ring<XdpDesc>,
    fill: Ring<u64>,
    /// The chunk of the frame handed out by `next`, until `release`.
    cur: Option<u64>,
    last_drops: u64,
}

impl XskRx {
    /// The socket's fd: its number in the `xsks` map, and pollable.
    pub fn raw_fd(&self) -> RawFd {
        self.shared.fd.as_raw_fd()
    }
}

impl RxQueue for XskRx {
    #[inline]
    fn next(&mut self) -> Option<RxFrame<'_>> {
        loop {
            if self.rx.available() == 0 {
                return None;
            }
            let d = self.rx.get(self.rx.local);
            let (addr, len) = (d.addr as usize, d.len as usize);
            if addr + len > self.shared.umem.len {
                // Not a chunk of ours: never from a sane kernel; skip it.
                self.rx.local = self.rx.local.wrapping_add(1);
                continue;
            }
            self.cur = Some(d.addr);
            // SAFETY: the kernel handed this chunk to us; it is ours until
            // it goes back to the fill ring in `release`.
            let data =
                unsafe { std::slice::from_raw_parts_mut(self.shared.umem.ptr.add(addr), len) };
            let truncated = len > MAX_FRAME;
            return Some(RxFrame {
                data: if truncated {
                    &mut data[..MAX_FRAME]
                } else {
                    data
                },
                truncated,
                vlan: None,
                ts_ns: 0,
            });
        }
    }

    #[inline]
    fn release(&mut self) {
        if let Some(addr) = self.cur.take() {
            // The fill ring holds every RX chunk: there is always room.
            let i = self.fill.local;
            self.fill.set(i, addr);
            self.fill.local = i.wrapping_add(1);
            self.rx.local = self.rx.local.wrapping_add(1);
        }
    }

    fn done(&mut self) {
        self.rx.publish_consumer();
        self.fill.publish_producer();
        if self.fill.needs_wakeup() {
            // SAFETY: a zero-length non-blocking recvfrom kicks the driver.
            unsafe {
                libc::recvfrom(
                    self.raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
        }
    }

    /// Frames the kernel could not hand over since the last call (RX ring
    /// full, no free chunk, too large for a chunk).
    fn drops(&mut self) -> u64 {
        let mut st = XdpStats::default();
        let mut len = std::mem::size_of::<XdpStats>() as libc::socklen_t;
        // SAFETY: st is a writable buffer of len bytes.
        let r = unsafe {
            libc::getsockopt(
                self.raw_fd(),
                SOL_XDP,
                XDP_STATISTICS,
                (&mut st as *mut XdpStats).cast(),
                &mut len,
            )
        };
        if r != 0 {
            return 0;
        }
        let total = st.rx_dropped + st.rx_ring_full;
        let d = total.saturating_sub(self.last_drops);
        self.last_drops = total;
        d
    }

    fn fd(&self) -> RawFd {
        self.raw_fd()
    }
}

/// The socket's transmit half: TX and completion rings and the TX chunks
/// (the port's TX lock holder).
pub struct XskTx {
    shared: Arc<Shared>,
    tx: Ring<XdpDesc>,
    comp: Ring<u64>,
    free: Vec<u64>,
    /// Zero-copy: the driver sends on its own unless the ring asks for a
    /// kick. Copy mode sends only inside sendto()/poll(), whatever the flag.
    zero_copy: bool,
}

/// sendto() kicks per flush at most: copy mode sends 32 frames per call on
/// kernels without XDP_MAX_TX_SKB_BUDGET, the whole ring with it.
const MAX_KICKS: usize = 64;

impl XskTx {
    /// Takes back the chunks the kernel has sent.
    fn reclaim(&mut self) {
        let n = self.comp.available();
        for k in 0..n {
            let addr = self.comp.get(self.comp.local.wrapping_add(k));
            self.free.push(addr);
        }
        if n > 0 {
            self.comp.local = self.comp.local.wrapping_add(n);
            self.comp.publish_consumer();
        }
    }

    /// Queues one frame; false if no chunk or slot is free (the caller keeps
    /// it queued) or it is larger than a chunk.
    pub fn put(&mut self, frame: &[u8]) -> bool {
        if frame.len() > CHUNK {
            return false;
        }
        if self.free.is_empty() {
            self.reclaim();
        }
        if self.tx.free() == 0 {
            return false;
        }
        let Some(addr) = self.free.pop() else {
            return false;
        };
        // SAFETY: a free TX chunk of ours (not with the kernel), CHUNK bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.shared.umem.ptr.add(addr as usize),
                frame.len(),
            );
        }
        let i = self.tx.local;
        self.tx.set(
            i,
            XdpDesc {
                addr,
                len: frame.len() as u32,
                options: 0,
            },
        );
        self.tx.local = i.wrapping_add(1);
        true
    }

    /// Hands the queued frames to the kernel. In copy mode each sendto()
    /// sends a bounded batch, so it kicks until the ring is empty or the
    /// device pushes back (the frames then go with the next flush).
    pub fn flush(&mut self) -> io::Result<()> {
        self.tx.publish_producer();
        for _ in 0..MAX_KICKS {
            if self.tx.kernel_consumer() == self.tx.local {
                break;
            }
            if self.zero_copy && !self.tx.needs_wakeup() {
                break;
            }
            // SAFETY: a zero-length non-blocking sendto kicks transmission.
            let r = unsafe {
                libc::sendto(
                    self.shared.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                    Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::ENETDOWN) => break,
                    _ => return Err(e),
                }
            }
        }
        self.reclaim();
        Ok(())
    }

    /// Frames written but not yet taken by the kernel.
    pub fn backlog(&self) -> u32 {
        self.tx.local.wrapping_sub(self.tx.kernel_consumer())
    }
}

/// RX queues of an interface (channels), for one socket each.
pub fn rx_queues(ifname: &str) -> u32 {
    // struct ethtool_channels: cmd, max_rx, max_tx, max_other, max_combined,
    // rx_count, tx_count, other_count, combined_count.
    let mut ch = [0u32; 9];
    ch[0] = 0x3c; // ETHTOOL_GCHANNELS
    #[repr(C)]
    struct Ifreq {
        name: [u8; libc::IFNAMSIZ],
        data: *mut libc::c_void,
        _pad: [u8; 16],
    }
    let mut ifr = Ifreq {
        name: [0; libc::IFNAMSIZ],
        data: ch.as_mut_ptr().cast(),
        _pad: [0; 16],
    };
    let n = ifname.len().min(libc::IFNAMSIZ - 1);
    ifr.name[..n].copy_from_slice(&ifname.as_bytes()[..n]);
    // SAFETY: plain socket for the ioctl, closed below.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return 1;
    }
    // SAFETY: ifr and ch outlive the call; SIOCETHTOOL reads/writes them.
    let r = unsafe { libc::ioctl(s, 0x8946, &mut ifr as *mut Ifreq) };
    // SAFETY: our socket.
    unsafe { libc::close(s) };
    if r != 0 {
        // No channel information (driver without get_channels): one queue.
        return 1;
    }
    (ch[5] + ch[8]).max(1)
}
