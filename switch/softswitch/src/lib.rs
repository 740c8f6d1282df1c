//! p4relay software switch: the p4relay pipeline on Linux interfaces.
//!
//! Layout: `contract`/`schema` (names and ids), `packet` (parser, checksums),
//! `tables` (the state the control plane writes), `pipeline` (one packet
//! through the tables, a module per P4 control with its registers),
//! `dataplane` (AF_XDP sockets or AF_PACKET rings, workers, egress FIFOs),
//! `fastpath` (the XDP program behind `pipeline::FastPathMaps` and the AF_XDP
//! sockets' map), `xdp_abi` (the constants and map layouts the program
//! shares with the softswitch), `grpc` (BfRt server and notifications),
//! `metrics` (Prometheus), `sys` (clocks, shared mappings). Dependencies
//! point one way (tests/architecture.rs checks there is no cycle): config,
//! sys and xdp_abi below everything, tables below pipeline, pipeline below
//! dataplane, fastpath and grpc.

pub mod config;
pub mod contract;
pub mod dataplane;
pub mod fastpath;
pub mod grpc;
pub mod metrics;
pub mod packet;
pub mod pipeline;
pub mod schema;
pub mod sys;
pub mod tables;
pub mod xdp_abi;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use tracing_subscriber::EnvFilter;

use contract::CONTRACT;

/// Digests buffered between the data plane and the gRPC stream.
const DIGEST_QUEUE: usize = 65536;

fn init_logging(config: &config::Config) -> Result<()> {
    let filter =
        EnvFilter::try_new(&config.log).with_context(|| format!("--log {:?}", config.log))?;
    use std::io::IsTerminal;
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    if config.log_json {
        b.json().init();
    } else {
        b.init();
    }
    Ok(())
}

/// Runs the switch until SIGINT/SIGTERM.
pub fn run(config: config::Config) -> Result<()> {
    init_logging(&config)?;
    let (digest_tx, digest_rx) = std::sync::mpsc::sync_channel(DIGEST_QUEUE);
    let (reroute_tx, reroute_rx) = std::sync::mpsc::sync_channel(DIGEST_QUEUE);
    let (learn6_tx, learn6_rx) = std::sync::mpsc::sync_channel(DIGEST_QUEUE);
    let port_ids: Vec<u32> = config.ports.keys().copied().collect();
    let mut pipeline = pipeline::Pipeline::new(
        &CONTRACT,
        config.relay_entries as usize,
        config.legs as usize,
        &port_ids,
        digest_tx,
    )
    .with_v6(config.v6, learn6_tx)
    .with_quality_half_bits(config.quality_half_bits)
    .with_reroute_digests(reroute_tx)
    .with_ired_sample(config.ired_sample);
    let prog = load_xdp(&config);
    let attached = prog
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|fp| attach_xdp(fp, &config));
    let fast = match &prog {
        Ok(fp) if config.xdp != config::XdpMode::Off && fp.links() > 0 => Some(fp.clone()),
        _ => None,
    };
    if let Some(fp) = &fast {
        pipeline = pipeline.with_fastpath(&CONTRACT, fp.clone());
    }
    let pipeline = Arc::new(pipeline);
    let xsk: std::result::Result<&dyn dataplane::XskMap, String> = match (&prog, &attached) {
        (Ok(fp), Ok(())) => Ok(fp.as_ref()),
        (Err(why), _) | (_, Err(why)) => Err(why.clone()),
    };
    let dp = dataplane::Dataplane::start(&config, pipeline.clone(), xsk)?;
    if let (Ok(fp), None, dataplane::Io::AfPacket) = (&prog, &fast, dp.io) {
        // Loaded for AF_XDP alone, which is not used: nothing for it to do.
        fp.detach_all();
    }
    let schema = schema::Schema::build_sized(
        &CONTRACT,
        config.relay_entries,
        config.legs,
        config.v6,
        config.quality_half_bits,
    );
    let sw = Arc::new(grpc::Switch::new(schema, pipeline, dp.ports.clone()));
    let _ = sw.dataplane_io.set(dp.io.label());
    if let Some(fp) = &fast {
        let _ = sw.xdp_mode.set(fp.mode().label());
    }
    let stop = Arc::new(AtomicBool::new(false));
    if let Some(fp) = &fast {
        sw.sync_fast_ports();
        tracing::info!(mode = ?fp.mode(), ports = fp.links(), "XDP fast path attached");
        let (sw, stop, fp) = (sw.clone(), stop.clone(), fp.clone());
        std::thread::Builder::new()
            .name("fastpath".into())
            .spawn(move || {
                // Link state and the clock offset change outside any Write.
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for (port, ifname) in fp.check_native_tx() {
                        tracing::error!(
                            port,
                            ifname = %ifname,
                            "native XDP: this veth's peer stopped taking redirected frames (GRO turned off there?); relay hits to it now take the user-space pipeline"
                        );
                    }
                    sw.sync_fast_ports();
                    fp.refresh_clock();
                    std::thread::sleep(std::time::Duration::from_millis(250));
                }
            })?;
    }
    {
        let sw = sw.clone();
        std::thread::Builder::new()
            .name("digests".into())
            .spawn(move || grpc::notify::run_digests(sw, digest_rx))?;
    }
    {
        let sw = sw.clone();
        std::thread::Builder::new()
            .name("learn6-digests".into())
            .spawn(move || grpc::notify::run_digests(sw, learn6_rx))?;
    }
    {
        let sw = sw.clone();
        std::thread::Builder::new()
            .name("reroute-digests".into())
            .spawn(move || grpc::notify::run_digests(sw, reroute_rx))?;
    }
    let idle = {
        let (sw, stop) = (sw.clone(), stop.clone());
        std::thread::Builder::new()
            .name("idle".into())
            .spawn(move || grpc::notify::run_idle(sw, stop))?
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("ctl")
        .build()?;
    let result = rt.block_on(serve(config.clone(), sw));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    dp.stop();
    let _ = idle.join();
    tracing::info!("stopped");
    result
}

/// The XDP program: the fast path for relay hits (`--xdp`) and the AF_XDP
/// sockets' redirect (`--user-io`). Not loaded when neither wants it, or
/// when it cannot load here (logged: the user-space pipeline on AF_PACKET
/// carries everything).
fn load_xdp(config: &config::Config) -> std::result::Result<Arc<fastpath::FastPath>, String> {
    let fast = config.xdp != config::XdpMode::Off;
    if !fast && config.user_io == config::UserIo::AfPacket {
        return Err("--xdp off and --user-io af-packet".into());
    }
    let c = &CONTRACT.config;
    // Without the fast path the program only redirects: its maps stay minimal.
    let sizes = if fast {
        fastpath::Sizes {
            relay: config.xdp_entries,
            legs: config.legs,
            // each relay6 entry under one relay address (usually the only one)
            relay6: config.v6.relay6,
            legs6: config.v6.legs6,
        }
    } else {
        fastpath::Sizes::v4(1, 1)
    };
    match fastpath::FastPath::load_sized(config.xdp, sizes, c.rtp_clock_hz, c.jitter_shift) {
        Ok(fp) => Ok(Arc::new(fp)),
        Err(e) => {
            let why = format!("{e:#}");
            tracing::warn!(
                error = %why,
                "XDP program not available: relay hits and everything else in user space (AF_PACKET)"
            );
            Err(format!("XDP program not available: {why}"))
        }
    }
}

/// `--xdp auto` (and the program for AF_XDP alone): attaches natively when
/// every port is a NIC whose driver attaches it; otherwise attaches nothing
/// (false: the caller attaches in generic mode). On veth, native works where
/// the peer runs NAPI but costs about twice generic per relayed packet
/// (docs/benchmarks/10-softswitch.md), so auto keeps generic there. Logged
/// either way.
fn attach_auto_native(fp: &fastpath::FastPath, config: &config::Config) -> bool {
    let virt: Vec<&str> = config
        .ports
        .values()
        .filter(|pc| fastpath::is_virtual(&pc.ifname))
        .map(|pc| pc.ifname.as_str())
        .collect();
    if !virt.is_empty() || config.ports.is_empty() {
        tracing::info!(
            virtual_ports = ?virt,
            "XDP auto: generic mode (virtual interfaces: native XDP on veth costs about twice generic per packet; --xdp native uses it where the peers run NAPI)"
        );
        return false;
    }
    for (&id, pc) in &config.ports {
        if let Err(e) = fp.attach(id, &pc.ifname, config::XdpMode::Native) {
            fp.detach_all();
            tracing::warn!(
                port = id,
                ifname = %pc.ifname,
                error = format!("{e:#}"),
                "XDP auto: the driver refused native mode; generic mode on every port"
            );
            return false;
        }
    }
    tracing::info!("XDP auto: native mode on every port");
    true
}

/// The virtual ports (veth) that drop frames redirected into them in native
/// mode, each with why: (port, interface and reason).
fn refused_native_tx(fp: &fastpath::FastPath, config: &config::Config) -> Vec<(u32, String)> {
    config
        .ports
        .iter()
        .filter(|(_, pc)| fastpath::is_virtual(&pc.ifname))
        .filter_map(|(&id, pc)| match fp.native_tx_reaches(&pc.ifname) {
            Ok(true) => None,
            Ok(false) => Some((id, format!("{}: probe frame dropped", pc.ifname))),
            Err(e) => Some((id, format!("{}: {e:#}", pc.ifname))),
        })
        .collect()
}

/// Attaches the program to every port: Ok when it runs on all of them (the
/// AF_XDP sockets can then take every packet the fast path leaves), else
/// why not. A port it could not attach to still relays (in user space).
fn attach_xdp(fp: &fastpath::FastPath, config: &config::Config) -> std::result::Result<(), String> {
    let mode = match config.xdp {
        config::XdpMode::Auto | config::XdpMode::Off => {
            if attach_auto_native(fp, config) {
                return Ok(());
            }
            config::XdpMode::Generic
        }
        m => m,
    };
    if mode == config::XdpMode::Native {
        // Asked for: relay hits routed to a port that drops native
        // redirects take the user-space pipeline instead.
        for (id, why) in refused_native_tx(fp, config) {
            tracing::warn!(
                port = id,
                why = %why,
                "--xdp native: this interface drops natively redirected frames (a veth's peer needs GRO on, `ethtool -K <peer> gro on`, or an XDP program); relay hits to it take the user-space pipeline"
            );
            fp.refuse_native_tx(id);
        }
    }
    let mut failed = Vec::new();
    for (&id, pc) in &config.ports {
        if let Err(e) = fp.attach(id, &pc.ifname, mode) {
            let why = format!("{e:#}");
            tracing::warn!(
                port = id,
                ifname = %pc.ifname,
                error = %why,
                "XDP program not attached to this port; its packets take the user-space pipeline"
            );
            failed.push(format!("port {id}: {why}"));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("XDP not attached to {}", failed.join("; ")))
    }
}

async fn serve(config: config::Config, sw: Arc<grpc::Switch>) -> Result<()> {
    let metrics_sw = sw.clone();
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let sw = metrics_sw.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4",
                    )],
                    metrics::render(&sw),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind(config.metrics_listen)
        .await
        .with_context(|| format!("metrics listen {}", config.metrics_listen))?;
    tracing::info!(addr = %config.metrics_listen, "metrics on /metrics");
    let metrics = tokio::spawn(async move { axum::serve(listener, app).await });

    let grpc_listener = tokio::net::TcpListener::bind(config.grpc_listen)
        .await
        .with_context(|| format!("gRPC listen {}", config.grpc_listen))?;
    tracing::info!(addr = %config.grpc_listen, program = grpc::P4_NAME, "BfRt gRPC serving");
    // TCP_NODELAY: small unary replies must not wait for the peer's delayed ACK
    // (Nagle), which cost rtpagent ~40 ms per write.
    let incoming = tonic::transport::server::TcpIncoming::from_listener(grpc_listener, true, None)
        .map_err(|e| anyhow::anyhow!("gRPC listener: {e}"))?;
    let stop = Arc::new(tokio::sync::Notify::new());
    let server = {
        let stop = stop.clone();
        tonic::transport::Server::builder()
            .add_service(grpc::server(sw))
            .serve_with_incoming_shutdown(incoming, async move { stop.notified().await })
    };
    tokio::pin!(server);
    tokio::select! {
        r = &mut server => r.context("gRPC server")?,
        () = shutdown() => {
            stop.notify_one();
            // Clients keep StreamChannel open; give them a moment, then go.
            if tokio::time::timeout(std::time::Duration::from_secs(2), &mut server).await.is_err() {
                tracing::info!("closing client streams still open");
            }
        }
    }
    metrics.abort();
    Ok(())
}

async fn shutdown() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
}
