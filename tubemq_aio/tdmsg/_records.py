"""Result types of the TDMsg decoders."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from tubemq_aio.tdmsg._common import parse_attributes

__all__ = ["TDFormat", "TDPacket", "TDRecord", "make_record", "record_maker"]


class TDFormat(enum.Enum):
    """Which InLong payload format a record came from."""

    V0 = 0
    """InLongMsg v0 (magic ``0F 00``): no creation time, legacy."""
    V1 = 1
    """InLongMsg v1 (magic ``0F 01``): creation time, text messages (DataProxy default)."""
    V2 = 2
    """InLongMsg v2 (magic ``0F 02``): v1 plus message counts."""
    V3 = 3
    """InLongMsg v3 (magic ``0F 03``): items carry their own attributes."""
    V4 = 4
    """InLongMsg v4 (magic ``0F 04``): binary message ("bin msg")."""
    RAW = 100
    """No InLong wrapping (``msgEnType=0``): the whole TubeMQ body is one record."""
    PB_V1 = 101
    """INLONG_MSG_V1 (``msgEnType=1``): protobuf ``MessageObjs`` batch."""


#: A record's attributes when it has none (read-only; one shared empty mapping).
_NO_ATTRIBUTES: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class TDRecord:
    """One user record decoded from a TDMsg / InLongMsg payload.

    Attributes:
        data: The record bytes as the producer sent them.
        attributes: The parsed ``k=v&k2=v2`` attributes of the record (read-only).
        raw_attributes: The attribute string the attributes were parsed from.
        format: The payload format the record came from.
        group_id: The InLong group id (attribute ``groupId``, else ``bid``), if present.
        stream_id: The InLong stream id (attribute ``streamId``, else ``tid``), if present.
        time_ms: The time the format carries, in epoch milliseconds: the package creation
            time for v1-v3, the data time for v4, ``msgTime`` for INLONG_MSG_V1; ``None``
            for v0.
        source_ip: The ``sourceIp`` of an INLONG_MSG_V1 record; ``None`` otherwise.
    """

    data: bytes
    attributes: Mapping[str, str] = field(default_factory=lambda: _NO_ATTRIBUTES, hash=False)
    raw_attributes: str = ""
    format: TDFormat = TDFormat.V1
    group_id: str | None = None
    stream_id: str | None = None
    time_ms: int | None = None
    source_ip: str | None = None


@dataclass(frozen=True, slots=True)
class TDPacket:
    """A whole decoded payload: its header fields and its records in order.

    Attributes:
        format: The payload format.
        records: The records, in the order they appear in the payload.
        create_time_ms: Creation time (v1-v3) or data time (v4) in epoch ms; ``None`` for v0
            and INLONG_MSG_V1.
        msg_count: The message count the header declares (v2, v3, v4); ``None`` otherwise.
            It is informational and not checked against ``len(records)``.
        unique_id: The v4 unique id; ``None`` for other formats.
        ext_field: The v4 extension flags (``0x1`` item attributes, ``0x4`` string ids,
            ``0x20`` line-feed support); ``None`` for other formats.
    """

    format: TDFormat
    records: tuple[TDRecord, ...]
    create_time_ms: int | None = None
    msg_count: int | None = None
    unique_id: int | None = None
    ext_field: int | None = None


def record_maker(
    attributes: Mapping[str, str] | str,
    fmt: TDFormat,
    time_ms: int | None,
    source_ip: str | None = None,
    default_group_id: str | None = None,
    default_stream_id: str | None = None,
) -> Callable[[bytes], TDRecord]:
    """Return a function building :class:`TDRecord` objects that share these attributes.

    The attributes are parsed once (when given as a string) and shared read-only by every
    record the returned function builds. The ``default_*`` ids apply when the attributes
    name no group or stream.
    """
    if isinstance(attributes, str):
        raw = attributes
        parsed = parse_attributes(attributes)
    else:
        parsed = dict(attributes)
        raw = "&".join(f"{k}={v}" for k, v in parsed.items())
    view = MappingProxyType(parsed)
    group_id = parsed.get("groupId", parsed.get("bid", default_group_id))
    stream_id = parsed.get("streamId", parsed.get("tid", default_stream_id))

    def build(data: bytes) -> TDRecord:
        return TDRecord(data, view, raw, fmt, group_id, stream_id, time_ms, source_ip)

    return build


def make_record(
    data: bytes,
    attributes: Mapping[str, str] | str,
    fmt: TDFormat,
    time_ms: int | None,
    source_ip: str | None = None,
    default_group_id: str | None = None,
    default_stream_id: str | None = None,
) -> TDRecord:
    """Build one :class:`TDRecord`, parsing ``attributes`` when given as a string."""
    maker = record_maker(attributes, fmt, time_ms, source_ip, default_group_id, default_stream_id)
    return maker(data)
