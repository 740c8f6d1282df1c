//! The fixed tables of ports and queues: `$PORT` (enable), `$PORT_STAT`,
//! `tf1.tm.port.sched_shaping` (egress rate), `tf1.tm.counter.queue`.

use std::sync::atomic::Ordering::Relaxed;

use tonic::Status;

use super::{Op, Reader, Target, Undo, Update};
use crate::contract::names;
use crate::dataplane::Port;
use crate::grpc::codec::{df_bool, df_int, df_int_array, df_str, invalid, key_exact, Keys};
use crate::grpc::{pb, Switch};
use crate::pipeline::mirror::PortCounts;
use crate::schema::{TableKind, TableSchema};

impl Switch {
    /// The index in `ports` of a dev port.
    pub(super) fn port_index(&self, dev_port: u64) -> Result<usize, Status> {
        self.ports
            .iter()
            .position(|p| u64::from(p.id) == dev_port)
            .ok_or_else(|| {
                Status::not_found(format!("dev_port {dev_port} is not a port of this switch"))
            })
    }
}

fn one_queue(keys: &Keys) -> Result<(), Status> {
    if keys.exact(names::KEY_PG_QUEUE)? != 0 {
        return Err(Status::not_found(
            "the softswitch has one queue per port: pg_queue 0",
        ));
    }
    Ok(())
}

pub(super) fn apply(u: &mut Update) -> Result<(), Status> {
    let (sw, t, op) = (u.sw, u.t, u.op);
    if t.kind == TableKind::DevConfig {
        return Err(invalid(format!(
            "{}: the fields this switch serves are read-only",
            t.name
        )));
    }
    let keys = u.keys()?;
    match t.kind {
        TableKind::Port => {
            let i = sw.port_index(keys.exact(names::KEY_DEV_PORT)?)?;
            let enable = match op {
                Op::Delete => Some(false),
                _ => u
                    .data
                    .bool_opt(names::PORT_ENABLE)?
                    .or((op == Op::Insert).then_some(true)),
            };
            if let Some(e) = enable {
                let old = sw.ports[i].enabled.swap(e, Relaxed);
                u.undo.push(Undo::PortEnable(i, old));
            }
            Ok(())
        }
        TableKind::SchedShaping => {
            let i = sw.port_index(keys.exact(names::KEY_SHAPING_DEV_PORT)?)?;
            if let Some(unit) = u.data.str_opt(names::UNIT)? {
                if unit != "BPS" {
                    return Err(invalid(format!(
                        "{}: unit {unit:?} not supported (BPS only)",
                        t.name
                    )));
                }
            }
            let rate = if op == Op::Delete {
                Some(0)
            } else {
                u.data.int_opt(names::MAX_RATE)?
            };
            if let Some(kbps) = rate {
                let old = sw.ports[i].stats.egress.rate_bps.swap(kbps * 1000, Relaxed);
                u.undo.push(Undo::Rate(i, old));
            }
            Ok(())
        }
        TableKind::QueueCounter => {
            let i = sw.port_index(keys.exact(names::KEY_PG_ID)?)?;
            one_queue(&keys)?;
            let e = &sw.ports[i].stats.egress;
            if u.data.int_opt(names::WATERMARK_CELLS)?.is_some() || op == Op::Delete {
                e.watermark_cells
                    .store(sw.ports[i].queue_cells() as u32, Relaxed);
            }
            if u.data.int_opt(names::DROP_COUNT_PACKETS)?.is_some() || op == Op::Delete {
                e.tail_drops.store(0, Relaxed);
            }
            Ok(())
        }
        _ => Err(invalid(format!("{} is read-only", t.name))),
    }
}

pub(super) fn undo(sw: &Switch, u: Undo) {
    match u {
        Undo::PortEnable(i, v) => sw.ports[i].enabled.store(v, Relaxed),
        Undo::Rate(i, v) => sw.ports[i].stats.egress.rate_bps.store(v, Relaxed),
        _ => {}
    }
}

pub(super) fn read(
    r: &Reader,
    target: Target,
    out: &mut dyn FnMut(pb::TableEntry),
) -> Result<(), Status> {
    let (sw, t) = (r.sw, r.t);
    if t.kind == TableKind::DevConfig {
        // Keyless: its one entry is the default entry.
        return match target {
            Target::Key(_) => Err(invalid(format!("{} has no key", t.name))),
            _ => Ok(()),
        };
    }
    let only = match target {
        Target::Key(k) => {
            let keys = Keys::new(t, k)?;
            let dp = keys.exact(&t.keys[0].name)?;
            if t.kind == TableKind::QueueCounter {
                one_queue(&keys)?;
            }
            Some(sw.port_index(dp)?)
        }
        _ => None,
    };
    for (i, port) in sw.ports.iter().enumerate() {
        if only.is_some_and(|o| o != i) {
            continue;
        }
        let mut kf = vec![key_exact(&t.keys[0], u64::from(port.id))];
        if t.kind == TableKind::QueueCounter {
            kf.push(key_exact(&t.keys[1], 0));
        }
        out(r.entry(
            pb::TableKey { fields: kf },
            data_pb(t, port, sw.pipeline.fast_port_counts(port.id)),
        ));
    }
    Ok(())
}

fn data_pb(t: &TableSchema, port: &Port, fast: PortCounts) -> pb::TableData {
    let st = &port.stats;
    let e = &st.egress;
    let fields = t
        .data
        .iter()
        .filter_map(|f| {
            let id = f.id;
            Some(match f.name.as_str() {
                names::SPEED => df_str(id, "BF_SPEED_10G"),
                names::PORT_ENABLE => df_bool(id, port.enabled.load(Relaxed)),
                names::PORT_NAME => df_str(id, &port.ifname),
                names::PORT_UP => df_bool(id, port.link_up()),
                names::FRAMES_RX_OK => {
                    df_int(id, st.rx_packets.load(Relaxed) + fast.rx_packets, 64)
                }
                names::OCTETS_RX => df_int(id, st.rx_bytes.load(Relaxed) + fast.rx_bytes, 64),
                names::FRAMES_TX_OK => df_int(id, e.tx_packets.load(Relaxed) + fast.tx_packets, 64),
                names::OCTETS_TX => df_int(id, e.tx_bytes.load(Relaxed) + fast.tx_bytes, 64),
                names::FRAMES_DROPPED_BUFFER_FULL => df_int(id, e.tail_drops.load(Relaxed), 64),
                names::UNIT => df_str(id, "BPS"),
                names::PROVISIONING => df_str(id, "UPPER"),
                names::MAX_RATE => df_int(id, e.rate_bps.load(Relaxed) / 1000, 32),
                names::MAX_BURST_SIZE => df_int(id, 0, 32),
                names::USAGE_CELLS => df_int(id, port.queue_cells() as u64, f.bits),
                names::WATERMARK_CELLS => {
                    df_int(id, u64::from(e.watermark_cells.load(Relaxed)), f.bits)
                }
                names::DROP_COUNT_PACKETS => df_int(id, e.tail_drops.load(Relaxed), f.bits),
                _ => return None,
            })
        })
        .collect();
    pb::TableData {
        action_id: 0,
        fields,
    }
}

/// The softswitch as a device: one pipe of Tofino 1's 12 stages, and its
/// ports, every one external (no CPU, internal or recirculation ports).
pub(super) fn device_configuration(sw: &Switch, t: &TableSchema) -> pb::TableData {
    let ports: Vec<u32> = sw.ports.iter().map(|p| p.id).collect();
    let fields = t
        .data
        .iter()
        .filter_map(|f| {
            let id = f.id;
            Some(match f.name.as_str() {
                names::SKU => df_str(id, "UNKNOWN"),
                names::NUM_PIPES => df_int(id, u64::from(super::super::PIPES), 32),
                names::NUM_STAGES => df_int(id, 12, 32),
                names::NUM_MAX_PORTS => df_int(
                    id,
                    u64::from(crate::contract::CONTRACT.config.max_ports),
                    32,
                ),
                names::NUM_FRONT_PORTS => df_int(id, ports.len() as u64, 32),
                names::EXTERNAL_PORT_LIST => df_int_array(id, &ports),
                names::ETH_CPU_PORT_LIST | names::INTERNAL_PORT_LIST | names::RECIRC_PORT_LIST => {
                    df_int_array(id, &[])
                }
                names::INTR_BASED_LINK_MONITORING => df_bool(id, false),
                _ => return None,
            })
        })
        .collect();
    pb::TableData {
        action_id: 0,
        fields,
    }
}
