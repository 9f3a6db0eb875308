"""Micro-benchmark of the producer codec hot paths.

Run ``python -m benchmarks.micro.codec``; prints one JSON line per case with microseconds per
operation (best of several rounds):

* ``send_request_1k``: 1 KB body -> :func:`encode_message` -> :class:`SendRequestEncoder` ->
  :func:`encode_request` -> :func:`encode_frame`, i.e. the whole frame of one send.
* ``send_request_1k_attrs``: the same with msgType, msgTime and two user attributes.
* ``send_response``: decode a ``SendMessageResponseB2P`` into a :class:`SendResult`
  (:func:`parse_send_result`).
* ``decode_payload_1k_attrs``: split a received 1 KB payload with attributes (consumer side).
* ``get_message_100x1k_frame``: a 100 x 1 KB GetMessage response frame -> frame decoder ->
  envelope -> :func:`parse_get_message_response` -> ``decode_payload`` per message (payloads
  only, no ``Message`` objects).
* ``get_message_100x1k_messages`` (``..._attrs``): the same frame up to the ``Message`` objects
  the consumer delivers, through the consumer's own decode loop
  (:func:`~tubemq_aio.consumer._decode.decode_raw_messages`): CRC check, attribute split, msgType
  filter check, one ``Message`` per message.
* ``get_message_470x1k_chunks``: a broker's usual large answer (470 x 1 KB, ≈ 480 KB) fed to
  the connection's frame decoder in 256 KB reads (asyncio's read size), up to the ``Message``
  objects.

Every line names the implementation measured (``impl``): ``compiled`` when the optional
accelerator (:mod:`tubemq_aio.accelerator`) is built, ``pure`` otherwise or with
``TUBEMQ_AIO_PURE=1``.
"""

from __future__ import annotations

import functools
import json
import time
import timeit
from collections.abc import Callable

from tubemq_aio import accelerator
from tubemq_aio.consumer._decode import decode_raw_messages
from tubemq_aio.consumer.batch import ConsumerStats
from tubemq_aio.protocol import framing, rpc
from tubemq_aio.protocol.consumer_replies import parse_get_message_response
from tubemq_aio.protocol.message import (
    EncodedMessage,
    checksum,
    decode_payload,
    encode_message,
    ip_to_int,
)
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.protocol.producer_master_values import BrokerAuthorization
from tubemq_aio.protocol.producer_meta import Broker, Partition
from tubemq_aio.protocol.producer_send import SendRequestEncoder, parse_send_result

_ROUNDS = 7


def _bench(name: str, func: Callable[[], object], number: int = 100_000) -> dict[str, object]:
    func()  # warm caches
    # CPU time of this process, not wall time: the machine is shared, and a preempted round
    # should not count the other processes' time.
    best = min(timeit.repeat(func, number=number, repeat=_ROUNDS, timer=time.process_time))
    impl = "pure" if accelerator.compiled() is None else "compiled"
    return {"case": name, "impl": impl, "us_per_op": round(best / number * 1e6, 3), "ops": number}


def main() -> None:
    """Run every case and print the JSON lines."""
    body = bytes(range(256)) * 4
    partition = Partition(Broker(1, "10.0.0.2", 8123), "bench-topic", 3)
    encoder = SendRequestEncoder(
        "10.0.0.1-1234-98765432101234-1234567890-tubemq-aio-0.1.0", ip_to_int("10.0.0.1")
    )
    auth = BrokerAuthorization(1700000000123, None)
    attrs = {"source": "bench", "region": "eu"}
    serial = [0]

    def send_frame() -> bytes:
        msg = encode_message(body)
        req = encoder.encode(partition.topic, partition.partition_id, msg, auth)
        serial[0] += 1
        return framing.encode_frame(serial[0], rpc.encode_request(3, 13, 10_000, req))

    def send_frame_attrs() -> bytes:
        msg = encode_message(body, attributes=attrs, msg_type="order", msg_time="202401011200")
        req = encoder.encode(partition.topic, partition.partition_id, msg, auth)
        serial[0] += 1
        return framing.encode_frame(serial[0], rpc.encode_request(3, 13, 10_000, req))

    response = (
        b"\x08\x01\x10\xc8\x01\x1a\x0f123456789012345"
        + b"\x28\x87\xe1\xd7\x8e\xdc\x8e\xe0\x01"  # messageId
        + b"\x30\x8b\xa0\x9f\xa6\xbb\x31"  # appendTime
        + b"\x38\xc0\xbb\x01"  # appendOffset
    )

    def send_response() -> object:
        return parse_send_result(response, partition)

    encoded = encode_message(body, attributes=attrs, msg_type="order", msg_time="202401011200")
    crc = checksum(encoded.data)

    def decode() -> object:
        return decode_payload(encoded.data, encoded.flag, crc)

    batch_frame = _get_message_frame(100, encode_message(body))
    decoder = framing.new_frame_decoder()

    def decode_batch() -> object:
        (frame,) = decoder.feed(batch_frame)
        data = rpc.decode_response(frame.payload)
        assert isinstance(data, bytes)
        response = parse_get_message_response(data)
        return [decode_payload(m.payload, m.flag, m.checksum) for m in response.messages]

    for name, func in (
        ("send_request_1k", send_frame),
        ("send_request_1k_attrs", send_frame_attrs),
        ("send_response", send_response),
        ("decode_payload_1k_attrs", decode),
    ):
        print(json.dumps(_bench(name, func)))
    batch = _bench("get_message_100x1k_frame", decode_batch, number=5_000)
    batch["us_per_message"] = round(float(str(batch["us_per_op"])) / 100, 3)
    print(json.dumps(batch))
    stats = ConsumerStats()

    def to_messages(reads: list[bytes]) -> object:
        """Frame decoder -> envelope -> parse -> decode loop, as a connection and fetcher do."""
        frames = [f for chunk in reads for f in decoder.feed(chunk)]
        data = rpc.decode_response(frames[0].payload)
        assert isinstance(data, bytes)
        rsp = parse_get_message_response(data)
        return decode_raw_messages(
            rsp.messages,
            topic="bench-topic",
            partition_key="1:bench-topic:3",
            filters=frozenset(),
            counters=stats,
        )

    big = _get_message_frame(470, encode_message(body))
    for name, reads, count, number in (
        (
            "get_message_100x1k_messages",
            [_get_message_frame(100, encode_message(body))],
            100,
            5_000,
        ),
        ("get_message_100x1k_messages_attrs", [_get_message_frame(100, encoded)], 100, 5_000),
        # asyncio reads at most 256 KB per callback
        (
            "get_message_470x1k_chunks",
            [big[i : i + 256 * 1024] for i in range(0, len(big), 256 * 1024)],
            470,
            500,
        ),
    ):
        result = _bench(name, functools.partial(to_messages, reads), number=number)
        result["us_per_message"] = round(float(str(result["us_per_op"])) / count, 3)
        print(json.dumps(result))


def _get_message_frame(count: int, message: EncodedMessage) -> bytes:
    """A complete response frame carrying a ``GetMessageResponseB2C`` of ``count`` messages."""
    response = broker_pb.GetMessageResponseB2C(
        success=True, errCode=200, errMsg="OK", currOffset=0, maxOffset=28 * count
    )
    crc = checksum(message.data)
    for i in range(count):
        response.messages.add(
            messageId=i, checkSum=crc, payLoadData=message.data, flag=message.flag
        )
    payload = rpc.encode_success(17, response.SerializeToString())
    return framing.encode_frame(1, payload)


if __name__ == "__main__":
    main()
