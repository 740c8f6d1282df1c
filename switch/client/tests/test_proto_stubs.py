"""The committed Python stubs are what gen_proto.sh makes from switch/proto today."""

from __future__ import annotations

import subprocess
from pathlib import Path

from google.protobuf.message import Message

HERE = Path(__file__).resolve().parent
CLIENT = HERE.parent
STUBS = CLIENT / "src" / "p4relay_switch" / "proto"


def test_stubs_up_to_date(tmp_path: Path) -> None:
    subprocess.run([str(CLIENT / "gen_proto.sh"), str(tmp_path)], check=True, timeout=120)
    names = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    assert names == sorted(p.name for p in STUBS.iterdir() if p.is_file() and p.suffix != ".pyc")
    for n in names:
        assert (tmp_path / n).read_bytes() == (STUBS / n).read_bytes(), (
            f"{n} is stale: run switch/client/gen_proto.sh"
        )


def test_wire_names_and_numbers() -> None:
    """Spot checks of field numbers the public bfruntime.proto fixes (wire format)."""
    from p4relay_switch.proto import bfruntime_pb2 as pb

    def num(msg: type[Message], field: str) -> int:
        return msg.DESCRIPTOR.fields_by_name[field].number

    assert pb.DESCRIPTOR.package == "bfrt_proto"
    assert [m.name for m in pb.DESCRIPTOR.services_by_name["BfRuntime"].methods] == [
        "Write",
        "Read",
        "SetForwardingPipelineConfig",
        "GetForwardingPipelineConfig",
        "StreamChannel",
    ]
    assert num(pb.TableEntry, "handle_id") == 7
    assert num(pb.TableEntry, "entry_tgt") == 8
    assert num(pb.TableEntry, "table_flags") == 9
    assert num(pb.KeyField, "range") == 5
    assert num(pb.DataField, "bool_val") == 8
    assert num(pb.DataField, "str_arr_val") == 9
    assert num(pb.TableAttribute, "port_status_notify") == 7
    assert num(pb.StreamMessageResponse, "set_forwarding_pipeline_config_response") == 5
    assert num(pb.Subscribe, "status") == 4
    assert num(pb.ForwardingPipelineConfig, "profiles") == 3
    assert num(pb.GetForwardingPipelineConfigResponse, "non_p4_config") == 2
    assert num(pb.Error, "code") == 4
    assert pb.Update.INSERT_OR_MODIFY == 5
    assert pb.IdleTimeoutNotification.ENTRY_IDLE == 1
