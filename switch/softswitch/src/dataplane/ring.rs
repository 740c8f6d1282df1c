//! AF_PACKET sockets with PACKET_MMAP TPACKET_V2 rings: the RX ring is read
//! in place (frames are handed back by flipping their status word) and the
//! TX ring is filled and flushed with one `send()` per batch.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context, Result};

use crate::sys::map_shared;

const SOL_PACKET: libc::c_int = 263;
const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_TX_RING: libc::c_int = 13;
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_MR_PROMISC: libc::c_ushort = 1;
const TPACKET_V2: libc::c_int = 1;
const PACKET_FANOUT_HASH: u32 = 0;
const PACKET_OUTGOING: u8 = 4;

const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_SENDING: u32 = 2;
const TP_STATUS_WRONG_FORMAT: u32 = 4;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

pub const FRAME_SIZE: usize = 2048;
/// sizeof(tpacket2_hdr) rounded to TPACKET_ALIGNMENT; TX data starts here
/// (tp_hdrlen - sizeof(sockaddr_ll)).
const TX_DATA_OFF: usize = 32;
const SOCKADDR_LL_OFF: usize = 32;

#[repr(C)]
struct Tpacket2Hdr {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_sec: u32,
    tp_nsec: u32,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
    tp_padding: [u8; 4],
}

#[repr(C)]
struct TpacketReq {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
}

#[repr(C)]
struct PacketMreq {
    mr_ifindex: libc::c_int,
    mr_type: libc::c_ushort,
    mr_alen: libc::c_ushort,
    mr_address: [u8; 8],
}

pub fn ifindex(name: &str) -> Result<i32> {
    let c = CString::new(name)?;
    // SAFETY: c is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        bail!("interface {name:?}: {}", io::Error::last_os_error());
    }
    Ok(idx as i32)
}

fn setsockopt<T>(
    fd: RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    val: &T,
    what: &str,
) -> Result<()> {
    // SAFETY: val points to a live T of the given size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as u32,
        )
    };
    if r != 0 {
        bail!("setsockopt {what}: {}", io::Error::last_os_error());
    }
    Ok(())
}

struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value; access is
// coordinated with the kernel through the per-frame status words.
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from a successful mmap.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

pub struct Ring {
    fd: OwnedFd,
    map: Mapping,
    frames: usize,
    cur: usize,
}

/// One received frame, still in the ring.
pub struct RxFrame<'a> {
    pub data: &'a mut [u8],
    /// Frame was longer than what the ring holds (cut).
    pub truncated: bool,
    /// VLAN tag the kernel took off the frame (to be put back), if any.
    pub vlan: Option<(u16, u16)>,
    pub ts_ns: u64,
}

fn open_socket(protocol: u16) -> Result<OwnedFd> {
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(protocol.to_be())) };
    if fd < 0 {
        bail!(
            "AF_PACKET socket (needs CAP_NET_RAW): {}",
            io::Error::last_os_error()
        );
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind(fd: RawFd, ifindex: i32, protocol: u16) -> Result<()> {
    // SAFETY: zeroed sockaddr_ll is valid; fields set below.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: sll is a valid sockaddr_ll.
    let r = unsafe {
        libc::bind(
            fd,
            &sll as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if r != 0 {
        bail!(
            "bind AF_PACKET to ifindex {ifindex}: {}",
            io::Error::last_os_error()
        );
    }
    Ok(())
}

fn map_ring(fd: RawFd, opt: libc::c_int, frames: usize) -> Result<Mapping> {
    let version = TPACKET_V2;
    setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, "PACKET_VERSION")?;
    let frames_per_block = 32;
    let req = TpacketReq {
        tp_block_size: (FRAME_SIZE * frames_per_block) as u32,
        tp_block_nr: frames.div_ceil(frames_per_block) as u32,
        tp_frame_size: FRAME_SIZE as u32,
        tp_frame_nr: (frames.div_ceil(frames_per_block) * frames_per_block) as u32,
    };
    setsockopt(fd, SOL_PACKET, opt, &req, "PACKET_RX/TX_RING")?;
    let len = (req.tp_block_size * req.tp_block_nr) as usize;
    let ptr = map_shared(fd, len).map_err(|e| anyhow::anyhow!("mmap packet ring: {e}"))?;
    Ok(Mapping { ptr, len })
}

impl Ring {
    /// RX ring on `ifname`, promiscuous, ignoring our own transmissions, in
    /// fanout group `fanout` (one socket per worker shares the port's flows by hash).
    pub fn rx(ifname: &str, frames: usize, fanout: Option<u16>) -> Result<Ring> {
        let idx = ifindex(ifname)?;
        let fd = open_socket(libc::ETH_P_ALL as u16)?;
        let raw = fd.as_raw_fd();
        let map = map_ring(raw, PACKET_RX_RING, frames)
            .with_context(|| format!("RX ring on {ifname}"))?;
        bind(raw, idx, libc::ETH_P_ALL as u16)?;
        let one: libc::c_int = 1;
        // Older kernels lack it; outgoing frames are also skipped by pkttype below.
        let _ = setsockopt(
            raw,
            SOL_PACKET,
            PACKET_IGNORE_OUTGOING,
            &one,
            "PACKET_IGNORE_OUTGOING",
        );
        let mreq = PacketMreq {
            mr_ifindex: idx,
            mr_type: PACKET_MR_PROMISC,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        setsockopt(
            raw,
            SOL_PACKET,
            PACKET_ADD_MEMBERSHIP,
            &mreq,
            "PACKET_MR_PROMISC",
        )?;
        if let Some(group) = fanout {
            let arg: u32 = u32::from(group) | (PACKET_FANOUT_HASH << 16);
            setsockopt(raw, SOL_PACKET, PACKET_FANOUT, &arg, "PACKET_FANOUT")?;
        }
        let frames = map.len / FRAME_SIZE;
        Ok(Ring {
            fd,
            map,
            frames,
            cur: 0,
        })
    }

    /// TX ring on `ifname` (receives nothing: protocol 0), bypassing the qdisc:
    /// the switch's own egress FIFO is the queue.
    pub fn tx(ifname: &str, frames: usize) -> Result<Ring> {
        let idx = ifindex(ifname)?;
        let fd = open_socket(0)?;
        let raw = fd.as_raw_fd();
        let one: libc::c_int = 1;
        setsockopt(
            raw,
            SOL_PACKET,
            PACKET_QDISC_BYPASS,
            &one,
            "PACKET_QDISC_BYPASS",
        )?;
        let map = map_ring(raw, PACKET_TX_RING, frames)
            .with_context(|| format!("TX ring on {ifname}"))?;
        bind(raw, idx, 0)?;
        let frames = map.len / FRAME_SIZE;
        Ok(Ring {
            fd,
            map,
            frames,
            cur: 0,
        })
    }

    /// Frames the kernel dropped because this RX ring was full, since the last call.
    pub fn rx_drops(&self) -> u64 {
        let mut st = [0u32; 2]; // struct tpacket_stats { tp_packets, tp_drops }
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // SAFETY: st is a writable buffer of len bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd(),
                SOL_PACKET,
                PACKET_STATISTICS,
                st.as_mut_ptr() as *mut libc::c_void,
                &mut len,
            )
        };
        if r == 0 {
            u64::from(st[1])
        } else {
            0
        }
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    #[inline]
    fn hdr(&self, i: usize) -> *mut Tpacket2Hdr {
        // SAFETY: i < frames, so the frame lies inside the mapping.
        unsafe { self.map.ptr.add(i * FRAME_SIZE) as *mut Tpacket2Hdr }
    }

    #[inline]
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: tp_status is the first, 4-byte aligned field of the frame header.
        unsafe { &*(self.hdr(i) as *const AtomicU32) }
    }

    /// Next received frame, if any. Call `rx_release` when done with it.
    #[inline]
    pub fn rx_next(&mut self) -> Option<RxFrame<'_>> {
        loop {
            let st = self.status(self.cur).load(Ordering::Acquire);
            if st & TP_STATUS_USER == 0 {
                return None;
            }
            // SAFETY: the kernel handed this frame to us (TP_STATUS_USER).
            let h = unsafe { &*self.hdr(self.cur) };
            // SAFETY: sockaddr_ll follows the header; sll_pkttype is at byte 10 of it.
            let pkttype = unsafe {
                *self
                    .map
                    .ptr
                    .add(self.cur * FRAME_SIZE + SOCKADDR_LL_OFF + 10)
            };
            let (mac, snap) = (h.tp_mac as usize, h.tp_snaplen as usize);
            if pkttype == PACKET_OUTGOING || mac + snap > FRAME_SIZE {
                self.rx_release();
                continue;
            }
            let vlan = (st & TP_STATUS_VLAN_VALID != 0).then(|| {
                let tpid = if st & TP_STATUS_VLAN_TPID_VALID != 0 {
                    h.tp_vlan_tpid
                } else {
                    0x8100
                };
                (tpid, h.tp_vlan_tci)
            });
            let ts_ns = u64::from(h.tp_sec) * 1_000_000_000 + u64::from(h.tp_nsec);
            let truncated = h.tp_len as usize > snap;
            // SAFETY: mac+snap is within this frame (checked above) and the frame is ours until released.
            let data = unsafe {
                std::slice::from_raw_parts_mut(self.map.ptr.add(self.cur * FRAME_SIZE + mac), snap)
            };
            return Some(RxFrame {
                data,
                truncated,
                vlan,
                ts_ns,
            });
        }
    }

    #[inline]
    pub fn rx_release(&mut self) {
        self.status(self.cur)
            .store(TP_STATUS_KERNEL, Ordering::Release);
        self.cur = (self.cur + 1) % self.frames;
    }

    /// Room for one more frame in the TX ring?
    #[inline]
    pub fn tx_free(&self) -> bool {
        let st = self.status(self.cur).load(Ordering::Acquire);
        st & (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING) == 0
    }

    /// Queues one frame; false if the ring is full or the frame too large.
    #[inline]
    pub fn tx_put(&mut self, data: &[u8]) -> bool {
        if !self.tx_free() || data.len() > FRAME_SIZE - TX_DATA_OFF {
            return false;
        }
        let base = self.cur * FRAME_SIZE;
        // SAFETY: the frame is free (not owned by the kernel) and data fits.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.map.ptr.add(base + TX_DATA_OFF),
                data.len(),
            );
            (*self.hdr(self.cur)).tp_len = data.len() as u32;
        }
        let st = self.status(self.cur);
        if st.load(Ordering::Relaxed) & TP_STATUS_WRONG_FORMAT != 0 {
            tracing::warn!("TX ring reported a frame in wrong format");
        }
        st.store(TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.cur = (self.cur + 1) % self.frames;
        true
    }

    /// Hands queued TX frames to the kernel.
    pub fn tx_flush(&self) -> io::Result<()> {
        // SAFETY: send with a NULL buffer is how TX rings are kicked.
        let r = unsafe { libc::send(self.fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::WouldBlock && e.raw_os_error() != Some(libc::ENOBUFS) {
                return Err(e);
            }
        }
        Ok(())
    }
}
