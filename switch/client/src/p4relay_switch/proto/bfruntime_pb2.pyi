from google.rpc import status_pb2 as _status_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SetForwardingPipelineConfigResponseType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WARM_INIT_STARTED: _ClassVar[SetForwardingPipelineConfigResponseType]
    WARM_INIT_FINISHED: _ClassVar[SetForwardingPipelineConfigResponseType]
WARM_INIT_STARTED: SetForwardingPipelineConfigResponseType
WARM_INIT_FINISHED: SetForwardingPipelineConfigResponseType

class WriteRequest(_message.Message):
    __slots__ = ("target", "client_id", "updates", "atomicity", "p4_name")
    class Atomicity(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        CONTINUE_ON_ERROR: _ClassVar[WriteRequest.Atomicity]
        ROLLBACK_ON_ERROR: _ClassVar[WriteRequest.Atomicity]
        DATAPLANE_ATOMIC: _ClassVar[WriteRequest.Atomicity]
    CONTINUE_ON_ERROR: WriteRequest.Atomicity
    ROLLBACK_ON_ERROR: WriteRequest.Atomicity
    DATAPLANE_ATOMIC: WriteRequest.Atomicity
    TARGET_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    ATOMICITY_FIELD_NUMBER: _ClassVar[int]
    P4_NAME_FIELD_NUMBER: _ClassVar[int]
    target: TargetDevice
    client_id: int
    updates: _containers.RepeatedCompositeFieldContainer[Update]
    atomicity: WriteRequest.Atomicity
    p4_name: str
    def __init__(self, target: _Optional[_Union[TargetDevice, _Mapping]] = ..., client_id: _Optional[int] = ..., updates: _Optional[_Iterable[_Union[Update, _Mapping]]] = ..., atomicity: _Optional[_Union[WriteRequest.Atomicity, str]] = ..., p4_name: _Optional[str] = ...) -> None: ...

class WriteResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _containers.RepeatedCompositeFieldContainer[Error]
    def __init__(self, status: _Optional[_Iterable[_Union[Error, _Mapping]]] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("target", "client_id", "entities", "p4_name")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    P4_NAME_FIELD_NUMBER: _ClassVar[int]
    target: TargetDevice
    client_id: int
    entities: _containers.RepeatedCompositeFieldContainer[Entity]
    p4_name: str
    def __init__(self, target: _Optional[_Union[TargetDevice, _Mapping]] = ..., client_id: _Optional[int] = ..., entities: _Optional[_Iterable[_Union[Entity, _Mapping]]] = ..., p4_name: _Optional[str] = ...) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ("entities", "status")
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    entities: _containers.RepeatedCompositeFieldContainer[Entity]
    status: _containers.RepeatedCompositeFieldContainer[Error]
    def __init__(self, entities: _Optional[_Iterable[_Union[Entity, _Mapping]]] = ..., status: _Optional[_Iterable[_Union[Error, _Mapping]]] = ...) -> None: ...

class TargetDevice(_message.Message):
    __slots__ = ("device_id", "pipe_id", "direction", "prsr_id")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    PIPE_ID_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    PRSR_ID_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    pipe_id: int
    direction: int
    prsr_id: int
    def __init__(self, device_id: _Optional[int] = ..., pipe_id: _Optional[int] = ..., direction: _Optional[int] = ..., prsr_id: _Optional[int] = ...) -> None: ...

class Update(_message.Message):
    __slots__ = ("type", "entity")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNSPECIFIED: _ClassVar[Update.Type]
        INSERT: _ClassVar[Update.Type]
        MODIFY: _ClassVar[Update.Type]
        MODIFY_INC: _ClassVar[Update.Type]
        DELETE: _ClassVar[Update.Type]
        INSERT_OR_MODIFY: _ClassVar[Update.Type]
        RESET: _ClassVar[Update.Type]
    UNSPECIFIED: Update.Type
    INSERT: Update.Type
    MODIFY: Update.Type
    MODIFY_INC: Update.Type
    DELETE: Update.Type
    INSERT_OR_MODIFY: Update.Type
    RESET: Update.Type
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    type: Update.Type
    entity: Entity
    def __init__(self, type: _Optional[_Union[Update.Type, str]] = ..., entity: _Optional[_Union[Entity, _Mapping]] = ...) -> None: ...

class Entity(_message.Message):
    __slots__ = ("table_entry", "table_usage", "table_attribute", "table_operation", "object_id", "handle")
    TABLE_ENTRY_FIELD_NUMBER: _ClassVar[int]
    TABLE_USAGE_FIELD_NUMBER: _ClassVar[int]
    TABLE_ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    TABLE_OPERATION_FIELD_NUMBER: _ClassVar[int]
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    table_entry: TableEntry
    table_usage: TableUsage
    table_attribute: TableAttribute
    table_operation: TableOperation
    object_id: ObjectId
    handle: HandleId
    def __init__(self, table_entry: _Optional[_Union[TableEntry, _Mapping]] = ..., table_usage: _Optional[_Union[TableUsage, _Mapping]] = ..., table_attribute: _Optional[_Union[TableAttribute, _Mapping]] = ..., table_operation: _Optional[_Union[TableOperation, _Mapping]] = ..., object_id: _Optional[_Union[ObjectId, _Mapping]] = ..., handle: _Optional[_Union[HandleId, _Mapping]] = ...) -> None: ...

class HandleId(_message.Message):
    __slots__ = ("table_id", "key", "handle_id")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    HANDLE_ID_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    key: TableKey
    handle_id: int
    def __init__(self, table_id: _Optional[int] = ..., key: _Optional[_Union[TableKey, _Mapping]] = ..., handle_id: _Optional[int] = ...) -> None: ...

class TableEntry(_message.Message):
    __slots__ = ("table_id", "key", "handle_id", "data", "is_default_entry", "entry_tgt", "table_flags")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    HANDLE_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_ENTRY_FIELD_NUMBER: _ClassVar[int]
    ENTRY_TGT_FIELD_NUMBER: _ClassVar[int]
    TABLE_FLAGS_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    key: TableKey
    handle_id: int
    data: TableData
    is_default_entry: bool
    entry_tgt: TargetDevice
    table_flags: TableFlags
    def __init__(self, table_id: _Optional[int] = ..., key: _Optional[_Union[TableKey, _Mapping]] = ..., handle_id: _Optional[int] = ..., data: _Optional[_Union[TableData, _Mapping]] = ..., is_default_entry: _Optional[bool] = ..., entry_tgt: _Optional[_Union[TargetDevice, _Mapping]] = ..., table_flags: _Optional[_Union[TableFlags, _Mapping]] = ...) -> None: ...

class TableUsage(_message.Message):
    __slots__ = ("table_id", "usage", "table_flags")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TABLE_FLAGS_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    usage: int
    table_flags: TableFlags
    def __init__(self, table_id: _Optional[int] = ..., usage: _Optional[int] = ..., table_flags: _Optional[_Union[TableFlags, _Mapping]] = ...) -> None: ...

class TableOperation(_message.Message):
    __slots__ = ("table_id", "table_operations_type")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_OPERATIONS_TYPE_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    table_operations_type: str
    def __init__(self, table_id: _Optional[int] = ..., table_operations_type: _Optional[str] = ...) -> None: ...

class TableKey(_message.Message):
    __slots__ = ("fields",)
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.RepeatedCompositeFieldContainer[KeyField]
    def __init__(self, fields: _Optional[_Iterable[_Union[KeyField, _Mapping]]] = ...) -> None: ...

class KeyField(_message.Message):
    __slots__ = ("field_id", "exact", "ternary", "lpm", "range", "optional")
    class Exact(_message.Message):
        __slots__ = ("value",)
        VALUE_FIELD_NUMBER: _ClassVar[int]
        value: bytes
        def __init__(self, value: _Optional[bytes] = ...) -> None: ...
    class Ternary(_message.Message):
        __slots__ = ("value", "mask")
        VALUE_FIELD_NUMBER: _ClassVar[int]
        MASK_FIELD_NUMBER: _ClassVar[int]
        value: bytes
        mask: bytes
        def __init__(self, value: _Optional[bytes] = ..., mask: _Optional[bytes] = ...) -> None: ...
    class LPM(_message.Message):
        __slots__ = ("value", "prefix_len")
        VALUE_FIELD_NUMBER: _ClassVar[int]
        PREFIX_LEN_FIELD_NUMBER: _ClassVar[int]
        value: bytes
        prefix_len: int
        def __init__(self, value: _Optional[bytes] = ..., prefix_len: _Optional[int] = ...) -> None: ...
    class Range(_message.Message):
        __slots__ = ("low", "high")
        LOW_FIELD_NUMBER: _ClassVar[int]
        HIGH_FIELD_NUMBER: _ClassVar[int]
        low: bytes
        high: bytes
        def __init__(self, low: _Optional[bytes] = ..., high: _Optional[bytes] = ...) -> None: ...
    class Optional(_message.Message):
        __slots__ = ("value", "is_valid")
        VALUE_FIELD_NUMBER: _ClassVar[int]
        IS_VALID_FIELD_NUMBER: _ClassVar[int]
        value: bytes
        is_valid: bool
        def __init__(self, value: _Optional[bytes] = ..., is_valid: _Optional[bool] = ...) -> None: ...
    FIELD_ID_FIELD_NUMBER: _ClassVar[int]
    EXACT_FIELD_NUMBER: _ClassVar[int]
    TERNARY_FIELD_NUMBER: _ClassVar[int]
    LPM_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    OPTIONAL_FIELD_NUMBER: _ClassVar[int]
    field_id: int
    exact: KeyField.Exact
    ternary: KeyField.Ternary
    lpm: KeyField.LPM
    range: KeyField.Range
    optional: KeyField.Optional
    def __init__(self, field_id: _Optional[int] = ..., exact: _Optional[_Union[KeyField.Exact, _Mapping]] = ..., ternary: _Optional[_Union[KeyField.Ternary, _Mapping]] = ..., lpm: _Optional[_Union[KeyField.LPM, _Mapping]] = ..., range: _Optional[_Union[KeyField.Range, _Mapping]] = ..., optional: _Optional[_Union[KeyField.Optional, _Mapping]] = ...) -> None: ...

class TableData(_message.Message):
    __slots__ = ("action_id", "fields")
    ACTION_ID_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    action_id: int
    fields: _containers.RepeatedCompositeFieldContainer[DataField]
    def __init__(self, action_id: _Optional[int] = ..., fields: _Optional[_Iterable[_Union[DataField, _Mapping]]] = ...) -> None: ...

class DataField(_message.Message):
    __slots__ = ("field_id", "stream", "float_val", "str_val", "int_arr_val", "bool_arr_val", "container_arr_val", "bool_val", "str_arr_val")
    class IntArray(_message.Message):
        __slots__ = ("val",)
        VAL_FIELD_NUMBER: _ClassVar[int]
        val: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, val: _Optional[_Iterable[int]] = ...) -> None: ...
    class BoolArray(_message.Message):
        __slots__ = ("val",)
        VAL_FIELD_NUMBER: _ClassVar[int]
        val: _containers.RepeatedScalarFieldContainer[bool]
        def __init__(self, val: _Optional[_Iterable[bool]] = ...) -> None: ...
    class StrArray(_message.Message):
        __slots__ = ("val",)
        VAL_FIELD_NUMBER: _ClassVar[int]
        val: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, val: _Optional[_Iterable[str]] = ...) -> None: ...
    class ContainerArray(_message.Message):
        __slots__ = ("container",)
        class Container(_message.Message):
            __slots__ = ("val",)
            VAL_FIELD_NUMBER: _ClassVar[int]
            val: _containers.RepeatedCompositeFieldContainer[DataField]
            def __init__(self, val: _Optional[_Iterable[_Union[DataField, _Mapping]]] = ...) -> None: ...
        CONTAINER_FIELD_NUMBER: _ClassVar[int]
        container: _containers.RepeatedCompositeFieldContainer[DataField.ContainerArray.Container]
        def __init__(self, container: _Optional[_Iterable[_Union[DataField.ContainerArray.Container, _Mapping]]] = ...) -> None: ...
    FIELD_ID_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    FLOAT_VAL_FIELD_NUMBER: _ClassVar[int]
    STR_VAL_FIELD_NUMBER: _ClassVar[int]
    INT_ARR_VAL_FIELD_NUMBER: _ClassVar[int]
    BOOL_ARR_VAL_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_ARR_VAL_FIELD_NUMBER: _ClassVar[int]
    BOOL_VAL_FIELD_NUMBER: _ClassVar[int]
    STR_ARR_VAL_FIELD_NUMBER: _ClassVar[int]
    field_id: int
    stream: bytes
    float_val: float
    str_val: str
    int_arr_val: DataField.IntArray
    bool_arr_val: DataField.BoolArray
    container_arr_val: DataField.ContainerArray
    bool_val: bool
    str_arr_val: DataField.StrArray
    def __init__(self, field_id: _Optional[int] = ..., stream: _Optional[bytes] = ..., float_val: _Optional[float] = ..., str_val: _Optional[str] = ..., int_arr_val: _Optional[_Union[DataField.IntArray, _Mapping]] = ..., bool_arr_val: _Optional[_Union[DataField.BoolArray, _Mapping]] = ..., container_arr_val: _Optional[_Union[DataField.ContainerArray, _Mapping]] = ..., bool_val: _Optional[bool] = ..., str_arr_val: _Optional[_Union[DataField.StrArray, _Mapping]] = ...) -> None: ...

class TableFlags(_message.Message):
    __slots__ = ("from_hw", "key_only", "mod_del", "reset_ttl", "reset_stats")
    FROM_HW_FIELD_NUMBER: _ClassVar[int]
    KEY_ONLY_FIELD_NUMBER: _ClassVar[int]
    MOD_DEL_FIELD_NUMBER: _ClassVar[int]
    RESET_TTL_FIELD_NUMBER: _ClassVar[int]
    RESET_STATS_FIELD_NUMBER: _ClassVar[int]
    from_hw: bool
    key_only: bool
    mod_del: bool
    reset_ttl: bool
    reset_stats: bool
    def __init__(self, from_hw: _Optional[bool] = ..., key_only: _Optional[bool] = ..., mod_del: _Optional[bool] = ..., reset_ttl: _Optional[bool] = ..., reset_stats: _Optional[bool] = ...) -> None: ...

class TableAttribute(_message.Message):
    __slots__ = ("table_id", "idle_table", "entry_scope", "port_status_notify")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    IDLE_TABLE_FIELD_NUMBER: _ClassVar[int]
    ENTRY_SCOPE_FIELD_NUMBER: _ClassVar[int]
    PORT_STATUS_NOTIFY_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    idle_table: IdleTable
    entry_scope: EntryScope
    port_status_notify: PortStatusChg
    def __init__(self, table_id: _Optional[int] = ..., idle_table: _Optional[_Union[IdleTable, _Mapping]] = ..., entry_scope: _Optional[_Union[EntryScope, _Mapping]] = ..., port_status_notify: _Optional[_Union[PortStatusChg, _Mapping]] = ...) -> None: ...

class IdleTable(_message.Message):
    __slots__ = ("ttl_query_interval", "max_ttl", "min_ttl", "idle_table_mode", "enable")
    class IdleTableMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        IDLE_TABLE_POLL_MODE: _ClassVar[IdleTable.IdleTableMode]
        IDLE_TABLE_NOTIFY_MODE: _ClassVar[IdleTable.IdleTableMode]
    IDLE_TABLE_POLL_MODE: IdleTable.IdleTableMode
    IDLE_TABLE_NOTIFY_MODE: IdleTable.IdleTableMode
    TTL_QUERY_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    MAX_TTL_FIELD_NUMBER: _ClassVar[int]
    MIN_TTL_FIELD_NUMBER: _ClassVar[int]
    IDLE_TABLE_MODE_FIELD_NUMBER: _ClassVar[int]
    ENABLE_FIELD_NUMBER: _ClassVar[int]
    ttl_query_interval: int
    max_ttl: int
    min_ttl: int
    idle_table_mode: IdleTable.IdleTableMode
    enable: bool
    def __init__(self, ttl_query_interval: _Optional[int] = ..., max_ttl: _Optional[int] = ..., min_ttl: _Optional[int] = ..., idle_table_mode: _Optional[_Union[IdleTable.IdleTableMode, str]] = ..., enable: _Optional[bool] = ...) -> None: ...

class PortStatusChg(_message.Message):
    __slots__ = ("enable",)
    ENABLE_FIELD_NUMBER: _ClassVar[int]
    enable: bool
    def __init__(self, enable: _Optional[bool] = ...) -> None: ...

class Mode(_message.Message):
    __slots__ = ("predef", "user_defined", "args")
    class PredefinedMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ALL: _ClassVar[Mode.PredefinedMode]
        SINGLE: _ClassVar[Mode.PredefinedMode]
    ALL: Mode.PredefinedMode
    SINGLE: Mode.PredefinedMode
    PREDEF_FIELD_NUMBER: _ClassVar[int]
    USER_DEFINED_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    predef: Mode.PredefinedMode
    user_defined: int
    args: int
    def __init__(self, predef: _Optional[_Union[Mode.PredefinedMode, str]] = ..., user_defined: _Optional[int] = ..., args: _Optional[int] = ...) -> None: ...

class EntryScope(_message.Message):
    __slots__ = ("gress_scope", "pipe_scope", "prsr_scope")
    GRESS_SCOPE_FIELD_NUMBER: _ClassVar[int]
    PIPE_SCOPE_FIELD_NUMBER: _ClassVar[int]
    PRSR_SCOPE_FIELD_NUMBER: _ClassVar[int]
    gress_scope: Mode
    pipe_scope: Mode
    prsr_scope: Mode
    def __init__(self, gress_scope: _Optional[_Union[Mode, _Mapping]] = ..., pipe_scope: _Optional[_Union[Mode, _Mapping]] = ..., prsr_scope: _Optional[_Union[Mode, _Mapping]] = ...) -> None: ...

class ObjectId(_message.Message):
    __slots__ = ("table_object", "learn_object", "id")
    class ActionName(_message.Message):
        __slots__ = ("action",)
        ACTION_FIELD_NUMBER: _ClassVar[int]
        action: str
        def __init__(self, action: _Optional[str] = ...) -> None: ...
    class KeyFieldName(_message.Message):
        __slots__ = ("field",)
        FIELD_FIELD_NUMBER: _ClassVar[int]
        field: str
        def __init__(self, field: _Optional[str] = ...) -> None: ...
    class DataFieldName(_message.Message):
        __slots__ = ("action", "field")
        ACTION_FIELD_NUMBER: _ClassVar[int]
        FIELD_FIELD_NUMBER: _ClassVar[int]
        action: str
        field: str
        def __init__(self, action: _Optional[str] = ..., field: _Optional[str] = ...) -> None: ...
    class TableObject(_message.Message):
        __slots__ = ("table_name", "action_name", "key_field_name", "data_field_name")
        TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
        ACTION_NAME_FIELD_NUMBER: _ClassVar[int]
        KEY_FIELD_NAME_FIELD_NUMBER: _ClassVar[int]
        DATA_FIELD_NAME_FIELD_NUMBER: _ClassVar[int]
        table_name: str
        action_name: ObjectId.ActionName
        key_field_name: ObjectId.KeyFieldName
        data_field_name: ObjectId.DataFieldName
        def __init__(self, table_name: _Optional[str] = ..., action_name: _Optional[_Union[ObjectId.ActionName, _Mapping]] = ..., key_field_name: _Optional[_Union[ObjectId.KeyFieldName, _Mapping]] = ..., data_field_name: _Optional[_Union[ObjectId.DataFieldName, _Mapping]] = ...) -> None: ...
    class LearnObject(_message.Message):
        __slots__ = ("learn_name", "data_field_name")
        LEARN_NAME_FIELD_NUMBER: _ClassVar[int]
        DATA_FIELD_NAME_FIELD_NUMBER: _ClassVar[int]
        learn_name: str
        data_field_name: ObjectId.DataFieldName
        def __init__(self, learn_name: _Optional[str] = ..., data_field_name: _Optional[_Union[ObjectId.DataFieldName, _Mapping]] = ...) -> None: ...
    TABLE_OBJECT_FIELD_NUMBER: _ClassVar[int]
    LEARN_OBJECT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    table_object: ObjectId.TableObject
    learn_object: ObjectId.LearnObject
    id: int
    def __init__(self, table_object: _Optional[_Union[ObjectId.TableObject, _Mapping]] = ..., learn_object: _Optional[_Union[ObjectId.LearnObject, _Mapping]] = ..., id: _Optional[int] = ...) -> None: ...

class StreamMessageRequest(_message.Message):
    __slots__ = ("client_id", "subscribe", "digest_ack")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    DIGEST_ACK_FIELD_NUMBER: _ClassVar[int]
    client_id: int
    subscribe: Subscribe
    digest_ack: DigestListAck
    def __init__(self, client_id: _Optional[int] = ..., subscribe: _Optional[_Union[Subscribe, _Mapping]] = ..., digest_ack: _Optional[_Union[DigestListAck, _Mapping]] = ...) -> None: ...

class Subscribe(_message.Message):
    __slots__ = ("is_master", "device_id", "notifications", "status")
    class Notifications(_message.Message):
        __slots__ = ("enable_learn_notifications", "enable_idletimeout_notifications", "enable_port_status_change_notifications", "enable_entry_active_notifications", "enable_selector_update_change_notifications")
        ENABLE_LEARN_NOTIFICATIONS_FIELD_NUMBER: _ClassVar[int]
        ENABLE_IDLETIMEOUT_NOTIFICATIONS_FIELD_NUMBER: _ClassVar[int]
        ENABLE_PORT_STATUS_CHANGE_NOTIFICATIONS_FIELD_NUMBER: _ClassVar[int]
        ENABLE_ENTRY_ACTIVE_NOTIFICATIONS_FIELD_NUMBER: _ClassVar[int]
        ENABLE_SELECTOR_UPDATE_CHANGE_NOTIFICATIONS_FIELD_NUMBER: _ClassVar[int]
        enable_learn_notifications: bool
        enable_idletimeout_notifications: bool
        enable_port_status_change_notifications: bool
        enable_entry_active_notifications: bool
        enable_selector_update_change_notifications: bool
        def __init__(self, enable_learn_notifications: _Optional[bool] = ..., enable_idletimeout_notifications: _Optional[bool] = ..., enable_port_status_change_notifications: _Optional[bool] = ..., enable_entry_active_notifications: _Optional[bool] = ..., enable_selector_update_change_notifications: _Optional[bool] = ...) -> None: ...
    IS_MASTER_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    NOTIFICATIONS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    is_master: bool
    device_id: int
    notifications: Subscribe.Notifications
    status: _status_pb2.Status
    def __init__(self, is_master: _Optional[bool] = ..., device_id: _Optional[int] = ..., notifications: _Optional[_Union[Subscribe.Notifications, _Mapping]] = ..., status: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class DigestListAck(_message.Message):
    __slots__ = ("digest_id", "list_id")
    DIGEST_ID_FIELD_NUMBER: _ClassVar[int]
    LIST_ID_FIELD_NUMBER: _ClassVar[int]
    digest_id: int
    list_id: int
    def __init__(self, digest_id: _Optional[int] = ..., list_id: _Optional[int] = ...) -> None: ...

class StreamMessageResponse(_message.Message):
    __slots__ = ("subscribe", "digest", "idle_timeout_notification", "port_status_change_notification", "set_forwarding_pipeline_config_response")
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_NOTIFICATION_FIELD_NUMBER: _ClassVar[int]
    PORT_STATUS_CHANGE_NOTIFICATION_FIELD_NUMBER: _ClassVar[int]
    SET_FORWARDING_PIPELINE_CONFIG_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    subscribe: Subscribe
    digest: DigestList
    idle_timeout_notification: IdleTimeoutNotification
    port_status_change_notification: PortStatusChgNotification
    set_forwarding_pipeline_config_response: SetForwardingPipelineConfigResponse
    def __init__(self, subscribe: _Optional[_Union[Subscribe, _Mapping]] = ..., digest: _Optional[_Union[DigestList, _Mapping]] = ..., idle_timeout_notification: _Optional[_Union[IdleTimeoutNotification, _Mapping]] = ..., port_status_change_notification: _Optional[_Union[PortStatusChgNotification, _Mapping]] = ..., set_forwarding_pipeline_config_response: _Optional[_Union[SetForwardingPipelineConfigResponse, _Mapping]] = ...) -> None: ...

class SubscribeResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: Error
    def __init__(self, status: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class DigestList(_message.Message):
    __slots__ = ("digest_id", "list_id", "data", "target")
    DIGEST_ID_FIELD_NUMBER: _ClassVar[int]
    LIST_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    digest_id: int
    list_id: int
    data: _containers.RepeatedCompositeFieldContainer[TableData]
    target: TargetDevice
    def __init__(self, digest_id: _Optional[int] = ..., list_id: _Optional[int] = ..., data: _Optional[_Iterable[_Union[TableData, _Mapping]]] = ..., target: _Optional[_Union[TargetDevice, _Mapping]] = ...) -> None: ...

class IdleTimeoutNotification(_message.Message):
    __slots__ = ("target", "table_entry", "type")
    class NotificationType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ENTRY_ACTIVE: _ClassVar[IdleTimeoutNotification.NotificationType]
        ENTRY_IDLE: _ClassVar[IdleTimeoutNotification.NotificationType]
    ENTRY_ACTIVE: IdleTimeoutNotification.NotificationType
    ENTRY_IDLE: IdleTimeoutNotification.NotificationType
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TABLE_ENTRY_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    target: TargetDevice
    table_entry: TableEntry
    type: IdleTimeoutNotification.NotificationType
    def __init__(self, target: _Optional[_Union[TargetDevice, _Mapping]] = ..., table_entry: _Optional[_Union[TableEntry, _Mapping]] = ..., type: _Optional[_Union[IdleTimeoutNotification.NotificationType, str]] = ...) -> None: ...

class PortStatusChgNotification(_message.Message):
    __slots__ = ("table_entry", "port_up")
    TABLE_ENTRY_FIELD_NUMBER: _ClassVar[int]
    PORT_UP_FIELD_NUMBER: _ClassVar[int]
    table_entry: TableEntry
    port_up: bool
    def __init__(self, table_entry: _Optional[_Union[TableEntry, _Mapping]] = ..., port_up: _Optional[bool] = ...) -> None: ...

class SetForwardingPipelineConfigRequest(_message.Message):
    __slots__ = ("device_id", "client_id", "action", "dev_init_mode", "base_path", "config")
    class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        BIND: _ClassVar[SetForwardingPipelineConfigRequest.Action]
        VERIFY: _ClassVar[SetForwardingPipelineConfigRequest.Action]
        VERIFY_AND_WARM_INIT_BEGIN: _ClassVar[SetForwardingPipelineConfigRequest.Action]
        VERIFY_AND_WARM_INIT_BEGIN_AND_END: _ClassVar[SetForwardingPipelineConfigRequest.Action]
        WARM_INIT_END: _ClassVar[SetForwardingPipelineConfigRequest.Action]
        RECONCILE_AND_WARM_INIT_END: _ClassVar[SetForwardingPipelineConfigRequest.Action]
    BIND: SetForwardingPipelineConfigRequest.Action
    VERIFY: SetForwardingPipelineConfigRequest.Action
    VERIFY_AND_WARM_INIT_BEGIN: SetForwardingPipelineConfigRequest.Action
    VERIFY_AND_WARM_INIT_BEGIN_AND_END: SetForwardingPipelineConfigRequest.Action
    WARM_INIT_END: SetForwardingPipelineConfigRequest.Action
    RECONCILE_AND_WARM_INIT_END: SetForwardingPipelineConfigRequest.Action
    class DevInitMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        FAST_RECONFIG: _ClassVar[SetForwardingPipelineConfigRequest.DevInitMode]
        HITLESS: _ClassVar[SetForwardingPipelineConfigRequest.DevInitMode]
    FAST_RECONFIG: SetForwardingPipelineConfigRequest.DevInitMode
    HITLESS: SetForwardingPipelineConfigRequest.DevInitMode
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    DEV_INIT_MODE_FIELD_NUMBER: _ClassVar[int]
    BASE_PATH_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    client_id: int
    action: SetForwardingPipelineConfigRequest.Action
    dev_init_mode: SetForwardingPipelineConfigRequest.DevInitMode
    base_path: str
    config: _containers.RepeatedCompositeFieldContainer[ForwardingPipelineConfig]
    def __init__(self, device_id: _Optional[int] = ..., client_id: _Optional[int] = ..., action: _Optional[_Union[SetForwardingPipelineConfigRequest.Action, str]] = ..., dev_init_mode: _Optional[_Union[SetForwardingPipelineConfigRequest.DevInitMode, str]] = ..., base_path: _Optional[str] = ..., config: _Optional[_Iterable[_Union[ForwardingPipelineConfig, _Mapping]]] = ...) -> None: ...

class SetForwardingPipelineConfigResponse(_message.Message):
    __slots__ = ("set_forwarding_pipeline_config_response_type",)
    SET_FORWARDING_PIPELINE_CONFIG_RESPONSE_TYPE_FIELD_NUMBER: _ClassVar[int]
    set_forwarding_pipeline_config_response_type: SetForwardingPipelineConfigResponseType
    def __init__(self, set_forwarding_pipeline_config_response_type: _Optional[_Union[SetForwardingPipelineConfigResponseType, str]] = ...) -> None: ...

class ForwardingPipelineConfig(_message.Message):
    __slots__ = ("p4_name", "bfruntime_info", "profiles")
    class Profile(_message.Message):
        __slots__ = ("profile_name", "context", "binary", "pipe_scope")
        PROFILE_NAME_FIELD_NUMBER: _ClassVar[int]
        CONTEXT_FIELD_NUMBER: _ClassVar[int]
        BINARY_FIELD_NUMBER: _ClassVar[int]
        PIPE_SCOPE_FIELD_NUMBER: _ClassVar[int]
        profile_name: str
        context: bytes
        binary: bytes
        pipe_scope: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, profile_name: _Optional[str] = ..., context: _Optional[bytes] = ..., binary: _Optional[bytes] = ..., pipe_scope: _Optional[_Iterable[int]] = ...) -> None: ...
    P4_NAME_FIELD_NUMBER: _ClassVar[int]
    BFRUNTIME_INFO_FIELD_NUMBER: _ClassVar[int]
    PROFILES_FIELD_NUMBER: _ClassVar[int]
    p4_name: str
    bfruntime_info: bytes
    profiles: _containers.RepeatedCompositeFieldContainer[ForwardingPipelineConfig.Profile]
    def __init__(self, p4_name: _Optional[str] = ..., bfruntime_info: _Optional[bytes] = ..., profiles: _Optional[_Iterable[_Union[ForwardingPipelineConfig.Profile, _Mapping]]] = ...) -> None: ...

class NonP4Config(_message.Message):
    __slots__ = ("bfruntime_info",)
    BFRUNTIME_INFO_FIELD_NUMBER: _ClassVar[int]
    bfruntime_info: bytes
    def __init__(self, bfruntime_info: _Optional[bytes] = ...) -> None: ...

class GetForwardingPipelineConfigRequest(_message.Message):
    __slots__ = ("device_id", "client_id")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    client_id: int
    def __init__(self, device_id: _Optional[int] = ..., client_id: _Optional[int] = ...) -> None: ...

class GetForwardingPipelineConfigResponse(_message.Message):
    __slots__ = ("config", "non_p4_config")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    NON_P4_CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _containers.RepeatedCompositeFieldContainer[ForwardingPipelineConfig]
    non_p4_config: NonP4Config
    def __init__(self, config: _Optional[_Iterable[_Union[ForwardingPipelineConfig, _Mapping]]] = ..., non_p4_config: _Optional[_Union[NonP4Config, _Mapping]] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("canonical_code", "message", "space", "code")
    CANONICAL_CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SPACE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    canonical_code: int
    message: str
    space: str
    code: int
    def __init__(self, canonical_code: _Optional[int] = ..., message: _Optional[str] = ..., space: _Optional[str] = ..., code: _Optional[int] = ...) -> None: ...
