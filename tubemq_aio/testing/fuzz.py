"""A seeded fuzz driver for everything that decodes bytes a server sent.

Targets: the frame decoder, the RPC envelope, every master/broker response parser (the message
decoding of fetched messages included) and the metadata strings inside those responses. The only
outcome allowed for any input is a value, a :class:`~tubemq_aio.errors.ProtocolError` (the peer
broke the protocol) or a :class:`~tubemq_aio.errors.ServerError` (a refusal, e.g. a send result);
anything else (``TypeError``, ``IndexError``, ``UnicodeDecodeError``...) is a finding.

:data:`PROTOBUF_PARSERS` and :data:`TEXT_PARSERS` are the one table of parsers: the per-commit
hypothesis tests (``tests/unit/test_parser_fuzz.py``) and this seeded driver both walk it.

Run it from the command line (``make fuzz`` runs a million inputs)::

    python -m tubemq_aio.testing.fuzz --inputs 1000000 --seed 1

or reuse a target from a property test::

    @given(st.binary())
    def test_heartbeat_parser(data):
        fuzz.check("broker heartbeat", data)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from google.protobuf.message import Message

from tubemq_aio.errors import ConfigError, ProtocolError, ServerError
from tubemq_aio.protocol import (
    client_balance,
    consumer_meta,
    consumer_replies,
    producer_rpc,
    producer_send,
)
from tubemq_aio.protocol.attributes import parse_attributes, parse_msg_time
from tubemq_aio.protocol.flow_control import parse_flow_rules
from tubemq_aio.protocol.framing import FrameDecoder, encode_frame
from tubemq_aio.protocol.message import decode_payload
from tubemq_aio.protocol.partitions import parse_confirm_context
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.pb import MasterService_pb2 as master_pb
from tubemq_aio.protocol.producer_meta import Broker, Partition, parse_broker_info, parse_topic_info
from tubemq_aio.protocol.rpc import (
    decode_request,
    decode_response,
    encode_exception,
    encode_request,
    encode_success,
)
from tubemq_aio.testing._fuzz_gen import message_bytes, mutate, text_bytes

__all__ = [
    "PROTOBUF_PARSERS",
    "TARGETS",
    "TEXT_PARSERS",
    "Finding",
    "FuzzReport",
    "UntypedError",
    "check",
    "main",
    "run",
]

#: What a parser may raise for hostile input.
TYPED = (ProtocolError, ServerError)

_PARTITION = Partition(Broker(1, "127.0.0.1", 8123), "demo", 0)
_BROKERS = {1: consumer_meta.BrokerInfo(1, "127.0.0.1", 8123)}
_PRODUCER_BROKERS = {1: Broker(1, "127.0.0.1", 8123)}
_PAYLOAD_SIZES = (1, 5, 300, 8192, 8193, 20000)
_FLOW_KEYS = (
    "type",
    "rule",
    "start",
    "end",
    "dltInM",
    "limitInM",
    "freqInMs",
    "zeroCnt",
    "normFreqInMs",
    "filterFreqInMs",
    "minDataFilterFreqInMs",
)


class UntypedError(AssertionError):
    """A target raised something other than a :data:`TYPED` error."""


@dataclass(frozen=True, slots=True)
class _Target:
    generate: Callable[[random.Random], bytes]
    consume: Callable[[bytes], object]


def _feed_frames(data: bytes) -> None:
    decoder = FrameDecoder(max_frame_bytes=1 << 20)
    chunks = random.Random(zlib.crc32(data))
    pos = 0
    while pos < len(data):
        step = chunks.randrange(1, 64) if chunks.random() < 0.7 else len(data)
        decoder.feed(data[pos : pos + step])
        pos += step


def _gen_frames(rng: random.Random) -> bytes:
    out = b"".join(
        encode_frame(
            rng.randrange(2**32), rng.randbytes(rng.choice((1, 5, 300, 8192, 8193, 20000)))
        )
        for _ in range(rng.randrange(1, 3))
    )
    return out if rng.random() < 0.3 else mutate(rng, out, [])


def _gen_envelope(rng: random.Random) -> bytes:
    body = message_bytes(rng, master_pb.HeartResponseM2C.DESCRIPTOR)
    kind = rng.randrange(3)
    if kind == 0:
        payload = encode_success(rng.randrange(1, 23), body)
    elif kind == 1:
        payload = encode_exception(
            text_bytes(rng).decode(errors="replace"), "x", fatal=rng.random() < 0.5
        )
    else:
        payload = encode_request(rng.randrange(1, 6), rng.randrange(1, 23), 1000, body)
    return payload if rng.random() < 0.2 else mutate(rng, payload, [])


def _envelope(data: bytes) -> None:
    for decode in (decode_response, decode_request):
        with contextlib.suppress(*TYPED):
            decode(data)


def _proto(descriptor: object) -> Callable[[random.Random], bytes]:
    def generate(rng: random.Random) -> bytes:
        data = message_bytes(rng, descriptor)
        return mutate(rng, data, []) if rng.random() < 0.3 else data

    return generate


def _get_message(data: bytes) -> None:
    for msg in consumer_replies.parse_get_message_response(data).messages:
        with contextlib.suppress(*TYPED):
            decode_payload(msg.payload, msg.flag, msg.checksum)


def _master(method: int) -> Callable[[bytes], object]:
    return lambda data: consumer_replies.parse_master_response(method, data)


def _strings(data: bytes) -> None:
    """Every metadata-string parser on the same text (each must fail typed on its own)."""
    text = data.decode("utf-8", "replace")
    for parse in TEXT_PARSERS.values():
        with contextlib.suppress(*TYPED):
            parse(text)
    # The confirm context comes back from the application: a bad one is the caller's error.
    with contextlib.suppress(ConfigError):
        parse_confirm_context(text)


def _gen_json(rng: random.Random, depth: int = 0) -> object:
    roll = rng.random()
    if depth > 3 or roll < 0.3:
        return rng.choice((0, -1, 1, 2, 3, 2**40, 0.5, "0800", "2359", "x", None, True, 1e308))
    if roll < 0.6:
        return [_gen_json(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    keys = rng.sample(_FLOW_KEYS, rng.randrange(0, 5))
    return {k: _gen_json(rng, depth + 1) for k in keys}


def _gen_strings(rng: random.Random) -> bytes:
    if rng.random() < 0.25:
        return json.dumps(_gen_json(rng)).encode()
    return text_bytes(rng)


#: Every protobuf response parser: name -> (message class, parser of its bytes).
PROTOBUF_PARSERS: dict[str, tuple[type[Message], Callable[[bytes], object]]] = {
    "producer register": (master_pb.RegisterResponseM2P, producer_rpc.parse_register_response),
    "producer heartbeat": (master_pb.HeartResponseM2P, producer_rpc.parse_heartbeat_response),
    "producer close": (master_pb.CloseResponseM2P, producer_rpc.parse_close_response),
    "send result": (
        broker_pb.SendMessageResponseB2P,
        lambda d: producer_send.parse_send_result(d, _PARTITION),
    ),
    "master register": (master_pb.RegisterResponseM2C, _master(4)),
    "master heartbeat": (master_pb.HeartResponseM2C, _master(5)),
    "master close": (master_pb.CloseResponseM2C, _master(6)),
    "master register v2": (master_pb.RegisterResponseM2CV2, _master(20)),
    "master heartbeat v2": (master_pb.HeartResponseM2CV2, _master(21)),
    "part meta": (master_pb.GetPartMetaResponseM2C, _master(22)),
    "broker register": (broker_pb.RegisterResponseB2C, consumer_replies.parse_offset_response),
    "commit": (
        broker_pb.CommitOffsetResponseB2C,
        lambda d: consumer_replies.parse_offset_response(d, commit=True),
    ),
    "broker heartbeat": (
        broker_pb.HeartBeatResponseB2C,
        consumer_replies.parse_broker_heartbeat_response,
    ),
    # The fetched messages are decoded too: their payloads come from the broker as well.
    "get message": (broker_pb.GetMessageResponseB2C, _get_message),
}

#: Every parser of the metadata strings inside responses: name -> parser of one text.
TEXT_PARSERS: dict[str, Callable[[str], object]] = {
    "broker info": parse_broker_info,
    "topic info": lambda t: parse_topic_info(t, _PRODUCER_BROKERS),
    "broker config list": lambda t: client_balance.parse_broker_config_list(t.split(",")),
    "topic meta list": lambda t: client_balance.parse_topic_meta_list(t.split("|"), _BROKERS),
    "part sub info": lambda t: client_balance.parse_part_sub_info(t.split("|")),
    "required partitions": consumer_meta.parse_required_partitions,
    "failure info": consumer_meta.FailureInfo.parse,
    "subscribe info": consumer_meta.SubscribeInfo.parse,
    "topic condition": consumer_meta.TopicCondition.parse,
    "partition": consumer_meta.Partition.parse,
    "partition key": consumer_meta.PartitionKey.parse,
    "broker": consumer_meta.BrokerInfo.parse,
    "flow rules": parse_flow_rules,
    "attributes": parse_attributes,
    "msg time": parse_msg_time,
}

TARGETS: dict[str, _Target] = {
    "frame": _Target(_gen_frames, _feed_frames),
    "envelope": _Target(_gen_envelope, _envelope),
    **{
        name: _Target(_proto(cls.DESCRIPTOR), parse)
        for name, (cls, parse) in PROTOBUF_PARSERS.items()
    },
    "meta strings": _Target(_gen_strings, _strings),
}


def check(target: str, data: bytes) -> None:
    """Run one input through ``target``.

    Raises:
        UntypedError: the target raised anything but a :data:`TYPED` error (chained as the cause).
        KeyError: no such target.
    """
    consume = TARGETS[target].consume
    try:
        consume(data)
    except TYPED:
        pass
    except Exception as exc:
        raise UntypedError(f"{target}: {type(exc).__name__}: {exc}") from exc


@dataclass(slots=True)
class Finding:
    """One kind of untyped failure (same target, exception type and raising line).

    Attributes:
        target: the target name.
        error: ``ExceptionType: message`` of the first occurrence.
        where: ``file:line`` that raised.
        data: the first input that produced it.
        count: how many inputs produced it.
    """

    target: str
    error: str
    where: str
    data: bytes
    count: int = 1


@dataclass(slots=True)
class FuzzReport:
    """The outcome of :func:`run`.

    Attributes:
        inputs: inputs run per target.
        typed: inputs that ended in a :data:`TYPED` error, per target.
        findings: the untyped failures, one per kind.
    """

    inputs: dict[str, int] = field(default_factory=dict)
    typed: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)


def run(inputs: int, *, seed: int = 0, targets: Sequence[str] | None = None) -> FuzzReport:
    """Run ``inputs`` generated inputs, spread round robin over ``targets`` (default: all).

    The same ``seed`` always produces the same inputs.

    Raises:
        ValueError: ``inputs`` is not an int >= 1 (0 or -1 ran nothing and reported no
            finding, a pass that checked nothing), or a target is not one of :data:`TARGETS`.
    """
    if type(inputs) is not int or inputs < 1:
        raise ValueError(f"inputs must be an int >= 1, got {inputs!r}")
    unknown = sorted(set(targets or ()) - set(TARGETS))
    if unknown:
        raise ValueError(f"unknown fuzz targets {unknown}; the targets are {sorted(TARGETS)}")
    names = list(targets or TARGETS)
    rng = random.Random(seed)
    report = FuzzReport(dict.fromkeys(names, 0), dict.fromkeys(names, 0))
    kinds: dict[tuple[str, str, str], Finding] = {}
    for i in range(inputs):
        name = names[i % len(names)]
        target = TARGETS[name]
        data = target.generate(rng)
        report.inputs[name] += 1
        try:
            target.consume(data)
        except TYPED:
            report.typed[name] += 1
        except Exception as exc:
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"
            key = (name, type(exc).__name__, where)
            if key in kinds:
                kinds[key].count += 1
            else:
                kinds[key] = Finding(name, f"{type(exc).__name__}: {exc}"[:300], where, data)
    report.findings = list(kinds.values())
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: run the fuzzer, print a summary, exit 1 on any finding."""
    parser = argparse.ArgumentParser(prog="python -m tubemq_aio.testing.fuzz")
    parser.add_argument("--inputs", type=int, default=1_000_000, help="how many inputs in all")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--target", action="append", choices=sorted(TARGETS), help="repeatable")
    args = parser.parse_args(argv)
    if args.inputs < 1:
        parser.error(f"argument --inputs: must be >= 1, got {args.inputs}")
    start = time.monotonic()
    report = run(args.inputs, seed=args.seed, targets=args.target)
    elapsed = time.monotonic() - start
    for name, count in report.inputs.items():
        print(f"{name:20} {count:9d} inputs  {report.typed[name]:9d} typed errors")
    print(f"{sum(report.inputs.values())} inputs in {elapsed:.1f} s, seed {args.seed}")
    for f in report.findings:
        print(f"FINDING {f.target}: {f.error} at {f.where} ({f.count}x); input {f.data.hex()}")
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
