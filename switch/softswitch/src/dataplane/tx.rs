//! Port transmission with `sendmmsg()` on an AF_PACKET socket (qdisc bypassed):
//! frames leaving the egress FIFO are staged in a fixed ring of slots and handed
//! to the kernel with one system call per batch. Unlike a PACKET_TX_RING, the
//! kernel copies each frame into a linear skb, which is cheaper for small RTP
//! frames than a ring frame's page fragments (veth and the receiving stack copy
//! those again). Frames the kernel does not take (ENOBUFS, EAGAIN, link down)
//! stay staged and are retried at the next flush; a full stage refuses `put`,
//! so the egress FIFO keeps them and tail-drops, as with a full TX ring.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use anyhow::{Context, Result};

use super::egress::TxSink;
use super::ring::{self, FRAME_SIZE};

pub struct MsgTx {
    fd: OwnedFd,
    ifname: String,
    buf: Vec<u8>,
    lens: Vec<u16>,
    head: usize,
    len: usize,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    /// Frames the kernel refused for good (too long for the link's MTU).
    pub refused: u64,
}

// SAFETY: the iovec/mmsghdr arrays only ever point into `buf`, owned by this
// value, and are rebuilt before every use.
unsafe impl Send for MsgTx {}

impl MsgTx {
    pub fn open(ifname: &str, slots: usize) -> Result<MsgTx> {
        let fd = ring::tx_socket().with_context(|| format!("TX socket on {ifname}"))?;
        ring::bind(fd.as_raw_fd(), ring::ifindex(ifname)?, 0)?;
        Ok(MsgTx {
            fd,
            ifname: ifname.to_string(),
            buf: vec![0; slots * FRAME_SIZE],
            lens: vec![0; slots],
            head: 0,
            len: 0,
            // SAFETY: all-zero iovec and mmsghdr are valid values.
            iov: vec![unsafe { std::mem::zeroed() }; slots],
            msgs: vec![unsafe { std::mem::zeroed() }; slots],
            refused: 0,
        })
    }

    fn slots(&self) -> usize {
        self.lens.len()
    }

    /// Frames staged but not yet taken by the kernel.
    pub fn staged(&self) -> usize {
        self.len
    }

    /// One sendmmsg() over the contiguous run of staged frames starting at
    /// head; returns how many the kernel took.
    fn send_run(&mut self) -> io::Result<usize> {
        let run = self.len.min(self.slots() - self.head);
        for k in 0..run {
            let i = self.head + k;
            self.iov[k] = libc::iovec {
                // SAFETY: slot i lies inside buf.
                iov_base: unsafe { self.buf.as_mut_ptr().add(i * FRAME_SIZE) } as *mut libc::c_void,
                iov_len: usize::from(self.lens[i]),
            };
            let h = &mut self.msgs[k].msg_hdr;
            h.msg_iov = &mut self.iov[k];
            h.msg_iovlen = 1;
        }
        // SAFETY: msgs[..run] point at iovecs into buf, all live for the call.
        let r = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                self.msgs.as_mut_ptr(),
                run as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }

    fn pop(&mut self, n: usize) {
        self.head = (self.head + n) % self.slots();
        self.len -= n;
    }
}

impl TxSink for MsgTx {
    #[inline]
    fn put(&mut self, frame: &[u8]) -> bool {
        if self.len == self.slots() || frame.len() > FRAME_SIZE {
            return false;
        }
        let i = (self.head + self.len) % self.slots();
        self.buf[i * FRAME_SIZE..i * FRAME_SIZE + frame.len()].copy_from_slice(frame);
        self.lens[i] = frame.len() as u16;
        self.len += 1;
        true
    }

    fn flush(&mut self) {
        while self.len > 0 {
            match self.send_run() {
                Ok(0) => break,
                Ok(n) => self.pop(n),
                Err(e) => match e.raw_os_error() {
                    // Kernel or device busy, link down: keep the frames, retry later.
                    Some(libc::EAGAIN | libc::ENOBUFS | libc::ENETDOWN | libc::ENXIO) => break,
                    // This frame can never go (longer than the MTU): drop it, go on.
                    Some(libc::EMSGSIZE | libc::EINVAL) => {
                        self.refused += 1;
                        if self.refused.is_power_of_two() {
                            tracing::warn!(ifname = %self.ifname, refused = self.refused, error = %e,
                                "egress frame refused by the interface");
                        }
                        self.pop(1);
                    }
                    _ => {
                        tracing::warn!(ifname = %self.ifname, error = %e, "sendmmsg failed");
                        break;
                    }
                },
            }
        }
    }
}
