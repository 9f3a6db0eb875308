"""Micro-benchmark of the Spark source's column read path, in process (no broker, no Spark).

Run ``python -m benchmarks.micro.spark_columns``; prints one JSON line per case with the
process CPU time per row (median of several rounds; CPU time, not wall time, because the
machine is usually shared):

* ``decode``: GetMessage answers (bytes, as the transport hands them over) ->
  :func:`~tubemq_aio.spark._columns.parse_columns` ->
  :func:`~tubemq_aio.spark._columns.decode_columns` -> the reader's chunk, for the
  answers of one Arrow batch (22 answers of 470 x 1 KB, the broker's usual unit), all
  kept alive until the batch is built, as the reader does.
* ``arrow``: those chunks -> one Arrow record batch of the source's schema
  (:func:`~tubemq_aio.spark._reader.chunks_to_arrow`).

Cases ``plain`` (bodies only) and ``attrs`` (msgType, msgTime and two user attributes on every
message). Every line names the implementation measured (``impl``): ``compiled`` when the
optional accelerator (:mod:`tubemq_aio.accelerator`) is built, ``pure`` otherwise or with
``TUBEMQ_AIO_PURE=1``.
"""

from __future__ import annotations

import json
import statistics
import time

from pyspark.sql.pandas.types import to_arrow_schema

from tubemq_aio import accelerator
from tubemq_aio.consumer._cb_models import DecodeContext
from tubemq_aio.consumer.batch import ConsumerStats
from tubemq_aio.protocol.message import EncodedMessage, checksum, encode_message
from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb
from tubemq_aio.spark._columns import decode_columns, parse_columns
from tubemq_aio.spark._reader import _chunk, chunks_to_arrow
from tubemq_aio.spark.source import SCHEMA

_ROUNDS = 15
_PER_ANSWER = 470
_ANSWERS = 22


def _answer(message: EncodedMessage, first_id: int) -> bytes:
    response = broker_pb.GetMessageResponseB2C(
        success=True, errCode=200, errMsg="OK", currOffset=0, maxOffset=28 * _PER_ANSWER
    )
    crc = checksum(message.data)
    for i in range(_PER_ANSWER):
        response.messages.add(
            messageId=first_id + i, checkSum=crc, payLoadData=message.data, flag=message.flag
        )
    return response.SerializeToString()


def _case(name: str, message: EncodedMessage) -> list[dict[str, object]]:
    answers = [_answer(message, k * _PER_ANSWER) for k in range(_ANSWERS)]
    rows = _PER_ANSWER * _ANSWERS
    context = DecodeContext("bench", "1:bench:0", frozenset(), ConsumerStats(), False)
    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    none: frozenset[str] = frozenset()

    def one_batch() -> tuple[float, float]:
        start = time.process_time()
        chunks = [_chunk(decode_columns(parse_columns(a), context), 0, none) for a in answers]
        decoded = time.process_time()
        batch = chunks_to_arrow([c for c in chunks if c is not None], schema, ("bench", "k"))
        built = time.process_time()
        assert batch.num_rows == rows
        return decoded - start, built - decoded

    one_batch()  # warm caches
    times = [one_batch() for _ in range(_ROUNDS)]
    impl = "pure" if accelerator.compiled() is None else "compiled"
    return [
        {
            "case": f"{name}_{stage}",
            "impl": impl,
            "us_per_row": round(statistics.median(t[i] for t in times) / rows * 1e6, 3),
            "rows": rows,
        }
        for i, stage in enumerate(("decode", "arrow"))
    ]


def main() -> None:
    """Run every case and print the JSON lines."""
    body = bytes(range(256)) * 4
    attrs = {"source": "bench", "region": "eu"}
    for name, message in (
        ("plain", encode_message(body)),
        ("attrs", encode_message(body, attributes=attrs, msg_type="o", msg_time="202401011200")),
    ):
        for line in _case(name, message):
            print(json.dumps(line))


if __name__ == "__main__":
    main()
