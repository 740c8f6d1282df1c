//! Helpers for scripts/bench-stages/10-softswitch.sh (not part of the switch):
//!
//! - `frames`:  writes a trafgen config of G.711 RTP frames (214 bytes) for N flows
//! - `send`:    paced sender: RTP frames at a fixed rate in 1 ms slots (each
//!   slot's frames in one TX-ring flush), optionally timestamped (latency
//!   probe); reports what it sent and its own CPU time
//! - `recv`:    counts RTP frames arriving on an interface; latency percentiles
//!   and its own CPU time
//! - `program`: installs routes and N relay calls in a softswitch over BfRt gRPC
//! - `insert`:  inserts N sessions (4 relay + 2 leg_rewrite entries each) in
//!   batches over BfRt gRPC and reports the rate
//!
//! `--ipv6` (send, frames, program): the same flows and calls over IPv6, each
//! IPv4 address a.b.c.d standing for fd00:7034:7262::a.b.c.d (`v6_of`);
//! frames are 20 bytes longer (234: the IPv6 header is 40 bytes). `recv`
//! counts either family.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use p4relay_softswitch::contract::CONTRACT;
use p4relay_softswitch::dataplane::ring::Ring;
use p4relay_softswitch::grpc::codec::{
    action_data, df_int128, key_exact128, key_lpm128, key_of, key_range,
};
use p4relay_softswitch::grpc::pb::{self, bf_runtime_client::BfRuntimeClient};
use p4relay_softswitch::packet::{fold, ipv4_checksum, ones_sum, wr16, wr32};
use p4relay_softswitch::schema::{Schema, TableSchema};
use p4relay_softswitch::sys::{now_mono_ns, now_real_ns, sleep_until};

/// RTP payload bytes: 214-byte frames = 14 Ethernet + 20 IPv4 + 8 UDP + 12 RTP + 160.
const G711_PAYLOAD: usize = 160;
const MAGIC: u32 = 0x7034_7262; // "p4rb": marks probe frames carrying a send timestamp
/// fd00:7034:7262::/96: IPv4 address a.b.c.d as IPv6 (`--ipv6`).
const V6_PREFIX: u128 = 0xfd00_7034_7262 << 80;

fn v6_of(ip: u32) -> u128 {
    V6_PREFIX | u128::from(ip)
}

#[derive(Parser)]
#[command(about = "p4relay softswitch benchmark helpers")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct Flow {
    #[arg(long)]
    src_mac: String,
    #[arg(long)]
    dst_mac: String,
    #[arg(long)]
    src: Ipv4Addr,
    #[arg(long)]
    dst: Ipv4Addr,
    /// First source port; flow i uses sport + 2i (within its --src-block)
    #[arg(long)]
    sport: u16,
    /// First destination port; flow i uses dport + STEP*i (within its
    /// --dst-block; STEP is --dport-step), or the i-th of --dports
    #[arg(long)]
    dport: u16,
    /// Explicit destination ports, comma separated (e.g. RTPProxy's allocations)
    #[arg(long, value_delimiter = ',')]
    dports: Vec<u16>,
    /// Explicit destination ports, one per line (for more flows than a command line holds)
    #[arg(long)]
    dports_file: Option<std::path::PathBuf>,
    #[arg(long, default_value_t = 1)]
    flows: u32,
    /// Flows per source address: flow i is from src + i / N, port sport + 2 (i % N)
    #[arg(long, default_value_t = 1 << 15)]
    src_block: u32,
    /// Flows per destination address: flow i is to dst + i / N
    #[arg(long, default_value_t = 1 << 15)]
    dst_block: u32,
    #[arg(long, default_value_t = 2)]
    dport_step: u16,
    /// The same flows over IPv6 (addresses through `v6_of`)
    #[arg(long)]
    ipv6: bool,
}

impl Flow {
    /// Reads --dports-file into --dports; checks that every flow has its ports.
    fn resolve(mut self) -> Result<Flow> {
        if let Some(path) = &self.dports_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--dports-file {}", path.display()))?;
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let p = line.trim().parse::<u16>().with_context(|| {
                    format!("--dports-file {}: {line:?} is not a port", path.display())
                })?;
                self.dports.push(p);
            }
        }
        if self.src_block == 0 || self.dst_block == 0 || self.dport_step == 0 {
            bail!("--src-block, --dst-block and --dport-step must be positive");
        }
        // The highest port any flow uses, unwrapped.
        let n = self.flows.saturating_sub(1);
        let top = |first: u16, step: u16, block: u32| {
            u64::from(first) + u64::from(step) * u64::from(n.min(block - 1))
        };
        if top(self.sport, 2, self.src_block) > 65535
            || (self.dports.len() < self.flows as usize
                && top(self.dport, self.dport_step, self.dst_block) > 65535)
        {
            bail!("ports beyond 65535: use smaller --src-block/--dst-block or fewer flows");
        }
        Ok(self)
    }

    /// (source address, source port, destination address, destination port) of flow i.
    fn endpoints(&self, i: u32) -> (Ipv4Addr, u16, Ipv4Addr, u16) {
        let (sb, db) = (self.src_block.max(1), self.dst_block.max(1));
        let src = Ipv4Addr::from(u32::from(self.src).wrapping_add(i / sb));
        let sport = self.sport.wrapping_add((2 * (i % sb)) as u16);
        let (dst, dport) = match self.dports.get(i as usize) {
            Some(&d) => (self.dst, d),
            None => (
                Ipv4Addr::from(u32::from(self.dst).wrapping_add(i / db)),
                self.dport
                    .wrapping_add(self.dport_step.wrapping_mul((i % db) as u16)),
            ),
        };
        (src, sport, dst, dport)
    }
}

/// Where call c's endpoints are (`program`'s layout, which the bench's
/// senders follow with --src-block CALL_BLOCK --dst-block RELAY_BLOCK):
/// A and B at (ip + c / CALL_BLOCK, port + 2 (c % CALL_BLOCK)), the relay
/// ports at (relay + c / RELAY_BLOCK, 20000 + 4 (c % RELAY_BLOCK)) and + 2.
const CALL_BLOCK: u32 = 16384;
const RELAY_BLOCK: u32 = 8192;

struct CallEnds {
    a: (u32, u16),
    b: (u32, u16),
    relay: u32,
    ra: u16,
    rb: u16,
}

fn call_ends(c: u32, a: (Ipv4Addr, u16), b: (Ipv4Addr, u16), relay: Ipv4Addr) -> CallEnds {
    let at = |ip: Ipv4Addr, port: u16| {
        (
            u32::from(ip) + c / CALL_BLOCK,
            port.wrapping_add((2 * (c % CALL_BLOCK)) as u16),
        )
    };
    let ra = 20000 + (4 * (c % RELAY_BLOCK)) as u16;
    CallEnds {
        a: at(a.0, a.1),
        b: at(b.0, b.1),
        relay: u32::from(relay) + c / RELAY_BLOCK,
        ra,
        rb: ra + 2,
    }
}

#[derive(Subcommand)]
enum Cmd {
    Frames {
        #[command(flatten)]
        flow: Flow,
    },
    Send {
        #[arg(long)]
        ifname: String,
        #[command(flatten)]
        flow: Flow,
        #[arg(long, default_value_t = 1000)]
        pps: u32,
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
        /// Pacing slot: each slot sends the frames due by its end in one flush
        #[arg(long, default_value_t = 1000)]
        slot_us: u64,
        /// Stamp every frame with its send time (latency probe)
        #[arg(long)]
        stamp: bool,
    },
    Recv {
        #[arg(long)]
        ifname: String,
        #[arg(long)]
        secs: f64,
        /// Count UDP frames with destination port in [dport_min, dport_max]
        #[arg(long)]
        dport_min: u16,
        #[arg(long)]
        dport_max: u16,
        /// Stop once no counted frame arrived for this long (after the first one)
        #[arg(long, default_value_t = 1.0)]
        idle_stop: f64,
    },
    Program {
        #[arg(long, default_value = "http://127.0.0.1:50052")]
        grpc: String,
        /// Calls: A (a_ip:a_port+2i) <-> relay (relay_ip:20000+4i / 20002+4i) <-> B (b_ip:b_port+2i),
        /// the addresses stepping up every 16,384 calls (the relay's every 8,192)
        #[arg(long)]
        calls: u32,
        #[arg(long)]
        a_ip: Ipv4Addr,
        #[arg(long)]
        a_port: u16,
        #[arg(long)]
        b_ip: Ipv4Addr,
        #[arg(long)]
        b_port: u16,
        #[arg(long)]
        relay_ip: Ipv4Addr,
        /// Next hops: PORT,SRC_MAC,DST_MAC,PREFIX/LEN (repeatable)
        #[arg(long)]
        route: Vec<String>,
        /// The calls over IPv6 (relay6, leg_rewrite6, relay6_addr; each
        /// route's prefix through `v6_of` too)
        #[arg(long)]
        ipv6: bool,
    },
    Insert {
        #[arg(long, default_value = "http://127.0.0.1:50052")]
        grpc: String,
        #[arg(long)]
        sessions: u32,
        #[arg(long, default_value_t = 1000)]
        batch: usize,
    },
}

fn parse_mac(s: &str) -> Result<[u8; 6]> {
    let v: Vec<u8> = s
        .split(':')
        .map(|x| u8::from_str_radix(x, 16))
        .collect::<Result<_, _>>()
        .with_context(|| format!("MAC {s}"))?;
    v.try_into()
        .map_err(|_| anyhow::anyhow!("MAC {s}: need 6 bytes"))
}

/// One 214-byte G.711 RTP frame with valid IPv4 and UDP checksums (234
/// bytes over IPv6, `--ipv6`).
fn rtp_frame(f: &Flow, i: u32, seq: u16, stamp_ns: Option<u64>) -> Result<Vec<u8>> {
    let (src, sport, dst, dport) = f.endpoints(i);
    let mut b = Vec::with_capacity(234);
    b.extend_from_slice(&parse_mac(&f.dst_mac)?);
    b.extend_from_slice(&parse_mac(&f.src_mac)?);
    if f.ipv6 {
        b.extend_from_slice(&[0x86, 0xdd]);
        let (s6, d6) = (v6_of(u32::from(src)), v6_of(u32::from(dst)));
        let len = 8 + 12 + G711_PAYLOAD;
        // version 6, traffic class 0xb8 (EF, as the IPv4 frames), no flow label
        let mut ip = [0u8; 40];
        ip[0] = 0x6b;
        ip[1] = 0x80;
        wr16(&mut ip, 4, len as u16);
        ip[6] = 17;
        ip[7] = 64;
        ip[8..24].copy_from_slice(&s6.to_be_bytes());
        ip[24..40].copy_from_slice(&d6.to_be_bytes());
        b.extend_from_slice(&ip);
        let mut udp = rtp_udp(i, sport, dport, seq, stamp_ns);
        let pseudo = ones_sum(&ip[8..40]) + 17 + udp.len() as u32;
        let c = !fold(pseudo + ones_sum(&udp));
        wr16(&mut udp, 6, if c == 0 { 0xffff } else { c });
        b.extend_from_slice(&udp);
        return Ok(b);
    }
    b.extend_from_slice(&[0x08, 0x00]);
    let total = 20 + 8 + 12 + G711_PAYLOAD;
    let mut ip = [
        0x45, 0xb8, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    wr16(&mut ip, 2, total as u16);
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let c = ipv4_checksum(&ip);
    wr16(&mut ip, 10, c);
    b.extend_from_slice(&ip);
    let mut udp = rtp_udp(i, sport, dport, seq, stamp_ns);
    let pseudo = ones_sum(&src.octets()) + ones_sum(&dst.octets()) + 17 + udp.len() as u32;
    let c = !fold(pseudo + ones_sum(&udp));
    wr16(&mut udp, 6, if c == 0 { 0xffff } else { c });
    b.extend_from_slice(&udp);
    Ok(b)
}

/// The UDP datagram of flow i's RTP packet `seq`, checksum 0.
fn rtp_udp(i: u32, sport: u16, dport: u16, seq: u16, stamp_ns: Option<u64>) -> Vec<u8> {
    let mut udp = vec![0u8; 8 + 12 + G711_PAYLOAD];
    wr16(&mut udp, 0, sport);
    wr16(&mut udp, 2, dport);
    wr16(&mut udp, 4, (8 + 12 + G711_PAYLOAD) as u16);
    udp[8] = 0x80;
    udp[9] = 8; // PCMA
    wr16(&mut udp, 10, seq);
    wr32(&mut udp, 12, u32::from(seq).wrapping_mul(160));
    wr32(&mut udp, 16, 0x1234_0000 ^ i); // SSRC
    udp[20..].fill(0xd5);
    if let Some(ns) = stamp_ns {
        wr32(&mut udp, 20, MAGIC);
        udp[24..32].copy_from_slice(&ns.to_be_bytes());
    }
    udp
}

fn frames(f: &Flow) -> Result<()> {
    println!(
        "/* p4relay bench: {} G.711 RTP flows, 214-byte frames */",
        f.flows
    );
    for i in 0..f.flows {
        let fr = rtp_frame(f, i, 1, None)?;
        let hex: Vec<String> = fr.iter().map(|b| format!("0x{b:02x}")).collect();
        println!("{{ {} }}", hex.join(", "));
    }
    Ok(())
}

/// On-CPU time of every thread of this process, ns (exact, from the
/// scheduler: /proc/self/task/*/schedstat; softirq work done on our time
/// is included, as this kernel has no separate IRQ time accounting).
fn own_cpu_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Most frames one TX-ring flush sends.
const FLUSH_MAX: usize = 256;

/// Paced sender: slot k (of `slot_us`) sends the frames due by its end, so the
/// offered rate holds at the 1 ms scale (no burst then silence). If the host
/// stalls the sender, the next slot catches up and the stall is reported.
fn send(ifname: &str, f: &Flow, pps: u32, secs: f64, slot_us: u64, stamp: bool) -> Result<()> {
    if pps == 0 || slot_us == 0 || secs <= 0.0 {
        bail!("--pps, --slot-us and --secs must be positive");
    }
    let per_slot = (u64::from(pps) * slot_us).div_ceil(1_000_000) as usize;
    let mut ring = Ring::tx(ifname, (per_slot * 16).clamp(1024, 65536))?;
    let n = (f64::from(pps) * secs) as u64;
    let prebuilt: Vec<Vec<u8>> = (0..f.flows)
        .map(|i| rtp_frame(f, i, 1, None))
        .collect::<Result<_>>()?;
    let slot_ns = slot_us * 1000;
    let cpu0 = own_cpu_ns();
    let t0 = now_mono_ns();
    let (mut sent, mut late_slots, mut ring_full, mut max_lag_ns) = (0u64, 0u64, 0u64, 0u64);
    let mut k = 0u64;
    while sent < n {
        let due_at = t0 + k * slot_ns;
        let now = now_mono_ns();
        if now < due_at {
            sleep_until(due_at);
        } else if now - due_at > slot_ns {
            // Started more than a slot late: the host did not run us in time.
            late_slots += 1;
            max_lag_ns = max_lag_ns.max(now - due_at);
        }
        // Frames due by the end of this slot, by elapsed time (catches up after a stall).
        let elapsed = now_mono_ns().saturating_sub(t0);
        let due = (u128::from(pps) * u128::from(elapsed + slot_ns) / 1_000_000_000)
            .min(u128::from(n)) as u64;
        let mut batch = 0;
        while sent < due {
            if batch == FLUSH_MAX {
                // A catch-up burst goes out in slot-sized flushes, so the
                // receiving CPU's backlog (netdev_max_backlog) is not what
                // overflows after a stall of the sender.
                ring.tx_flush()?;
                batch = 0;
            }
            let i = (sent % u64::from(f.flows)) as u32;
            let ok = if stamp {
                ring.tx_put(&rtp_frame(f, i, sent as u16, Some(now_real_ns()))?)
            } else {
                ring.tx_put(&prebuilt[i as usize])
            };
            if ok {
                sent += 1;
                batch += 1;
            } else {
                // The kernel has not taken the previous flush yet.
                ring_full += 1;
                ring.tx_flush()?;
                std::thread::yield_now();
            }
        }
        ring.tx_flush()?;
        k = (k + 1).max(elapsed / slot_ns + 1);
    }
    let dt = (now_mono_ns() - t0) as f64 / 1e9;
    let cpu = own_cpu_ns().saturating_sub(cpu0);
    println!(
        "{{\"sent\": {sent}, \"seconds\": {dt:.4}, \"achieved_pps\": {:.0}, \"late_slots\": {late_slots}, \"max_lag_us\": {}, \"ring_full\": {ring_full}, \"cpu_ns\": {cpu}}}",
        sent as f64 / dt,
        max_lag_ns / 1000
    );
    Ok(())
}

fn recv(ifname: &str, secs: f64, lo: u16, hi: u16, idle_stop: f64) -> Result<()> {
    // 16K frames hold 16 ms of traffic at 1 Mpps, far more than one 1 ms gathering pass.
    let mut ring = Ring::rx(ifname, 16384, None)?;
    // The ring's setup (allocating and zeroing it) is not per-packet work.
    let cpu0 = own_cpu_ns();
    let mut pfd = libc::pollfd {
        fd: ring.fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let (mut count, mut other) = (0u64, 0u64);
    let mut lat_ns: Vec<u64> = Vec::new();
    let mut last = None::<Instant>;
    while Instant::now() < end && last.is_none_or(|t| t.elapsed().as_secs_f64() < idle_stop) {
        let mut got = false;
        while let Some(fr) = ring.rx_next() {
            got = true;
            let d = &*fr.data;
            let v6 = d.len() >= 62 && d[12..14] == [0x86, 0xdd] && d[20] == 17;
            let ok = v6 || (d.len() >= 42 && d[12..14] == [8, 0] && d[23] == 17);
            // the L3 header's length: IPv4's IHL, or IPv6's fixed 40 bytes
            let ihl = if v6 {
                40
            } else {
                usize::from(d.get(14).copied().unwrap_or(0) & 0xf) * 4
            };
            let dport = if ok && d.len() >= 14 + ihl + 4 {
                u16::from_be_bytes([d[14 + ihl + 2], d[14 + ihl + 3]])
            } else {
                0
            };
            if ok && (lo..=hi).contains(&dport) {
                count += 1;
                last = Some(Instant::now());
                // an INT stack (DSCP 0x17: shim + MD header + hops) sits before RTP
                let shim = 14 + ihl + 8;
                let int_words = if !v6 && d[15] >> 2 == 0x17 && d.len() > shim + 1 {
                    usize::from(d[shim + 1])
                } else {
                    0
                };
                let p = shim + 4 * int_words + 12;
                if d.len() >= p + 12 && d[p..p + 4] == MAGIC.to_be_bytes() {
                    let sent = u64::from_be_bytes(d[p + 4..p + 12].try_into().expect("8 bytes"));
                    lat_ns.push(fr.ts_ns.saturating_sub(sent));
                }
            } else {
                other += 1;
            }
            ring.rx_release();
        }
        if got {
            // While frames flow, gather them 1 ms at a time (the ring holds far
            // more): a wake-up per frame would make the receiver's cost depend
            // on how the device under test spaces its output.
            sleep_until(now_mono_ns() + 1_000_000);
        } else {
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 50) };
        }
    }
    let drops = ring.rx_drops();
    lat_ns.sort_unstable();
    let pct = |q: f64| {
        if lat_ns.is_empty() {
            -1.0
        } else {
            lat_ns[((lat_ns.len() - 1) as f64 * q) as usize] as f64 / 1000.0
        }
    };
    println!(
        "{{\"packets\": {count}, \"other\": {other}, \"ring_drops\": {drops}, \"latency_samples\": {}, \"p50_us\": {:.1}, \"p99_us\": {:.1}, \"cpu_ns\": {}}}",
        lat_ns.len(),
        pct(0.5),
        pct(0.99),
        own_cpu_ns().saturating_sub(cpu0)
    );
    Ok(())
}

struct Session {
    client: BfRuntimeClient<tonic::transport::Channel>,
    _stream_tx: tokio::sync::mpsc::Sender<pb::StreamMessageRequest>,
    client_id: u32,
}

async fn connect(url: &str, client_id: u32) -> Result<Session> {
    let mut client = BfRuntimeClient::connect(url.to_string())
        .await
        .with_context(|| format!("connect {url}"))?;
    client = client
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20);
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tx.send(pb::StreamMessageRequest {
        client_id,
        update: Some(pb::stream_message_request::Update::Subscribe(
            pb::Subscribe {
                device_id: 0,
                notifications: Some(pb::subscribe::Notifications::default()),
                ..Default::default()
            },
        )),
    })
    .await?;
    let mut inbound = client
        .stream_channel(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await?
        .into_inner();
    inbound
        .message()
        .await?
        .context("stream closed before the Subscribe answer")?;
    tokio::spawn(async move { while let Ok(Some(_)) = inbound.message().await {} });
    client
        .set_forwarding_pipeline_config(pb::SetForwardingPipelineConfigRequest {
            device_id: 0,
            client_id,
            action: pb::set_forwarding_pipeline_config_request::Action::Bind as i32,
            config: vec![pb::ForwardingPipelineConfig {
                p4_name: "p4relay".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .await?;
    Ok(Session {
        client,
        _stream_tx: tx,
        client_id,
    })
}

fn entry(t: &TableSchema, key: &[(&str, u64)], action: &str, params: &[(&str, u64)]) -> pb::Update {
    pb::Update {
        r#type: pb::update::Type::Insert as i32,
        entity: Some(pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: t.id,
                value: Some(pb::table_entry::Value::Key(key_of(t, key))),
                data: Some(action_data(t, action, params)),
                ..Default::default()
            })),
        }),
    }
}

/// The 6 entries of one call: legs 2c (A→B) and 2c+1 (B→A), RTP and RTCP;
/// A's packets arrive on dev port 1, B's on 2 (the bench's `--port 1=sa,2=sb`).
fn call_updates(
    s: &Schema,
    c: u32,
    a: (u32, u16),
    b: (u32, u16),
    relay: u32,
    ra: u16,
    rb: u16,
) -> Vec<pb::Update> {
    let relay_t = s.table_by_name("pipe.Ingress.relay").expect("contract");
    let leg_t = s
        .table_by_name("pipe.Ingress.leg_rewrite")
        .expect("contract");
    let (la, lb) = (u64::from(2 * c), u64::from(2 * c + 1));
    let mut v = Vec::with_capacity(6);
    for (from, to_port, leg, in_port) in [(a, ra, la, 1u64), (b, rb, lb, 2)] {
        for rtcp in [0u16, 1] {
            v.push(entry(
                relay_t,
                &[
                    ("hdr.ipv4.src_addr", u64::from(from.0)),
                    ("hdr.ipv4.dst_addr", u64::from(relay)),
                    ("hdr.udp.src_port", u64::from(from.1 + rtcp)),
                    ("hdr.udp.dst_port", u64::from(to_port + rtcp)),
                    ("ig_md.bound_port", in_port),
                ],
                "Ingress.relay_leg",
                &[("leg", leg), ("rtcp", u64::from(rtcp))],
            ));
        }
    }
    let rw = |src_port: u16, dst: (u32, u16)| {
        [
            ("src_addr", u64::from(relay)),
            ("dst_addr", u64::from(dst.0)),
            ("src_port", u64::from(src_port)),
            ("dst_port", u64::from(dst.1)),
        ]
    };
    v.push(entry(
        leg_t,
        &[("ig_md.leg", la)],
        "Ingress.rewrite",
        &rw(rb, b),
    ));
    v.push(entry(
        leg_t,
        &[("ig_md.leg", lb)],
        "Ingress.rewrite",
        &rw(ra, a),
    ));
    v
}

/// Key field `n` of `t` (the contract has it).
fn key<'a>(t: &'a TableSchema, n: &str) -> &'a p4relay_softswitch::schema::KeySchema {
    t.key_by_name(n).expect("contract")
}

/// An entry with 128-bit key fields and parameters.
fn entry6(
    t: &TableSchema,
    key: Vec<pb::KeyField>,
    action: &str,
    params: &[(&str, u128)],
) -> pb::Update {
    let a = t.action_by_name(action).expect("contract action");
    let fields = params
        .iter()
        .map(|(n, v)| {
            let p = a
                .params
                .iter()
                .find(|p| p.name == *n)
                .expect("contract param");
            df_int128(p.id, *v, p.bits)
        })
        .collect();
    pb::Update {
        r#type: pb::update::Type::Insert as i32,
        entity: Some(pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: t.id,
                value: Some(pb::table_entry::Value::Key(pb::TableKey { fields: key })),
                data: Some(pb::TableData {
                    action_id: a.id,
                    fields,
                }),
                ..Default::default()
            })),
        }),
    }
}

/// `call_updates` over IPv6: relay6 on (A or B, relay_id, ports, dev port),
/// leg_rewrite6 from the relay's IPv6 address.
fn call_updates6(s: &Schema, c: u32, e: &CallEnds) -> Vec<pb::Update> {
    let relay_t = s.table_by_name("pipe.Ingress.relay6").expect("contract");
    let leg_t = s
        .table_by_name("pipe.Ingress.leg_rewrite6")
        .expect("contract");
    let relay_id = u128::from(c / RELAY_BLOCK + 1);
    let (la, lb) = (u128::from(2 * c), u128::from(2 * c + 1));
    let mut v = Vec::with_capacity(6);
    for (from, to_port, leg, in_port) in [(e.a, e.ra, la, 1u128), (e.b, e.rb, lb, 2)] {
        for rtcp in [0u16, 1] {
            v.push(entry6(
                relay_t,
                vec![
                    key_exact128(key(relay_t, "hdr.ipv6.src_addr"), v6_of(from.0)),
                    key_exact128(key(relay_t, "ig_md.relay_id"), relay_id),
                    key_exact128(key(relay_t, "hdr.udp.src_port"), u128::from(from.1 + rtcp)),
                    key_exact128(key(relay_t, "hdr.udp.dst_port"), u128::from(to_port + rtcp)),
                    key_exact128(key(relay_t, "ig_md.bound_port"), in_port),
                ],
                "Ingress.relay6_leg",
                &[("leg", leg), ("rtcp", u128::from(rtcp))],
            ));
        }
    }
    for (leg, src_port, dst) in [(la, e.rb, e.b), (lb, e.ra, e.a)] {
        v.push(entry6(
            leg_t,
            vec![key_exact128(key(leg_t, "ig_md.leg6"), leg)],
            "Ingress.rewrite6",
            &[
                ("src_addr", v6_of(e.relay)),
                ("dst_addr", v6_of(dst.0)),
                ("src_port", u128::from(src_port)),
                ("dst_port", u128::from(dst.1)),
            ],
        ));
    }
    v
}

/// A call's 4 relay_guard entries: both relay ports and their RTCP ports,
/// each counting its drops on the leg whose packets arrive there.
fn guard_updates(s: &Schema, c: u32, relay: u32, ra: u16, rb: u16) -> Vec<pb::Update> {
    let guard_t = s
        .table_by_name("pipe.Ingress.relay_guard")
        .expect("contract");
    let (la, lb) = (u64::from(2 * c), u64::from(2 * c + 1));
    [(ra, la), (ra + 1, la), (rb, lb), (rb + 1, lb)]
        .into_iter()
        .map(|(port, leg)| {
            entry(
                guard_t,
                &[
                    ("hdr.ipv4.dst_addr", u64::from(relay)),
                    ("hdr.udp.dst_port", u64::from(port)),
                ],
                "Ingress.guard_drop",
                &[("leg", leg)],
            )
        })
        .collect()
}

async fn write(sess: &mut Session, updates: Vec<pb::Update>) -> Result<()> {
    sess.client
        .write(pb::WriteRequest {
            target: Some(pb::TargetDevice {
                device_id: 0,
                pipe_id: 0xffff,
                direction: 0xff,
                prsr_id: 0xff,
            }),
            client_id: sess.client_id,
            updates,
            atomicity: 0,
            p4_name: "p4relay".into(),
        })
        .await
        .map_err(|e| anyhow::anyhow!("Write: {} {}", e.code(), e.message()))?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn program(
    grpc: &str,
    calls: u32,
    a_ip: Ipv4Addr,
    a_port: u16,
    b_ip: Ipv4Addr,
    b_port: u16,
    relay_ip: Ipv4Addr,
    routes: &[String],
    ipv6: bool,
) -> Result<()> {
    let s = Schema::build(&CONTRACT, 1, 1);
    let mut sess = connect(grpc, 7).await?;
    let lpm = s.table_by_name("pipe.Ingress.ipv4_lpm").expect("contract");
    let nh = s.table_by_name("pipe.Ingress.nexthop").expect("contract");
    let mut ups = Vec::new();
    for (i, r) in routes.iter().enumerate() {
        let parts: Vec<&str> = r.split(',').collect();
        let [port, smac, dmac, prefix] = parts[..] else {
            bail!("--route {r}: PORT,SRC_MAC,DST_MAC,PREFIX/LEN")
        };
        let (net, len) = prefix.split_once('/').context("prefix needs /LEN")?;
        let net: Ipv4Addr = net.parse()?;
        let mac = |m: &str| -> Result<u64> {
            Ok(parse_mac(m)?
                .iter()
                .fold(0u64, |a, &x| (a << 8) | u64::from(x)))
        };
        let id = i as u64 + 1;
        ups.push(entry(
            nh,
            &[("ig_md.nexthop_id", id)],
            "Ingress.forward",
            &[
                ("port", port.parse()?),
                ("src_mac", mac(smac)?),
                ("dst_mac", mac(dmac)?),
            ],
        ));
        let mut u = entry(lpm, &[], "Ingress.set_nexthop", &[("nexthop_id", id)]);
        if let Some(pb::entity::Entity::TableEntry(te)) =
            u.entity.as_mut().and_then(|e| e.entity.as_mut())
        {
            let k = lpm.key_by_name("hdr.ipv4.dst_addr").expect("contract");
            te.value = Some(pb::table_entry::Value::Key(pb::TableKey {
                fields: vec![p4relay_softswitch::grpc::codec::key_lpm(
                    k,
                    u64::from(u32::from(net)),
                    len.parse()?,
                )],
            }));
        }
        ups.push(u);
        if ipv6 {
            let lpm6 = s.table_by_name("pipe.Ingress.ipv6_lpm").expect("contract");
            let k = lpm6.key_by_name("hdr.ipv6.dst_addr").expect("contract");
            let len: u8 = len.parse()?;
            ups.push(entry6(
                lpm6,
                vec![key_lpm128(k, v6_of(u32::from(net)), 96 + len)],
                "Ingress.set_nexthop",
                &[("nexthop_id", u128::from(id))],
            ));
        }
    }
    if ipv6 {
        // relay6_addr: relay address r (one per RELAY_BLOCK calls) is relay_id r + 1
        let t = s
            .table_by_name("pipe.Ingress.relay6_addr")
            .expect("contract");
        for r in 0..calls.div_ceil(RELAY_BLOCK).max(1) {
            ups.push(entry6(
                t,
                vec![
                    key_exact128(key(t, "hdr.ipv6.dst_addr"), v6_of(u32::from(relay_ip) + r)),
                    key_range(key(t, "hdr.udp.dst_port"), 20000, 65535),
                    key_exact128(key(t, "$MATCH_PRIORITY"), 1),
                ],
                "Ingress.mark_relay6",
                &[("relay_id", u128::from(r + 1))],
            ));
        }
    }
    write(&mut sess, ups).await?;
    // Calls in Writes of about 2,000 entries (the relay entries mirrored
    // into the kernel before each Write returns).
    let mut ups = Vec::new();
    for c in 0..calls {
        let e = call_ends(c, (a_ip, a_port), (b_ip, b_port), relay_ip);
        if ipv6 {
            ups.extend(call_updates6(&s, c, &e));
        } else {
            ups.extend(call_updates(&s, c, e.a, e.b, e.relay, e.ra, e.rb));
        }
        if ups.len() >= 2000 {
            write(&mut sess, std::mem::take(&mut ups)).await?;
        }
    }
    if !ups.is_empty() {
        write(&mut sess, ups).await?;
    }
    println!("{{\"calls\": {calls}, \"routes\": {}}}", routes.len());
    Ok(())
}

async fn insert(grpc: &str, sessions: u32, batch: usize) -> Result<()> {
    let s = Schema::build(&CONTRACT, 1, 1);
    let mut sess = connect(grpc, 8).await?;
    let t0 = Instant::now();
    let mut pending = Vec::with_capacity(batch + 10);
    let mut entries = 0u64;
    for c in 0..sessions {
        // Distinct endpoints per session: A in 100.64/16-style space of 198.18.x, ports cycling.
        let a = (
            0xc612_0000 | (c >> 8 & 0xff) << 8 | 10,
            10_000 + (c & 0xff) as u16 * 2,
        );
        let b = (
            0xc613_0000 | (c >> 8 & 0xff) << 8 | 10,
            10_000 + (c & 0xff) as u16 * 2,
        );
        // A relay address per 12,288 sessions, so each session's 4 guarded
        // relay ports (16000..=65151) are its own, as RTPProxy allocates them.
        let (r, i) = (c / 12_288, (c % 12_288) as u16);
        let relay = 0xc612_00fe | (r & 0x1ff) << 8;
        let (ra, rb) = (16_000 + 4 * i, 16_002 + 4 * i);
        pending.extend(call_updates(&s, c, a, b, relay, ra, rb));
        pending.extend(guard_updates(&s, c, relay, ra, rb));
        if pending.len() >= batch {
            entries += pending.len() as u64;
            write(&mut sess, std::mem::take(&mut pending)).await?;
        }
    }
    entries += pending.len() as u64;
    if !pending.is_empty() {
        write(&mut sess, pending).await?;
    }
    let dt = t0.elapsed().as_secs_f64();
    println!("{{\"sessions\": {sessions}, \"entries\": {entries}, \"seconds\": {dt:.2}, \"inserts_per_s\": {:.0}}}", entries as f64 / dt);
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let rt = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    match cli.cmd {
        Cmd::Frames { flow } => frames(&flow.resolve()?),
        Cmd::Send {
            ifname,
            flow,
            pps,
            secs,
            slot_us,
            stamp,
        } => send(&ifname, &flow.resolve()?, pps, secs, slot_us, stamp),
        Cmd::Recv {
            ifname,
            secs,
            dport_min,
            dport_max,
            idle_stop,
        } => recv(&ifname, secs, dport_min, dport_max, idle_stop),
        Cmd::Program {
            grpc,
            calls,
            a_ip,
            a_port,
            b_ip,
            b_port,
            relay_ip,
            route,
            ipv6,
        } => rt()?.block_on(program(
            &grpc, calls, a_ip, a_port, b_ip, b_port, relay_ip, &route, ipv6,
        )),
        Cmd::Insert {
            grpc,
            sessions,
            batch,
        } => rt()?.block_on(insert(&grpc, sessions, batch)),
    }
}
