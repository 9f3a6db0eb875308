"""``host:port`` text of the testing tools' arguments (the client's own parser,
:func:`tubemq_aio.config.parse_host_port`, sits above the testing layer)."""

from __future__ import annotations

__all__ = ["split_host_port"]


def split_host_port(text: object) -> tuple[str, int] | None:
    """``(host, port)`` of ``"host:port"`` (``"[ipv6]:port"``: the host without brackets), or
    None when ``text`` is no such string with a port in 1..65535."""
    host, sep, port = text.rpartition(":") if isinstance(text, str) else ("", "", "")
    if not host or not sep or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host.strip("[]"), int(port)
