"""Free-port allocation for local clusters.

TubeMQ listeners bind the wildcard address, so a port counts as free only when it can be bound on
the wildcard (IPv4 and, when available, IPv6) and on each loopback address a cluster uses.
"""

from __future__ import annotations

import contextlib
import socket
import threading

__all__ = ["allocate_ports", "is_port_free"]

_LOCK = threading.Lock()
_HANDED_OUT: set[int] = set()


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
        True when nothing listens on that port on any of the addresses checked.
    """
    if not _can_bind(socket.AF_INET, "0.0.0.0", port):
        return False
    if socket.has_ipv6 and not _can_bind(socket.AF_INET6, "::", port):
        return False
    return all(_can_bind(socket.AF_INET, host, port) for host in hosts)


def allocate_ports(count: int, hosts: tuple[str, ...] = ("127.0.0.1",)) -> list[int]:
    """Ask the OS for ``count`` distinct free TCP ports.

    Ports handed out earlier in this process are never handed out again, so two clusters started
    by the same process cannot collide even before their servers bind.

    Args:
        count: Number of ports wanted.
        hosts: Loopback addresses on which each port must also be free.

    Returns:
        The port numbers.

    Raises:
        OSError: If the OS keeps returning busy ports.
    """
    ports: list[int] = []
    with _LOCK:
        for _ in range(count * 50):
            if len(ports) == count:
                break
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind(("0.0.0.0", 0))
                port = int(probe.getsockname()[1])
            if port in _HANDED_OUT or port in ports or not is_port_free(port, hosts):
                continue
            ports.append(port)
        if len(ports) < count:
            raise OSError(f"could not find {count} free TCP ports")
        _HANDED_OUT.update(ports)
    return ports
