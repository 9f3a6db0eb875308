"""Types of the compiled module built from ``_cdecode.pyx`` (see :mod:`tubemq_aio._speedups`)."""

from collections.abc import Callable, Iterable, Mapping
from logging import Logger
from typing import Any

from tubemq_aio.models import Message
from tubemq_aio.protocol.framing import Frame

COLUMN_API: int

class GetMessageParser:
    def __init__(
        self,
        response_cls: type[Any],
        raw_cls: type[tuple[Any, ...]],
        fallback: Callable[[bytes], Any],
        undefined: int,
    ) -> None: ...
    def __call__(self, data: bytes) -> Any: ...
    def columns(
        self, data: bytes, start: int = 0, stop: int = -1
    ) -> tuple[Any, int, bytes] | None: ...

class RawDecoder:
    def __init__(
        self,
        message_cls: type[Message],
        crc32: Callable[[bytes], int],
        attr_cache: dict[bytes, Any],
        attribute_info: Callable[[bytes], Any],
        no_attributes: Mapping[str, str],
        log: Logger,
        fallback: Callable[..., tuple[list[Message], int]],
    ) -> None: ...
    def __call__(
        self,
        raw: Iterable[Any],
        *,
        topic: str,
        partition_key: str,
        filters: frozenset[str],
        counters: Any,
        deliver_corrupt: bool = False,
    ) -> tuple[list[Message], int]: ...

class ColumnDecoder:
    def __init__(
        self,
        crc32: Callable[[Any], int],
        attr_cache: dict[bytes, Any],
        attribute_info: Callable[[bytes], Any],
        no_block: tuple[Any, ...],
        log: Logger,
        crc_address: int = 0,
    ) -> None: ...
    def __call__(
        self,
        data: bytes,
        ids: Any,
        checksums: Any,
        flags: Any,
        starts: Any,
        ends: Any,
        bodies: Any,
        *,
        partition_key: str,
        filters: frozenset[str],
        counters: Any,
        deliver_corrupt: bool,
    ) -> tuple[bytes, bytes, bytes | None, list[tuple[Any, ...]]]: ...

class FrameDecoder:
    def __init__(self, max_frame_bytes: int = ..., max_list_size: int = ...) -> None: ...
    @property
    def buffered(self) -> int: ...
    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]: ...

class ResponseDecoder:
    def __init__(self, fallback: Callable[[bytes], Any]) -> None: ...
    def __call__(self, payload: bytes) -> Any: ...

class SendResultParser:
    def __init__(
        self,
        result_cls: type[Any],
        fields: tuple[str, ...],
        fallback: Callable[[bytes, Any], Any],
        partition_cls: type[Any] | None = None,
        broker_cls: type[Any] | None = None,
    ) -> None: ...
    def __call__(self, data: bytes, partition: Any) -> Any: ...
    def parse(self, data: bytes, partition: Any) -> Any: ...

class PlainSendEncoder:
    def __init__(self, pure: Any, plain_message: Callable[[bytes], Any]) -> None: ...
    def plain_parts(
        self, topic: str, partition_id: int, body: bytes, auth: Any, timeout_ms: int
    ) -> tuple[tuple[bytes, bytes, bytes], int]: ...

class SendRegistry:
    """Fields and methods as ``tubemq_aio._io.registry.SendRegistry`` (the reference)."""

    label: str
    stats: Any
    next_deadline: float
    last_activity: float
    def _flush(self) -> None: ...
    def _wake_room(self) -> None: ...
    def start_parts(
        self, parts: Any, size: int, timeout: float, deadline: float | None = None
    ) -> tuple[Any, int, Any] | None: ...
    def resolve(self, frames: Iterable[tuple[int, bytes]]) -> Exception | None: ...

class WindowSlots:
    """Fields and methods as ``tubemq_aio.producer._window.WindowSlots`` (the reference)."""

    limit: int
    borrowed: int
    def try_acquire(self) -> bool: ...
    def release(self) -> None: ...

def plain_send_args(
    topic: object, body: object, attributes: object, msg_type: object, msg_time: object
) -> bool: ...

class MessageJson:
    def __init__(
        self,
        crc32: Callable[[bytes], int],
        attr_cache: dict[bytes, Any],
        attribute_info: Callable[[bytes], Any],
        log: Logger,
        tail_of: Callable[[bytes | None], bytes],
        tails: dict[bytes | None, bytes],
        screen_fallback: Callable[..., tuple[Any, ...]],
        encode_fallback: Callable[[Any, bool], bytes],
        crc_address: int = 0,
    ) -> None: ...
    def screen(
        self, raw: Any, *, partition_key: str, filters: frozenset[str], counters: Any
    ) -> tuple[Any, ...]: ...
    def encode(self, raw: Any, force_base64: bool) -> bytes: ...
