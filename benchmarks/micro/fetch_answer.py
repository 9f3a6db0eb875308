"""The per-message part of a gateway fetch, counted rather than timed: a GetMessage answer to
the ``messages`` JSON of the fetch answer.

Run ``python -m benchmarks.micro.fetch_answer [--batch M] [--rounds N] [--size B]
[--attributes] [--pure]``. One process builds a ``GetMessageResponseB2C`` of ``--batch``
messages of ``--size`` bytes (plain, or with an attribute block with ``--attributes``), then
``--rounds`` times walks the path a gateway read takes for it: ``parse_get_message_response``,
``screen_raw_messages``, the read's list and ``FetchedMessages``, and the answer with the
messages as an ``orjson.Fragment`` (``FetchedMessages.json``), each round's objects freed before
the next. The process runs twice under Valgrind's Callgrind, with no rounds and with
``--rounds``; the difference of the two instruction counts (``Ir``), divided by the messages,
is the count per message: everything a message costs on that path, the tuples' freeing
included, and nothing of what a fetch costs whatever its size (the Redis calls, the route: see
``benchmarks.micro.gateway_fetch``). ``--pure`` counts the pure-Python twins
(``TUBEMQ_AIO_PURE=1``). Output: one JSON line. Nothing here asserts a figure.

``python -m benchmarks.micro.fetch_answer run ROUNDS BATCH SIZE ATTRIBUTES`` is the counted side.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tubemq_aio.accelerator import ENV_PURE


class _Counters:
    def __init__(self) -> None:
        self.crc_mismatches = self.decode_errors = self.filtered = 0


def answer(batch: int, size: int, attributes: bool) -> bytes:
    """A successful ``GetMessageResponseB2C`` of ``batch`` messages of ``size`` bytes."""
    from tubemq_aio.protocol.message import checksum, encode_message
    from tubemq_aio.protocol.pb import BrokerService_pb2 as broker_pb

    encoded = encode_message(b"x" * size, attributes={"k": "v"} if attributes else None)
    rsp = broker_pb.GetMessageResponseB2C(success=True, errCode=200, errMsg="OK")
    rsp.currOffset, rsp.maxOffset = 0, 10**9
    for i in range(batch):
        rsp.messages.add(
            messageId=2**40 + i,  # a broker's ids are large
            checkSum=checksum(encoded.data),
            payLoadData=encoded.data,
            flag=encoded.flag,
        )
    return rsp.SerializeToString()


def rounds(n: int, batch: int, size: int, attributes: bool) -> None:
    """Walk the fetch path ``n`` times over one answer (the counted side)."""
    import orjson

    from tubemq_aio.gateway.tubemq.fetched_messages import FetchedMessages, screen_raw_messages
    from tubemq_aio.protocol.consumer_replies import parse_get_message_response

    data = answer(batch, size, attributes)
    counters = _Counters()
    for _ in range(n):
        got = parse_get_message_response(data)
        kept = screen_raw_messages(
            got.messages, partition_key="1:t:0", filters=frozenset(), counters=counters
        )
        messages: list[Any] = []
        messages.extend(kept)
        fetched = FetchedMessages("t", "1:t:0", tuple(messages))
        orjson.dumps({"status": "ok", "messages": orjson.Fragment(fetched.json(False))})
        del got, kept, messages, fetched
    if counters.crc_mismatches or counters.decode_errors:
        raise RuntimeError("the built answer was screened as damaged")


def _count(n: int, args: argparse.Namespace, where: Path) -> int:
    """The ``Ir`` total of one counted process."""
    out = where / f"callgrind.{n}"
    env = dict(os.environ)
    if args.pure:
        env[ENV_PURE] = "1"
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        "-m",
        "benchmarks.micro.fetch_answer",
        "run",
        str(n),
        str(args.batch),
        str(args.size),
        "1" if args.attributes else "0",
    ]
    subprocess.run(command, check=True, env=env, capture_output=True)
    found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(errors="replace"), re.M)
    if found is None:
        raise RuntimeError(f"no total in {out}")
    return int(found.group(1))


def main(argv: Sequence[str]) -> int:
    """Entry point (see the module)."""
    if argv[:1] == ["run"]:
        rounds(int(argv[1]), int(argv[2]), int(argv[3]), argv[4] == "1")
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.micro.fetch_answer")
    parser.add_argument("--batch", type=int, default=660, help="messages per answer")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--size", type=int, default=100, help="body bytes per message")
    parser.add_argument("--attributes", action="store_true", help="an attribute block each")
    parser.add_argument("--pure", action="store_true", help="the pure-Python twins")
    args = parser.parse_args(argv)
    if args.batch < 1 or args.rounds < 1 or args.size < 1:
        parser.error("--batch, --rounds and --size must be 1 or more")
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        empty, counted = _count(0, args, Path(tmp)), _count(args.rounds, args, Path(tmp))
    messages = args.rounds * args.batch
    result = {
        "batch": args.batch,
        "rounds": args.rounds,
        "size": args.size,
        "attributes": args.attributes,
        "pure": args.pure,
        "instructions_per_message": round((counted - empty) / messages),
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
