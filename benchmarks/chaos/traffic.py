"""The clients of a chaos run and what they saw: every ack, every receipt, every error.

Each producer sends numbered bodies (``<name>-<seq>``) from a few concurrent senders; each
consumer records every body it receives. Errors are recorded by type name: a
:class:`~tubemq_aio.TubeMQError` subclass, or ``"untyped:<name>"`` for anything else (which the
run reports as a fault of the SDK).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from tubemq_aio import (
    ClientBalancedConsumer,
    Consumer,
    Producer,
    TubeMQError,
)

__all__ = ["Ack", "ConsumerLog", "ErrorLog", "ProducerLog", "Traffic", "TrafficPlan"]


@dataclass(frozen=True)
class TrafficPlan:
    """The clients' settings.

    Attributes:
        masters: Every master address (``h:p,h:p,h:p``).
        topic: The topic all clients use.
        senders: Concurrent send loops per producer.
        send_interval: Seconds each send loop waits between sends.
        send_timeout: ``timeout`` of each send (seconds).
        rpc_timeout: The clients' ``rpc_timeout`` (seconds).
        heartbeat: The clients' ``heartbeat_interval`` (seconds).
    """

    masters: str
    topic: str
    senders: int = 3
    send_interval: float = 0.05
    send_timeout: float = 10.0
    rpc_timeout: float = 5.0
    heartbeat: float = 3.0


def error_name(exc: BaseException) -> str:
    """``type(exc).__name__``, prefixed ``untyped:`` unless it is a :class:`TubeMQError`."""
    name = type(exc).__name__
    return name if isinstance(exc, TubeMQError) else f"untyped:{name}"


@dataclass(frozen=True)
class Ack:
    """One acknowledged message: when (monotonic seconds) and which broker stored it."""

    at: float
    broker_id: int


@dataclass
class ErrorLog:
    """``(monotonic time, client, error type)`` of every error an application call raised."""

    items: list[tuple[float, str, str]] = field(default_factory=list)

    def add(self, who: str, exc: BaseException) -> None:
        """Record ``exc`` raised to ``who`` now."""
        self.items.append((time.monotonic(), who, error_name(exc)))


@dataclass
class ProducerLog:
    """What one producer saw: ``acked`` maps each acknowledged body to its :class:`Ack`."""

    name: str
    acked: dict[bytes, Ack] = field(default_factory=dict)
    attempts: int = 0


@dataclass
class ConsumerLog:
    """What one consumer group saw: receipt counts and times (monotonic seconds)."""

    group: str
    counts: Counter[bytes] = field(default_factory=Counter)
    times: list[float] = field(default_factory=list)
    duplicate_times: list[float] = field(default_factory=list)

    def record(self, body: bytes, now: float) -> None:
        """Count one receipt of ``body``."""
        self.counts[body] += 1
        self.times.append(now)
        if self.counts[body] > 1:
            self.duplicate_times.append(now)


async def _send_loop(
    producer: Producer,
    plan: TrafficPlan,
    log: ProducerLog,
    errors: ErrorLog,
    idx: int,
    stop: Callable[[], bool],
) -> None:
    seq = 0
    while not stop():
        body = f"{log.name}-{idx}-{seq}".encode()
        seq += 1
        log.attempts += 1
        try:
            result = await producer.send(plan.topic, body, timeout=plan.send_timeout)
        except TubeMQError as exc:
            errors.add(log.name, exc)
            await asyncio.sleep(plan.send_interval)
            continue
        except Exception as exc:  # an SDK fault: recorded, the run goes on
            errors.add(log.name, exc)
            await asyncio.sleep(plan.send_interval)
            continue
        log.acked[body] = Ack(time.monotonic(), result.broker_id)
        await asyncio.sleep(plan.send_interval)


async def run_producer(
    plan: TrafficPlan, log: ProducerLog, errors: ErrorLog, stop: Callable[[], bool]
) -> None:
    """Run one producer with ``plan.senders`` send loops until ``stop()`` is true."""
    producer = Producer(
        plan.masters,
        topics=[plan.topic],
        rpc_timeout=plan.rpc_timeout,
        heartbeat_interval=plan.heartbeat,
    )
    async with producer:
        loops = [_send_loop(producer, plan, log, errors, i, stop) for i in range(plan.senders)]
        await asyncio.gather(*loops)


async def _read_loop(
    consumer: Consumer | ClientBalancedConsumer,
    who: str,
    log: ConsumerLog,
    errors: ErrorLog,
    stop: Callable[[], bool],
) -> None:
    while not stop():
        try:
            batch = await consumer.getmany(timeout=1.0)
            async with batch:
                now = time.monotonic()
                for msg in batch:
                    log.record(msg.body, now)
        except TubeMQError as exc:
            errors.add(who, exc)
            await asyncio.sleep(0.2)
        except Exception as exc:  # an SDK fault: recorded, the run goes on
            errors.add(who, exc)
            await asyncio.sleep(0.2)


class Traffic:
    """All clients of a run: start them, stop them, read their logs.

    The uvloop producer runs on its own thread and event loop; everything else on the caller's.
    """

    def __init__(self, plan: TrafficPlan, *, uvloop_producer: bool = True) -> None:
        """Prepare the logs; nothing runs until :meth:`start`."""
        self.plan = plan
        self.errors = ErrorLog()
        self.producers = [ProducerLog("asyncio")]
        if uvloop_producer:
            self.producers.append(ProducerLog("uvloop"))
        self.group = ConsumerLog("server-balanced")
        self.client_balanced = ConsumerLog("client-balanced")
        self._stop_producers = False
        self._stop_consumers = False
        self._tasks: list[asyncio.Task[None]] = []
        self._thread: threading.Thread | None = None

    @property
    def consumer_logs(self) -> list[ConsumerLog]:
        """The two consumer groups' logs."""
        return [self.group, self.client_balanced]

    def acked(self) -> dict[bytes, Ack]:
        """Every acknowledged body of every producer."""
        merged: dict[bytes, Ack] = {}
        for log in self.producers:
            merged.update(log.acked)
        return merged

    def flowing_since(self, t: float) -> bool:
        """Whether a message was acknowledged, and each consumer group received one, after
        ``t`` (monotonic seconds): what a report's ``produce_back_s`` and ``consume_back_s``
        measure from an event's end."""
        acked = any(ack.at > t for ack in reversed(self.acked().values()))
        return acked and all(bool(log.times) and log.times[-1] > t for log in self.consumer_logs)

    def start(self) -> None:
        """Start the consumers and producers (returns at once)."""
        plan = self.plan
        opts = {"rpc_timeout": plan.rpc_timeout, "heartbeat_interval": plan.heartbeat}
        group = f"chaos_{plan.topic}"
        members = [
            Consumer(
                plan.masters,
                group=group,
                topics=[plan.topic],
                consume_from="earliest",
                **opts,  # type: ignore[arg-type]
            )
            for _ in range(2)
        ]
        cbc = ClientBalancedConsumer(
            plan.masters,
            group=f"chaos_cb_{plan.topic}",
            topics=[plan.topic],
            source_count=1,
            node_id=0,
            consume_from="earliest",
            reassign_interval=5.0,
            **opts,  # type: ignore[arg-type]
        )
        consumers: list[tuple[str, Consumer | ClientBalancedConsumer, ConsumerLog]] = [
            ("member1", members[0], self.group),
            ("member2", members[1], self.group),
            ("client-balanced", cbc, self.client_balanced),
        ]
        for who, consumer, log in consumers:
            self._tasks.append(asyncio.ensure_future(self._consume(who, consumer, log)))
        self._tasks.append(asyncio.ensure_future(self._produce(self.producers[0])))
        if len(self.producers) > 1:
            self._thread = threading.Thread(
                target=self._uvloop_main, args=(self.producers[1],), daemon=True
            )
            self._thread.start()

    async def _consume(
        self, who: str, consumer: Consumer | ClientBalancedConsumer, log: ConsumerLog
    ) -> None:
        try:
            async with consumer:
                await _read_loop(consumer, who, log, self.errors, lambda: self._stop_consumers)
        except Exception as exc:  # start/close failures are part of the record
            self.errors.add(who, exc)

    async def _produce(self, log: ProducerLog) -> None:
        try:
            await run_producer(self.plan, log, self.errors, lambda: self._stop_producers)
        except Exception as exc:
            self.errors.add(log.name, exc)

    def _uvloop_main(self, log: ProducerLog) -> None:
        import uvloop

        uvloop.run(self._produce(log))

    async def stop_producers(self, timeout: float = 60.0) -> None:
        """Stop sending and wait (at most ``timeout`` s) until every producer closed."""
        self._stop_producers = True
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, timeout)
        producer_task = self._tasks[-1]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(producer_task), timeout)

    async def drain(self, timeout: float) -> None:
        """Let the consumers read until both groups have every acked body, or ``timeout`` s."""
        acked = set(self.acked())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(acked <= log.counts.keys() for log in self.consumer_logs):
                return
            await asyncio.sleep(0.5)

    async def stop(self, timeout: float = 60.0) -> None:
        """Stop everything and wait (at most ``timeout`` s) for the clients to close."""
        self._stop_producers = self._stop_consumers = True
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, timeout)
        _done, pending = await asyncio.wait(self._tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        await _settle(pending)


async def _settle(tasks: set[asyncio.Task[None]]) -> None:
    for task in tasks:
        with contextlib.suppress(BaseException):
            await task
