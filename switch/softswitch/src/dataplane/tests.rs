//! The data plane on real veth pairs, on AF_XDP and on AF_PACKET, and the
//! choice between them. Each test runs in a network namespace of its own
//! (root, as the rest of the suite's packet tests): `sN` are the switch's
//! ports, `pN` their peers, where the test sends and receives.

use std::process::Command;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::config::{Args, Config, UserIo, XdpMode};
use crate::fastpath::FastPath;
use crate::packet::testpkt::{rtp, Udp4};
use crate::pipeline::tests::{install_call, meta, setup, RELAY, UAC};
use crate::schema::Reg;

/// Runs `f` on a thread in a fresh network namespace (threads it starts
/// inherit it; it goes away with them).
fn in_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // SAFETY: unshare affects only this thread's namespaces.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "unshare(CLONE_NEWNET) (the Rust tests run as root)");
        f()
    })
    .join()
    .expect("test thread")
}

fn ip(args: &str) {
    let st = Command::new("ip")
        .args(args.split_whitespace())
        .status()
        .expect("run ip");
    assert!(st.success(), "ip {args}");
}

/// Ports 1 and 2: veth pairs s1/p1 and s2/p2 (`extra`: more `ip link add` options).
fn veths(extra: &str) {
    ip("link set lo up");
    for i in 1..=2 {
        ip(&format!("link add s{i} {extra} type veth peer name p{i}"));
        ip(&format!("link set s{i} up"));
        ip(&format!("link set p{i} up"));
    }
}

fn config(io: UserIo) -> Config {
    Config::resolve(&Args {
        port: vec!["1=s1".into(), "2=s2".into()],
        user_io: Some(io),
        workers: Some(2),
        rx_ring_frames: Some(256),
        queue_depth: Some(256),
        ..Args::default()
    })
    .expect("config")
}

/// The XDP program (no fast path: it only redirects) on s1 and s2.
fn program() -> Arc<FastPath> {
    let fp = Arc::new(FastPath::load(XdpMode::Off, 1, 1, 8000, 4).expect("load the XDP program"));
    for (port, ifname) in [(1, "s1"), (2, "s2")] {
        fp.attach(port, ifname, XdpMode::Generic)
            .expect("attach generic XDP to veth");
    }
    fp
}

/// `n` RTP frames of the call's RTP flow (install_call: relayed to port 2).
fn frames(n: u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|seq| {
            Udp4 {
                src: UAC,
                dst: RELAY,
                sport: 4000,
                dport: 20000,
                payload: rtp(0, seq, 160 * u32::from(seq), 160),
                ..Udp4::default()
            }
            .build()
        })
        .collect()
}

/// Sends `frames` into port 1 (from p1) and returns what leaves port 2 (at
/// p2) within a second of the last one arriving.
fn relay_through(frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut rx = Ring::rx("p2", 1024, None).expect("RX ring on p2");
    let mut tx = Ring::tx("p1", 512).expect("TX ring on p1");
    // 16 every 5 ms (3.2 kpps): a burst never outruns the egress queue.
    for chunk in frames.chunks(16) {
        for f in chunk {
            assert!(tx.tx_put(f));
        }
        tx.tx_flush().expect("send");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut got = Vec::new();
    let mut last = Instant::now();
    while last.elapsed() < Duration::from_secs(1) && got.len() < frames.len() {
        match rx.rx_next() {
            Some(f) => {
                // Only the relayed flow (the kernel may send its own frames).
                if f.data.len() > 36 && f.data[36..38] == 6000u16.to_be_bytes() {
                    got.push(f.data.to_vec());
                }
                rx.rx_release();
                last = Instant::now();
            }
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    got
}

/// The same frames through a reference pipeline: what must leave port 2.
fn expected(frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let (r, _) = setup();
    install_call(&r);
    frames
        .iter()
        .map(|f| {
            let mut w = f.clone();
            let (v, _) = r.ingress(&mut w, &meta(5));
            assert_eq!(v, Verdict::Forward(2));
            w
        })
        .collect()
}

/// Relays 300 RTP frames (through a shaped port's FIFO when `rate_bps` > 0)
/// and checks the frames, the counters and the quality registers.
fn relay_on(io: UserIo, rate_bps: u64) -> Io {
    in_netns(move || {
        veths("");
        let fp = program();
        let (p, _) = setup();
        install_call(&p);
        let p = Arc::new(p);
        let map: &dyn XskMap = fp.as_ref();
        let dp = Dataplane::start(&config(io), p.clone(), Ok(map)).expect("data plane");
        let out = dp.port(2).expect("port 2");
        out.stats.egress.rate_bps.store(rate_bps, Relaxed);
        let sent = frames(300);
        let got = relay_through(&sent);
        let io = dp.io;
        assert_eq!(got.len(), sent.len(), "{io:?}: relayed frames");
        assert_eq!(
            got,
            expected(&sent),
            "{io:?}: frames as the pipeline makes them"
        );
        let inp = dp.port(1).expect("port 1");
        assert!(inp.stats.rx_packets.load(Relaxed) >= 300);
        assert_eq!(out.stats.egress.tx_packets.load(Relaxed), 300);
        assert_eq!(out.stats.egress.tail_drops.load(Relaxed), 0);
        if rate_bps > 0 {
            // Shaped below the offered rate: the packets waited in the FIFO.
            let cells = out.stats.egress.watermark_cells.load(Relaxed);
            assert!(cells > 10 * 3, "watermark {cells} cells");
        }
        // Quality registers: every packet departed its queue, none lost.
        assert_eq!(p.quality.read(Reg::Packets, 7), Some(300));
        assert_eq!(p.quality.lost(7), Some(0));
        assert_eq!(p.quality.read(Reg::MaxSeq, 7), Some(299));
        dp.stop();
        io
    })
}

#[test]
fn af_xdp_relays_frames_as_the_pipeline_makes_them() {
    assert_eq!(relay_on(UserIo::AfXdp, 0), Io::AfXdp(XskMode::Copy));
}

#[test]
fn af_xdp_through_a_shaped_port_keeps_fifo_and_quality_registers() {
    // 5 Mbit/s under 6 Mbit/s offered: a queue of up to ~50 frames builds.
    assert_eq!(relay_on(UserIo::Auto, 5_000_000), Io::AfXdp(XskMode::Copy));
}

#[test]
fn af_packet_when_forced() {
    assert_eq!(relay_on(UserIo::AfPacket, 0), Io::AfPacket);
}

/// A port AF_XDP cannot serve (more RX queues than the `xsks` map holds):
/// auto falls back to AF_PACKET with every socket unregistered, af-xdp fails.
#[test]
fn af_xdp_falls_back_to_af_packet_where_it_cannot_bind() {
    in_netns(|| {
        veths("numrxqueues 65");
        let fp = program();
        let (p, _) = setup();
        let p = Arc::new(p);
        let map: &dyn XskMap = fp.as_ref();
        let e = Dataplane::start(&config(UserIo::AfXdp), p.clone(), Ok(map))
            .err()
            .expect("forced AF_XDP must fail");
        assert!(format!("{e:#}").contains("65 RX queues"), "{e:#}");
        let dp = Dataplane::start(&config(UserIo::Auto), p, Ok(map)).expect("fallback");
        assert_eq!(dp.io, Io::AfPacket);
        dp.stop();
    });
}

#[test]
fn the_choice_follows_the_flag_and_the_program() {
    in_netns(|| {
        let fp = program_without_ports();
        let map: &dyn XskMap = fp.as_ref();
        let no: Result<&dyn XskMap, String> = Err("XDP not attached to port 1".into());
        assert_eq!(choose_io(UserIo::Auto, &Ok(map)).unwrap(), None);
        assert_eq!(choose_io(UserIo::AfXdp, &Ok(map)).unwrap(), None);
        assert_eq!(
            choose_io(UserIo::Auto, &no).unwrap().as_deref(),
            Some("XDP not attached to port 1")
        );
        assert!(choose_io(UserIo::AfXdp, &no).is_err());
        assert!(choose_io(UserIo::AfPacket, &Ok(map)).unwrap().is_some());
        assert!(choose_io(UserIo::AfPacket, &no).unwrap().is_some());
    });
}

fn program_without_ports() -> Arc<FastPath> {
    Arc::new(FastPath::load(XdpMode::Off, 1, 1, 8000, 4).expect("load the XDP program"))
}

/// Copy mode sends only inside sendto(): a flush hands every queued frame to
/// the kernel at once, not when the worker next polls.
#[test]
fn af_xdp_flush_sends_every_queued_frame() {
    in_netns(|| {
        veths("");
        let ifindex = ring::ifindex("s2").expect("s2") as u32;
        let (_rx, mut tx, mode) = xsk::open("s2", ifindex, 0, 64, false).expect("AF_XDP socket");
        assert_eq!(mode, XskMode::Copy);
        let mut peer = Ring::rx("p2", 1024, None).expect("RX ring on p2");
        let sent = frames(300);
        for f in &sent {
            assert!(tx.put(f));
        }
        tx.flush().expect("flush");
        assert_eq!(tx.backlog(), 0, "frames left in the TX ring");
        let mut got = 0;
        while let Some(f) = peer.rx_next() {
            got += usize::from(f.data.len() == sent[0].len());
            peer.rx_release();
        }
        assert_eq!(got, 300);
    });
}
