//! BfRt gRPC server (`bfrt_proto.BfRuntime`), wire-compatible with bf_switchd
//! for the subset p4relay uses. Sessions follow bf_switchd: a client opens
//! StreamChannel and Subscribes, then BINDs with SetForwardingPipelineConfig;
//! Read/Write need a bound client id. When the stream ends the id is free.

// tonic::Status is the API's error type end to end; boxing it buys nothing here.
#![allow(clippy::result_large_err)]

pub mod codec;
pub mod entries;
pub mod notify;

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
}

/// Everything the control plane reaches: schema, pipeline, ports, sessions.
pub struct Switch {
    pub schema: Schema,
    pub pipeline: Arc<Pipeline>,
    pub ports: Arc<Vec<Port>>,
    sessions: Mutex<HashMap<u32, Session>>,
    pub subscribers: Mutex<HashMap<u32, Subscriber>>,
    pub idle: IdleConfig,
    next_stream: AtomicU64,
    /// Serializes Write batches so a rollback sees only its own changes.
    write_lock: Mutex<()>,
    pub writes_ok: AtomicU64,
    pub writes_failed: AtomicU64,
    pub notifications_dropped: AtomicU64,
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
            },
            next_stream: AtomicU64::new(1),
            write_lock: Mutex::new(()),
            writes_ok: AtomicU64::new(0),
            writes_failed: AtomicU64::new(0),
            notifications_dropped: AtomicU64::new(0),
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
    /// unshaped ones with link up send (a shaped port's FIFO is user space's).
    pub fn sync_fast_ports(&self) {
        let Some(fp) = &self.pipeline.fastpath else {
            return;
        };
        for p in self.ports.iter() {
            let enabled = p.enabled.load(Relaxed);
            let unshaped = p.stats.egress.rate_bps.load(Relaxed) == 0;
            fp.set_port(p.id, enabled, enabled && unshaped && p.link_up());
        }
    }

    /// Applies one Write batch with the request's atomicity.
    pub fn write_batch(&self, req: &pb::WriteRequest) -> Result<(), Status> {
        self.check_target(req.target.as_ref(), &req.p4_name)?;
        self.check_bound(req.client_id)?;
        let atomicity = Atomicity::try_from(req.atomicity)
            .map_err(|_| Status::invalid_argument("unknown atomicity"))?;
        let rollback = atomicity != Atomicity::ContinueOnError;
        let _w = self.write_lock.lock();
        let mut undo = Vec::new();
        let mut errors: Vec<pb::Error> = Vec::with_capacity(req.updates.len());
        let mut first_err: Option<Status> = None;
        for u in &req.updates {
            let r = self.apply_update(u, &mut undo);
            match r {
                Ok(()) => errors.push(pb::Error {
                    canonical_code: 0,
                    message: String::new(),
                    space: String::new(),
                    code: 0,
                }),
                Err(e) => {
                    errors.push(pb::Error {
                        canonical_code: e.code() as i32,
                        message: e.message().to_string(),
                        space: String::new(),
                        code: e.code() as i32,
                    });
                    if first_err.is_none() {
                        first_err = Some(e);
                    }
                    if rollback {
                        break;
                    }
                }
            }
        }
        // The fast path mirrors the result (applied or rolled back) before we answer.
        let touched = entries::touched(&undo);
        let Some(first) = first_err else {
            self.writes_ok.fetch_add(req.updates.len() as u64, Relaxed);
            self.mirror(&touched);
            return Ok(());
        };
        self.writes_failed.fetch_add(1, Relaxed);
        if rollback {
            for u in undo.into_iter().rev() {
                self.undo(u);
            }
        }
        self.mirror(&touched);
        let failed = errors.iter().filter(|e| e.canonical_code != 0).count();
        // bf_switchd's shape: google.rpc.Status with one Any(bfrt_proto.Error) per update.
        let details = google::rpc::Status {
            code: first.code() as i32,
            message: first.message().to_string(),
            details: error_details(errors),
        };
        let msg = if req.updates.len() > 1 {
            format!(
                "{} of {} updates failed{}; first: {}",
                failed,
                req.updates.len(),
                if rollback { " (batch rolled back)" } else { "" },
                first.message()
            )
        } else {
            first.message().to_string()
        };
        Err(Status::with_details(
            first.code(),
            msg,
            details.encode_to_vec().into(),
        ))
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
                    // Counters and hit state are always live in software.
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
            Some(pb::table_attribute::Attribute::IdleTable(it)) => {
                if t.kind != crate::schema::TableKind::Relay {
                    return Err(Status::invalid_argument(format!(
                        "{} has no idle timeout",
                        t.name
                    )));
                }
                if it.idle_table_mode != pb::idle_table::IdleTableMode::IdleTableNotifyMode as i32
                    && it.enable
                {
                    return Err(Status::invalid_argument(
                        "only IDLE_TABLE_NOTIFY_MODE is supported",
                    ));
                }
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
                if t.kind == crate::schema::TableKind::Relay =>
            {
                Ok(pb::TableAttribute {
                    table_id: t.id,
                    attribute: Some(pb::table_attribute::Attribute::IdleTable(pb::IdleTable {
                        ttl_query_interval: self.idle.interval_ms.load(Relaxed),
                        max_ttl: u32::MAX,
                        min_ttl: crate::contract::CONTRACT.config.idle_timeout_min_ms,
                        idle_table_mode: pb::idle_table::IdleTableMode::IdleTableNotifyMode as i32,
                        enable: self.idle.enabled.load(Relaxed),
                    })),
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

    /// Answers one Read: entries are sent in chunks as they are produced.
    pub fn read(
        &self,
        req: &pb::ReadRequest,
        send: &mut dyn FnMut(pb::ReadResponse) -> bool,
    ) -> Result<(), Status> {
        self.check_target(req.target.as_ref(), &req.p4_name)?;
        self.check_bound(req.client_id)?;
        const CHUNK: usize = 2048;
        let mut buf: Vec<pb::Entity> = Vec::new();
        let mut alive = true;
        for e in &req.entities {
            match e.entity.as_ref() {
                Some(pb::entity::Entity::TableEntry(te)) => {
                    self.read_entries(te, &mut |entry| {
                        buf.push(pb::Entity {
                            entity: Some(pb::entity::Entity::TableEntry(entry)),
                        });
                        if buf.len() >= CHUNK && alive {
                            alive = send(pb::ReadResponse {
                                entities: std::mem::take(&mut buf),
                                status: vec![],
                            });
                        }
                    })?;
                }
                Some(pb::entity::Entity::TableUsage(u)) => {
                    let t = self.schema.table(u.table_id).ok_or_else(|| {
                        Status::invalid_argument(format!("unknown table id {}", u.table_id))
                    })?;
                    buf.push(pb::Entity {
                        entity: Some(pb::entity::Entity::TableUsage(pb::TableUsage {
                            table_id: t.id,
                            usage: self.usage(t),
                            table_flags: None,
                        })),
                    });
                }
                Some(pb::entity::Entity::TableAttribute(a)) => {
                    buf.push(pb::Entity {
                        entity: Some(pb::entity::Entity::TableAttribute(self.read_attribute(a)?)),
                    });
                }
                _ => {
                    return Err(Status::unimplemented(
                        "only table entries, usage and attributes can be read",
                    ))
                }
            }
            if !alive {
                return Ok(());
            }
        }
        if !buf.is_empty() || alive {
            send(pb::ReadResponse {
                entities: buf,
                status: vec![],
            });
        }
        Ok(())
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
        Ok(pb::SetForwardingPipelineConfigResponse {
            set_forwarding_pipeline_config_response_type: ty as i32,
        })
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
        let req = request.into_inner();
        blocking(move || sw.write_batch(&req)).await?;
        Ok(Response::new(pb::WriteResponse { status: vec![] }))
    }

    type ReadStream = BoxStream<pb::ReadResponse>;

    async fn read(
        &self,
        request: Request<pb::ReadRequest>,
    ) -> Result<Response<Self::ReadStream>, Status> {
        let sw = self.sw.clone();
        let req = request.into_inner();
        // Validate the session up front so errors come back as the call's status.
        sw.check_target(req.target.as_ref(), &req.p4_name)?;
        sw.check_bound(req.client_id)?;
        let (tx, rx) = mpsc::channel(4);
        tokio::task::spawn_blocking(move || {
            let mut send = |r: pb::ReadResponse| tx.blocking_send(Ok(r)).is_ok();
            if let Err(e) = sw.read(&req, &mut send) {
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
                    // Digests are not retransmitted, so acks need no bookkeeping.
                    Some(pb::stream_message_request::Update::DigestAck(_)) | None => {}
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

/// gRPC clients refuse trailers over 8 KiB (grpc's default max metadata size),
/// which would turn a large failed batch into an opaque RESOURCE_EXHAUSTED. Keep
/// the details under that: the first failure keeps its text, later ones only
/// their codes, and past the budget the list is cut (the call's code and message
/// still name the first failure).
fn error_details(mut errors: Vec<pb::Error>) -> Vec<prost_types::Any> {
    const BUDGET: usize = 6 * 1024; // base64 in the trailer grows it by a third
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
