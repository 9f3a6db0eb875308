"""framing="legacy-length" held byte for byte against the RPC codec of TubeMQ 1.2.0-incubating.

Central has the tubemq-core jar of that release but no 1.1.0/1.2.0 Java client, so
``tests/compat/legacy_framing/LegacyCodec.java`` runs that jar's own Netty encoder and decoder
(behind the release's length-field decoder) on frames our connection writes and on frames it must
read (docs/protocol/wire.md §1.7). Needs Maven and a JDK (``make system-deps``); fails, never skips,
without them.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tests.support.echo_server import MemoryTransport, request_payload
from tubemq_aio._io.connection import Connection
from tubemq_aio._io.settings import TransportSettings
from tubemq_aio.errors import FrameError
from tubemq_aio.protocol.framing import BLOCK_SIZE, Frame, encode_frame
from tubemq_aio.protocol.legacy_framing import LEGACY_MAX_FRAME_BYTES, LengthPrefixedDecoder
from tubemq_aio.protocol.rpc import encode_success
from tubemq_aio.testing._maven import cache_root

pytestmark = pytest.mark.timeout(300)

SOURCE_DIR = Path(__file__).resolve().parents[1] / "compat" / "legacy_framing"
CORE = "org.apache.inlong:tubemq-core:1.2.0-incubating:jar"
COPY_DEPS = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"
COPY_ONE = "org.apache.maven.plugins:maven-dependency-plugin:2.8:copy"
SIZES = (1, 100, BLOCK_SIZE - 60, BLOCK_SIZE, BLOCK_SIZE + 1, 3 * BLOCK_SIZE + 17, 300_000)
SERIALS = (1, 2, 2**31, 2**32 - 1)


@pytest.fixture(scope="module")
def codec(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The argv prefix that runs LegacyCodec on the 1.2.0-incubating jars (resolved once)."""
    lib = cache_root() / "legacy-framing-codec" / "lib"
    if not (lib / "tubemq-core-1.2.0-incubating.jar").exists():
        mvn = shutil.which("mvn")
        assert mvn, "Maven is needed: run make system-deps"
        staging = lib.with_name(f"lib.partial-{os.getpid()}")
        done = subprocess.run(
            [
                mvn,
                "-B",
                "-q",
                "-f",
                str(SOURCE_DIR / "pom.xml"),
                COPY_DEPS,
                COPY_ONE,
                f"-Dartifact={CORE}",
                f"-DoutputDirectory={staging}",
            ],
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        shutil.rmtree(lib, ignore_errors=True)
        staging.rename(lib)
    classes = tmp_path_factory.mktemp("legacy-codec")
    javac = subprocess.run(
        ["javac", "-cp", f"{lib}/*", "-d", str(classes), str(SOURCE_DIR / "LegacyCodec.java")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert javac.returncode == 0, javac.stdout + javac.stderr
    return ["java", "-cp", f"{classes}:{lib}/*", "LegacyCodec"]


def run(codec: list[str], mode: str, text: str) -> list[str]:
    done = subprocess.run(
        [*codec, mode], input=text, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


async def bytes_written(payloads: list[bytes]) -> bytes:
    """What a legacy-framing connection writes for these request payloads (serials 1, 2, ...)."""
    conn = Connection("memory", TransportSettings(framing="legacy-length"))
    transport = MemoryTransport()
    conn.connection_made(transport)
    calls = [asyncio.ensure_future(conn.call(p, 5.0)) for p in payloads]
    for _ in range(3):
        await asyncio.sleep(0)
    conn.abort()
    await asyncio.gather(*calls, return_exceptions=True)
    return bytes(transport.written)


async def test_java_1_2_decodes_what_our_connection_writes(codec: list[str]) -> None:
    payloads = [request_payload(bytes([i % 251]) * size) for i, size in enumerate(SIZES)]
    stream = await bytes_written(payloads)
    lines = run(codec, "decode", stream.hex() + "\n")
    assert lines[-1] == "END"
    got = [(int(lines[i]), bytes.fromhex(lines[i + 1])) for i in range(0, len(lines) - 1, 2)]
    assert got == list(enumerate(payloads, 1))


async def test_we_read_what_java_1_2_writes(codec: list[str]) -> None:
    """Java's units carry the last block's whole 8 KiB buffer after the frame (as a real 1.2.0
    master's answers do); ours carry none. The frames inside are the same bytes."""
    cases = [(s, bytes([s % 256]) * size) for s in SERIALS for size in SIZES[:5]]
    cases.append((7, bytes(range(256)) * 400))
    lines = run(codec, "encode", "".join(f"{s} {p.hex()}\n" for s, p in cases))
    java = [bytes.fromhex(line) for line in lines]
    assert len(java) == len(cases)
    assert LengthPrefixedDecoder().feed(b"".join(java)) == [Frame(s, p) for s, p in cases]
    for (serial, payload), theirs in zip(cases, java, strict=True):
        frame = encode_frame(serial, payload)
        padding = -len(payload) % BLOCK_SIZE
        assert theirs == struct.pack(">I", len(frame) + padding) + frame + bytes(padding)
    # and a connection resolves a call from Java's bytes
    conn = Connection("memory", TransportSettings(framing="legacy-length"))
    conn.connection_made(MemoryTransport())
    call = asyncio.ensure_future(conn.call(request_payload(b"q"), 5.0))
    for _ in range(3):
        await asyncio.sleep(0)
    (answer,) = run(codec, "encode", f"1 {encode_success(1, b'answer').hex()}\n")
    conn.data_received(bytes.fromhex(answer))
    assert await call == b"answer"


def test_java_1_2_refuses_bare_frames_and_units_over_five_mib(codec: list[str]) -> None:
    """How those servers drop a client of the other framing, and where their limit is: the
    reasons docs/protocol/wire.md §1.7 gives for the hint and for ``LEGACY_MAX_FRAME_BYTES``."""
    bare = encode_frame(1, request_payload(b"x"))
    assert run(codec, "decode", bare.hex() + "\n")[0] == "ERROR"
    too_long = struct.pack(">I", LEGACY_MAX_FRAME_BYTES - 3) + b"\0" * 16
    assert run(codec, "decode", too_long.hex() + "\n") == [
        "ERROR",
        "io.netty.handler.codec.TooLongFrameException",
    ]
    largest = struct.pack(">I", LEGACY_MAX_FRAME_BYTES - 4)
    with pytest.raises(FrameError):
        LengthPrefixedDecoder().feed(struct.pack(">I", LEGACY_MAX_FRAME_BYTES - 3))
    assert LengthPrefixedDecoder().feed(largest) == []  # accepted, waiting
