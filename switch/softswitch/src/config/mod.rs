//! Configuration: flags > environment (`P4RELAY_SOFTSWITCH_*`) > config file > defaults.
//!
//! Every flag has a config-file key of the same name with `_` for `-`
//! (`grpc_listen = "127.0.0.1:50052"`, `port = ["1=eth1"]`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use serde::Deserialize;

use crate::contract::CONTRACT;
use crate::pipeline::ired::IredSample;
use crate::schema::V6Sizes;
use crate::tables::small::QUEUE_DEPTH_MAX;

mod aqm;
pub use aqm::AqmConfig;

/// p4relay software switch: the p4relay relay pipeline (IPv4 LPM forwarding,
/// RTP/RTCP session rewrite, learning digests, RTP quality registers) on Linux
/// interfaces, programmed over BfRt gRPC like a Tofino running bf_switchd.
#[derive(Debug, Parser, Default)]
#[command(name = "p4relay-softswitch", version, about, long_about = None,
    after_help = "Ports are BfRt dev_port numbers mapped to interfaces: --port 1=veth1 --port 2=veth2.\n\
Every option can also be set in the config file (--config, keys named like the flags\n\
with '_' for '-') or via P4RELAY_SOFTSWITCH_<OPTION> environment variables.")]
pub struct Args {
    /// Port mapping DEV_PORT=IFNAME (repeatable). DEV_PORT is the BfRt dev_port number.
    #[arg(
        long = "port",
        value_name = "DEV_PORT=IFNAME",
        env = "P4RELAY_SOFTSWITCH_PORT",
        value_delimiter = ','
    )]
    pub port: Vec<String>,
    /// BfRt gRPC listen address [default: 127.0.0.1:50052]
    #[arg(long, env = "P4RELAY_SOFTSWITCH_GRPC_LISTEN")]
    pub grpc_listen: Option<SocketAddr>,
    /// Prometheus /metrics listen address [default: 127.0.0.1:9101]
    #[arg(long, env = "P4RELAY_SOFTSWITCH_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// TOML config file; keys mirror the flags
    #[arg(long, env = "P4RELAY_SOFTSWITCH_CONFIG")]
    pub config: Option<PathBuf>,
    /// Capacity of pipe.Ingress.relay and of pipe.Ingress.relay_guard (a call has 4 of each) [default: contract relay_entries_softswitch]
    #[arg(long, env = "P4RELAY_SOFTSWITCH_RELAY_ENTRIES")]
    pub relay_entries: Option<u32>,
    /// Number of legs (leg_rewrite entries and quality-register slots) [default: contract legs_softswitch]
    #[arg(long, env = "P4RELAY_SOFTSWITCH_LEGS")]
    pub legs: Option<u32>,
    /// Capacity of pipe.Ingress.relay6 and of pipe.Ingress.relay_guard6 [default: contract relay6_entries_softswitch]
    #[arg(long, env = "P4RELAY_SOFTSWITCH_RELAY6_ENTRIES")]
    pub relay6_entries: Option<u32>,
    /// Entries of pipe.Ingress.leg_rewrite6 (IPv6 legs; legs are shared with IPv4) [default: contract leg_rewrite6_entries_softswitch, at most --legs]
    #[arg(long, env = "P4RELAY_SOFTSWITCH_LEG6_ENTRIES")]
    pub leg6_entries: Option<u32>,
    /// Publish each RTP quality register as two, as a Tofino build that splits them (switch/p4 QUALITY_HALF_BITS, the large-t2 profile: 16): pipe.Egress.rtp_* for legs below 2^N, rtp_*_hi for the rest; needs 2^N < --legs <= 2^(N+1) [default: one register each]
    #[arg(long, env = "P4RELAY_SOFTSWITCH_QUALITY_HALF_BITS")]
    pub quality_half_bits: Option<u32>,
    /// Egress FIFO depth per port, packets [default: 1024]
    #[arg(long, env = "P4RELAY_SOFTSWITCH_QUEUE_DEPTH")]
    pub queue_depth: Option<u32>,
    /// Egress line rate of every port in bits/s, 0 = unshaped [default: 0]
    #[arg(long, env = "P4RELAY_SOFTSWITCH_LINE_RATE")]
    pub line_rate: Option<u64>,
    /// Per-port egress line rate override DEV_PORT=BITS_PER_SECOND (repeatable)
    #[arg(
        long = "port-rate",
        value_name = "DEV_PORT=BPS",
        env = "P4RELAY_SOFTSWITCH_PORT_RATE",
        value_delimiter = ','
    )]
    pub port_rate: Vec<String>,
    /// Egress-drop AQM of a port's queue, DEV_PORT=codel[:TARGET_US[:INTERVAL_US]]
    /// (default 5000:100000) or
    /// DEV_PORT=pi2[:TARGET_US[:TUPDATE_US[:ALPHA_HZ[:BETA_HZ]]]] (default
    /// 20000:16000:0.16:3.2) (repeatable). For comparisons with iRED; drops as
    /// packets leave the queue
    #[arg(
        long = "port-aqm",
        value_name = "DEV_PORT=AQM",
        env = "P4RELAY_SOFTSWITCH_PORT_AQM",
        value_delimiter = ','
    )]
    pub port_aqm: Vec<String>,
    /// A port queue's buffer limit, DEV_PORT=CELLS (80-byte cells, as
    /// Tofino's traffic manager counts; repeatable): a packet arriving to a
    /// queue that holds CELLS or more is tail-dropped before it is queued.
    /// Without it only --queue-depth's packet slots bound the queue
    #[arg(
        long = "port-queue-cells",
        value_name = "DEV_PORT=CELLS",
        env = "P4RELAY_SOFTSWITCH_PORT_QUEUE_CELLS",
        value_delimiter = ','
    )]
    pub port_queue_cells: Vec<String>,
    /// The queue depth iRED averages: deq (deq_qdepth, the queue as the
    /// deciding packet leaves it; the P4 program's) or enq (enq_qdepth, as
    /// the program built with -DIRED_SAMPLE_ENQ; for comparisons) [default: deq]
    #[arg(long, value_enum, env = "P4RELAY_SOFTSWITCH_IRED_SAMPLE")]
    pub ired_sample: Option<IredSample>,
    /// RX ring size per worker and port, frames of 2 KiB [default: 4096]; a
    /// deeper ring rides out longer CPU stalls on a busy host
    #[arg(long, env = "P4RELAY_SOFTSWITCH_RX_RING_FRAMES")]
    pub rx_ring_frames: Option<u32>,
    /// Forwarding worker threads [default: number of CPUs]
    #[arg(long, env = "P4RELAY_SOFTSWITCH_WORKERS")]
    pub workers: Option<usize>,
    /// Interrupt coalescing: while packets keep arriving, a worker sleeps up to
    /// this long between RX passes to gather a batch instead of waking per
    /// packet; an isolated packet is never delayed. 0 = wake per packet [default: 200]
    #[arg(long, env = "P4RELAY_SOFTSWITCH_RX_COALESCE_US")]
    pub rx_coalesce_us: Option<u32>,
    /// Scheduling priority (nice, -20..=19) of the forwarding workers: on a
    /// host shared with other work a worker below the kernel's own packet
    /// path loses packets whenever it waits for a CPU [default: -10]
    #[arg(
        long,
        env = "P4RELAY_SOFTSWITCH_WORKER_NICE",
        allow_negative_numbers = true
    )]
    pub worker_nice: Option<i32>,
    /// XDP fast path for relay hits: auto (native when every port is a
    /// physical NIC whose driver takes it, else generic; the choice is
    /// logged and in p4relay_xdp_mode), generic (skb mode, any interface),
    /// native (driver mode; on veth a port whose peer would drop redirected
    /// frames, checked with one probe frame, is left to user space) or off. Relay entries whose egress port is unshaped and enabled are
    /// forwarded in the kernel; everything else takes the user-space
    /// pipeline. If it cannot attach, the switch runs without it and logs
    /// why [default: auto]
    #[arg(long, value_enum, env = "P4RELAY_SOFTSWITCH_XDP")]
    pub xdp: Option<XdpMode>,
    /// How packets for the user-space pipeline (every one the XDP fast path
    /// does not relay) reach it: auto (AF_XDP sockets where the XDP program
    /// attaches to every port and a socket binds to each RX queue, else
    /// AF_PACKET rings; the choice and the reason are logged), af-xdp
    /// (AF_XDP or fail to start) or af-packet [default: auto]
    #[arg(long, value_enum, env = "P4RELAY_SOFTSWITCH_USER_IO")]
    pub user_io: Option<UserIo>,
    /// Relay entries the XDP fast path holds (kernel memory: a 16-byte hash
    /// bucket each at start, the entries as they arrive; sized to the calls
    /// carried, 4 per call, its lookups touch fewer pages); entries beyond
    /// are relayed in user space, counted and logged [default:
    /// --relay-entries, up to 67108864: every entry]
    #[arg(long, env = "P4RELAY_SOFTSWITCH_XDP_ENTRIES")]
    pub xdp_entries: Option<u32>,
    /// Log filter (tracing EnvFilter syntax) [default: info]
    #[arg(long, env = "P4RELAY_SOFTSWITCH_LOG")]
    pub log: Option<String>,
    /// Log as JSON lines instead of text
    #[arg(long, env = "P4RELAY_SOFTSWITCH_LOG_JSON")]
    pub log_json: bool,
    /// Print the program's bfrt.json (as served by GetForwardingPipelineConfig) and exit
    #[arg(long)]
    pub dump_bfrt_json: bool,
    /// Print the fixed tables' bfrt.json ($PORT, $PORT_STAT, tf1.tm.*) and exit
    #[arg(long)]
    pub dump_fixed_bfrt_json: bool,
    /// Print the settings reference table (Markdown, README.md) and exit
    #[arg(long, hide = true)]
    pub print_settings_table: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    port: Vec<String>,
    grpc_listen: Option<SocketAddr>,
    metrics_listen: Option<SocketAddr>,
    relay_entries: Option<u32>,
    legs: Option<u32>,
    relay6_entries: Option<u32>,
    leg6_entries: Option<u32>,
    quality_half_bits: Option<u32>,
    queue_depth: Option<u32>,
    line_rate: Option<u64>,
    #[serde(default)]
    port_rate: Vec<String>,
    #[serde(default)]
    port_aqm: Vec<String>,
    #[serde(default)]
    port_queue_cells: Vec<String>,
    ired_sample: Option<IredSample>,
    workers: Option<usize>,
    rx_ring_frames: Option<u32>,
    rx_coalesce_us: Option<u32>,
    worker_nice: Option<i32>,
    xdp: Option<XdpMode>,
    user_io: Option<UserIo>,
    xdp_entries: Option<u32>,
    log: Option<String>,
    log_json: Option<bool>,
}

/// The resolved configuration the switch runs with.
#[derive(Debug, Clone)]
pub struct Config {
    pub ports: BTreeMap<u32, PortConfig>,
    pub grpc_listen: SocketAddr,
    pub metrics_listen: SocketAddr,
    pub relay_entries: u32,
    pub legs: u32,
    /// relay6 / relay_guard6 and leg_rewrite6 sizes.
    pub v6: V6Sizes,
    /// The quality registers split in two at 2^N (`--quality-half-bits`).
    pub quality_half_bits: Option<u32>,
    pub queue_depth: u32,
    pub workers: usize,
    pub rx_ring_frames: u32,
    /// Longest a worker sleeps between RX passes while packets flow, µs (0 = never).
    pub rx_coalesce_us: u32,
    /// Nice value the forwarding workers ask for.
    pub worker_nice: i32,
    pub xdp: XdpMode,
    pub user_io: UserIo,
    pub xdp_entries: u32,
    pub log: String,
    pub log_json: bool,
    pub ired_sample: IredSample,
}

/// Where relay hits are forwarded: the XDP fast path's attach mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// No fast path: every packet through the user-space pipeline.
    Off,
    /// Native where every port is a NIC whose driver attaches it, otherwise
    /// (veth and other virtual interfaces, where native costs more per
    /// packet, or a driver refusing) generic.
    #[default]
    Auto,
    /// Generic (skb) XDP: works on every interface, veth included.
    Generic,
    /// Driver XDP: faster on NICs that support it (and XDP_REDIRECT targets).
    Native,
}

impl XdpMode {
    /// As `p4relay_xdp_mode` labels it.
    pub fn label(self) -> &'static str {
        match self {
            XdpMode::Off => "off",
            XdpMode::Auto => "auto",
            XdpMode::Generic => "generic",
            XdpMode::Native => "native",
        }
    }
}

/// How the user-space pipeline's packets reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum UserIo {
    /// AF_XDP where it attaches on every port, else AF_PACKET.
    #[default]
    Auto,
    /// AF_XDP sockets (the XDP program redirects to them); no fallback.
    AfXdp,
    /// AF_PACKET rings (the packets pass the kernel stack's taps).
    AfPacket,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PortConfig {
    pub ifname: String,
    /// Egress line rate, bits/s; 0 = unshaped.
    pub rate_bps: u64,
    /// Egress-drop AQM of the port's queue; None = tail drop only.
    pub aqm: Option<AqmConfig>,
    /// The queue's buffer limit, cells; None = the packet slots only.
    pub queue_cells: Option<u32>,
}

fn parse_pair(s: &str, what: &str) -> Result<(u32, String)> {
    let (k, v) = s
        .split_once('=')
        .with_context(|| format!("{what} {s:?}: expected DEV_PORT=VALUE"))?;
    let id: u32 = k
        .trim()
        .parse()
        .with_context(|| format!("{what} {s:?}: DEV_PORT must be a number"))?;
    let v = v.trim();
    if v.is_empty() {
        bail!("{what} {s:?}: empty value");
    }
    Ok((id, v.to_string()))
}

impl Config {
    pub fn resolve(args: &Args) -> Result<Config> {
        let file: FileConfig = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading config file {}", path.display()))?;
                toml::from_str(&text)
                    .with_context(|| format!("parsing config file {}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let c = &CONTRACT.config;
        let port_specs = if args.port.is_empty() {
            &file.port
        } else {
            &args.port
        };
        let rate_specs = if args.port_rate.is_empty() {
            &file.port_rate
        } else {
            &args.port_rate
        };
        let line_rate = args.line_rate.or(file.line_rate).unwrap_or(0);
        let mut ports = BTreeMap::new();
        for spec in port_specs {
            let (id, ifname) = parse_pair(spec, "--port")?;
            if id >= c.max_ports {
                bail!("--port {spec}: dev_port must be below {}", c.max_ports);
            }
            if ifname.len() >= libc::IFNAMSIZ {
                bail!("--port {spec}: interface name too long");
            }
            if ports
                .insert(
                    id,
                    PortConfig {
                        ifname,
                        rate_bps: line_rate,
                        aqm: None,
                        queue_cells: None,
                    },
                )
                .is_some()
            {
                bail!("--port {spec}: dev_port {id} given twice");
            }
        }
        for spec in rate_specs {
            let (id, rate) = parse_pair(spec, "--port-rate")?;
            let rate: u64 = rate
                .parse()
                .with_context(|| format!("--port-rate {spec}: rate must be bits/s"))?;
            match ports.get_mut(&id) {
                Some(p) => p.rate_bps = rate,
                None => bail!("--port-rate {spec}: no --port {id}"),
            }
        }
        let aqm_specs = if args.port_aqm.is_empty() {
            &file.port_aqm
        } else {
            &args.port_aqm
        };
        for spec in aqm_specs {
            let (id, aqm) = parse_pair(spec, "--port-aqm")?;
            let aqm = AqmConfig::parse(&aqm).with_context(|| format!("--port-aqm {spec}"))?;
            match ports.get_mut(&id) {
                Some(p) => p.aqm = Some(aqm),
                None => bail!("--port-aqm {spec}: no --port {id}"),
            }
        }
        let cells_specs = if args.port_queue_cells.is_empty() {
            &file.port_queue_cells
        } else {
            &args.port_queue_cells
        };
        for spec in cells_specs {
            let (id, cells) = parse_pair(spec, "--port-queue-cells")?;
            let cells: u32 = cells
                .parse()
                .ok()
                .filter(|c| (1..=QUEUE_DEPTH_MAX).contains(c))
                .with_context(|| {
                    format!(
                        "--port-queue-cells {spec}: cells must be 1..={QUEUE_DEPTH_MAX} \
                         (the 19-bit queue depth)"
                    )
                })?;
            match ports.get_mut(&id) {
                Some(p) => p.queue_cells = Some(cells),
                None => bail!("--port-queue-cells {spec}: no --port {id}"),
            }
        }
        let relay_entries = args
            .relay_entries
            .or(file.relay_entries)
            .unwrap_or(c.relay_entries_softswitch);
        let legs = args.legs.or(file.legs).unwrap_or(c.legs_softswitch);
        let leg_limit = 1u64 << CONTRACT.leg_bits();
        if legs == 0 || u64::from(legs) > leg_limit {
            bail!(
                "--legs {legs}: must be 1..={leg_limit} (leg is {} bits)",
                CONTRACT.leg_bits()
            );
        }
        if relay_entries == 0 || relay_entries > (1 << 28) {
            bail!("--relay-entries {relay_entries}: must be 1..=268435456");
        }
        let v6_default = V6Sizes::of_contract(&CONTRACT, legs);
        let v6 = V6Sizes {
            relay6: args
                .relay6_entries
                .or(file.relay6_entries)
                .unwrap_or(v6_default.relay6),
            legs6: args
                .leg6_entries
                .or(file.leg6_entries)
                .unwrap_or(v6_default.legs6),
        };
        if v6.relay6 == 0 || v6.relay6 > (1 << 28) {
            bail!("--relay6-entries {}: must be 1..=268435456", v6.relay6);
        }
        if v6.legs6 == 0 || v6.legs6 > legs {
            bail!("--leg6-entries {}: must be 1..={legs} (--legs)", v6.legs6);
        }
        let quality_half_bits = args.quality_half_bits.or(file.quality_half_bits);
        if let Some(h) = quality_half_bits {
            // sizes.p4's rule for QUALITY_SPLIT: both halves have cells, and
            // bit N of every leg chooses the half.
            if h >= 31 || legs <= 1 << h || u64::from(legs) > 2u64 << h {
                bail!("--quality-half-bits {h}: needs 2^{h} < --legs {legs} <= 2^({h}+1)");
            }
        }
        let queue_depth = args.queue_depth.or(file.queue_depth).unwrap_or(1024);
        if !(1..=1 << 20).contains(&queue_depth) {
            bail!("--queue-depth {queue_depth}: must be 1..=1048576");
        }
        let workers = args
            .workers
            .or(file.workers)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        if !(1..=64).contains(&workers) {
            bail!("--workers {workers}: must be 1..=64");
        }
        let rx_ring_frames = args.rx_ring_frames.or(file.rx_ring_frames).unwrap_or(4096);
        if !(64..=262_144).contains(&rx_ring_frames) {
            bail!("--rx-ring-frames {rx_ring_frames}: must be 64..=262144");
        }
        let rx_coalesce_us = args.rx_coalesce_us.or(file.rx_coalesce_us).unwrap_or(200);
        if rx_coalesce_us > 10_000 {
            bail!("--rx-coalesce-us {rx_coalesce_us}: must be 0..=10000");
        }
        let worker_nice = args.worker_nice.or(file.worker_nice).unwrap_or(-10);
        if !(-20..=19).contains(&worker_nice) {
            bail!("--worker-nice {worker_nice}: must be -20..=19");
        }
        // Every relay entry fits the fast path unless the operator caps it.
        let xdp_entries = args
            .xdp_entries
            .or(file.xdp_entries)
            .unwrap_or(relay_entries.min(1 << 26));
        if !(1..=1 << 26).contains(&xdp_entries) {
            bail!("--xdp-entries {xdp_entries}: must be 1..=67108864");
        }
        Ok(Config {
            ports,
            rx_ring_frames,
            rx_coalesce_us,
            worker_nice,
            xdp: args.xdp.or(file.xdp).unwrap_or_default(),
            user_io: args.user_io.or(file.user_io).unwrap_or_default(),
            xdp_entries,
            grpc_listen: args
                .grpc_listen
                .or(file.grpc_listen)
                .unwrap_or_else(|| "127.0.0.1:50052".parse().expect("literal")),
            metrics_listen: args
                .metrics_listen
                .or(file.metrics_listen)
                .unwrap_or_else(|| "127.0.0.1:9101".parse().expect("literal")),
            relay_entries,
            legs,
            v6,
            quality_half_bits,
            queue_depth,
            workers,
            log: args
                .log
                .clone()
                .or(file.log)
                .unwrap_or_else(|| "info".into()),
            log_json: args.log_json || file.log_json.unwrap_or(false),
            ired_sample: args.ired_sample.or(file.ired_sample).unwrap_or_default(),
        })
    }
}

/// Every setting as a Markdown table (the README's reference, kept current by
/// `scripts/settings_reference.py`): its config-file key, environment variable,
/// flag, default (the `[default: …]` its help ends with) and meaning, all read
/// from `Args`' own definition.
pub fn settings_table() -> String {
    use clap::CommandFactory;
    let cmd = Args::command();
    let mut out = String::from(
        "| setting (TOML) | environment | flag | default | meaning |\n|---|---|---|---|---|\n",
    );
    for arg in cmd.get_arguments() {
        let (Some(long), Some(env)) = (arg.get_long(), arg.get_env()) else {
            continue; // help, version and the print-and-exit flags
        };
        if arg.is_hide_set() || long == "config" {
            continue;
        }
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let mut meaning = help.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut default = "—".to_string();
        if let Some(start) = meaning.find("[default: ") {
            if let Some(len) = meaning[start..].find(']') {
                default = format!("`{}`", &meaning[start + 10..start + len]);
                meaning = format!("{}{}", &meaning[..start], &meaning[start + len + 1..])
                    .replace(" ;", ";")
                    .trim()
                    .to_string();
            }
        }
        let values: Vec<_> = arg
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_string())
            .collect();
        let flag = match arg.get_value_names() {
            _ if !arg.get_action().takes_values() => {
                default = "`false`".to_string();
                format!("--{long}")
            }
            _ if !values.is_empty() => format!("--{long} {}", values.join("|")),
            Some(names) => format!("--{long} {}", names[0]),
            None => format!("--{long} {}", long.to_uppercase()),
        };
        let key = long.replace('-', "_");
        let cell = |s: &str| s.replace('|', "\\|");
        out.push_str(&format!(
            "| `{key}` | `{}` | `{}` | {} | {} |\n",
            env.to_string_lossy(),
            cell(&flag),
            cell(&default),
            cell(&meaning)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_file_and_validate() {
        let dir = std::env::temp_dir().join(format!("p4r-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.toml");
        std::fs::write(&f, "port = [\"1=a\", \"2=b\"]\nqueue_depth = 64\nline_rate = 1000\nport_rate = [\"2=500\"]\n").unwrap();
        let args = Args {
            config: Some(f.clone()),
            queue_depth: Some(32),
            ..Args::default()
        };
        let c = Config::resolve(&args).unwrap();
        assert_eq!(c.queue_depth, 32);
        assert_eq!(
            c.ports[&1],
            PortConfig {
                ifname: "a".into(),
                rate_bps: 1000,
                aqm: None,
                queue_cells: None,
            }
        );
        let cells = |specs: &[&str]| {
            Config::resolve(&Args {
                config: Some(f.clone()),
                port_queue_cells: specs.iter().map(|s| s.to_string()).collect(),
                ..Args::default()
            })
        };
        assert_eq!(
            cells(&["2=1212"]).unwrap().ports[&2].queue_cells,
            Some(1212)
        );
        for bad in ["3=100", "2=0", "2=524288", "2=many", "2="] {
            let e = cells(&[bad]).unwrap_err();
            assert!(
                format!("{e:#}").contains("--port-queue-cells"),
                "{bad}: {e:#}"
            );
        }
        assert_eq!(c.ports[&2].rate_bps, 500);
        let aqm = Args {
            config: Some(f.clone()),
            port_aqm: vec!["2=pi2".into()],
            ..Args::default()
        };
        assert_eq!(
            Config::resolve(&aqm).unwrap().ports[&2].aqm,
            Some(AqmConfig::parse("pi2:20000:16000:0.16:3.2").unwrap())
        );
        for bad in ["3=codel", "2=red", "2=codel:1:2", "2=pi2:20000:33000:0"] {
            let a = Args {
                config: Some(f.clone()),
                port_aqm: vec![bad.into()],
                ..Args::default()
            };
            assert!(Config::resolve(&a).is_err(), "{bad}");
        }
        std::fs::write(&f, "bogus = 1\n").unwrap();
        assert!(Config::resolve(&args).is_err());
        let bad = Args {
            port: vec!["x=eth0".into()],
            ..Args::default()
        };
        assert!(Config::resolve(&bad).is_err());
        let dup = Args {
            port: vec!["1=a".into(), "1=b".into()],
            ..Args::default()
        };
        assert!(Config::resolve(&dup).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn quality_half_bits_must_split_the_legs_as_the_p4_build() {
        let split = |legs: u32, bits: u32| {
            Config::resolve(&Args {
                legs: Some(legs),
                quality_half_bits: Some(bits),
                ..Args::default()
            })
        };
        assert_eq!(split(131072, 16).unwrap().quality_half_bits, Some(16));
        assert_eq!(split(106496, 16).unwrap().quality_half_bits, Some(16));
        for (legs, bits) in [(65536, 16), (131073, 16), (4, 40), (1, 0)] {
            let e = split(legs, bits).unwrap_err();
            assert!(
                format!("{e:#}").contains("--quality-half-bits"),
                "{legs} {bits}: {e:#}"
            );
        }
        assert_eq!(
            Config::resolve(&Args::default()).unwrap().quality_half_bits,
            None
        );
    }
}
