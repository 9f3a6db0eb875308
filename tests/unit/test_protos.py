"""The protobuf schema: freshness, golden wire bytes, field numbers and proto2 required-ness.

The field table below was taken from the upstream apache/inlong ``tubemq-core`` ``.proto`` files
(commit a6c7a6a670c3b935c68138d080f82f7d0f925dbc). Servers identify fields by number, type and
label only, so any edit of ``protos/*.proto`` that changes one of them breaks wire compatibility
and must fail here.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor, FileDescriptor
from google.protobuf.descriptor_pb2 import FileDescriptorProto
from google.protobuf.internal import api_implementation
from google.protobuf.message import EncodeError, Message
from hypothesis import given
from hypothesis import strategies as st

from tests.support.proto_schema import OPT, REP, REQ, SCALARS, SCHEMA
from tubemq_aio.protocol.pb import BrokerService_pb2, MasterService_pb2, RPC_pb2, generate

REPO_ROOT = Path(__file__).resolve().parents[2]
PB_DIR = REPO_ROOT / "tubemq_aio" / "protocol" / "pb"

FILES: dict[str, FileDescriptor] = {
    "RPC": RPC_pb2.DESCRIPTOR,
    "MasterService": MasterService_pb2.DESCRIPTOR,
    "BrokerService": BrokerService_pb2.DESCRIPTOR,
}

# ---------------------------------------------------------------------------------------------
# helpers: an independent varint / delimited codec, so the golden tests do not trust protobuf
# ---------------------------------------------------------------------------------------------


def varint(value: int) -> bytes:
    """Unsigned LEB128; negative numbers as their 64-bit two's complement (protobuf int32/int64)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def delimited(message: Message) -> bytes:
    """``message`` serialized with a varint length prefix (Java ``writeDelimitedTo``)."""
    data = message.SerializeToString()
    return varint(len(data)) + data


def read_delimited(buf: bytes, pos: int) -> tuple[bytes, int]:
    """Read one varint-delimited chunk at ``pos``; return it and the position after it."""
    length = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    end = pos + length
    assert end <= len(buf), "truncated delimited message"
    return buf[pos:end], end


def initialization_errors(message: Message) -> list[str]:
    """Paths of unset required fields (``FindInitializationErrors`` is absent from the stubs)."""
    errors: list[str] = message.FindInitializationErrors()  # type: ignore[attr-defined]
    return errors


def h(text: str) -> bytes:
    """Bytes from a hex string with optional spaces."""
    return bytes.fromhex(text)


# ---------------------------------------------------------------------------------------------
# (a) the committed generated modules are fresh and importable the intended way
# ---------------------------------------------------------------------------------------------


def test_generated_modules_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tubemq_aio.protocol.pb.generate", "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_protobuf_runtime_is_upb() -> None:
    assert api_implementation.Type() == "upb"


def test_generated_modules_use_package_relative_imports() -> None:
    for path in sorted(PB_DIR.glob("*_pb2.py*")):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^(import|from) \w+_pb2\b", text, re.MULTILINE), path.name


def test_rewrite_imports_touches_only_local_modules() -> None:
    source = (
        "from google.protobuf import descriptor as _descriptor\n"
        "import RPC_pb2 as RPC__pb2\n"
        "import other_pb2 as other__pb2\n"
        "from RPC_pb2 import RequestBody\n"
    )
    expected = (
        "from google.protobuf import descriptor as _descriptor\n"
        "from . import RPC_pb2 as RPC__pb2\n"
        "import other_pb2 as other__pb2\n"
        "from .RPC_pb2 import RequestBody\n"
    )
    assert generate.rewrite_imports(source, {"RPC_pb2"}) == expected


def test_compare_names_stale_missing_and_unexpected_files(tmp_path: Path) -> None:
    fresh, committed = tmp_path / "fresh", tmp_path / "committed"
    fresh.mkdir()
    committed.mkdir()
    (fresh / "A_pb2.py").write_text("a = 1\n")
    (committed / "A_pb2.py").write_text("a = 2\n")
    (fresh / "A_pb2.pyi").write_text("a: int\n")
    (committed / "A_pb2.pyi").write_text("a: int\n")
    (fresh / "B_pb2.py").write_text("b = 1\n")
    (committed / "C_pb2.py").write_text("c = 1\n")
    (committed / "generate.py").write_text("# hand-written, ignored\n")
    stale = generate.compare(fresh, committed)
    assert stale.changed == ["A_pb2.py"]
    assert stale.missing == ["B_pb2.py"]
    assert stale.unexpected == ["C_pb2.py"]
    assert "A_pb2.py" in stale.describe()
    assert not generate.compare(fresh, fresh)


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_pyproject_protobuf_floor_accepts_generated_code() -> None:
    """The generated modules refuse to load on a runtime older than the protoc that made them."""
    gencode = re.search(
        r"^# Protobuf Python Version: (\d+\.\d+\.\d+)$",
        (PB_DIR / "RPC_pb2.py").read_text(encoding="utf-8"),
        re.MULTILINE,
    )
    assert gencode is not None
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    specs = [d for d in project["project"]["dependencies"] if re.match(r"protobuf\b", d)]
    assert len(specs) == 1, specs
    floor = re.search(r">=\s*([\d.]+)", specs[0])
    assert floor is not None, specs[0]
    assert _version_tuple(floor.group(1)) >= _version_tuple(gencode.group(1)), (
        f"pyproject allows {specs[0]!r} but the generated code needs protobuf>={gencode.group(1)}"
    )


# ---------------------------------------------------------------------------------------------
# (b) golden bytes from docs/protocol/wire.md (§1.4, §5)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param(RPC_pb2.RpcConnHeader(flag=0), "02 08 00", id="conn-request"),
        pytest.param(RPC_pb2.RpcConnHeader(flag=1), "02 08 01", id="conn-response"),
        pytest.param(
            RPC_pb2.RequestHeader(serviceType=1, protocolVer=3), "04 08 01 10 03", id="req-header"
        ),
        pytest.param(
            RPC_pb2.ResponseHeader(status=RPC_pb2.ResponseHeader.SUCCESS, protocolVer=3),
            "04 08 00 18 03",
            id="rsp-success",
        ),
        pytest.param(
            RPC_pb2.ResponseHeader(status=RPC_pb2.ResponseHeader.ERROR, protocolVer=3),
            "04 08 01 18 03",
            id="rsp-error",
        ),
        pytest.param(
            RPC_pb2.ResponseHeader(status=RPC_pb2.ResponseHeader.FATAL), "02 08 02", id="rsp-fatal"
        ),
    ],
)
def test_envelope_headers_golden(message: Message, expected: str) -> None:
    assert delimited(message) == h(expected)
    parsed = type(message).FromString(h(expected)[1:])
    assert parsed == message
    assert parsed.ListFields() == message.ListFields()  # same fields present, not just equal values


def test_request_body_golden() -> None:
    inner = MasterService_pb2.CloseRequestP2M(clientId="c1")
    assert inner.SerializeToString() == h("0A 02 63 31")
    body = RPC_pb2.RequestBody(method=2, timeout=10_000, request=inner.SerializeToString())
    assert body.SerializeToString() == h("08 02 10 90 4E 1A 04 0A 02 63 31")
    assert RPC_pb2.RequestBody(method=13, timeout=15_000).SerializeToString() == h("08 0D 10 98 75")
    parsed = RPC_pb2.RequestBody.FromString(h("08 02 10 90 4E 1A 04 0A 02 63 31"))
    assert (parsed.method, parsed.timeout) == (2, 10_000)
    assert MasterService_pb2.CloseRequestP2M.FromString(parsed.request).clientId == "c1"


@given(
    method=st.integers(min_value=-(2**31), max_value=2**31 - 1),
    timeout=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    request=st.binary(max_size=300),
)
def test_request_body_matches_independent_encoding(
    method: int, timeout: int, request: bytes
) -> None:
    body = RPC_pb2.RequestBody(method=method, timeout=timeout, request=request)
    expected = h("08") + varint(method) + h("10") + varint(timeout)
    expected += h("1A") + varint(len(request)) + request
    assert body.SerializeToString() == expected
    assert RPC_pb2.RequestBody.FromString(expected) == body


def test_request_body_request_field_is_not_delimited_inside() -> None:
    payload = bytes(range(200))  # a 200-byte business message needs a 2-byte length varint
    body = RPC_pb2.RequestBody(method=13, timeout=10_000, request=payload).SerializeToString()
    assert body == h("08 0D 10 90 4E 1A C8 01") + payload


def test_full_request_payload_golden_and_parse() -> None:
    inner = MasterService_pb2.CloseRequestP2M(clientId="c1").SerializeToString()
    payload = (
        delimited(RPC_pb2.RpcConnHeader(flag=0))
        + delimited(RPC_pb2.RequestHeader(serviceType=1, protocolVer=3))
        + delimited(RPC_pb2.RequestBody(method=3, timeout=10_000, request=inner))
    )
    assert payload == h("02 08 00  04 08 01 10 03  0B 08 03 10 90 4E 1A 04 0A 02 63 31")
    chunk, pos = read_delimited(payload, 0)
    assert RPC_pb2.RpcConnHeader.FromString(chunk).flag == 0
    chunk, pos = read_delimited(payload, pos)
    header = RPC_pb2.RequestHeader.FromString(chunk)
    assert (header.serviceType, header.protocolVer) == (1, 3)
    chunk, pos = read_delimited(payload, pos)
    assert pos == len(payload)
    assert RPC_pb2.RequestBody.FromString(chunk).method == 3


def test_response_bodies_golden() -> None:
    data = MasterService_pb2.CloseResponseM2P(success=True, errCode=200, errMsg="OK!")
    data_bytes = data.SerializeToString()
    assert data_bytes == h("08 01 10 C8 01 1A 03 4F 4B 21")
    body = RPC_pb2.RspResponseBody(method=3, data=data_bytes)
    assert body.SerializeToString() == h("08 03 12 0A") + data_bytes
    exc = RPC_pb2.RspExceptionBody(exceptionName="x.StandbyException", stackTrace="m")
    assert exc.SerializeToString() == h("0A 12") + b"x.StandbyException" + h("12 01") + b"m"
    # A server exception frame with an empty message text still carries field 2.
    parsed = RPC_pb2.RspExceptionBody.FromString(h("0A 01 45 12 00"))
    assert parsed.exceptionName == "E"
    assert parsed.HasField("stackTrace")
    assert parsed.stackTrace == ""


def test_response_header_parse_presence() -> None:
    success = RPC_pb2.ResponseHeader.FromString(h("08 00 18 03"))
    assert success.status == RPC_pb2.ResponseHeader.SUCCESS
    assert success.HasField("protocolVer")
    assert not success.HasField("serviceType")
    fatal = RPC_pb2.ResponseHeader.FromString(h("08 02"))
    assert fatal.status == RPC_pb2.ResponseHeader.FATAL
    assert not fatal.HasField("protocolVer")


def test_send_message_negative_int32_fields_golden() -> None:
    """checkSum -1 and a negative sentAddr travel as ten-byte varints, as Java writes them."""
    request = BrokerService_pb2.SendMessageRequestP2B(
        clientId="p",
        topicName="t",
        partitionId=10001,
        data=b"hello",
        flag=0,
        checkSum=-1,
        sentAddr=-1062731510,  # 192.168.1.10 packed big-endian into a signed int32
    )
    expected = (
        h("0A 01 70")  # 1 clientId
        + h("12 01 74")  # 2 topicName
        + h("18 91 4E")  # 3 partitionId 10001
        + h("22 05")
        + b"hello"  # 4 data
        + h("28 00")  # 5 flag
        + h("30 FF FF FF FF FF FF FF FF FF 01")  # 6 checkSum -1
        + h("38")
        + varint(-1062731510)  # 7 sentAddr
    )
    assert len(varint(-1062731510)) == 10
    assert request.SerializeToString() == expected
    assert BrokerService_pb2.SendMessageRequestP2B.FromString(expected).sentAddr == -1062731510


def test_get_message_response_max_offset_field_10() -> None:
    rsp = BrokerService_pb2.GetMessageResponseB2C(success=True, errCode=200, maxOffset=280)
    assert rsp.SerializeToString() == h("08 01 10 C8 01 50 98 02")


# ---------------------------------------------------------------------------------------------
# (c) field numbers, labels and types (from the upstream .proto files)
# ---------------------------------------------------------------------------------------------


def _message(key: str) -> Descriptor:
    file_name, message_name = key.split(".")
    return FILES[file_name].message_types_by_name[message_name]


def _label(field: FieldDescriptor) -> str:
    if field.is_required:
        return REQ
    return REP if field.is_repeated else OPT


def _type(field: FieldDescriptor) -> str:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        assert field.message_type is not None
        return "." + field.message_type.name
    if field.type == FieldDescriptor.TYPE_ENUM:
        enum = field.enum_type
        assert enum is not None
        outer = enum.containing_type
        return "." + (f"{outer.name}.{enum.name}" if outer is not None else enum.name)
    for name, code in SCALARS.items():
        if field.type == code:
            return name
    return f"<type {field.type}>"


@pytest.mark.parametrize("key", sorted(SCHEMA))
def test_field_numbers_labels_and_types(key: str) -> None:
    descriptor = _message(key)
    expected = {name: (number, label, type_) for name, number, label, type_ in SCHEMA[key]}
    actual = {
        name: (field.number, _label(field), _type(field))
        for name, field in descriptor.fields_by_name.items()
    }
    assert actual == expected


def test_schema_table_is_consistent() -> None:
    for key, fields in SCHEMA.items():
        numbers = [number for _, number, _, _ in fields]
        assert len(set(numbers)) == len(numbers), key
        for _, _, label, type_ in fields:
            assert label in (REQ, OPT, REP)
            assert type_.startswith(".") or type_ in SCALARS


def test_response_status_enum_values() -> None:
    status = RPC_pb2.ResponseHeader.DESCRIPTOR.enum_types_by_name["Status"]
    assert {v.name: v.number for v in status.values} == {"SUCCESS": 0, "ERROR": 1, "FATAL": 2}


MESSAGES: dict[str, list[str]] = {
    "RPC": [
        "RpcConnHeader",
        "RequestHeader",
        "RequestBody",
        "ResponseHeader",
        "RspExceptionBody",
        "RspResponseBody",
    ],
    "MasterService": [
        "EventProto",
        "EnableBrokerFunInfo",
        "AuthenticateInfo",
        "MasterCertificateInfo",
        "MasterAuthorizedInfo",
        "MasterBrokerAuthorizedInfo",
        "ApprovedClientConfig",
        "ClusterConfig",
        "RegisterRequestP2M",
        "RegisterResponseM2P",
        "HeartRequestP2M",
        "HeartResponseM2P",
        "CloseRequestP2M",
        "CloseResponseM2P",
        "RegisterRequestC2M",
        "RegisterResponseM2C",
        "HeartRequestC2M",
        "HeartResponseM2C",
        "CloseRequestC2M",
        "CloseResponseM2C",
        "RegisterRequestB2M",
        "RegisterResponseM2B",
        "HeartRequestB2M",
        "HeartResponseM2B",
        "CloseRequestB2M",
        "CloseResponseM2B",
        "DataStorePath",
        "TopicRmvInfo",
        "DefaultConfigInfo",
        "TopicConfigInfo",
        "BrokerConfigInfo",
        "BrokerPolicyInfo",
        "BrokerStatusInfo",
        "BrokerOperateInfo",
        "RegisterRequest_V2_B2M",
        "RegisterResponse_V2_M2B",
        "HeartRequest_V2_B2M",
        "HeartResponse_V2_M2B",
        "CloseRequest_V2_B2M",
        "CloseResponse_V2_M2B",
        "ClientSubRepInfo",
        "OpsTaskInfo",
        "RegisterRequestC2MV2",
        "RegisterResponseM2CV2",
        "HeartRequestC2MV2",
        "HeartResponseM2CV2",
        "GetPartMetaRequestC2M",
        "GetPartMetaResponseM2C",
    ],
    "BrokerService": [
        "TransferedMessage",
        "AuthorizedInfo",
        "SendMessageRequestP2B",
        "SendMessageResponseB2P",
        "RegisterRequestC2B",
        "RegisterResponseB2C",
        "HeartBeatRequestC2B",
        "HeartBeatResponseB2C",
        "GetMessageRequestC2B",
        "GetMessageResponseB2C",
        "CommitOffsetRequestC2B",
        "CommitOffsetResponseB2C",
    ],
}


@pytest.mark.parametrize("file_name", sorted(FILES))
def test_every_server_message_exists_in_the_right_file(file_name: str) -> None:
    descriptor = FILES[file_name]
    assert sorted(descriptor.message_types_by_name) == sorted(MESSAGES[file_name])
    proto = FileDescriptorProto.FromString(descriptor.serialized_pb)
    assert proto.name == f"{file_name}.proto"
    assert proto.syntax in ("", "proto2")  # protoc leaves it empty for proto2
    assert proto.package == "tubemq"
    assert list(proto.dependency) == []


# ---------------------------------------------------------------------------------------------
# (d) proto2 required-ness
# ---------------------------------------------------------------------------------------------


def test_missing_required_field_fails_to_serialize() -> None:
    request = MasterService_pb2.RegisterRequestP2M(clientId="p", hostName="127.0.0.1")
    assert not request.IsInitialized()
    assert initialization_errors(request) == ["brokerCheckSum"]
    with pytest.raises(EncodeError):
        request.SerializeToString()
    request.brokerCheckSum = -1
    assert request.IsInitialized()
    assert request.SerializeToString() == h("0A 01 70 18 FF FF FF FF FF FF FF FF FF 01 22 09") + (
        b"127.0.0.1"
    )


def test_missing_required_nested_field_fails_to_serialize() -> None:
    request = MasterService_pb2.CloseRequestP2M(
        clientId="p",
        authInfo=MasterService_pb2.MasterCertificateInfo(
            authInfo=MasterService_pb2.AuthenticateInfo(userName="u")
        ),
    )
    assert not request.IsInitialized()
    assert sorted(initialization_errors(request)) == [
        "authInfo.authInfo.nonce",
        "authInfo.authInfo.othParams",
        "authInfo.authInfo.signature",
        "authInfo.authInfo.timestamp",
    ]
    with pytest.raises(EncodeError):
        request.SerializeToString()
    assert request.SerializePartialToString() == h("0A 01 70 12 05 0A 03 0A 01 75")


@pytest.mark.parametrize(
    ("message_type", "data", "missing"),
    [
        pytest.param(RPC_pb2.RpcConnHeader, "", ["flag"], id="conn-header"),
        pytest.param(RPC_pb2.ResponseHeader, "18 03", ["status"], id="response-header"),
        pytest.param(RPC_pb2.RspResponseBody, "08 03", ["data"], id="response-body"),
        pytest.param(
            BrokerService_pb2.GetMessageResponseB2C, "08 01", ["errCode"], id="get-message"
        ),
    ],
)
def test_parsing_does_not_enforce_required_fields(
    message_type: type[Message], data: str, missing: list[str]
) -> None:
    """The Python (upb) runtime accepts a message lacking required fields when parsing.

    Unlike protobuf-java on the servers, ``FromString`` does not raise; a decoder that wants the
    server's strictness must call ``IsInitialized()`` itself.
    """
    parsed = message_type.FromString(h(data))
    assert not parsed.IsInitialized()
    assert initialization_errors(parsed) == missing
    with pytest.raises(EncodeError):
        parsed.SerializeToString()


def test_empty_required_values_are_still_present() -> None:
    """Setting a required field to its zero value counts as present (proto2 presence)."""
    header = RPC_pb2.RpcConnHeader(flag=0)
    assert header.HasField("flag")
    assert header.SerializeToString() == h("08 00")
