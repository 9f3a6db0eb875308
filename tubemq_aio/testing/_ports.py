"""Free-port allocation for local services, reserved across processes.

TubeMQ listeners bind the wildcard address, so a port counts as free only when it can be bound on
the wildcard (IPv4 and, when available, IPv6) and on each loopback address a service uses.

A probe tells that a port is free *now*; the server that binds it starts seconds later, and
several processes allocate at once (pytest-xdist workers, ``tubemq-aio cluster up``). So every
port handed out is also *reserved*: a lock file ``<port>.lock`` in a per-user directory, held
with an exclusive ``flock`` until the service using the port is stopped for good
(:func:`release_ports`, :meth:`PortLease.release`). No other process of the same user hands out
a reserved port. The kernel drops the lock when its owner exits, however it exits (SIGKILL
included), so a reservation cannot go stale: the next process simply takes the lock.

Ports are drawn at random from below the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``), so an outgoing connection of some other process
cannot take a reserved port as its source port while the server owning it is down (a broker
killed and restarted on the same port). When that range is unusable the OS picks ephemeral ports
as before (still reserved).

Environment:
    ``TUBEMQ_AIO_PORT_DIR``: the reservation directory (default
    ``<tempdir>/tubemq-aio-ports-<uid>``).
    ``TUBEMQ_AIO_PORT_RANGE``: ``LOW-HIGH``, the range ports are drawn from (default: see
    :func:`port_range`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import random
import socket
import stat
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "LOWEST_PORT",
    "PortLease",
    "allocate_ports",
    "claim_ports",
    "is_port_free",
    "port_range",
    "release_ports",
    "reservation_dir",
    "reserved_ports",
]

#: Ports below this are left to well-known services (databases, web servers, brokers).
LOWEST_PORT = 10000
#: A preferred range narrower than this is unusable: the OS picks ephemeral ports instead.
_MIN_RANGE = 1000
#: Linux's default ephemeral range, assumed when ``/proc`` does not tell.
_DEFAULT_EPHEMERAL = (32768, 60999)
_EPHEMERAL_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_DIR_ENV = "TUBEMQ_AIO_PORT_DIR"
_RANGE_ENV = "TUBEMQ_AIO_PORT_RANGE"

_LOCK = threading.Lock()
#: Ports this process reserves: port -> (the open lock file holding the flock, its path).
_HELD: dict[int, tuple[int, Path]] = {}
#: Ports this process released: never handed out by it again (a late client of the stopped
#: service must not reach a new one).
_RETIRED: set[int] = set()
_RANDOM = random.SystemRandom()


def _forget_after_fork() -> None:  # pragma: no cover - runs in a forked child
    # The child's copies of the lock files share the parent's locks; closing them leaves the
    # locks with the parent (a flock ends only when every copy is closed), and the child must
    # not release what it does not own.
    global _LOCK
    _LOCK = threading.Lock()
    for fd, _ in _HELD.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _can_bind(family: socket.AddressFamily, host: str, port: int) -> bool:
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError:
        return True  # address family unsupported here: nothing can collide on it
    with sock:
        if family == socket.AF_INET6:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def is_port_free(port: int, hosts: tuple[str, ...] = ("127.0.0.1",)) -> bool:
    """Tell whether ``port`` can be bound on the wildcard and on every host in ``hosts``.

    Args:
        port: TCP port number.
        hosts: Loopback addresses that must also be free.

    Returns:
        True when nothing listens on that port on any of the addresses checked (a reservation
        by another process is not looked at: see :func:`allocate_ports`).
    """
    if not _can_bind(socket.AF_INET, "0.0.0.0", port):
        return False
    if socket.has_ipv6 and not _can_bind(socket.AF_INET6, "::", port):
        return False
    return all(_can_bind(socket.AF_INET, host, port) for host in hosts)


def _parse_range(text: str, where: str) -> tuple[int, int]:
    parts = text.replace("-", " ").split()
    try:
        low, high = (int(p) for p in parts)
    except ValueError:
        raise ValueError(f"{where}: expected two port numbers, got {text!r}") from None
    if not 1 <= low <= high <= 65535:
        raise ValueError(f"{where}: expected 1 <= LOW <= HIGH <= 65535, got {text!r}")
    return low, high


def _ephemeral_range(source: Path) -> tuple[int, int]:
    try:
        return _parse_range(source.read_text(encoding="ascii"), str(source))
    except (OSError, ValueError):
        return _DEFAULT_EPHEMERAL


def port_range(source: Path = _EPHEMERAL_FILE) -> tuple[int, int] | None:
    """The range ports are drawn from: ``TUBEMQ_AIO_PORT_RANGE`` if set, else the widest span
    outside the kernel's ephemeral range, above :data:`LOWEST_PORT`.

    Args:
        source: The file holding the ephemeral range (``LOW HIGH``).

    Returns:
        ``(low, high)`` inclusive, or None when no span of at least 1000 ports exists (the OS
        then picks ephemeral ports).

    Raises:
        ValueError: ``TUBEMQ_AIO_PORT_RANGE`` is not ``LOW-HIGH`` within 1..65535.
    """
    given = os.environ.get(_RANGE_ENV)
    if given:
        return _parse_range(given, _RANGE_ENV)
    eph_low, eph_high = _ephemeral_range(source)
    spans = [(LOWEST_PORT, eph_low - 1), (max(LOWEST_PORT, eph_high + 1), 65535)]
    low, high = max(spans, key=lambda span: span[1] - span[0])
    return (low, high) if high - low + 1 >= _MIN_RANGE else None


def reservation_dir() -> Path:
    """The per-user directory of the lock files (created, mode 0700, on first use).

    Returns:
        ``TUBEMQ_AIO_PORT_DIR`` if set, else ``<tempdir>/tubemq-aio-ports-<uid>``.

    Raises:
        OSError: It cannot be created, or it is not a directory owned by this user.
    """
    given = os.environ.get(_DIR_ENV)
    path = Path(given) if given else Path(tempfile.gettempdir()) / f"tubemq-aio-ports-{os.getuid()}"
    _ensure_dir(path)
    return path


def _ensure_dir(path: Path) -> None:
    """Create ``path`` (mode 0700) unless it exists; refuse one that is not this user's."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700, parents=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise OSError(errno.EPERM, f"port reservation dir {path} is not a directory of this user")


def _hold(folder: Path, port: int) -> bool:
    """Take the lock of ``port`` and record it as held; False if another process holds it."""
    path = folder / f"{port}.lock"
    for _ in range(3):  # the holder may unlink the file between our open and our flock
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except FileNotFoundError:  # the last holder removed the emptied folder meanwhile
            _ensure_dir(folder)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        try:
            now, mine = os.stat(path), os.fstat(fd)
        except FileNotFoundError:
            os.close(fd)
            continue
        if (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))  # who holds it, for a curious reader
        _HELD[port] = (fd, path)
        return True
    return False


def _unlock(port: int) -> None:
    held = _HELD.pop(port, None)
    if held is None:
        return
    fd, path = held
    _RETIRED.add(port)
    # Unlink while still holding the lock: a process that opened the old file finds it gone
    # after its flock succeeds and starts over on a new one.
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    os.close(fd)
    # The folder goes with its last reservation, so a tool that cleans up after itself (the
    # gateway's dev command) leaves nothing behind; a folder still in use is not empty.
    with contextlib.suppress(OSError):
        path.parent.rmdir()


def _candidates(count: int) -> Iterable[int]:
    span = port_range()
    if span is not None:
        low, high = span
        for _ in range(max(64, 32 * count)):
            yield _RANDOM.randint(low, high)
    for _ in range(50 * count):  # fallback: the OS picks (ephemeral) ports
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("0.0.0.0", 0))
            port = int(probe.getsockname()[1])
        yield port  # closed first: the caller binds it to check


def allocate_ports(count: int, hosts: tuple[str, ...] = ("127.0.0.1",)) -> list[int]:
    """Find ``count`` distinct free TCP ports and reserve them for this process.

    A port reserved by any live process of this user (this one included) is skipped, and so is
    a port this process released before. The reservation lasts until :func:`release_ports` or
    the end of this process; a forked child does not inherit it.

    Args:
        count: Number of ports wanted (0 or more).
        hosts: Loopback addresses on which each port must also be free.

    Returns:
        The port numbers, drawn at random from :func:`port_range`.

    Raises:
        ValueError: ``count`` is not a non-negative int.
        OSError: Not enough free, unreserved ports were found, or the reservation directory is
            unusable.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be a non-negative int, got {count!r}")
    folder = reservation_dir()
    ports: list[int] = []
    with _LOCK:
        for port in _candidates(count):
            if len(ports) == count:
                break
            if port in _HELD or port in _RETIRED:
                continue
            if not _hold(folder, port):
                continue
            if is_port_free(port, hosts):
                ports.append(port)
            else:
                _unlock(port)
        if len(ports) < count:
            for port in ports:
                _unlock(port)
            raise OSError(errno.EADDRINUSE, f"could not find {count} free TCP ports")
    return ports


def claim_ports(ports: Iterable[int]) -> None:
    """Reserve these exact ports for this process (e.g. fixed ports a user asked for).

    Ports this process already holds stay held. Nothing is probed: whether they are free is
    the caller's business.

    Args:
        ports: Port numbers.

    Raises:
        ValueError: A port is not an int within 1..65535 (none is reserved then).
        OSError: Another live process holds one of them (none is reserved then).
    """
    ports = list(ports)
    for port in ports:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"a port must be an int within 1..65535, got {port!r}")
    folder = reservation_dir()
    taken: list[int] = []
    with _LOCK:
        for port in ports:
            if port in _HELD:
                continue
            if not _hold(folder, port):
                for mine in taken:
                    _unlock(mine)
                raise OSError(errno.EADDRINUSE, f"port {port} is reserved by another process")
            taken.append(port)


def release_ports(ports: Iterable[int]) -> None:
    """End this process's reservation of ``ports`` (ports it does not hold are ignored).

    Args:
        ports: Port numbers.
    """
    with _LOCK:
        for port in ports:
            _unlock(port)


def reserved_ports() -> frozenset[int]:
    """The ports this process reserves right now."""
    with _LOCK:
        return frozenset(_HELD)


class PortLease:
    """The ports of one service: reserved as it takes them, released together when it stops.

    Example::

        lease = PortLease()
        port, web_port = lease.take(2)
        ...  # start the server; kill and restart it on the same ports as often as needed
        lease.release()  # when the server is stopped for good
    """

    def __init__(self) -> None:
        """Start empty."""
        self._ports: list[int] = []

    @property
    def ports(self) -> tuple[int, ...]:
        """The ports held, in the order taken."""
        return tuple(self._ports)

    def take(self, count: int, hosts: tuple[str, ...] = ("127.0.0.1",)) -> list[int]:
        """Allocate and hold ``count`` free ports (see :func:`allocate_ports`)."""
        ports = allocate_ports(count, hosts)
        self._ports += ports
        return ports

    def claim(self, ports: Iterable[int]) -> None:
        """Hold these exact ports too (see :func:`claim_ports`)."""
        wanted = [p for p in ports if p not in self._ports]
        claim_ports(wanted)
        self._ports += wanted

    def release(self) -> None:
        """Release every port held (idempotent)."""
        ports, self._ports = self._ports, []
        release_ports(ports)

    def __repr__(self) -> str:
        """Show the ports held."""
        return f"<PortLease {self._ports}>"
