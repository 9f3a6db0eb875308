"""Request and response bodies (pydantic v2): the source of the OpenAPI document."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Literal, Self, cast

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
    field_validator,
    model_validator,
)

from tubemq_aio.gateway.config.limits import (
    LEASE_MS_CEILING,
    MAX_BATCH_CEILING,
    MAX_DELAY_MS,
    MAX_WAIT_MS,
)
from tubemq_aio.gateway.engine.data import MAX_OFFSET
from tubemq_aio.gateway.errors import InvalidBodyError
from tubemq_aio.gateway.http.wire_ints import Int64Text, OffsetInput
from tubemq_aio.protocol.time_search import EARLIEST_TIME, LATEST_TIME

__all__ = [
    "MAX_VALUE_CHARS",
    "AckResult",
    "BatchItem",
    "BatchMessage",
    "BatchProduceRequest",
    "BatchProduceResponse",
    "ErrorBody",
    "ErrorResponse",
    "ExtendRequest",
    "ExtendResponse",
    "FetchRequest",
    "FetchResponse",
    "LagPartition",
    "LagResponse",
    "LeaseInfo",
    "NackRequest",
    "OkResponse",
    "OutMessage",
    "ProduceRequest",
    "ProduceResult",
    "RateRequest",
    "ResetEntry",
    "ResetRequest",
    "ResetResponse",
    "SettleResponse",
    "error_responses",
]

_STRICT = ConfigDict(extra="forbid", strict=True)
#: The longest message ``value`` in characters (text or base64).
MAX_VALUE_CHARS = 16 * 1024 * 1024
AttrText = Annotated[str, Field(min_length=1, max_length=1024, pattern=r"^[^,=]+$")]
ClientId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")]
Token = Annotated[str, Field(min_length=1, max_length=1024)]


class ErrorBody(BaseModel):
    """What went wrong (``retry_after_ms``: a 429's wait, exact; ``Retry-After`` rounds it up
    to whole seconds)."""

    code: str
    message: str
    retriable: bool
    retry_after_ms: int | None = None


class ErrorResponse(BaseModel):
    """Every error answer."""

    error: ErrorBody


#: The OpenAPI description of an error answer whose ``http.HTTPStatus`` phrase changed with the
#: Python version (3.13 took RFC 9110's names), so that the published document is one on every
#: version; any other status keeps FastAPI's, its phrase.
_STABLE_PHRASES = {413: "Request Entity Too Large", 422: "Unprocessable Entity"}


def error_responses(codes: Iterable[int]) -> dict[int | str, dict[str, object]]:
    """The ``responses=`` of a route or router whose error answers are ``codes`` (HTTP status
    numbers): each an :class:`ErrorResponse`, described as on Python 3.11 whatever the version."""
    return {
        code: {"model": ErrorResponse, "description": _STABLE_PHRASES[code]}
        if code in _STABLE_PHRASES
        else {"model": ErrorResponse}
        for code in codes
    }


class ProduceRequest(BaseModel):
    """One message to publish."""

    model_config = _STRICT
    value: str = Field(
        min_length=1, max_length=MAX_VALUE_CHARS, description="the body, as text or base64"
    )
    encoding: Literal["utf8", "base64"] = "utf8"
    attributes: dict[AttrText, AttrText] | None = Field(default=None, max_length=256)
    msg_type: Annotated[str, Field(max_length=256, pattern=r"^[^,=]*$")] | None = None
    msg_time: Annotated[str, Field(pattern=r"^[0-9]{12}$")] | None = Field(
        default=None, description="yyyyMMddHHmm"
    )
    key: Annotated[str, Field(min_length=1, max_length=1024)] | None = Field(
        default=None, description="messages with one key go to one partition"
    )


class ProduceResult(BaseModel):
    """Where the broker stored a message."""

    partition_key: str
    message_id: Int64Text
    append_time: int = Field(description="ms since the epoch, broker clock (-1 if not sent)")
    append_offset: Int64Text


def _item_or_error(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    """A batch message as a :class:`ProduceRequest`, or the :class:`InvalidBodyError` that
    refuses it alone (its result is a 422 item; the other messages are sent)."""
    try:
        return handler(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        if not where:  # not an object at all (pydantic words this per parse mode)
            return InvalidBodyError("a message must be a JSON object")
        return InvalidBodyError(f"{where}: {first.get('msg', 'invalid')}")


#: A batch message: its schema is :class:`ProduceRequest`'s; an invalid one validates as the
#: :class:`InvalidBodyError` naming its problem.
BatchMessage = Annotated[
    ProduceRequest,
    WrapValidator(_item_or_error),
    WithJsonSchema(
        {
            "anyOf": [
                {"$ref": "#/components/schemas/ProduceRequest"},
                {"description": "any other value: refused alone, with its own 422 result"},
            ]
        }
    ),
]


class BatchProduceRequest(BaseModel):
    """Up to 500 messages (the configured ``max_batch``) to publish. A message that is invalid
    (an empty ``value``, a bad attribute, …) gets its own 422 result; the others are sent."""

    model_config = _STRICT
    messages: list[BatchMessage] = Field(min_length=1, max_length=MAX_BATCH_CEILING)

    def items(self) -> list[ProduceRequest | InvalidBodyError]:
        """The messages, each valid or the error that refuses it."""
        return cast(list[ProduceRequest | InvalidBodyError], self.messages)


class BatchItem(BaseModel):
    """The outcome of one message of a batch."""

    index: int
    status: int = Field(description="the HTTP status this message alone would have had")
    partition_key: str | None = None
    message_id: Int64Text | None = None
    append_offset: Int64Text | None = None
    error: ErrorBody | None = None


class BatchProduceResponse(BaseModel):
    """Per-message outcomes, in request order."""

    results: list[BatchItem]


class FetchRequest(BaseModel):
    """Lease one partition and read a batch from it."""

    model_config = _STRICT
    wait_ms: int = Field(default=0, ge=0, le=MAX_WAIT_MS, description="long poll up to this long")
    client_id: ClientId | None = Field(
        default=None, description="required in broadcast groups, refused in clustering groups"
    )
    ack: list[Token] | None = Field(
        default=None, max_length=100, description="tokens to ack before leasing"
    )
    lease_ms: int | None = Field(default=None, ge=1, le=LEASE_MS_CEILING)
    value_encoding: Literal["auto", "base64"] = "auto"
    max_messages: int = Field(
        default=1000,
        ge=1,
        le=10_000,
        description=(
            "gather further broker batches of the leased partition while the answer stays "
            "within this many messages; the first broker batch is always delivered whole"
        ),
    )


class LeaseInfo(BaseModel):
    """The lease on the fetched batch; ack, nack or extend it with the token."""

    token: str
    partition_key: str
    expires_at: int = Field(description="ms since the epoch, Redis clock")
    redelivery: int


class OutMessage(BaseModel):
    """A delivered message."""

    message_id: Int64Text
    value: str
    encoding: Literal["utf8", "base64"]
    attributes: dict[str, str]
    msg_type: str
    msg_time: str | None = Field(description="yyyyMMddHHmm, or null")


class AckResult(BaseModel):
    """The outcome of one piggy-backed ack."""

    token: str
    result: str
    error: ErrorBody | None = None


class FetchResponse(BaseModel):
    """The batch (``ok``) or why there is none."""

    status: Literal["ok", "empty", "busy", "paused"]
    lease: LeaseInfo | None = None
    messages: list[OutMessage]
    acks: list[AckResult] | None = None
    retry_after_ms: int | None = None


class SettleResponse(BaseModel):
    """The outcome of ack/nack."""

    result: str


class NackRequest(BaseModel):
    """Give the batch back; it is delivered again after ``delay_ms``."""

    model_config = _STRICT
    delay_ms: int = Field(default=0, ge=0, le=MAX_DELAY_MS)


class ExtendRequest(BaseModel):
    """Keep the lease longer."""

    model_config = _STRICT
    lease_ms: int = Field(ge=1, le=LEASE_MS_CEILING)


class ExtendResponse(BaseModel):
    """The new expiry."""

    expires_at: int


class ResetRequest(BaseModel):
    """Move the group's committed offsets: give ``to`` or ``to_time``."""

    model_config = _STRICT
    to: (
        Literal["earliest", "latest"]
        | dict[str, Annotated[OffsetInput, Field(ge=0, le=MAX_OFFSET)]]
        | None
    ) = Field(
        default=None,
        description="earliest, latest, or partition key -> offset (a decimal string)",
    )
    to_time: AwareDatetime | None = Field(
        default=None,
        strict=False,  # parsed from its RFC 3339 text (a string only, see _time_text)
        description="RFC 3339 time with a zone: every partition moves to its first message "
        "stamped (msg_time, minute granularity) at or after it; a time after the newest "
        "message moves right after the last one",
    )
    client_id: ClientId | None = None

    @field_validator("to_time", mode="before")
    @classmethod
    def _time_text(cls, value: object) -> object:
        if value is not None and not isinstance(value, str):
            raise ValueError("to_time must be an RFC 3339 string, e.g. 2026-11-29T10:00:00Z")
        return value

    @field_validator("to_time")
    @classmethod
    def _time_in_range(cls, value: datetime | None) -> datetime | None:
        # read in the group's zone (any offset up to a day): a time within a day of datetime's
        # ends could not be converted there (OverflowError, once a 500)
        if value is not None and not EARLIEST_TIME <= value <= LATEST_TIME:
            raise ValueError("to_time must be between 0001-01-02 and 9999-12-30 (UTC)")
        return value

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.to is None) == (self.to_time is None):
            raise ValueError("give exactly one of to and to_time")
        return self


class ResetEntry(BaseModel):
    """One partition's offset before and after a reset."""

    model_config = ConfigDict(extra="allow")
    partition_key: str
    old: Int64Text | None
    new: Int64Text | Literal["earliest", "latest"] | None


class ResetResponse(BaseModel):
    """Every partition touched by a reset."""

    partitions: list[ResetEntry]


class RateRequest(BaseModel):
    """A consume rate limit shared by every replica (0 = off)."""

    model_config = _STRICT
    messages_per_second: float = Field(
        ge=0, le=1e9, allow_inf_nan=False, description="0 (off) or at least 0.001"
    )
    burst: int | None = Field(default=None, ge=0, le=1_000_000_000)


class OkResponse(BaseModel):
    """A plain acknowledgement."""

    ok: bool = True


class LagPartition(BaseModel):
    """Backlog of one partition."""

    model_config = ConfigDict(extra="allow")
    partition_key: str
    committed: Int64Text | None
    max: Int64Text | None
    lag_bytes: Int64Text | None
    lease_holder: str | None = None
    lease_expires_at: int | None = None


class LagResponse(BaseModel):
    """Backlog per partition and in total."""

    model_config = ConfigDict(extra="allow")
    group: str
    partitions: list[LagPartition]
    total_lag_bytes: Int64Text
