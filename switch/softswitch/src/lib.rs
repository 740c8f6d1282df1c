//! p4relay software switch: the p4relay pipeline on Linux interfaces.
//!
//! Layout: `contract`/`schema` (names and ids), `packet` (parser, checksums),
//! `tables` + `registers` (pipeline state), `pipeline` (one packet through
//! the tables), `dataplane` (AF_PACKET rings, workers, egress FIFOs),
//! `grpc` (BfRt server), `metrics` (Prometheus).

pub mod config;
pub mod contract;
pub mod packet;
pub mod pipeline;
pub mod registers;
pub mod schema;
pub mod tables;

use anyhow::Result;

/// Runs the switch until SIGINT/SIGTERM.
pub fn run(_config: config::Config) -> Result<()> {
    anyhow::bail!(
        "the data plane is being built; only --help and --dump-bfrt-json work in this commit"
    )
}
