//! ObjectId reads (names → ids, as bf_switchd's `read_id`) and entry handles
//! (HandleId reads give an entry's handle; a TableEntry read may address the
//! entry by it, as bf_switchd's `read_handle` and `table_read`).

use std::collections::HashMap;

use prost::Message;
use tonic::Status;

use super::{pb, Switch};

/// Handles are given out once per (table, key) and stay valid for the
/// switch's life; this bounds how many a client can make us remember.
const MAX_HANDLES: usize = 1 << 20;

/// Entry handles: a number per (table, key) asked for by a HandleId read.
#[derive(Default)]
pub struct Handles {
    by_key: HashMap<(u32, Vec<u8>), u32>,
    by_handle: HashMap<u32, (u32, pb::TableKey)>,
}

/// A key in one canonical encoding (fields in id order).
fn canonical(key: &pb::TableKey) -> (pb::TableKey, Vec<u8>) {
    let mut k = key.clone();
    k.fields.sort_by_key(|f| f.field_id);
    let bytes = k.encode_to_vec();
    (k, bytes)
}

impl Switch {
    /// `ObjectId`: the id of a table, or of an action, key field or data
    /// field of a table, or of a learn object's field, by name.
    pub(super) fn read_object_id(&self, o: &pb::ObjectId) -> Result<pb::ObjectId, Status> {
        use pb::object_id::table_object::Names;
        use pb::object_id::Object;
        let not_found = |what: &str| Status::not_found(format!("{what} Object not found"));
        let id = match &o.object {
            Some(Object::TableObject(t)) => {
                let table = self
                    .schema
                    .table_by_name(&t.table_name)
                    .ok_or_else(|| not_found("Table not found."))?;
                match &t.names {
                    None => table.id,
                    Some(Names::ActionName(a)) => {
                        table
                            .action_by_name(&a.action)
                            .ok_or_else(|| not_found("Id get faild."))?
                            .id
                    }
                    Some(Names::KeyFieldName(k)) => {
                        table
                            .key_by_name(&k.field)
                            .ok_or_else(|| not_found("Id get faild."))?
                            .id
                    }
                    Some(Names::DataFieldName(d)) => {
                        let field = if d.action.is_empty() {
                            table.data_by_name(&d.field)
                        } else {
                            table
                                .action_by_name(&d.action)
                                .and_then(|a| a.params.iter().find(|p| p.name == d.field))
                        };
                        field.ok_or_else(|| not_found("Id get faild."))?.id
                    }
                }
            }
            Some(Object::LearnObject(l)) => {
                let digest = self
                    .schema
                    .digests
                    .iter()
                    .find(|d| d.name == l.learn_name)
                    .ok_or_else(|| not_found("Learn Obj not found."))?;
                let f = l.data_field_name.as_ref();
                if f.is_some_and(|f| !f.action.is_empty()) {
                    return Err(Status::invalid_argument(
                        "Action IDs not applicable for Learn objs Invalid arguments",
                    ));
                }
                let field = f.map_or("", |f| f.field.as_str());
                digest
                    .fields
                    .iter()
                    .find(|x| x.name == field)
                    .ok_or_else(|| not_found("Failed to get Learn ID"))?
                    .id
            }
            None => {
                return Err(Status::invalid_argument(
                    "Wrong Option for ID get Invalid arguments",
                ))
            }
        };
        Ok(pb::ObjectId { object: None, id })
    }

    /// `HandleId` with a key: the entry's handle (NOT_FOUND if there is no
    /// such entry).
    pub(super) fn read_handle(&self, h: &pb::HandleId) -> Result<pb::HandleId, Status> {
        let Some(pb::handle_id::Value::Key(key)) = &h.value else {
            return Err(Status::invalid_argument(
                "Invalid key is mandatory for get handle operation.",
            ));
        };
        let t = self
            .schema
            .table(h.table_id)
            .ok_or_else(|| Status::not_found(format!("Table {} not found.", h.table_id)))?;
        // The entry must exist: read it by its key.
        let probe = pb::TableEntry {
            table_id: t.id,
            value: Some(pb::table_entry::Value::Key(key.clone())),
            ..Default::default()
        };
        let mut found = false;
        self.read_entries(&probe, &mut |_| found = true)?;
        if !found {
            return Err(Status::not_found(format!(
                "Entry not found in table:{}",
                t.name
            )));
        }
        let (key, bytes) = canonical(key);
        let mut handles = self.handles.lock();
        let handle = match handles.by_key.get(&(t.id, bytes.clone())) {
            Some(&h) => h,
            None => {
                if handles.by_handle.len() >= MAX_HANDLES {
                    return Err(Status::resource_exhausted(format!(
                        "{MAX_HANDLES} entry handles in use"
                    )));
                }
                let h = handles.by_handle.len() as u32 + 1;
                handles.by_key.insert((t.id, bytes), h);
                handles.by_handle.insert(h, (t.id, key));
                h
            }
        };
        Ok(pb::HandleId {
            table_id: t.id,
            value: Some(pb::handle_id::Value::HandleId(handle)),
        })
    }

    /// The key a handle stands for, in its table.
    pub(super) fn key_of_handle(&self, table_id: u32, handle: u32) -> Result<pb::TableKey, Status> {
        match self.handles.lock().by_handle.get(&handle) {
            Some((t, key)) if *t == table_id => Ok(key.clone()),
            _ => Err(Status::not_found(format!(
                "Entry not found in table: no handle {handle}"
            ))),
        }
    }
}
