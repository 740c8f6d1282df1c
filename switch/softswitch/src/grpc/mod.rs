//! BfRt gRPC server (`bfrt_proto.BfRuntime`), wire-compatible with bf_switchd
//! for the subset p4relay uses, and behaving as bf_switchd's server does
//! where a client can tell (bf_rt_server_impl.cpp of P4 Studio):
//! - sessions: a client opens StreamChannel and Subscribes, then BINDs with
//!   SetForwardingPipelineConfig; Read/Write from a bound client id, or from
//!   any client id that names the program (`p4_name`), subscribed or not.
//!   When the stream ends the id is free. A `DigestListAck` ends the stream
//!   with UNIMPLEMENTED "Not yet implemented" (bf_switchd does not implement it);
//! - errors: a Write (Read) with failed updates (entities) fails with UNKNOWN
//!   "Write Error Status" ("Read Error Status"), its details one
//!   `bfrt_proto.Error` per update up to the last failure (the successes
//!   before it as empty Errors); DATAPLANE_ATOMIC is UNIMPLEMENTED;
//!   With request metadata `error_in_resp: 1` the outcomes go in the
//!   response's `status` instead and the call succeeds;
//! - reads: a keyless TableEntry read returns every entry and then the
//!   default entry; a read naming data fields gets only those; ObjectId and
//!   HandleId reads resolve names and handles;
//! - warm init (VERIFY_AND_WARM_INIT_*, WARM_INIT_END): the pipeline is
//!   reset and the client's stream gets WARM_INIT_STARTED / _FINISHED.

// tonic::Status is the API's error type end to end; boxing it buys nothing here.
#![allow(clippy::result_large_err)]

pub mod codec;
pub mod entries;
pub mod notify;
mod objects;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::Mutex;
use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::dataplane::Port;
use crate::pipeline::Pipeline;
use crate::schema::Schema;

pub mod google {
    pub mod rpc {
        tonic::include_proto!("google.rpc");
    }
}

pub mod pb {
    tonic::include_proto!("bfrt_proto");
}

use pb::bf_runtime_server::{BfRuntime, BfRuntimeServer};
use pb::write_request::Atomicity;

pub const P4_NAME: &str = "p4relay";
pub const DEVICE_ID: u32 = 0;
/// The software switch is one pipe (a Tofino 1 has two or four): every
/// dev_port it can have (below the contract's max_ports) is in pipe 0.
pub const PIPES: u32 = 1;

/// The pipe of a dev_port, Tofino 1's layout (dev_port bits 8:7).
pub fn pipe_of(dev_port: u32) -> u32 {
    (dev_port >> 7) & 0x3
}

#[derive(Debug, Clone, Copy, Default)]
struct Session {
    stream: u64,
    bound: bool,
}

/// A subscribed client's notification channel.
pub struct Subscriber {
    pub stream: u64,
    pub learn: bool,
    pub idle: bool,
    pub tx: mpsc::Sender<Result<pb::StreamMessageResponse, Status>>,
}

/// Idle-timeout sweeping of `pipe.Ingress.relay` (the IdleTimeout attribute).
pub struct IdleConfig {
    pub enabled: AtomicBool,
    pub interval_ms: AtomicU32,
    /// IDLE_TABLE_POLL_MODE: hit states sampled on UpdateHitState, no ageing.
    pub poll: AtomicBool,
}

/// Everything the control plane reaches: schema, pipeline, ports, sessions.
pub struct Switch {
    pub schema: Schema,
    pub pipeline: Arc<Pipeline>,
    pub ports: Arc<Vec<Port>>,
    sessions: Mutex<HashMap<u32, Session>>,
    pub subscribers: Mutex<HashMap<u32, Subscriber>>,
    pub idle: IdleConfig,
    /// relay6's idle timeout (NOTIFY mode only).
    pub idle6: IdleConfig,
    /// The relay table's sampled hit states (POLL mode).
    poll_hits: Mutex<entries::relay::PollHits>,
    next_stream: AtomicU64,
    /// Serializes Write batches so a rollback sees only its own changes.
    write_lock: Mutex<()>,
    pub writes_ok: AtomicU64,
    pub writes_failed: AtomicU64,
    pub notifications_dropped: AtomicU64,
    /// Entry handles given out by HandleId reads.
    handles: Mutex<objects::Handles>,
    /// What the data plane runs on (`Io::label`), once started.
    pub dataplane_io: std::sync::OnceLock<&'static str>,
    /// The XDP fast path's attach mode (`p4relay_xdp_mode`), once attached.
    pub xdp_mode: std::sync::OnceLock<&'static str>,
}

impl Switch {
    pub fn new(schema: Schema, pipeline: Arc<Pipeline>, ports: Arc<Vec<Port>>) -> Switch {
        Switch {
            schema,
            pipeline,
            ports,
            sessions: Mutex::new(HashMap::new()),
            subscribers: Mutex::new(HashMap::new()),
            idle: IdleConfig {
                enabled: AtomicBool::new(true),
                interval_ms: AtomicU32::new(200),
                poll: AtomicBool::new(false),
            },
            idle6: IdleConfig {
                enabled: AtomicBool::new(true),
                interval_ms: AtomicU32::new(200),
                poll: AtomicBool::new(false),
            },
            poll_hits: Mutex::new(entries::relay::PollHits::default()),
            next_stream: AtomicU64::new(1),
            write_lock: Mutex::new(()),
            writes_ok: AtomicU64::new(0),
            writes_failed: AtomicU64::new(0),
            notifications_dropped: AtomicU64::new(0),
            handles: Mutex::new(objects::Handles::default()),
            dataplane_io: std::sync::OnceLock::new(),
            xdp_mode: std::sync::OnceLock::new(),
        }
    }

    fn check_target(&self, device: Option<&pb::TargetDevice>, p4_name: &str) -> Result<(), Status> {
        if let Some(t) = device {
            if t.device_id != DEVICE_ID {
                return Err(Status::not_found(format!(
                    "device {} does not exist (device 0 only)",
                    t.device_id
                )));
            }
        }
        if !p4_name.is_empty() && p4_name != P4_NAME {
            return Err(Status::not_found(format!(
                "program {p4_name:?} is not loaded (only {P4_NAME:?})"
            )));
        }
        Ok(())
    }

    /// Who may Read/Write: a client naming the program (`p4_name`), whether
    /// or not it subscribed (bf_switchd's independent clients), or one bound
    /// to it.
    fn check_session(
        &self,
        device: Option<&pb::TargetDevice>,
        p4_name: &str,
        client_id: u32,
    ) -> Result<(), Status> {
        self.check_target(device, p4_name)?;
        if p4_name.is_empty() {
            self.check_bound(client_id)?;
        }
        Ok(())
    }

    fn check_bound(&self, client_id: u32) -> Result<(), Status> {
        match self.sessions.lock().get(&client_id) {
            Some(s) if s.bound => Ok(()),
            Some(_) => Err(Status::failed_precondition(format!("client {client_id} is not bound to {P4_NAME}: SetForwardingPipelineConfig(BIND) first"))),
            None => Err(Status::failed_precondition(format!("client {client_id} has no StreamChannel subscription: Subscribe, then BIND"))),
        }
    }

    fn mirror(&self, t: &crate::pipeline::Touched) {
        self.pipeline.mirror(t);
        if t.ports {
            self.sync_fast_ports();
        }
    }

    /// Which ports the fast path may use: enabled ones receive; enabled,
    /// unshaped ones without iRED or an INT hop with link up send (a shaped
    /// port's FIFO is user space's).
    pub fn sync_fast_ports(&self) {
        let Some(fp) = &self.pipeline.fastpath else {
            return;
        };
        for p in self.ports.iter() {
            let enabled = p.enabled.load(Relaxed);
            let unshaped = p.stats.egress.rate_bps.load(Relaxed) == 0;
            // iRED decides, and INT writes its hop, in user space at the port's FIFO.
            let fast = enabled
                && unshaped
                && !self.pipeline.ired_on(p.id)
                && !self.pipeline.int_hop_on(p.id)
                && p.link_up();
            fp.set_port(p.id, enabled, fast);
            if let Ok(port) = u16::try_from(p.id) {
                fp.set_port_unbound(p.id, self.pipeline.port_binding.unbound(port));
            }
        }
    }

    /// Applies one Write batch with the request's atomicity.
    pub fn write_batch(&self, req: &pb::WriteRequest) -> Result<(), Status> {
        self.write_batch_reported(req)?.into_result()
    }

    /// Applies one Write batch; its failed updates in the reporter (the
    /// call's status, or with `error_in_resp` the response's).
    fn write_batch_reported(&self, req: &pb::WriteRequest) -> Result<ErrorReporter, Status> {
        self.check_session(req.target.as_ref(), &req.p4_name, req.client_id)?;
        let atomicity = Atomicity::try_from(req.atomicity)
            .map_err(|_| Status::invalid_argument("unknown atomicity"))?;
        if atomicity == Atomicity::DataplaneAtomic {
            return Err(Status::unimplemented(
                "DATAPLANE_ATOMIC isn't implemented Not implemented",
            ));
        }
        let rollback = atomicity == Atomicity::RollbackOnError;
        let _w = self.write_lock.lock();
        let mut undo = Vec::new();
        let mut report = ErrorReporter::new(WRITE_ERROR_STATUS);
        for u in &req.updates {
            let r = self.apply_update(u, &mut undo);
            let failed = r.is_err();
            report.push(r);
            if failed && rollback {
                break;
            }
        }
        // The fast path mirrors the result (applied or rolled back) before we answer.
        let touched = entries::touched(&undo);
        if report.ok() {
            self.writes_ok.fetch_add(req.updates.len() as u64, Relaxed);
            self.mirror(&touched);
            return Ok(report);
        }
        self.writes_failed.fetch_add(1, Relaxed);
        if rollback {
            for u in undo.into_iter().rev() {
                self.undo(u);
            }
        }
        self.mirror(&touched);
        Ok(report)
    }

    fn apply_update(&self, u: &pb::Update, undo: &mut Vec<entries::Undo>) -> Result<(), Status> {
        let ty = pb::update::Type::try_from(u.r#type)
            .map_err(|_| Status::invalid_argument(format!("unknown update type {}", u.r#type)))?;
        let entity = u
            .entity
            .as_ref()
            .and_then(|e| e.entity.as_ref())
            .ok_or_else(|| Status::invalid_argument("update without entity"))?;
        match entity {
            pb::entity::Entity::TableEntry(te) => {
                if let Some(t) = &te.entry_tgt {
                    if t.device_id != DEVICE_ID {
                        return Err(Status::not_found(format!(
                            "device {} does not exist",
                            t.device_id
                        )));
                    }
                }
                self.apply(ty, te, undo)
            }
            pb::entity::Entity::TableAttribute(a) => self.apply_attribute(a),
            pb::entity::Entity::TableOperation(op) => {
                self.schema.table(op.table_id).ok_or_else(|| {
                    Status::invalid_argument(format!("unknown table id {}", op.table_id))
                })?;
                match op.table_operations_type.as_str() {
                    // In POLL mode, hit states are sampled now.
                    "UpdateHitState" if self.idle.poll.load(Relaxed) => {
                        self.poll_hits.lock().sample(self, crate::sys::now_ms());
                        Ok(())
                    }
                    // Counters (and NOTIFY-mode hit state) are always live in software.
                    "SyncCounters" | "UpdateHitState" | "Sync" | "SyncRegisters" => Ok(()),
                    o => Err(Status::invalid_argument(format!(
                        "table operation {o:?} not supported"
                    ))),
                }
            }
            _ => Err(Status::unimplemented(
                "only table entries, attributes and operations can be written",
            )),
        }
    }

    fn apply_attribute(&self, a: &pb::TableAttribute) -> Result<(), Status> {
        let t = self
            .schema
            .table(a.table_id)
            .ok_or_else(|| Status::invalid_argument(format!("unknown table id {}", a.table_id)))?;
        match &a.attribute {
            Some(pb::table_attribute::Attribute::IdleTable(it))
                if t.kind == crate::schema::TableKind::Relay6 =>
            {
                use pb::idle_table::IdleTableMode;
                if IdleTableMode::try_from(it.idle_table_mode)
                    != Ok(IdleTableMode::IdleTableNotifyMode)
                {
                    return Err(Status::invalid_argument(format!(
                        "{}: idle_table_mode {}: this switch ages relay6 in NOTIFY mode only",
                        t.name, it.idle_table_mode
                    )));
                }
                self.idle6.enabled.store(it.enable, Relaxed);
                if it.ttl_query_interval > 0 {
                    self.idle6
                        .interval_ms
                        .store(it.ttl_query_interval.clamp(10, 10_000), Relaxed);
                }
                Ok(())
            }
            Some(pb::table_attribute::Attribute::IdleTable(it)) => {
                if t.kind != crate::schema::TableKind::Relay {
                    return Err(Status::invalid_argument(format!(
                        "{} has no idle timeout",
                        t.name
                    )));
                }
                use pb::idle_table::IdleTableMode;
                let poll = match IdleTableMode::try_from(it.idle_table_mode) {
                    Ok(IdleTableMode::IdleTablePollMode) => true,
                    Ok(IdleTableMode::IdleTableNotifyMode) => false,
                    Err(_) => {
                        return Err(Status::invalid_argument(format!(
                            "unknown idle_table_mode {}",
                            it.idle_table_mode
                        )))
                    }
                };
                let poll = poll && it.enable;
                if poll && !self.idle.poll.load(Relaxed) {
                    self.poll_hits.lock().start(crate::sys::now_ms());
                }
                self.idle.poll.store(poll, Relaxed);
                self.idle.enabled.store(it.enable, Relaxed);
                if it.ttl_query_interval > 0 {
                    self.idle
                        .interval_ms
                        .store(it.ttl_query_interval.clamp(10, 10_000), Relaxed);
                }
                Ok(())
            }
            // One pipe: every scope is the same.
            Some(pb::table_attribute::Attribute::EntryScope(_)) => Ok(()),
            Some(pb::table_attribute::Attribute::PortStatusNotify(_)) => Ok(()),
            None => Err(Status::invalid_argument("attribute missing")),
        }
    }

    fn read_attribute(&self, a: &pb::TableAttribute) -> Result<pb::TableAttribute, Status> {
        let t = self
            .schema
            .table(a.table_id)
            .ok_or_else(|| Status::invalid_argument(format!("unknown table id {}", a.table_id)))?;
        match &a.attribute {
            Some(pb::table_attribute::Attribute::IdleTable(_))
                if t.kind == crate::schema::TableKind::Relay6 =>
            {
                Ok(pb::TableAttribute {
                    table_id: t.id,
                    attribute: Some(pb::table_attribute::Attribute::IdleTable(pb::IdleTable {
                        ttl_query_interval: self.idle6.interval_ms.load(Relaxed),
                        max_ttl: u32::MAX,
                        min_ttl: crate::contract::CONTRACT.config.idle_timeout_min_ms,
                        idle_table_mode: pb::idle_table::IdleTableMode::IdleTableNotifyMode as i32,
                        enable: self.idle6.enabled.load(Relaxed),
                    })),
                })
            }
            Some(pb::table_attribute::Attribute::IdleTable(_))
                if t.kind == crate::schema::TableKind::Relay =>
            {
                Ok(pb::TableAttribute {
                    table_id: t.id,
                    // bf_switchd reports the notify parameters in NOTIFY mode only.
                    attribute: Some(pb::table_attribute::Attribute::IdleTable(
                        if self.idle.poll.load(Relaxed) {
                            pb::IdleTable {
                                ttl_query_interval: 0,
                                max_ttl: 0,
                                min_ttl: 0,
                                idle_table_mode: pb::idle_table::IdleTableMode::IdleTablePollMode
                                    as i32,
                                enable: true,
                            }
                        } else {
                            pb::IdleTable {
                                ttl_query_interval: self.idle.interval_ms.load(Relaxed),
                                max_ttl: u32::MAX,
                                min_ttl: crate::contract::CONTRACT.config.idle_timeout_min_ms,
                                idle_table_mode: pb::idle_table::IdleTableMode::IdleTableNotifyMode
                                    as i32,
                                enable: self.idle.enabled.load(Relaxed),
                            }
                        },
                    )),
                })
            }
            Some(pb::table_attribute::Attribute::EntryScope(_)) => Ok(pb::TableAttribute {
                table_id: t.id,
                attribute: Some(pb::table_attribute::Attribute::EntryScope(pb::EntryScope {
                    gress_scope: None,
                    pipe_scope: Some(pb::Mode {
                        scope: Some(pb::mode::Scope::Predef(
                            pb::mode::PredefinedMode::All as i32,
                        )),
                        args: 0,
                    }),
                    prsr_scope: None,
                })),
            }),
            _ => Err(Status::invalid_argument(format!(
                "{}: attribute not readable",
                t.name
            ))),
        }
    }

    /// Answers one Read: entries are sent in chunks as they are produced;
    /// an entity that fails is reported in the call's final status (after
    /// whatever the others produced), as bf_switchd does.
    pub fn read(
        &self,
        req: &pb::ReadRequest,
        send: &mut dyn FnMut(pb::ReadResponse) -> bool,
    ) -> Result<(), Status> {
        self.read_reported(req, send, false)
    }

    /// A Read; with `error_in_resp` its failures go in the last response's
    /// `status` (one Error per entity) and the call succeeds.
    fn read_reported(
        &self,
        req: &pb::ReadRequest,
        send: &mut dyn FnMut(pb::ReadResponse) -> bool,
        error_in_resp: bool,
    ) -> Result<(), Status> {
        self.check_session(req.target.as_ref(), &req.p4_name, req.client_id)?;
        const CHUNK: usize = 2048;
        let mut buf: Vec<pb::Entity> = Vec::new();
        let mut alive = true;
        let mut report = ErrorReporter::new(READ_ERROR_STATUS);
        for e in &req.entities {
            let mut out = |entity: pb::entity::Entity| {
                buf.push(pb::Entity {
                    entity: Some(entity),
                });
                if buf.len() >= CHUNK && alive {
                    alive = send(pb::ReadResponse {
                        entities: std::mem::take(&mut buf),
                        status: vec![],
                    });
                }
            };
            report.push(self.read_entity(e, &mut out));
            if !alive {
                return Ok(());
            }
        }
        if error_in_resp {
            send(pb::ReadResponse {
                entities: buf,
                status: report.into_statuses(),
            });
            return Ok(());
        }
        if !buf.is_empty() || alive {
            send(pb::ReadResponse {
                entities: buf,
                status: vec![],
            });
        }
        report.into_result()
    }

    /// One entity of a Read.
    fn read_entity(
        &self,
        e: &pb::Entity,
        out: &mut dyn FnMut(pb::entity::Entity),
    ) -> Result<(), Status> {
        match e.entity.as_ref() {
            Some(pb::entity::Entity::TableEntry(te)) => {
                self.read_entries(te, &mut |entry| out(pb::entity::Entity::TableEntry(entry)))
            }
            Some(pb::entity::Entity::TableUsage(u)) => {
                let t = self.schema.table(u.table_id).ok_or_else(|| {
                    Status::invalid_argument(format!("unknown table id {}", u.table_id))
                })?;
                out(pb::entity::Entity::TableUsage(pb::TableUsage {
                    table_id: t.id,
                    usage: self.usage(t),
                    table_flags: None,
                }));
                Ok(())
            }
            Some(pb::entity::Entity::TableAttribute(a)) => {
                out(pb::entity::Entity::TableAttribute(self.read_attribute(a)?));
                Ok(())
            }
            Some(pb::entity::Entity::ObjectId(o)) => {
                out(pb::entity::Entity::ObjectId(self.read_object_id(o)?));
                Ok(())
            }
            Some(pb::entity::Entity::Handle(h)) => {
                out(pb::entity::Entity::Handle(self.read_handle(h)?));
                Ok(())
            }
            Some(pb::entity::Entity::TableOperation(_)) => Err(Status::unimplemented(
                "Read operation not available on TableOperation Not supported",
            )),
            None => Err(Status::invalid_argument("Invalid Read entity received")),
        }
    }

    fn subscribe(
        &self,
        client_id: u32,
        stream: u64,
        s: &pb::Subscribe,
        tx: mpsc::Sender<Result<pb::StreamMessageResponse, Status>>,
    ) -> Result<(), Status> {
        if s.device_id != DEVICE_ID {
            return Err(Status::not_found(format!(
                "device {} does not exist (device 0 only)",
                s.device_id
            )));
        }
        let mut sessions = self.sessions.lock();
        if let Some(old) = sessions.get(&client_id) {
            if old.stream != stream {
                return Err(Status::already_exists(format!(
                    "client id {client_id} is in use by another stream"
                )));
            }
        }
        let bound = sessions.get(&client_id).is_some_and(|s| s.bound);
        sessions.insert(client_id, Session { stream, bound });
        let n = s.notifications.unwrap_or_default();
        self.subscribers.lock().insert(
            client_id,
            Subscriber {
                stream,
                learn: n.enable_learn_notifications,
                idle: n.enable_idletimeout_notifications,
                tx,
            },
        );
        tracing::info!(
            client_id,
            learn = n.enable_learn_notifications,
            idle = n.enable_idletimeout_notifications,
            "client subscribed"
        );
        Ok(())
    }

    fn stream_closed(&self, client_id: u32, stream: u64) {
        let mut sessions = self.sessions.lock();
        if sessions.get(&client_id).is_some_and(|s| s.stream == stream) {
            sessions.remove(&client_id);
            self.subscribers.lock().remove(&client_id);
            tracing::info!(client_id, "client stream closed");
        }
    }

    pub fn set_pipeline(
        &self,
        req: &pb::SetForwardingPipelineConfigRequest,
    ) -> Result<pb::SetForwardingPipelineConfigResponse, Status> {
        use pb::set_forwarding_pipeline_config_request::Action;
        if req.device_id != DEVICE_ID {
            return Err(Status::not_found(format!(
                "device {} does not exist (device 0 only)",
                req.device_id
            )));
        }
        let action =
            Action::try_from(req.action).map_err(|_| Status::invalid_argument("unknown action"))?;
        for c in &req.config {
            if c.p4_name != P4_NAME {
                return Err(Status::not_found(format!(
                    "program {:?} is not available: this switch runs {P4_NAME:?}",
                    c.p4_name
                )));
            }
        }
        let mut sessions = self.sessions.lock();
        let s = sessions.get_mut(&req.client_id).ok_or_else(|| {
            Status::failed_precondition(format!(
                "client {}: open StreamChannel and Subscribe before SetForwardingPipelineConfig",
                req.client_id
            ))
        })?;
        let ty = match action {
            Action::Bind => {
                if req.config.is_empty() {
                    return Err(Status::invalid_argument("BIND needs config[0].p4_name"));
                }
                s.bound = true;
                pb::SetForwardingPipelineConfigResponseType::WarmInitFinished
            }
            Action::Verify => pb::SetForwardingPipelineConfigResponseType::WarmInitFinished,
            Action::VerifyAndWarmInitBegin
            | Action::VerifyAndWarmInitBeginAndEnd
            | Action::ReconcileAndWarmInitEnd => {
                // Loading "the" program again: start from empty tables, bound.
                s.bound = true;
                drop(sessions);
                let _w = self.write_lock.lock();
                self.pipeline.clear();
                tracing::info!(client_id = req.client_id, ?action, "pipeline reset");
                if action == Action::VerifyAndWarmInitBegin {
                    pb::SetForwardingPipelineConfigResponseType::WarmInitStarted
                } else {
                    pb::SetForwardingPipelineConfigResponseType::WarmInitFinished
                }
            }
            Action::WarmInitEnd => pb::SetForwardingPipelineConfigResponseType::WarmInitFinished,
        };
        // bf_switchd tells the client on its stream where a warm init
        // stands (bfrt_grpc waits for these, e.g. in clear_all_tables).
        use pb::SetForwardingPipelineConfigResponseType as R;
        let notices: &[R] = match action {
            Action::VerifyAndWarmInitBegin => &[R::WarmInitStarted],
            Action::VerifyAndWarmInitBeginAndEnd => &[R::WarmInitStarted, R::WarmInitFinished],
            Action::WarmInitEnd | Action::ReconcileAndWarmInitEnd => &[R::WarmInitFinished],
            Action::Bind | Action::Verify => &[],
        };
        self.notify_warm_init(req.client_id, notices);
        Ok(pb::SetForwardingPipelineConfigResponse {
            set_forwarding_pipeline_config_response_type: ty as i32,
        })
    }

    /// Sends the warm-init notices to one client's stream.
    fn notify_warm_init(
        &self,
        client_id: u32,
        notices: &[pb::SetForwardingPipelineConfigResponseType],
    ) {
        let subs = self.subscribers.lock();
        let Some(s) = subs.get(&client_id) else {
            return;
        };
        for n in notices {
            let msg = pb::StreamMessageResponse {
                update: Some(
                    pb::stream_message_response::Update::SetForwardingPipelineConfigResponse(
                        pb::SetForwardingPipelineConfigResponse {
                            set_forwarding_pipeline_config_response_type: *n as i32,
                        },
                    ),
                ),
            };
            if s.tx.try_send(Ok(msg)).is_err() {
                self.notifications_dropped.fetch_add(1, Relaxed);
            }
        }
    }

    pub fn pipeline_config(&self) -> pb::GetForwardingPipelineConfigResponse {
        pb::GetForwardingPipelineConfigResponse {
            config: vec![pb::ForwardingPipelineConfig {
                p4_name: P4_NAME.into(),
                bfruntime_info: self.schema.bfrt_json.clone().into_bytes(),
                profiles: vec![pb::forwarding_pipeline_config::Profile {
                    profile_name: "pipe".into(),
                    context: vec![],
                    binary: vec![],
                    pipe_scope: vec![0],
                }],
            }],
            non_p4_config: Some(pb::NonP4Config {
                bfruntime_info: self.schema.fixed_json.clone().into_bytes(),
            }),
        }
    }
}

/// The tonic service.
#[derive(Clone)]
pub struct Service {
    pub sw: Arc<Switch>,
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Status> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::internal(format!("worker failed: {e}")))?
}

#[tonic::async_trait]
impl BfRuntime for Service {
    async fn write(
        &self,
        request: Request<pb::WriteRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let sw = self.sw.clone();
        let error_in_resp = error_in_resp(request.metadata());
        let req = request.into_inner();
        let report = blocking(move || sw.write_batch_reported(&req)).await?;
        if error_in_resp {
            return Ok(Response::new(pb::WriteResponse {
                status: report.into_statuses(),
            }));
        }
        report.into_result()?;
        Ok(Response::new(pb::WriteResponse { status: vec![] }))
    }

    type ReadStream = BoxStream<pb::ReadResponse>;

    async fn read(
        &self,
        request: Request<pb::ReadRequest>,
    ) -> Result<Response<Self::ReadStream>, Status> {
        let sw = self.sw.clone();
        let error_in_resp = error_in_resp(request.metadata());
        let req = request.into_inner();
        // Validate the session up front so errors come back as the call's status.
        sw.check_session(req.target.as_ref(), &req.p4_name, req.client_id)?;
        let (tx, rx) = mpsc::channel(4);
        tokio::task::spawn_blocking(move || {
            let mut send = |r: pb::ReadResponse| tx.blocking_send(Ok(r)).is_ok();
            if let Err(e) = sw.read_reported(&req, &mut send, error_in_resp) {
                let _ = tx.blocking_send(Err(e));
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<pb::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<pb::SetForwardingPipelineConfigResponse>, Status> {
        let sw = self.sw.clone();
        let req = request.into_inner();
        Ok(Response::new(
            blocking(move || sw.set_pipeline(&req)).await?,
        ))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        request: Request<pb::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<pb::GetForwardingPipelineConfigResponse>, Status> {
        let req = request.into_inner();
        if req.device_id != DEVICE_ID {
            return Err(Status::not_found(format!(
                "device {} does not exist (device 0 only)",
                req.device_id
            )));
        }
        Ok(Response::new(self.sw.pipeline_config()))
    }

    type StreamChannelStream = BoxStream<pb::StreamMessageResponse>;

    async fn stream_channel(
        &self,
        request: Request<Streaming<pb::StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(4096);
        let sw = self.sw.clone();
        let stream = sw.next_stream.fetch_add(1, Relaxed);
        tokio::spawn(async move {
            let mut client: Option<u32> = None;
            while let Some(msg) = inbound.next().await {
                let Ok(msg) = msg else { break };
                match msg.update {
                    Some(pb::stream_message_request::Update::Subscribe(s)) => {
                        if client.is_some_and(|c| c != msg.client_id) {
                            let _ = tx
                                .send(Err(Status::invalid_argument("one client id per stream")))
                                .await;
                            break;
                        }
                        match sw.subscribe(msg.client_id, stream, &s, tx.clone()) {
                            Ok(()) => {
                                client = Some(msg.client_id);
                                let answer = pb::Subscribe {
                                    status: Some(google::rpc::Status {
                                        code: 0,
                                        message: "subscribed".into(),
                                        details: vec![],
                                    }),
                                    ..s
                                };
                                let _ = tx
                                    .send(Ok(pb::StreamMessageResponse {
                                        update: Some(
                                            pb::stream_message_response::Update::Subscribe(answer),
                                        ),
                                    }))
                                    .await;
                            }
                            Err(e) => {
                                let _ = tx.send(Err(e)).await;
                                break;
                            }
                        }
                    }
                    // bf_switchd: check_and_return(BF_NOT_SUPPORTED, "Not yet
                    // implemented"), which ends the stream and with it the
                    // client's subscription.
                    Some(pb::stream_message_request::Update::DigestAck(_)) => {
                        let _ = tx
                            .send(Err(Status::unimplemented(
                                "Not yet implemented Not supported",
                            )))
                            .await;
                        break;
                    }
                    None => {}
                }
            }
            if let Some(c) = client {
                sw.stream_closed(c, stream);
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

pub fn server(sw: Arc<Switch>) -> BfRuntimeServer<Service> {
    BfRuntimeServer::new(Service { sw })
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

#[cfg(test)]
mod tests;

/// bf_switchd's request metadata `error_in_resp: 1`: failures go in the
/// response's `status` list instead of failing the call.
fn error_in_resp(md: &tonic::metadata::MetadataMap) -> bool {
    md.get("error_in_resp").is_some_and(|v| v == "1")
}

const WRITE_ERROR_STATUS: &str = "Write Error Status";
const READ_ERROR_STATUS: &str = "Read Error Status";

/// bf_switchd's BfRtServerErrorReporter: the outcome of each update (entity)
/// of a call, turned into one status. All ok: OK. Otherwise UNKNOWN with the
/// reporter's message and, in `grpc-status-details-bin`, a `google.rpc.Status`
/// whose details are one `Any(bfrt_proto.Error)` per update up to the last
/// failure: an empty Error for a success, `canonical_code` and `message` for
/// a failure.
struct ErrorReporter {
    message: &'static str,
    outcomes: Vec<pb::Error>,
    last_failure: Option<usize>,
}

impl ErrorReporter {
    fn new(message: &'static str) -> ErrorReporter {
        ErrorReporter {
            message,
            outcomes: Vec::new(),
            last_failure: None,
        }
    }

    fn push(&mut self, r: Result<(), Status>) {
        let e = match r {
            Ok(()) => pb::Error::default(),
            Err(e) => {
                self.last_failure = Some(self.outcomes.len());
                pb::Error {
                    canonical_code: e.code() as i32,
                    message: e.message().to_string(),
                    space: String::new(),
                    code: 0,
                }
            }
        };
        self.outcomes.push(e);
    }

    fn ok(&self) -> bool {
        self.last_failure.is_none()
    }

    /// The outcome of every update (entity), for a response's `status`.
    fn into_statuses(self) -> Vec<pb::Error> {
        self.outcomes
    }

    fn into_result(mut self) -> Result<(), Status> {
        let Some(last) = self.last_failure else {
            return Ok(());
        };
        self.outcomes.truncate(last + 1);
        let details = google::rpc::Status {
            code: tonic::Code::Unknown as i32,
            message: self.message.to_string(),
            details: error_details(self.outcomes),
        };
        Err(Status::with_details(
            tonic::Code::Unknown,
            self.message,
            details.encode_to_vec().into(),
        ))
    }
}

/// The details name every update up to the last failure, as bf_switchd's do:
/// a failure is known by its position, so a list cut short of it names
/// nothing. A large batch's list outgrows grpc's default 8 KiB metadata limit;
/// p4relay's client raises its limit to 32 MiB (`grpc.max_metadata_size`), so
/// the list is kept whole up to 16 MiB (21 MiB as base64 in the trailer): a
/// success costs ~40 bytes, 350,000 updates. Later failures keep only their
/// codes (the first keeps its text); past the budget the list is cut.
fn error_details(mut errors: Vec<pb::Error>) -> Vec<prost_types::Any> {
    const BUDGET: usize = 16 << 20;
    let mut seen_failure = false;
    for e in errors.iter_mut() {
        if e.canonical_code != 0 {
            if seen_failure {
                e.message.clear();
            }
            seen_failure = true;
        }
    }
    let mut used = 0;
    let mut out = Vec::with_capacity(errors.len());
    for e in &errors {
        let value = e.encode_to_vec();
        used += value.len() + 48; // type_url and framing
        if used > BUDGET {
            break;
        }
        out.push(prost_types::Any {
            type_url: "type.googleapis.com/bfrt_proto.Error".into(),
            value,
        });
    }
    out
}
