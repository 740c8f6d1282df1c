//! p4relay software switch: the p4relay pipeline on Linux interfaces.
//!
//! Layout: `contract`/`schema` (names and ids), `packet` (parser, checksums),
//! `tables` + `registers` (pipeline state), `pipeline` (one packet through
//! the tables, a step per P4 control), `dataplane` (AF_PACKET rings, workers,
//! egress FIFOs), `fastpath` (the XDP program behind `pipeline::FastPathMaps`),
//! `grpc` (BfRt server and notifications), `metrics` (Prometheus), `sys`
//! (clocks, shared mappings). Dependencies point one way: config and sys
//! below everything, pipeline below dataplane, fastpath and grpc.

pub mod config;
pub mod contract;
pub mod dataplane;
pub mod fastpath;
pub mod grpc;
pub mod metrics;
pub mod packet;
pub mod pipeline;
pub mod registers;
pub mod schema;
pub mod sys;
pub mod tables;

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
    let port_ids: Vec<u32> = config.ports.keys().copied().collect();
    let mut pipeline = pipeline::Pipeline::new(
        &CONTRACT,
        config.relay_entries as usize,
        config.legs as usize,
        &port_ids,
        digest_tx,
    )
    .with_reroute_digests(reroute_tx);
    let fast = load_fastpath(&config);
    if let Some(fp) = &fast {
        pipeline = pipeline.with_fastpath(&CONTRACT, fp.clone());
    }
    let pipeline = Arc::new(pipeline);
    let dp = dataplane::Dataplane::start(&config, pipeline.clone())?;
    let schema = schema::Schema::build(&CONTRACT, config.relay_entries, config.legs);
    let sw = Arc::new(grpc::Switch::new(schema, pipeline, dp.ports.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    if let Some(fp) = &fast {
        attach_fastpath(fp, &config, &sw);
        let (sw, stop, fp) = (sw.clone(), stop.clone(), fp.clone());
        std::thread::Builder::new()
            .name("fastpath".into())
            .spawn(move || {
                // Link state and the clock offset change outside any Write.
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
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

/// The XDP fast path, or None (off, or it cannot load here: logged, and the
/// user-space pipeline carries everything).
fn load_fastpath(config: &config::Config) -> Option<Arc<fastpath::FastPath>> {
    if config.xdp == config::XdpMode::Off {
        return None;
    }
    let c = &CONTRACT.config;
    match fastpath::FastPath::load(
        config.xdp,
        config.xdp_entries,
        config.legs,
        c.rtp_clock_hz,
        c.jitter_shift,
    ) {
        Ok(fp) => Some(Arc::new(fp)),
        Err(e) => {
            tracing::warn!(
                error = format!("{e:#}"),
                "XDP fast path not available; relaying in user space"
            );
            None
        }
    }
}

/// `--xdp auto`: attaches natively when every port is a physical NIC and
/// each driver takes it (true); otherwise attaches nothing (false: the caller
/// attaches in generic mode). Logged either way.
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
            "XDP auto: generic mode (virtual interfaces: native XDP on veth costs more per packet and needs the peer's NAPI)"
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

fn attach_fastpath(fp: &fastpath::FastPath, config: &config::Config, sw: &grpc::Switch) {
    let auto = config.xdp == config::XdpMode::Auto;
    if auto && attach_auto_native(fp, config) {
        sw.sync_fast_ports();
        tracing::info!(mode = ?fp.mode(), ports = fp.links(), "XDP fast path attached");
        return;
    }
    let mode = if auto {
        config::XdpMode::Generic
    } else {
        config.xdp
    };
    for (&id, pc) in &config.ports {
        match fp.attach(id, &pc.ifname, mode) {
            Ok(()) => {}
            Err(e) => tracing::warn!(
                port = id,
                ifname = %pc.ifname,
                error = format!("{e:#}"),
                "XDP fast path not attached to this port; its packets take the user-space pipeline"
            ),
        }
    }
    sw.sync_fast_ports();
    tracing::info!(mode = ?fp.mode(), ports = fp.links(), "XDP fast path attached");
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
