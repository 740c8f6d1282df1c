//! BfRt server behaviour through a real tonic server and client on loopback:
//! sessions, write errors and their details, rollback, reads, notifications.

use std::sync::mpsc::sync_channel;
use std::sync::Arc;

use prost::Message;
use tokio_stream::wrappers::ReceiverStream;

use super::codec::{df_int, key_of};
use super::pb::{self, bf_runtime_client::BfRuntimeClient};
use super::{google, Switch};
use crate::contract::{names, CONTRACT};
use crate::pipeline::{LearnDigest, Pipeline};
use crate::schema::{Schema, TableSchema};

type Client = BfRuntimeClient<tonic::transport::Channel>;

struct Harness {
    sw: Arc<Switch>,
    client: Client,
    stream_tx: tokio::sync::mpsc::Sender<pb::StreamMessageRequest>,
    inbound: tonic::Streaming<pb::StreamMessageResponse>,
    digests: std::sync::mpsc::SyncSender<LearnDigest>,
}

async fn harness(relay_entries: usize) -> Harness {
    let (dtx, drx) = sync_channel(64);
    let pipeline = Arc::new(Pipeline::new(
        &CONTRACT,
        relay_entries,
        64,
        &[1, 2],
        dtx.clone(),
    ));
    let schema = Schema::build(&CONTRACT, relay_entries as u32, 64);
    let sw = Arc::new(Switch::new(schema, pipeline, Arc::new(Vec::new())));
    {
        let sw = sw.clone();
        std::thread::spawn(move || super::notify::run_digests(sw, drx));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = super::server(sw.clone());
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(server)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .unwrap();
    });
    // Trailers as large as p4relay's client takes (a large batch's error details).
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .http2_max_header_list_size(32 << 20)
        .connect()
        .await
        .unwrap();
    let mut client = BfRuntimeClient::new(channel);
    let (stream_tx, rx) = tokio::sync::mpsc::channel(8);
    let inbound = client
        .stream_channel(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    Harness {
        sw,
        client,
        stream_tx,
        inbound,
        digests: dtx,
    }
}

impl Harness {
    /// Raises a learn digest (ingress port 5) and returns the digest list the
    /// subscribed client receives for it.
    async fn learn_digest_sent(&mut self) -> pb::DigestList {
        self.digests
            .send(LearnDigest {
                src: 1,
                dst: 2,
                sport: 3,
                dport: 4,
                ingress_port: 5,
            })
            .unwrap();
        let msg = tokio::time::timeout(std::time::Duration::from_secs(5), self.inbound.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let Some(pb::stream_message_response::Update::Digest(d)) = msg.update else {
            panic!("{msg:?}")
        };
        d
    }

    async fn subscribe(&mut self, client_id: u32) -> pb::StreamMessageResponse {
        let n = pb::subscribe::Notifications {
            enable_learn_notifications: true,
            enable_idletimeout_notifications: true,
            ..Default::default()
        };
        self.stream_tx
            .send(pb::StreamMessageRequest {
                client_id,
                update: Some(pb::stream_message_request::Update::Subscribe(
                    pb::Subscribe {
                        device_id: 0,
                        notifications: Some(n),
                        ..Default::default()
                    },
                )),
            })
            .await
            .unwrap();
        self.inbound.message().await.unwrap().unwrap()
    }

    async fn bind(&mut self, client_id: u32) -> Result<(), tonic::Status> {
        self.client
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
            .await
            .map(|_| ())
    }

    async fn write(
        &mut self,
        updates: Vec<pb::Update>,
        atomicity: i32,
    ) -> Result<(), tonic::Status> {
        self.client
            .write(pb::WriteRequest {
                target: None,
                client_id: 1,
                updates,
                atomicity,
                p4_name: String::new(),
            })
            .await
            .map(|_| ())
    }

    /// A Write naming the program, from any client id (bf_switchd's
    /// independent clients).
    async fn write_named(
        &mut self,
        client_id: u32,
        p4_name: &str,
        updates: Vec<pb::Update>,
    ) -> Result<(), tonic::Status> {
        self.client
            .write(pb::WriteRequest {
                target: None,
                client_id,
                updates,
                atomicity: 0,
                p4_name: p4_name.into(),
            })
            .await
            .map(|_| ())
    }

    async fn read(&mut self, entities: Vec<pb::Entity>) -> Result<Vec<pb::Entity>, tonic::Status> {
        let mut s = self
            .client
            .read(pb::ReadRequest {
                target: None,
                client_id: 1,
                entities,
                p4_name: String::new(),
            })
            .await?
            .into_inner();
        let mut out = vec![];
        while let Some(r) = s.message().await? {
            out.extend(r.entities);
        }
        Ok(out)
    }

    fn table(&self, name: &str) -> &TableSchema {
        self.sw.schema.table_by_name(name).unwrap()
    }
}

fn update(
    ty: pb::update::Type,
    t: &TableSchema,
    key: &[(&str, u64)],
    action: Option<&str>,
    params: &[(&str, u64)],
) -> pb::Update {
    // no action: a data-only write (register cells, counter resets) when
    // fields are given, none at all otherwise
    let a = action.map(|a| t.action_by_name(a).unwrap());
    let data = (a.is_some() || !params.is_empty()).then(|| pb::TableData {
        action_id: a.map_or(0, |a| a.id),
        fields: params
            .iter()
            .map(|(n, v)| {
                let p = a
                    .and_then(|a| a.params.iter().find(|p| p.name == *n))
                    .map(|p| (p.id, p.bits));
                let (id, bits) = p.unwrap_or_else(|| {
                    let d = t.data_by_name(n).unwrap();
                    (d.id, d.bits)
                });
                df_int(id, *v, bits)
            })
            .collect(),
    });
    pb::Update {
        r#type: ty as i32,
        entity: Some(pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: t.id,
                value: Some(pb::table_entry::Value::Key(key_of(t, key))),
                data,
                ..Default::default()
            })),
        }),
    }
}

/// The entity naming one entry (a read, or a register / counter cell).
fn entry_at(t: &TableSchema, key: &[(&str, u64)]) -> pb::Entity {
    pb::Entity {
        entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
            table_id: t.id,
            value: Some(pb::table_entry::Value::Key(key_of(t, key))),
            ..Default::default()
        })),
    }
}

fn relay_key(i: u64) -> [(&'static str, u64); 5] {
    [
        ("hdr.ipv4.src_addr", 0xc612_010a),
        ("hdr.ipv4.dst_addr", 0xc612_000a),
        ("hdr.udp.src_port", 4000 + i),
        ("hdr.udp.dst_port", 20000),
        ("ig_md.bound_port", 1),
    ]
}

fn relay_insert(h: &Harness, i: u64) -> pb::Update {
    update(
        pb::update::Type::Insert,
        h.table("pipe.Ingress.relay"),
        &relay_key(i),
        Some("Ingress.relay_leg"),
        &[("leg", i), ("rtcp", 0)],
    )
}

/// bf_switchd's shape of a failed Write/Read: UNKNOWN "Write Error Status"
/// (or "Read Error Status"), the details ending with the last failure.
/// Returns the first failure's canonical code.
fn failure(s: &tonic::Status) -> tonic::Code {
    assert_eq!(s.code(), tonic::Code::Unknown, "{s:?}");
    assert!(
        ["Write Error Status", "Read Error Status"].contains(&s.message()),
        "{s:?}"
    );
    let d = details(s);
    assert_ne!(d.last().map(|e| e.canonical_code), Some(0), "{d:?}");
    let first = d.iter().find(|e| e.canonical_code != 0).expect("a failure");
    tonic::Code::from_i32(first.canonical_code)
}

fn details(s: &tonic::Status) -> Vec<pb::Error> {
    let st = google::rpc::Status::decode(s.details()).unwrap();
    st.details
        .iter()
        .map(|a| pb::Error::decode(a.value.as_slice()).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_gate_writes_and_subscribe_answers() {
    let mut h = harness(8).await;
    let up = relay_insert(&h, 1);
    assert_eq!(
        h.write(vec![up.clone()], 0).await.unwrap_err().code(),
        tonic::Code::FailedPrecondition
    );
    assert_eq!(
        h.bind(1).await.unwrap_err().code(),
        tonic::Code::FailedPrecondition
    );
    let ans = h.subscribe(1).await;
    match ans.update {
        Some(pb::stream_message_response::Update::Subscribe(s)) => {
            assert_eq!(s.status.unwrap().code, 0)
        }
        other => panic!("expected Subscribe answer, got {other:?}"),
    }
    assert_eq!(
        h.write(vec![up.clone()], 0).await.unwrap_err().code(),
        tonic::Code::FailedPrecondition
    );
    h.bind(1).await.unwrap();
    h.write(vec![up], 0).await.unwrap();
    // A client that names the program needs no subscription; another program is not here.
    h.write_named(7, "p4relay", vec![relay_insert(&h, 2)])
        .await
        .unwrap();
    assert_eq!(h.sw.pipeline.relay.len(), 2);
    assert_eq!(
        h.write_named(7, "other", vec![relay_insert(&h, 3)])
            .await
            .unwrap_err()
            .code(),
        tonic::Code::NotFound
    );
    let cfg = h
        .client
        .get_forwarding_pipeline_config(pb::GetForwardingPipelineConfigRequest {
            device_id: 0,
            client_id: 1,
        })
        .await
        .unwrap()
        .into_inner();
    let j: serde_json::Value = serde_json::from_slice(&cfg.config[0].bfruntime_info).unwrap();
    assert_eq!(
        j["tables"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] == "pipe.Ingress.relay")
            .count(),
        1
    );
    assert!(!cfg.non_p4_config.unwrap().bfruntime_info.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_errors_carry_per_update_details_and_rollback_undoes() {
    let mut h = harness(4).await;
    h.subscribe(1).await;
    h.bind(1).await.unwrap();
    // CONTINUE_ON_ERROR: the good ones stay; details up to the last failure.
    let batch = vec![
        relay_insert(&h, 1),
        relay_insert(&h, 1),
        relay_insert(&h, 2),
    ];
    let e = h.write(batch, 0).await.unwrap_err();
    assert_eq!(failure(&e), tonic::Code::AlreadyExists);
    let d = details(&e);
    assert_eq!(
        d.iter().map(|x| x.canonical_code).collect::<Vec<_>>(),
        vec![0, tonic::Code::AlreadyExists as i32]
    );
    // DATAPLANE_ATOMIC: not implemented (bf_switchd), nothing written.
    assert_eq!(
        h.write(vec![relay_insert(&h, 3)], 2)
            .await
            .unwrap_err()
            .code(),
        tonic::Code::Unimplemented
    );
    assert_eq!(h.sw.pipeline.relay.len(), 2);
    // ROLLBACK_ON_ERROR: a failing batch leaves nothing behind.
    let batch = vec![relay_insert(&h, 3), relay_insert(&h, 1)];
    assert_eq!(
        failure(&h.write(batch, 1).await.unwrap_err()),
        tonic::Code::AlreadyExists
    );
    assert_eq!(h.sw.pipeline.relay.len(), 2);
    // Table full: RESOURCE_EXHAUSTED.
    h.write(vec![relay_insert(&h, 3), relay_insert(&h, 4)], 0)
        .await
        .unwrap();
    let e = h.write(vec![relay_insert(&h, 5)], 0).await.unwrap_err();
    assert_eq!(failure(&e), tonic::Code::ResourceExhausted);
    // Malformed: wrong width, unknown table, leg beyond the table.
    let mut bad = relay_insert(&h, 6);
    if let Some(pb::entity::Entity::TableEntry(te)) =
        bad.entity.as_mut().and_then(|e| e.entity.as_mut())
    {
        if let Some(pb::table_entry::Value::Key(k)) = te.value.as_mut() {
            if let Some(pb::key_field::MatchType::Exact(x)) = k.fields[0].match_type.as_mut() {
                x.value.push(0);
            }
        }
    }
    assert_eq!(
        failure(&h.write(vec![bad], 0).await.unwrap_err()),
        tonic::Code::InvalidArgument
    );
    let relay = h.table("pipe.Ingress.relay").clone();
    let too_big_leg = update(
        pb::update::Type::Modify,
        &relay,
        &relay_key(1),
        Some("Ingress.relay_leg"),
        &[("leg", 64), ("rtcp", 0)],
    );
    assert_eq!(
        failure(&h.write(vec![too_big_leg], 0).await.unwrap_err()),
        tonic::Code::InvalidArgument
    );
    let unknown = pb::Update {
        r#type: pb::update::Type::Insert as i32,
        entity: Some(pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: 42,
                ..Default::default()
            })),
        }),
    };
    assert_eq!(
        failure(&h.write(vec![unknown], 0).await.unwrap_err()),
        tonic::Code::InvalidArgument
    );
    let reg = h.table("pipe.Egress.rtp_packets").clone();
    let default_reg = pb::Update {
        r#type: pb::update::Type::Modify as i32,
        entity: Some(pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: reg.id,
                is_default_entry: true,
                ..Default::default()
            })),
        }),
    };
    assert_eq!(
        failure(&h.write(vec![default_reg], 0).await.unwrap_err()),
        tonic::Code::InvalidArgument
    );
    let absent = update(pb::update::Type::Delete, &relay, &relay_key(99), None, &[]);
    assert_eq!(
        failure(&h.write(vec![absent], 0).await.unwrap_err()),
        tonic::Code::NotFound
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_return_entries_counters_registers_and_usage() {
    let mut h = harness(16).await;
    h.subscribe(1).await;
    h.bind(1).await.unwrap();
    let relay = h.table("pipe.Ingress.relay").clone();
    let mut up = relay_insert(&h, 1);
    if let Some(pb::entity::Entity::TableEntry(te)) =
        up.entity.as_mut().and_then(|e| e.entity.as_mut())
    {
        te.data
            .as_mut()
            .unwrap()
            .fields
            .push(df_int(crate::schema::ID_ENTRY_TTL, 5000, 32));
    }
    h.write(vec![up, relay_insert(&h, 2)], 0).await.unwrap();
    let all = h
        .read(vec![pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: relay.id,
                ..Default::default()
            })),
        }])
        .await
        .unwrap();
    // Every entry, then the default entry (as bf_switchd).
    assert_eq!(all.len(), 3);
    let Some(pb::entity::Entity::TableEntry(last)) = &all[2].entity else {
        panic!()
    };
    assert!(last.is_default_entry && last.value.is_none());
    let one = h
        .read(vec![pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: relay.id,
                value: Some(pb::table_entry::Value::Key(key_of(&relay, &relay_key(1)))),
                ..Default::default()
            })),
        }])
        .await
        .unwrap();
    let Some(pb::entity::Entity::TableEntry(te)) = &one[0].entity else {
        panic!()
    };
    let ttl = te
        .data
        .as_ref()
        .unwrap()
        .fields
        .iter()
        .find(|f| f.field_id == crate::schema::ID_ENTRY_TTL)
        .unwrap();
    let Some(pb::data_field::Value::Stream(b)) = &ttl.value else {
        panic!()
    };
    let left = u32::from_be_bytes(b.as_slice().try_into().unwrap());
    assert!(left > 0 && left <= 5000, "{left}");
    // register write + read back (a struct register: both fields, each
    // mandatory); out of range index
    let reg = h.table("pipe.Egress.rtp_loss").clone();
    assert_eq!(
        (reg.data[0].name.as_str(), reg.data[1].name.as_str()),
        ("Egress.rtp_loss.lost", "Egress.rtp_loss.reordered")
    );
    let w = |fields: &[(&str, u64)]| {
        update(
            pb::update::Type::Modify,
            &reg,
            &[("$REGISTER_INDEX", 3)],
            None,
            fields,
        )
    };
    h.write(
        vec![w(&[
            ("Egress.rtp_loss.lost", 77),
            ("Egress.rtp_loss.reordered", 9),
        ])],
        0,
    )
    .await
    .unwrap();
    assert_eq!(h.sw.pipeline.quality.lost(3), Some(77));
    assert_eq!(h.sw.pipeline.quality.reordered(3), Some(9));
    // one field alone is refused, the cell unchanged
    let e = h
        .write(vec![w(&[("Egress.rtp_loss.lost", 1)])], 0)
        .await
        .unwrap_err();
    assert_eq!(failure(&e), tonic::Code::InvalidArgument);
    assert_eq!(h.sw.pipeline.quality.lost(3), Some(77));
    let oob = entry_at(&reg, &[("$REGISTER_INDEX", 64)]);
    assert_eq!(
        failure(&h.read(vec![oob]).await.unwrap_err()),
        tonic::Code::OutOfRange
    );
    let usage = h
        .read(vec![pb::Entity {
            entity: Some(pb::entity::Entity::TableUsage(pb::TableUsage {
                table_id: relay.id,
                ..Default::default()
            })),
        }])
        .await
        .unwrap();
    let Some(pb::entity::Entity::TableUsage(u)) = &usage[0].entity else {
        panic!()
    };
    assert_eq!(u.usage, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digests_reach_subscribers() {
    let mut h = harness(8).await;
    h.subscribe(1).await;
    let d = h.learn_digest_sent().await;
    assert_eq!(d.digest_id, h.sw.schema.digests[0].id);
    assert_eq!(d.data.len(), 1);
    assert_eq!(d.data[0].fields.len(), 5);
}

mod fuzz {
    //! Random (mostly malformed) Write batches: every one gets an answer, none panics.
    use super::*;
    use proptest::prelude::*;

    fn switch() -> Arc<Switch> {
        let (dtx, _drx) = sync_channel(64);
        let pipeline = Arc::new(Pipeline::new(&CONTRACT, 64, 64, &[1, 2], dtx));
        let sw = Arc::new(Switch::new(
            Schema::build(&CONTRACT, 64, 64),
            pipeline,
            Arc::new(Vec::new()),
        ));
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        sw.subscribe(1, 1, &pb::Subscribe::default(), tx).unwrap();
        sw.sessions.lock().get_mut(&1).unwrap().bound = true;
        sw
    }

    fn key_field() -> impl Strategy<Value = pb::KeyField> {
        let bytes = proptest::collection::vec(any::<u8>(), 0..7);
        (
            prop_oneof![1u32..6, Just(65537u32), Just(65556u32), any::<u32>()],
            0u8..4,
            bytes.clone(),
            bytes,
            -2i32..40,
        )
            .prop_map(|(id, m, a, b, len)| {
                use pb::key_field::*;
                let mt = match m {
                    0 => MatchType::Exact(Exact { value: a }),
                    1 => MatchType::Lpm(Lpm {
                        value: a,
                        prefix_len: len,
                    }),
                    2 => MatchType::Range(Range { low: a, high: b }),
                    _ => MatchType::Ternary(Ternary { value: a, mask: b }),
                };
                pb::KeyField {
                    field_id: id,
                    match_type: Some(mt),
                }
            })
    }

    fn data_field() -> impl Strategy<Value = pb::DataField> {
        (
            prop_oneof![
                1u32..6,
                Just(65553u32),
                Just(65554u32),
                Just(65555u32),
                any::<u32>()
            ],
            proptest::collection::vec(any::<u8>(), 0..10),
            any::<bool>(),
        )
            .prop_map(|(id, b, as_bool)| pb::DataField {
                field_id: id,
                value: Some(if as_bool {
                    pb::data_field::Value::BoolVal(b.len() % 2 == 0)
                } else {
                    pb::data_field::Value::Stream(b)
                }),
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1500, .. ProptestConfig::default() })]
        #[test]
        fn random_writes_never_panic(
            table in 0usize..32, ty in 0i32..8, default in any::<bool>(), action in 0usize..4, raw_action in any::<u32>(),
            keys in proptest::collection::vec(key_field(), 0..6), fields in proptest::collection::vec(data_field(), 0..6),
        ) {
            let sw = switch();
            let ids: Vec<u32> = sw.schema.tables.iter().map(|t| t.id).collect();
            let t = sw.schema.tables.get(table % (ids.len() + 1));
            let table_id = t.map_or(0x0bad_0bad, |t| t.id);
            let action_id = t.and_then(|t| t.actions.get(action)).map_or(raw_action, |a| a.id);
            let te = pb::TableEntry {
                table_id,
                value: Some(pb::table_entry::Value::Key(pb::TableKey { fields: keys })),
                data: Some(pb::TableData { action_id, fields }),
                is_default_entry: default,
                ..Default::default()
            };
            let req = pb::WriteRequest {
                client_id: 1,
                updates: vec![pb::Update { r#type: ty, entity: Some(pb::Entity { entity: Some(pb::entity::Entity::TableEntry(te.clone())) }) }],
                ..Default::default()
            };
            let _ = sw.write_batch(&req);
            let mut sink = |_e: pb::TableEntry| {};
            let _ = sw.read_entries(&te, &mut sink);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_failed_batch_details_name_every_failure() {
    let mut h = harness(4096).await;
    h.subscribe(1).await;
    h.bind(1).await.unwrap();
    h.write(vec![relay_insert(&h, 1)], 0).await.unwrap();
    // 2,000 updates, every second one a duplicate: the details list all of
    // them up to the last failure, each failure at its own position.
    let relay = h.table("pipe.Ingress.relay").clone();
    let batch: Vec<_> = (0..2000)
        .map(|i| {
            let k = if i % 2 == 1 { 1 } else { 100 + i };
            let data = [("leg", 1), ("rtcp", 0)];
            update(
                pb::update::Type::Insert,
                &relay,
                &relay_key(k),
                Some("Ingress.relay_leg"),
                &data,
            )
        })
        .collect();
    let e = h.write(batch, 0).await.unwrap_err();
    assert_eq!(failure(&e), tonic::Code::AlreadyExists);
    let d = details(&e);
    assert_eq!(d.len(), 2000);
    for (i, x) in d.iter().enumerate() {
        let want = if i % 2 == 1 {
            tonic::Code::AlreadyExists as i32
        } else {
            0
        };
        assert_eq!(x.canonical_code, want, "update {i}");
    }
    assert!(!d[1].message.is_empty());
    assert!(d[2..].iter().all(|x| x.message.is_empty()));
    // Successes as empty Errors, later failures without their text: compact.
    assert!(e.details().len() < 2000 * 48, "{} bytes", e.details().len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guard_entries_write_read_counters_and_rollback() {
    use crate::tables::guard::{GuardAction, GuardKey};
    let mut h = harness(4).await;
    h.subscribe(1).await;
    h.bind(1).await.unwrap();
    let guard = h.table("pipe.Ingress.relay_guard").clone();
    let key = |port: u64| {
        [
            ("hdr.ipv4.dst_addr", 0xc612_000a),
            ("hdr.udp.dst_port", port),
        ]
    };
    let ins = |port: u64| {
        update(
            pb::update::Type::Insert,
            &guard,
            &key(port),
            Some("Ingress.guard_drop"),
            &[("leg", 5)],
        )
    };
    // The leg must be one the pipeline counts (64 legs here).
    let bad = update(
        pb::update::Type::Insert,
        &guard,
        &key(20000),
        Some("Ingress.guard_drop"),
        &[("leg", 64)],
    );
    assert_eq!(
        failure(&h.write(vec![bad], 0).await.unwrap_err()),
        tonic::Code::InvalidArgument
    );
    h.write((20000..20004).map(ins).collect(), 0).await.unwrap();
    assert_eq!(h.sw.pipeline.guard.len(), 4);
    let gk = GuardKey {
        dst: 0xc612_000a,
        dport: 20001,
    };
    assert_eq!(
        h.sw.pipeline.guard.lookup(&gk, 0),
        Some(GuardAction::Drop { leg: 5 })
    );
    // read one: the action and its leg, no counter of its own
    let one = h
        .read(vec![pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: guard.id,
                value: Some(pb::table_entry::Value::Key(key_of(&guard, &key(20001)))),
                ..Default::default()
            })),
        }])
        .await
        .unwrap();
    let Some(pb::entity::Entity::TableEntry(te)) = &one[0].entity else {
        panic!()
    };
    let d = te.data.as_ref().unwrap();
    assert_eq!(
        d.action_id,
        guard.action_by_name("Ingress.guard_drop").unwrap().id
    );
    assert_eq!(d.fields.len(), 1);
    assert_eq!(
        d.fields[0].value,
        Some(pb::data_field::Value::Stream(vec![0, 0, 5]))
    );
    // guard_drops: $COUNTER_INDEX -> $COUNTER_SPEC_PKTS, read and reset by leg
    h.sw.pipeline.guard_drops.count(5);
    h.sw.pipeline.guard_drops.count(5);
    let drops = h.table("pipe.Ingress.guard_drops").clone();
    let cell = |i: u64| entry_at(&drops, &[("$COUNTER_INDEX", i)]);
    let got = h.read(vec![cell(5)]).await.unwrap();
    let Some(pb::entity::Entity::TableEntry(te)) = &got[0].entity else {
        panic!()
    };
    let f = &te.data.as_ref().unwrap().fields[0];
    assert_eq!(f.field_id, crate::schema::ID_COUNTER_PKTS);
    assert_eq!(
        f.value,
        Some(pb::data_field::Value::Stream(2u64.to_be_bytes().to_vec()))
    );
    assert_eq!(
        failure(&h.read(vec![cell(64)]).await.unwrap_err()),
        tonic::Code::OutOfRange
    );
    let set = |ty: pb::update::Type, v: u64| pb::Update {
        r#type: ty as i32,
        entity: Some(pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: drops.id,
                value: Some(pb::table_entry::Value::Key(key_of(
                    &drops,
                    &[("$COUNTER_INDEX", 5)],
                ))),
                data: Some(pb::TableData {
                    action_id: 0,
                    fields: vec![df_int(crate::schema::ID_COUNTER_PKTS, v, 64)],
                }),
                ..Default::default()
            })),
        }),
    };
    // Every cell exists: INSERT sets it as MODIFY does (bf_switchd).
    h.write(vec![set(pb::update::Type::Insert, 7)], 0)
        .await
        .unwrap();
    assert_eq!(h.sw.pipeline.guard_drops.read(5), Some(7));
    h.write(vec![set(pb::update::Type::Modify, 0)], 0)
        .await
        .unwrap();
    assert_eq!(h.sw.pipeline.guard_drops.read(5), Some(0));
    // full table: RESOURCE_EXHAUSTED; rollback takes the batch's inserts back
    assert_eq!(
        failure(&h.write(vec![ins(20004)], 0).await.unwrap_err()),
        tonic::Code::ResourceExhausted
    );
    let del = |port: u64| update(pb::update::Type::Delete, &guard, &key(port), None, &[]);
    assert_eq!(
        failure(&h.write(vec![del(20000), del(20009)], 1).await.unwrap_err()),
        tonic::Code::NotFound
    );
    assert_eq!(h.sw.pipeline.guard.len(), 4);
    // an action of another table is refused; so is NoAction in an entry
    // (bf-p4c scopes it DefaultOnly here)
    let mut foreign = update(
        pb::update::Type::Modify,
        &guard,
        &key(20000),
        Some("NoAction"),
        &[],
    );
    if let Some(pb::entity::Entity::TableEntry(te)) =
        foreign.entity.as_mut().and_then(|e| e.entity.as_mut())
    {
        te.data.as_mut().unwrap().action_id = h
            .table("pipe.Ingress.relay")
            .action_by_name("Ingress.relay_leg")
            .unwrap()
            .id;
    }
    assert_eq!(
        failure(&h.write(vec![foreign], 0).await.unwrap_err()),
        tonic::Code::InvalidArgument
    );
    let disarm = update(
        pb::update::Type::Modify,
        &guard,
        &key(20000),
        Some("NoAction"),
        &[],
    );
    assert_eq!(
        failure(&h.write(vec![disarm], 0).await.unwrap_err()),
        tonic::Code::InvalidArgument
    );
    assert_ne!(
        h.sw.pipeline
            .guard
            .get(
                &GuardKey {
                    dst: 0xc612_000a,
                    dport: 20000
                },
                0
            )
            .unwrap()
            .action,
        GuardAction::NoAction
    );
    h.write(vec![del(20000), del(20001)], 0).await.unwrap();
    assert_eq!(h.sw.pipeline.guard.len(), 2);
}

#[tokio::test]
async fn ired_port_refuses_what_the_pipeline_cannot_run() {
    let mut h = harness(4).await;
    h.subscribe(1).await;
    h.bind(1).await.unwrap();
    let t = h.table(names::IRED_PORT).clone();
    let set = |port: u64, max: u64, n_drop: u64, n: u64| {
        update(
            pb::update::Type::Insert,
            &t,
            &[(names::KEY_EGRESS_PORT, port)],
            Some(names::IRED_SET),
            &[
                (names::P_MAX_LEN_QUEUE, max),
                (names::P_N_DROP, n_drop),
                (names::P_EWMA_N, n),
                (names::P_TAIL_DROP, 0),
                (names::P_PROTECT, 1),
            ],
        )
    };
    for (bad, why) in [
        (set(2, 64, 32, 1), "n_drop"), // N >= maxLenQueue / 2
        (set(2, 64, 0, 1), "n_drop"),
        (set(2, 64, 4, 0), "ewma_n"),
        (set(2, 64, 4, 5), "ewma_n"),
        (set(2, 1 << 19, 4, 1), "max_len_queue"),
        (set(9, 64, 4, 1), "not a port"), // the harness has ports 1 and 2
    ] {
        let e = h.write(vec![bad], 0).await.unwrap_err();
        assert_eq!(failure(&e), tonic::Code::InvalidArgument);
        let d = details(&e);
        assert!(d[0].message.contains(why), "{why}: {:?}", d[0].message);
    }
    assert!(h.sw.pipeline.small.load().ired_port.is_empty());
    h.write(vec![set(2, 64, 4, 1)], 0).await.unwrap();
    let c = h.sw.pipeline.small.load().ired_lookup(2).unwrap();
    assert_eq!((c.min_thsld(), c.max_thsld(), c.protect), (28, 56, true));
}

#[tokio::test]
async fn ired_counts_are_counters_read_and_reset_by_port() {
    use crate::schema::IredCount;
    let mut h = harness(4).await;
    h.subscribe(1).await;
    h.bind(1).await.unwrap();
    h.sw.pipeline.ired.write_count(IredCount::Drops, 2, 3);
    let t = h.table("pipe.Ingress.ired_drops").clone();
    assert_eq!(
        t.kind,
        crate::schema::TableKind::Counter(crate::schema::Ctr::Ired(IredCount::Drops))
    );
    let cell = entry_at(&t, &[("$COUNTER_INDEX", 2)]);
    let got = h.read(vec![cell.clone()]).await.unwrap();
    let Some(pb::entity::Entity::TableEntry(te)) = &got[0].entity else {
        panic!()
    };
    let f = &te.data.as_ref().unwrap().fields[0];
    assert_eq!(f.field_id, crate::schema::ID_COUNTER_PKTS);
    assert_eq!(
        f.value,
        Some(pb::data_field::Value::Stream(3u64.to_be_bytes().to_vec()))
    );
    let reset = update(
        pb::update::Type::Modify,
        &t,
        &[("$COUNTER_INDEX", 2)],
        None,
        &[("$COUNTER_SPEC_PKTS", 0)],
    );
    h.write(vec![reset], 0).await.unwrap();
    assert_eq!(h.sw.pipeline.ired.read_count(IredCount::Drops, 2), Some(0));
    assert_eq!(t.size, 512, "by dev_port: the program's 512 cells");
}

/// `$PORT_METADATA` write of port `port` (`unbound`, or no data).
fn port_binding_update(
    h: &Harness,
    ty: pb::update::Type,
    port: u64,
    unbound: Option<u64>,
) -> pb::Update {
    let t = h.table(names::PORT_METADATA);
    let f = t.data_by_name(names::D_UNBOUND).unwrap();
    pb::Update {
        r#type: ty as i32,
        entity: Some(pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: t.id,
                value: Some(pb::table_entry::Value::Key(key_of(
                    t,
                    &[(names::KEY_PORT_METADATA_PORT, port)],
                ))),
                data: unbound.map(|v| pb::TableData {
                    action_id: 0,
                    fields: vec![df_int(f.id, v, f.bits)],
                }),
                ..Default::default()
            })),
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_metadata_sets_port_binding_and_rolls_back() {
    use pb::update::Type::{Delete, Insert, InsertOrModify, Modify};
    let mut h = harness(4).await;
    h.subscribe(1).await;
    h.bind(1).await.unwrap();
    let sw = h.sw.clone();
    let pb_ = &sw.pipeline.port_binding;
    h.write(vec![port_binding_update(&h, Insert, 1, Some(1))], 0)
        .await
        .unwrap();
    assert!(pb_.unbound(1) && !pb_.unbound(2));
    // each failure by name: twice, no data, not a port, a value wider than 1 bit
    for (u, code) in [
        (
            port_binding_update(&h, Insert, 1, Some(0)),
            tonic::Code::AlreadyExists,
        ),
        (
            port_binding_update(&h, Insert, 2, None),
            tonic::Code::InvalidArgument,
        ),
        (
            port_binding_update(&h, Insert, 9, Some(1)),
            tonic::Code::InvalidArgument,
        ),
        (
            port_binding_update(&h, Modify, 2, Some(1)),
            tonic::Code::NotFound,
        ),
        (
            port_binding_update(&h, Delete, 2, None),
            tonic::Code::NotFound,
        ),
    ] {
        assert_eq!(failure(&h.write(vec![u], 0).await.unwrap_err()), code);
    }
    let wide = port_binding_update(&h, InsertOrModify, 2, Some(0));
    let mut wide_bytes = wide.clone();
    if let Some(pb::entity::Entity::TableEntry(te)) =
        wide_bytes.entity.as_mut().and_then(|e| e.entity.as_mut())
    {
        te.data.as_mut().unwrap().fields[0] = df_int(1, 0, 16);
    }
    assert!(h.write(vec![wide_bytes], 0).await.is_err());
    h.write(vec![wide], 0).await.unwrap();
    assert_eq!(pb_.entries(), vec![(1, true), (2, false)]);
    // ROLLBACK_ON_ERROR: the batch's good update is taken back
    let batch = vec![
        port_binding_update(&h, Modify, 2, Some(1)),
        port_binding_update(&h, Insert, 1, Some(1)),
    ];
    assert!(h.write(batch, 1).await.is_err());
    assert_eq!(pb_.entries(), vec![(1, true), (2, false)]);
    // read back: every entry, by key; the table has no default entry
    let t = h.table(names::PORT_METADATA).clone();
    let all = h
        .read(vec![pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: t.id,
                ..Default::default()
            })),
        }])
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    h.write(vec![port_binding_update(&h, Delete, 1, None)], 0)
        .await
        .unwrap();
    assert!(!pb_.unbound(1));
    assert_eq!(pb_.entries(), vec![(2, false)]);
}

/// What P4 Studio's client (bfrt_grpc) relies on, as bf_switchd answers it:
/// counter INSERT, DefaultOnly actions refused in entries, reads naming their
/// fields, one register value per pipe, warm init on the stream, digests
/// naming their pipe, `error_in_resp`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_p4_studio_clients_as_bf_switchd() {
    let mut h = harness(8).await;
    h.subscribe(1).await;
    h.bind(1).await.unwrap();
    // A counter cell always exists: INSERT sets it, as MODIFY does.
    let ctr = h.table("pipe.Ingress.guard_drops").clone();
    let mut ins = update(
        pb::update::Type::Insert,
        &ctr,
        &[("$COUNTER_INDEX", 3)],
        None,
        &[],
    );
    if let Some(pb::entity::Entity::TableEntry(te)) =
        ins.entity.as_mut().and_then(|e| e.entity.as_mut())
    {
        te.data = Some(pb::TableData {
            action_id: 0,
            fields: vec![df_int(crate::schema::ID_COUNTER_PKTS, 11, 64)],
        });
    }
    h.write(vec![ins], 0).await.unwrap();
    assert_eq!(h.sw.pipeline.guard_drops.read(3), Some(11));
    // NoAction is DefaultOnly on relay (bf-p4c): refused as an entry's action.
    let relay = h.table("pipe.Ingress.relay").clone();
    let noaction = update(
        pb::update::Type::Insert,
        &relay,
        &relay_key(1),
        Some(names::NO_ACTION),
        &[],
    );
    let e = h.write(vec![noaction], 0).await.unwrap_err();
    assert_eq!(failure(&e), tonic::Code::InvalidArgument);
    assert!(details(&e)[0].message.contains("default only"), "{e:?}");
    // A read naming fields gets only those ($ENTRY_HIT_STATE included).
    h.write(vec![relay_insert(&h, 1)], 0).await.unwrap();
    let named = |ids: &[u32]| pb::Entity {
        entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
            table_id: relay.id,
            value: Some(pb::table_entry::Value::Key(key_of(&relay, &relay_key(1)))),
            data: Some(pb::TableData {
                action_id: 0,
                fields: ids
                    .iter()
                    .map(|&field_id| pb::DataField {
                        field_id,
                        value: None,
                    })
                    .collect(),
            }),
            ..Default::default()
        })),
    };
    let got = h
        .read(vec![named(&[crate::schema::ID_ENTRY_HIT_STATE])])
        .await
        .unwrap();
    let Some(pb::entity::Entity::TableEntry(te)) = &got[0].entity else {
        panic!()
    };
    let fields = &te.data.as_ref().unwrap().fields;
    assert_eq!(fields.len(), 1, "{fields:?}");
    assert!(matches!(
        &fields[0].value,
        Some(pb::data_field::Value::StrVal(s)) if s == "ENTRY_IDLE" || s == "ENTRY_ACTIVE"
    ));
    // An unknown field id named in a read is an error.
    let e = h.read(vec![named(&[4242])]).await.unwrap_err();
    assert_eq!(failure(&e), tonic::Code::InvalidArgument);
    // A register read: the value once per pipe; a struct register's fields
    // each once per pipe, in declaration order.
    let reg = h.table("pipe.Egress.rtp_loss").clone();
    h.sw.pipeline
        .quality
        .write(crate::schema::Reg::Loss, 2, 5 << 32 | 4);
    let got = h
        .read(vec![entry_at(&reg, &[("$REGISTER_INDEX", 2)])])
        .await
        .unwrap();
    let Some(pb::entity::Entity::TableEntry(te)) = &got[0].entity else {
        panic!()
    };
    let fields = &te.data.as_ref().unwrap().fields;
    assert_eq!(fields.len(), 2 * super::PIPES as usize);
    let got: Vec<(u32, u64)> = fields
        .iter()
        .map(|f| {
            let Some(pb::data_field::Value::Stream(b)) = &f.value else {
                panic!("{f:?}")
            };
            (
                f.field_id,
                b.iter().fold(0u64, |a, x| a << 8 | u64::from(*x)),
            )
        })
        .collect();
    let want: Vec<(u32, u64)> = std::iter::repeat_n((1, 5), super::PIPES as usize)
        .chain(std::iter::repeat_n((2, 4), super::PIPES as usize))
        .collect();
    assert_eq!(got, want);
    // error_in_resp: a failed update comes back in WriteResponse.status.
    let mut req = tonic::Request::new(pb::WriteRequest {
        target: None,
        client_id: 1,
        updates: vec![relay_insert(&h, 1)],
        atomicity: 0,
        p4_name: String::new(),
    });
    req.metadata_mut()
        .insert("error_in_resp", "1".parse().unwrap());
    let resp = h.client.write(req).await.unwrap().into_inner();
    assert_eq!(resp.status.len(), 1);
    assert_eq!(
        resp.status[0].canonical_code,
        tonic::Code::AlreadyExists as i32
    );
    // Warm init (clear_all_tables): STARTED, then FINISHED, on the stream.
    use pb::set_forwarding_pipeline_config_request::Action;
    h.client
        .set_forwarding_pipeline_config(pb::SetForwardingPipelineConfigRequest {
            device_id: 0,
            client_id: 1,
            action: Action::VerifyAndWarmInitBeginAndEnd as i32,
            config: vec![pb::ForwardingPipelineConfig {
                p4_name: "p4relay".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .await
        .unwrap();
    let mut seen = vec![];
    for _ in 0..2 {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(5), h.inbound.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let Some(pb::stream_message_response::Update::SetForwardingPipelineConfigResponse(r)) =
            msg.update
        else {
            panic!("{msg:?}")
        };
        seen.push(r.set_forwarding_pipeline_config_response_type);
    }
    use pb::SetForwardingPipelineConfigResponseType as R;
    assert_eq!(
        seen,
        [R::WarmInitStarted as i32, R::WarmInitFinished as i32]
    );
    assert_eq!(h.sw.pipeline.relay.len(), 0);
    // A digest names its ingress port's pipe (Tofino 1: dev_port bits 8:7).
    let d = h.learn_digest_sent().await;
    assert_eq!(d.target.unwrap().pipe_id, 0);
    assert_eq!(super::pipe_of(130), 1);
    assert_eq!(super::pipe_of(5), 0);
}

/// An entry of a table with 128-bit fields: key and action parameters by
/// name, each encoded at its schema width.
fn update128(
    ty: pb::update::Type,
    t: &TableSchema,
    key: &[(&str, u128)],
    action: Option<&str>,
    params: &[(&str, u128)],
) -> pb::Update {
    use super::codec::{df_int128, key_exact128, key_lpm128, key_range};
    let fields = key
        .iter()
        .map(|(n, v)| {
            let k = t.key_by_name(n).unwrap();
            match k.match_type {
                crate::schema::MatchType::Lpm => key_lpm128(k, *v, 64),
                crate::schema::MatchType::Range => key_range(k, *v as u64, *v as u64),
                _ => key_exact128(k, *v),
            }
        })
        .collect();
    let data = action.map(|a| {
        let a = t.action_by_name(a).unwrap();
        pb::TableData {
            action_id: a.id,
            fields: params
                .iter()
                .map(|(n, v)| {
                    let p = a.params.iter().find(|p| p.name == *n).unwrap();
                    df_int128(p.id, *v, p.bits)
                })
                .collect(),
        }
    });
    pb::Update {
        r#type: ty as i32,
        entity: Some(pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: t.id,
                value: Some(pb::table_entry::Value::Key(pb::TableKey { fields })),
                data,
                ..Default::default()
            })),
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv6_tables_write_read_and_keep_a_leg_in_one_family() {
    use crate::tables::relay::{Relay6Key, RelayAction};
    use crate::tables::small6::Relay6AddrAction;
    use pb::update::Type::{Delete, Insert};
    let mut h = harness(16).await;
    h.subscribe(1).await;
    h.bind(1).await.unwrap();
    let (lpm6, addr6, relay6, legs6, legs4) = (
        h.table(names::IPV6_LPM).clone(),
        h.table(names::RELAY6_ADDR).clone(),
        h.table(names::RELAY6).clone(),
        h.table(names::LEG_REWRITE6).clone(),
        h.table(names::LEG_REWRITE).clone(),
    );
    let relay: u128 = 0x2001_0db8_00ff_0000_0000_0000_0000_0001;
    let uac: u128 = 0x2001_0db8_0001_0000_0000_0000_0000_000a;
    h.write(
        vec![
            update128(
                Insert,
                &lpm6,
                &[("hdr.ipv6.dst_addr", uac | 0xffff)],
                Some("Ingress.set_nexthop"),
                &[("nexthop_id", 4)],
            ),
            update128(
                Insert,
                &addr6,
                &[
                    ("hdr.ipv6.dst_addr", relay),
                    ("hdr.udp.dst_port", 20000),
                    ("$MATCH_PRIORITY", 1),
                ],
                Some("Ingress.mark_relay6"),
                &[("relay_id", 3)],
            ),
            update128(
                Insert,
                &relay6,
                &[
                    ("hdr.ipv6.src_addr", uac),
                    ("ig_md.relay_id", 3),
                    ("hdr.udp.src_port", 4000),
                    ("hdr.udp.dst_port", 20000),
                    ("ig_md.bound_port", 1),
                ],
                Some("Ingress.relay6_leg"),
                &[("leg", 7), ("rtcp", 0)],
            ),
            update128(
                Insert,
                &legs6,
                &[("ig_md.leg6", 7)],
                Some("Ingress.rewrite6"),
                &[
                    ("src_addr", relay),
                    ("dst_addr", u128::MAX),
                    ("src_port", 20002),
                    ("dst_port", 6000),
                ],
            ),
        ],
        0,
    )
    .await
    .unwrap();
    let p = &h.sw.pipeline;
    let small = p.small.load();
    assert_eq!(
        small.v6.lpm_lookup(uac),
        crate::tables::small::LpmAction::SetNexthop(4),
        "a /64: host bits cleared"
    );
    assert_eq!(
        small.v6.relay_addr_lookup(relay, 20000),
        Relay6AddrAction::MarkRelay6 { relay_id: 3 }
    );
    let k = Relay6Key {
        src: uac,
        relay_id: 3,
        sport: 4000,
        dport: 20000,
        port: 1,
    };
    assert_eq!(
        p.relay6.lookup(&k, 0),
        Some(RelayAction::Leg {
            leg: 7,
            rtcp: false
        })
    );
    assert_eq!(p.legs6.get(7).unwrap().dst, u128::MAX);
    // read back: the 128-bit parameters at their width
    let all = h
        .read(vec![pb::Entity {
            entity: Some(pb::entity::Entity::TableEntry(pb::TableEntry {
                table_id: legs6.id,
                ..Default::default()
            })),
        }])
        .await
        .unwrap();
    let Some(pb::entity::Entity::TableEntry(te)) = &all[0].entity else {
        panic!()
    };
    let d = te.data.as_ref().unwrap();
    let src = legs6
        .action_by_name("Ingress.rewrite6")
        .unwrap()
        .params
        .iter()
        .find(|p| p.name == "src_addr")
        .unwrap()
        .id;
    let f = d.fields.iter().find(|f| f.field_id == src).unwrap();
    assert_eq!(
        f.value,
        Some(pb::data_field::Value::Stream(relay.to_be_bytes().to_vec()))
    );
    // leg 7 has an IPv6 rewrite: leg_rewrite refuses it, and the other way
    let v4 = update(
        Insert,
        &legs4,
        &[("ig_md.leg", 7)],
        Some("Ingress.rewrite"),
        &[
            ("src_addr", 1),
            ("dst_addr", 2),
            ("src_port", 3),
            ("dst_port", 4),
        ],
    );
    assert_eq!(
        failure(&h.write(vec![v4], 0).await.unwrap_err()),
        tonic::Code::AlreadyExists
    );
    // relay_id wider than its 8 bits; an address one byte short
    let mut bad_id = update128(
        Insert,
        &addr6,
        &[
            ("hdr.ipv6.dst_addr", relay),
            ("hdr.udp.dst_port", 20001),
            ("$MATCH_PRIORITY", 1),
        ],
        Some("Ingress.mark_relay6"),
        &[("relay_id", 1)],
    );
    if let Some(pb::entity::Entity::TableEntry(te)) =
        bad_id.entity.as_mut().and_then(|e| e.entity.as_mut())
    {
        te.data.as_mut().unwrap().fields[0].value = Some(pb::data_field::Value::Stream(vec![1, 0]));
    }
    assert_eq!(
        failure(&h.write(vec![bad_id], 0).await.unwrap_err()),
        tonic::Code::InvalidArgument
    );
    let mut short = update128(Delete, &relay6, &[], None, &[]);
    if let Some(pb::entity::Entity::TableEntry(te)) =
        short.entity.as_mut().and_then(|e| e.entity.as_mut())
    {
        let ks = relay6.key_by_name("hdr.ipv6.src_addr").unwrap();
        te.value = Some(pb::table_entry::Value::Key(pb::TableKey {
            fields: vec![pb::KeyField {
                field_id: ks.id,
                match_type: Some(pb::key_field::MatchType::Exact(pb::key_field::Exact {
                    value: vec![0; 15],
                })),
            }],
        }));
    }
    assert_eq!(
        failure(&h.write(vec![short], 0).await.unwrap_err()),
        tonic::Code::InvalidArgument
    );
    // relay6 ages in NOTIFY mode: POLL is refused
    let poll = pb::Update {
        r#type: pb::update::Type::Modify as i32,
        entity: Some(pb::Entity {
            entity: Some(pb::entity::Entity::TableAttribute(pb::TableAttribute {
                table_id: relay6.id,
                attribute: Some(pb::table_attribute::Attribute::IdleTable(pb::IdleTable {
                    idle_table_mode: pb::idle_table::IdleTableMode::IdleTablePollMode as i32,
                    enable: true,
                    ..Default::default()
                })),
            })),
        }),
    };
    assert!(h.write(vec![poll], 0).await.is_err());
}
