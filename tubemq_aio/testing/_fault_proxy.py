"""``FaultProxy``: a loopback TCP proxy whose faults can be switched on and off at run time.

Put it between a client and any server (a :class:`~tubemq_aio.testing.FakeCluster` node or a
real broker) to produce what a real network or a sick peer does: latency, a bandwidth cap, a
peer that stops reading, a blackhole, a reset after N bytes, corrupted bytes, a half-closed
connection, refused connects. Faults apply per direction: ``"up"`` is client to server,
``"down"`` server to client.

The faults in :class:`LinkFaults` are proxy-wide and live: they apply to every connection, open
or new, until :meth:`FaultProxy.clear` removes them all. The actions (:meth:`FaultProxy.half_close`,
:meth:`FaultProxy.reset_connections`) act on the connections open at the call and leave new
connections healthy. Every fault and action behaves the same on asyncio's loop and on uvloop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import random
from dataclasses import dataclass, field
from typing import Literal

from tubemq_aio.testing._address import split_host_port
from tubemq_aio.testing._port_hold import PortHold
from tubemq_aio.testing._reset import reset_transport
from tubemq_aio.testing._service import AsyncService, check_serving_loop, loop_ended

__all__ = ["Direction", "FaultProxy", "LinkFaults"]

Direction = Literal["up", "down"]
_CHUNK = 64 * 1024
#: Chunks read but not yet forwarded (held back by latency or a bandwidth cap) per direction;
#: when full, the proxy stops reading, so the sender's buffers fill as on a slow link.
_QUEUED_CHUNKS = 16
#: What a write or EOF on a connection the peer (or an action) already closed raises: asyncio's
#: loop raises ``OSError``s, uvloop raises ``RuntimeError`` ("the handler is closed").
_LINK_GONE = (ConnectionError, OSError, RuntimeError)


@dataclass(slots=True)
class LinkFaults:
    """The faults of one direction; change the attributes at any time.

    Attributes:
        latency: seconds each chunk is held before it is forwarded (chunks behind it are not
            held up: latency does not limit throughput; ``bandwidth`` does).
        bandwidth: bytes per second at most (None: unlimited).
        stop_reading: stop reading from the sender, so its socket buffers fill up.
        blackhole: read and discard everything (the connection stays open).
        reset_after: abort the connection once this many more bytes were forwarded.
        corrupt_rate: probability that a forwarded chunk gets one byte flipped.

    A half-closed connection is not a fault of this table: :meth:`FaultProxy.half_close` marks
    the connections open at the call, so a connection made afterwards is healthy.

    Raises:
        ValueError: a value out of its range or of the wrong type, set here or through
            :meth:`FaultProxy.set`: ``latency`` finite seconds ``>= 0``, ``bandwidth`` and
            ``reset_after`` None or an int (``>= 1``, ``>= 0``), ``corrupt_rate`` in
            ``[0, 1]``, ``stop_reading``/``blackhole`` a bool. Nothing changes then.
    """

    latency: float = 0.0
    bandwidth: int | None = None
    stop_reading: bool = False
    blackhole: bool = False
    reset_after: int | None = None
    corrupt_rate: float = 0.0
    resumed: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)

    def __setattr__(self, name: str, value: object) -> None:
        _check_fault(name, value)
        object.__setattr__(self, name, value)  # slots: no zero-argument super() here

    def clear(self) -> None:
        """Set every fault back to its default (every field but ``resumed``, so a fault added
        to this class later is cleared too) and wake a reader held by ``stop_reading``."""
        for spec in dataclasses.fields(self):
            if spec.name != "resumed":
                factory = spec.default_factory
                default = spec.default if factory is dataclasses.MISSING else factory()
                setattr(self, spec.name, default)
        self.resumed.set()


def _check_fault(name: str, value: object) -> None:
    """Refuse a value a fault cannot take (a NaN latency or a zero bandwidth silently meant no
    fault at all, a string crashed the pump and reset the link)."""
    real = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    whole = real if isinstance(real, int) else None
    if name == "latency":
        rule, ok = "a finite number of seconds >= 0", real is not None and 0 <= real < math.inf
    elif name == "corrupt_rate":
        rule, ok = "a number in [0, 1]", real is not None and 0 <= real <= 1
    elif name in ("bandwidth", "reset_after"):
        low = 1 if name == "bandwidth" else 0
        rule, ok = f"None or an int >= {low}", value is None or (whole is not None and whole >= low)
    elif name in ("stop_reading", "blackhole"):
        rule, ok = "True or False", isinstance(value, bool)
    else:
        return
    if not ok:
        raise ValueError(f"LinkFaults: {name} must be {rule}, got {value!r}")


def _check_direction(direction: object, options: tuple[str, ...]) -> None:
    if direction not in options:
        raise ValueError(f"FaultProxy: direction must be one of {options}, got {direction!r}")


class _Link:
    """One proxied connection: a client socket, a server socket, two pump tasks."""

    def __init__(self, proxy: FaultProxy, client: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.client = client
        self.server: asyncio.StreamWriter | None = None
        #: Directions half-closed by :meth:`FaultProxy.half_close` while this link was open.
        self.half_closed: set[Direction] = set()

    def write_eof(self, direction: Direction) -> None:
        """Mark ``direction`` half-closed and send its receiver an EOF (if it is connected)."""
        self.half_closed.add(direction)
        writer = self.client if direction == "down" else self.server
        if writer is not None and not writer.transport.is_closing() and writer.can_write_eof():
            with contextlib.suppress(*_LINK_GONE):
                writer.write_eof()

    def abort(self) -> None:
        for writer in (self.client, self.server):
            if writer is not None:
                reset_transport(writer.transport)

    async def pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: Direction
    ) -> None:
        """Read one direction and hand each chunk, stamped with its delivery time, to a sender:
        latency delays every chunk without holding back the ones behind it."""
        faults = self.proxy.faults[direction]
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(_QUEUED_CHUNKS)
        sender = asyncio.ensure_future(self._send(queue, writer, direction))
        try:
            while not sender.done():
                while faults.stop_reading:
                    faults.resumed.clear()
                    await faults.resumed.wait()
                data = await reader.read(_CHUNK)
                if not data:
                    await queue.put(None)
                    await sender
                    return
                if faults.blackhole or direction in self.half_closed:
                    self.proxy.discarded[direction] += len(data)
                    continue
                await queue.put((loop.time() + faults.latency, self._corrupt(data, faults)))
        except _LINK_GONE:
            self.abort()
        finally:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)

    async def _send(
        self,
        queue: asyncio.Queue[tuple[float, bytes] | None],
        writer: asyncio.StreamWriter,
        direction: Direction,
    ) -> None:
        faults = self.proxy.faults[direction]
        loop = asyncio.get_running_loop()
        try:
            while (item := await queue.get()) is not None:
                due, data = item
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())
                if faults.reset_after is not None:
                    if len(data) >= faults.reset_after:
                        writer.write(data[: faults.reset_after])
                        faults.reset_after = 0
                        self.proxy.resets += 1
                        self.abort()
                        return
                    faults.reset_after -= len(data)
                if faults.bandwidth:
                    await asyncio.sleep(len(data) / faults.bandwidth)
                writer.write(data)
                self.proxy.forwarded[direction] += len(data)
                await writer.drain()
            if not writer.transport.is_closing() and writer.can_write_eof():
                writer.write_eof()
        except _LINK_GONE:
            self.abort()

    def _corrupt(self, data: bytes, faults: LinkFaults) -> bytes:
        rng = self.proxy.rng
        if faults.corrupt_rate <= 0 or rng.random() >= faults.corrupt_rate:
            return data
        out = bytearray(data)
        out[rng.randrange(len(out))] ^= rng.randrange(1, 256)
        self.proxy.corrupted += 1
        return bytes(out)


class FaultProxy(AsyncService):
    """A TCP proxy on a free loopback port that forwards to ``target`` (``host:port``).

    Args:
        target: where to forward, ``host:port``.
        seed: seed of the random choices (which chunk and byte to corrupt).

    Attributes:
        faults: ``{"up": LinkFaults, "down": LinkFaults}``, live.
        forwarded: bytes forwarded per direction.
        discarded: bytes read and dropped per direction (blackhole, half-closed).
        connections: how many client connections were accepted.

    Example::

        async with FaultProxy(cluster.broker_addr(1)) as proxy:
            proxy.set(stop_reading=True)          # the broker stops reading our requests
            ...
            proxy.clear()                         # healthy again
    """

    def __init__(self, target: str, *, seed: int = 0) -> None:
        address = split_host_port(target)
        if address is None:
            raise ValueError(f"target must be host:port (a port in 1..65535), got {target!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {seed!r}")
        self.target = address
        self.faults: dict[Direction, LinkFaults] = {"up": LinkFaults(), "down": LinkFaults()}
        self.forwarded: dict[Direction, int] = {"up": 0, "down": 0}
        self.discarded: dict[Direction, int] = {"up": 0, "down": 0}
        self.connections = 0
        self.resets = 0
        self.corrupted = 0
        self.rng = random.Random(seed)
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._port = 0
        self._hold = PortHold()
        #: The event loop it listens on (it forwards only while that loop runs).
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return (
            f"<FaultProxy 127.0.0.1:{self._port} -> {self.target[0]}:{self.target[1]} "
            f"links={len(self._links)} up={self.faults['up']!r} down={self.faults['down']!r}>"
        )

    @property
    def addr(self) -> str:
        """``host:port`` clients connect to.

        Raises:
            RuntimeError: asked from a running event loop while the loop the proxy listens on
                does not run: nothing would be forwarded (docs/testing.md).
        """
        check_serving_loop(self._loop, "FaultProxy")
        return f"127.0.0.1:{self._port}"

    @property
    def open_links(self) -> int:
        """Proxied connections open right now."""
        return len(self._links)

    async def start(self) -> None:
        """Listen (on the previous port if it was started before). Starts, closes and
        :meth:`refuse_connections` run one at a time: one called while another awaits waits
        for it. A proxy whose event loop has ended listens again on the running one.

        Raises:
            RuntimeError: it listens on another event loop that still exists.
        """
        async with self._lifecycle_lock():
            if self._server is not None and loop_ended(self._loop, "FaultProxy"):
                await self._stop_listening()
            if self._server is None:
                server = await self._hold.listen(
                    self._port, lambda held: asyncio.start_server(self._accept, sock=held)
                ) or await asyncio.start_server(self._accept, "127.0.0.1", self._port)
                self._server = server
                self._port = server.sockets[0].getsockname()[1]
                self._loop = asyncio.get_running_loop()

    async def stop(self) -> None:
        """The same as :meth:`close` (for ``async with``)."""
        await self.close()

    async def close(self) -> None:
        """Stop listening, drop every connection, end every task."""
        async with self._lifecycle_lock():
            await self._stop_listening()
        self.reset_connections()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ---- switching faults --------------------------------------------------------------------

    def set(self, direction: Direction | Literal["both"] = "both", **faults: object) -> None:
        """Set :class:`LinkFaults` attributes, e.g. ``set("down", latency=0.2)``.

        Raises:
            AttributeError: no fault of that name.
            ValueError: an unknown direction or a bad value (see
                :class:`LinkFaults`); nothing is changed then.
        """
        _check_direction(direction, ("up", "down", "both"))
        for name, value in faults.items():
            if name == "resumed" or name not in LinkFaults.__dataclass_fields__:
                raise AttributeError(f"no fault named {name!r}")
            _check_fault(name, value)
        for d in ("up", "down") if direction == "both" else (direction,):
            link = self.faults[d]
            for name, value in faults.items():
                setattr(link, name, value)
            if not link.stop_reading:
                link.resumed.set()

    def clear(self) -> None:
        """Remove every fault of both directions (:meth:`LinkFaults.clear`). A connection
        half-closed earlier stays so (its EOF was sent); connections made from now on are
        healthy either way."""
        for link in self.faults.values():
            link.clear()

    def half_close(self, direction: Direction = "down") -> None:
        """Send an EOF in ``direction`` on every connection open now and forward nothing more
        that way on them; their other direction keeps flowing. Connections made later are not
        affected.

        Raises:
            ValueError: ``direction`` is not ``"up"`` or ``"down"``.
        """
        _check_direction(direction, ("up", "down"))
        for link in self._links:
            link.write_eof(direction)

    def reset_connections(self) -> None:
        """Abort (TCP reset) every open connection now."""
        for link in list(self._links):
            link.abort()

    async def refuse_connections(self) -> None:
        """Stop listening: new connects are refused until :meth:`start`. The port stays bound
        (not listening) until then, so no other socket is given it meanwhile."""
        async with self._lifecycle_lock():
            await self._stop_listening(hold_port=True)

    async def _stop_listening(self, *, hold_port: bool = False) -> None:
        # close() closes the listening socket at once; wait_closed() is not awaited: from
        # Python 3.12 on it waits for every accepted link to end, which refuse_connections()
        # keeps and close() resets only after this.
        self._loop = None
        if self._server is not None:
            self._server.close()
            self._server = None
            if hold_port:
                self._hold.hold("127.0.0.1", self._port)
        if not hold_port:
            self._hold.release()

    # ---- plumbing ----------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        link = _Link(self, writer)
        self._links.add(link)
        try:
            try:
                s_reader, s_writer = await asyncio.open_connection(*self.target)
            except OSError:
                writer.transport.abort()
                return
            link.server = s_writer
            if "up" in link.half_closed:  # half-closed while the server was being reached
                link.write_eof("up")
            up = asyncio.ensure_future(link.pump(reader, s_writer, "up"))
            down = asyncio.ensure_future(link.pump(s_reader, writer, "down"))
            try:
                await asyncio.gather(up, down)
            finally:
                up.cancel()
                down.cancel()
                await asyncio.gather(up, down, return_exceptions=True)
        except asyncio.CancelledError:
            # Only close() cancels this task. Ending it normally keeps the stream machinery,
            # which inspects the handler's outcome, from logging the cancellation as an error.
            pass
        finally:
            self._links.discard(link)
            link.abort()
            self._tasks.discard(task)
