//! Pipeline state that the control plane writes and the data plane reads.
//!
//! - `relay`, `guard`: the big exact-match tables (4M entries each), sharded
//!   behind RwLocks (`exact`); the data path holds a shard's read lock for one
//!   lookup only.
//! - `relay`, `guard` also hold the IPv6 tables' keys (`relay6`,
//!   `relay_guard6`), on the same exact-match table.
//! - `legs`: leg_rewrite, a direct-indexed array with a seqlock per slot, so
//!   readers never wait, and its direct counter (per leg).
//! - `legs6`: leg_rewrite6 (128-bit rewrites; legs are shared with
//!   leg_rewrite, a leg has an entry in one of the two).
//! - `counter`: indexed packet counters (guard_drops, by leg).
//! - `small`: ipv4_lpm, nexthop, relay_addr: rarely written, so the data path
//!   reads an immutable snapshot (arc-swap) and writers publish a new one;
//!   `small6` the IPv6 ones in it; `maps` their maps, write rule and LPM index.

pub mod counter;
pub mod exact;
pub mod guard;
pub mod legs;
pub mod legs6;
pub mod maps;
pub mod relay;
pub mod small;
pub mod small6;

/// Why a table write failed; mapped to gRPC status codes by the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("entry already exists")]
    AlreadyExists,
    #[error("entry not found")]
    NotFound,
    #[error("table full ({0} entries)")]
    Full(usize),
    #[error("{0}")]
    Invalid(String),
}
