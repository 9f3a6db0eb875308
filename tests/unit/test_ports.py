"""Port allocation reserved across processes (tubemq_aio.testing._ports).

The processes here are small Python children that load ``_ports.py`` by its file (no package
import, so each starts in tens of milliseconds) and allocate from a shared, deliberately small
range in a reservation directory of the test's own.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tubemq_aio.testing import _ports
from tubemq_aio.testing._ports import (
    LOWEST_PORT,
    PortLease,
    allocate_ports,
    claim_ports,
    port_range,
    release_ports,
    reservation_dir,
    reserved_ports,
)

#: A child: loads _ports.py from argv[1], runs argv[2] (reserve | probe | claim | fork-release)
#: with argv[3:], prints one JSON line, then holds what it got until its stdin closes.
CHILD = textwrap.dedent(
    """
    import importlib.util, json, os, random, sys
    spec = importlib.util.spec_from_file_location("ports_under_test", sys.argv[1])
    ports = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ports)
    mode, args = sys.argv[2], sys.argv[3:]
    if mode == "reserve":
        out = ports.allocate_ports(int(args[0]))
    elif mode == "probe":  # the allocator before reservations: a probe and a per-process set
        low, high = ports.port_range()
        out = []
        while len(out) < int(args[0]):
            port = random.randint(low, high)
            if port not in out and ports.is_port_free(port):
                out.append(port)
    elif mode == "claim":
        try:
            ports.claim_ports([int(a) for a in args])
            out = "claimed"
        except OSError:
            out = "taken"
    else:  # fork-release: a forked child releases what its parent holds, then exits
        out = ports.allocate_ports(int(args[0]))
        pid = os.fork()
        if pid == 0:
            ports.release_ports(out)
            os._exit(0)
        os.waitpid(pid, 0)
    print(json.dumps(out), flush=True)
    sys.stdin.read()
    """
)
#: Ports in the forced range: small, so that processes without reservations collide.
SPAN = 600


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A reservation directory and a small range of the test's own, for it and its children."""
    # Clear of the ports this process already holds for other tests (in the default folder):
    # this process's reservations are by number, whatever the folder.
    held = reserved_ports()
    low = random.randint(LOWEST_PORT, 32000 - SPAN)
    while any(low <= port < low + SPAN for port in held):
        low = random.randint(LOWEST_PORT, 32000 - SPAN)
    env = {
        "TUBEMQ_AIO_PORT_DIR": str(tmp_path / "reserved"),
        "TUBEMQ_AIO_PORT_RANGE": f"{low}-{low + SPAN - 1}",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    yield env
    release_ports(reserved_ports() - held)


class Child:
    """One child process allocating ports; :meth:`result` waits for its JSON line."""

    def __init__(self, env: dict[str, str], mode: str, *args: object) -> None:
        """Start it."""
        argv = [sys.executable, "-c", CHILD, _ports.__file__, mode, *map(str, args)]
        self.proc = subprocess.Popen(
            argv,
            env={**os.environ, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def result(self) -> object:
        """The child's JSON line (it keeps running, holding its ports)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, self.proc.communicate(timeout=10)[1]
        return json.loads(line)

    def ports(self) -> list[int]:
        """The child's ports."""
        got = self.result()
        assert isinstance(got, list)
        return [int(p) for p in got]

    def end(self) -> None:
        """Close its stdin (it exits) and reap it."""
        self.proc.communicate(timeout=10)


def _in_range(env: dict[str, str], ports: list[int]) -> bool:
    low, high = (int(p) for p in env["TUBEMQ_AIO_PORT_RANGE"].split("-"))
    return all(low <= p <= high for p in ports)


def test_processes_allocating_at_once_never_share_a_port(shared: dict[str, str]) -> None:
    children = [Child(shared, "reserve", 150) for _ in range(3)]
    try:
        got = [child.ports() for child in children]
    finally:
        for child in children:
            child.end()
    flat = [p for ports in got for p in ports]
    assert len(flat) == 450
    assert len(set(flat)) == len(flat)
    assert _in_range(shared, flat)


def test_without_reservations_processes_collide(shared: dict[str, str]) -> None:
    """The race the reservations close: probing alone hands two processes the same ports."""
    children = [Child(shared, "probe", 150) for _ in range(2)]
    try:
        first, second = (child.ports() for child in children)
    finally:
        for child in children:
            child.end()
    assert set(first) & set(second)


def test_a_dead_owners_ports_are_reclaimed(shared: dict[str, str]) -> None:
    child = Child(shared, "reserve", 20)
    try:
        ports = child.ports()
        with pytest.raises(OSError, match="reserved by another process"):
            claim_ports(ports)
        assert not reserved_ports() & set(ports)  # nothing half-claimed
        child.proc.send_signal(signal.SIGKILL)
        child.proc.wait(timeout=10)
        claim_ports(ports)  # the kernel dropped the dead owner's locks
        assert reserved_ports() >= set(ports)
    finally:
        child.end()


def test_release_hands_ports_to_other_processes(shared: dict[str, str]) -> None:
    ports = allocate_ports(20)
    assert _in_range(shared, ports)
    before = Child(shared, "claim", *ports)
    assert before.result() == "taken"
    before.end()
    release_ports(ports)
    assert not reserved_ports() & set(ports)
    assert not list(reservation_dir().glob("*.lock"))  # released files are removed
    after = Child(shared, "claim", *ports)
    assert after.result() == "claimed"
    after.end()


def test_the_folder_goes_with_its_last_reservation_and_comes_back(shared: dict[str, str]) -> None:
    """A tool that releases all it took leaves no folder behind (the gateway's dev command
    promises to remove everything it started); the next reservation makes it again."""
    folder = reservation_dir()
    first = allocate_ports(3)
    other = Child(shared, "reserve", 2)
    try:
        theirs = other.ports()
        release_ports(first)
        assert folder.is_dir()  # the child's reservations keep it
    finally:
        other.end()
    second = allocate_ports(1)
    release_ports(second)
    leftovers = list(folder.glob("*.lock"))
    # The ended child's files, unlocked: the folder stays. The draw of `second` may take one of
    # those two ports (free again; 2 in 600), and its release removes that file.
    assert {f.name for f in leftovers} == {f"{p}.lock" for p in theirs if p not in second}
    for leftover in leftovers:
        leftover.unlink()
    third = allocate_ports(1)
    release_ports(third)
    assert not folder.exists()
    claim_ports(third)  # made again
    assert folder.is_dir()
    release_ports(third)


@pytest.mark.parametrize("bad", [0, -1, 65536, 2**100, True, 8080.0, "8080", None])
def test_claim_refuses_what_is_not_a_port_and_reserves_nothing(
    shared: dict[str, str], bad: object
) -> None:
    (good,) = allocate_ports(1)
    release_ports([good])
    with pytest.raises(ValueError, match=r"within 1\.\.65535"):
        claim_ports([good, bad])  # type: ignore[list-item]
    assert good not in reserved_ports()


def test_a_forked_child_cannot_release_its_parents_ports(shared: dict[str, str]) -> None:
    child = Child(shared, "fork-release", 10)
    try:
        ports = child.ports()
        with pytest.raises(OSError, match="reserved by another process"):
            claim_ports(ports)
    finally:
        child.end()


def test_ports_come_from_below_the_ephemeral_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TUBEMQ_AIO_PORT_RANGE", raising=False)
    text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii")
    eph_low, eph_high = (int(p) for p in text.split())
    span = port_range()
    assert span is not None, f"this machine's ephemeral range {text!r} leaves no room"
    ports = allocate_ports(30)
    try:
        assert all(span[0] <= p <= span[1] for p in ports)
        assert not any(eph_low <= p <= eph_high for p in ports)
        assert all(p >= LOWEST_PORT for p in ports)
    finally:
        release_ports(ports)


@pytest.mark.parametrize(
    ("ephemeral", "expected"),
    [
        ("32768\t60999\n", (LOWEST_PORT, 32767)),
        ("49152 65535", (LOWEST_PORT, 49151)),
        ("10000 20000", (20001, 65535)),  # nothing below: the span above
        ("1024 65000", None),  # no usable span: the OS picks
        ("garbage", (LOWEST_PORT, 32767)),  # unreadable: Linux's default assumed
    ],
)
def test_port_range_avoids_the_ephemeral_range(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ephemeral: str,
    expected: tuple[int, int] | None,
) -> None:
    monkeypatch.delenv("TUBEMQ_AIO_PORT_RANGE", raising=False)
    source = tmp_path / "ip_local_port_range"
    source.write_text(ephemeral, encoding="ascii")
    assert port_range(source) == expected


def test_port_range_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUBEMQ_AIO_PORT_RANGE", "30000-30999")
    assert port_range() == (30000, 30999)
    for bad in ("x", "5-2", "0-10", "1-70000", "1-2-3"):
        monkeypatch.setenv("TUBEMQ_AIO_PORT_RANGE", bad)
        with pytest.raises(ValueError, match="TUBEMQ_AIO_PORT_RANGE"):
            port_range()


def test_without_a_usable_range_the_os_picks(
    shared: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ports, "port_range", lambda: None)
    ports = allocate_ports(5)
    assert len(set(ports)) == 5
    assert reserved_ports() >= set(ports)
    release_ports(ports)


def test_released_ports_are_not_handed_out_again_by_this_process(
    shared: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    low = int(shared["TUBEMQ_AIO_PORT_RANGE"].split("-")[0])
    monkeypatch.setenv("TUBEMQ_AIO_PORT_RANGE", f"{low}-{low + 3}")
    monkeypatch.setattr(_ports, "_RETIRED", set())
    ports = allocate_ports(4)
    assert sorted(ports) == list(range(low, low + 4))
    release_ports(ports)
    (other,) = allocate_ports(1)  # the range is spent for this process: the OS picks
    assert other not in ports
    claim_ports(ports[:1])  # an exact port may still be claimed again
    assert ports[0] in reserved_ports()


@pytest.mark.parametrize("count", [-1, True, 1.5, "2"])
def test_a_bad_count_is_refused(count: object) -> None:
    with pytest.raises(ValueError, match="count must be a non-negative int"):
        allocate_ports(count)  # type: ignore[arg-type]


def test_zero_ports(shared: dict[str, str]) -> None:
    assert allocate_ports(0) == []


def test_a_lease_holds_until_released(shared: dict[str, str]) -> None:
    lease = PortLease()
    taken = lease.take(3)
    extra = allocate_ports(1)
    lease.claim(extra + taken)  # held already: recorded once
    assert lease.ports == (*taken, *extra)
    assert reserved_ports() >= set(lease.ports)
    assert repr(lease) == f"<PortLease {list(lease.ports)}>"
    lease.release()
    lease.release()  # idempotent
    assert lease.ports == ()
    assert not reserved_ports() & {*taken, *extra}


def test_a_lease_claim_of_a_foreign_port_takes_nothing(shared: dict[str, str]) -> None:
    child = Child(shared, "reserve", 1)
    try:
        foreign = child.ports()
        lease = PortLease()
        nobodys = [foreign[0] + 1]  # claimed first, then given up with the foreign one
        with pytest.raises(OSError, match=f"port {foreign[0]} is reserved"):
            lease.claim(nobodys + foreign)
        assert lease.ports == ()
        assert not reserved_ports() & set(nobodys)
    finally:
        child.end()


def test_the_reservation_dir_must_be_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("", encoding="ascii")
    monkeypatch.setenv("TUBEMQ_AIO_PORT_DIR", str(not_a_dir))
    with pytest.raises(OSError, match="not a directory of this user"):
        allocate_ports(1)
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("TUBEMQ_AIO_PORT_DIR", str(fresh))
    assert reservation_dir() == fresh
    assert fresh.stat().st_mode & 0o777 == 0o700
