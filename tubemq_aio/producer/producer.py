"""The public :class:`Producer`: ``await producer.send(topic, body)``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import replace
from datetime import datetime
from typing import Any, Self, Unpack

from tubemq_aio._client import AsyncLifecycle, open_pool
from tubemq_aio._io.decisions import wire_timeout_ms
from tubemq_aio._io.pool import ConnectionPool
from tubemq_aio._io.rpc_client import RpcClient
from tubemq_aio._stats_log import log_stats_every
from tubemq_aio.checks import Checks, check_options
from tubemq_aio.errors import (
    ClientClosedError,
    TopicNotDeployedError,
    TopicUnavailableError,
    TubeMQError,
)
from tubemq_aio.master import MasterInvoker
from tubemq_aio.producer._attempts import NO_AVOID, Failed, SendAttempts, SendCounts
from tubemq_aio.producer._batch import SendMany, SendPath
from tubemq_aio.producer._encode_many import encode_all
from tubemq_aio.producer._fast_attempt import FastAttempt
from tubemq_aio.producer._nowait import Callback, NowaitSends
from tubemq_aio.producer._outgoing import Outgoing, snapshot
from tubemq_aio.producer._preconnect import Preconnect
from tubemq_aio.producer._session import ProducerSession
from tubemq_aio.producer._waits import attempt_left, slot_by, writable_by
from tubemq_aio.producer._window import SendWindow
from tubemq_aio.producer.config import (
    ProducerConfig,
    ProducerOptions,
    SendOptions,
    check_send_args,
    check_send_many_args,
    is_plain_send,
)
from tubemq_aio.protocol.broker_blocking import BrokerBlocker
from tubemq_aio.protocol.consumer_names import check_topic_name
from tubemq_aio.protocol.producer_send import SendResult
from tubemq_aio.protocol.retry import RetryPolicy
from tubemq_aio.telemetry import Gauge, live, telemetry_for

__all__ = ["Producer"]

log = logging.getLogger("tubemq_aio.producer")


class Producer(AsyncLifecycle):
    """Publishes messages to TubeMQ topics.

    Safe to use from many tasks at once: sends are pipelined over one connection per broker, up
    to ``max_in_flight_sends`` outstanding; further senders wait (backpressure).

    Args:
        masters: master addresses, ``"h1:8715,h2:8715"`` or a list of ``host:port``.
        config: a ready :class:`ProducerConfig` (instead of ``masters`` and keywords).
        **options: :class:`ProducerConfig` fields, e.g. ``topics=["demo"]``.

    Example::

        async with Producer("127.0.0.1:8715", topics=["demo"]) as producer:
            result = await producer.send("demo", b"hello")
    """

    def __init__(
        self,
        masters: str | Sequence[str] | None = None,
        *,
        config: ProducerConfig | None = None,
        **options: Unpack[ProducerOptions],
    ) -> None:
        if config is None:
            check_options(ProducerConfig, options, what="Producer")
            config = ProducerConfig(masters=masters, **options)  # type: ignore[arg-type]
        else:
            given = Checks("Producer")
            if masters is not None or options:
                given.problem("pass either config= or masters and options, not both")
            given.instance("config", config, ProducerConfig)
            given.done()
        self.config = config
        self._tls = config.ssl_context is not None
        self._pool: ConnectionPool | None = None
        self._rpc: RpcClient | None = None
        self._session: ProducerSession | None = None
        self._attempts: SendAttempts | None = None  # built with the session by start()
        self._fast: FastAttempt | None = None  # its fast halves (the plain send's hot path)
        self._path: SendPath | None = None  # what a send_many call shares with the producer
        self._blocker = BrokerBlocker(config.blocking)
        self._window = SendWindow(config.max_in_flight_sends)
        self._send_timeout = config.effective_send_timeout
        self._send_timeout_ms = wire_timeout_ms(self._send_timeout)  # validated by the config
        self._closing = asyncio.Event()  # wakes sends waiting out a broker's connect backoff
        self._init_lifecycle("tubemq-producer")
        #: OpenTelemetry instrumentation (``None`` when off, see :mod:`tubemq_aio.telemetry`).
        self.telemetry = telemetry_for(config.telemetry)
        if self.telemetry is not None:
            self.telemetry.watch(self._gauges)
        self._counts = SendCounts()
        self._nowait = NowaitSends(self._supervisor, self._window, self._send_one, self._is_closed)

    @classmethod
    def from_url(cls, url: str, **options: Unpack[ProducerOptions]) -> Self:
        """Build a producer from ``tubemq://h1:8715,h2:8715?rpc_timeout=5``; see
        :meth:`~tubemq_aio.config.ClientConfig.from_url`."""
        check_options(ProducerConfig, options, what=f"{cls.__name__}.from_url")
        return cls(config=ProducerConfig.from_url(url, **options))

    _kind = "producer"

    @property
    def sent(self) -> int:
        """Sends that ended stored. Every send (``send``, ``send_nowait``, each message of
        ``send_many``) that got past the closed check ends in exactly one of :attr:`sent`,
        :attr:`failed` and :attr:`cancelled`."""
        return self._counts.sent

    @property
    def failed(self) -> int:
        """Sends that ended with an error (or were cut short by ``close()``)."""
        return self._counts.failed

    @property
    def cancelled(self) -> int:
        """Sends cancelled by their caller."""
        return self._counts.cancelled

    @property
    def retried(self) -> int:
        """Attempts made after a send's first one."""
        return self._counts.retried

    def __repr__(self) -> str:
        return (
            f"<Producer {self._lifecycle_state()} in_flight={self.in_flight} sent={self.sent} "
            f"failed={self.failed} session={self._session!r}>"
        )

    # ---- lifecycle ---------------------------------------------------------------------------

    async def _start(self) -> None:
        """Register at the master, publish the configured topics, start heartbeats."""
        cfg = self.config
        self._pool = open_pool(cfg)
        self._rpc = RpcClient(self._pool, tls=self._tls)
        invoker = MasterInvoker(self._rpc, cfg.masters, cfg.rpc_timeout)
        preconnect = Preconnect(self._rpc, self._supervisor, self._blocker)
        self._session = ProducerSession(cfg, invoker, on_metadata=preconnect.brokers)
        self._build_send_path(self._rpc, self._session)
        await self._session.register()
        if cfg.topics:
            await self._session.publish(cfg.topics)
        self._supervisor.spawn(self._session.run_heartbeats(), "heartbeat")
        if cfg.stats_log_interval is not None:
            session = self._session
            self._supervisor.spawn(
                log_stats_every(
                    cfg.stats_log_interval, lambda: f"Producer {session.client_id}", self.metrics
                ),
                "stats",
            )

    async def _teardown(self) -> None:
        """Let pending sends finish (``close_grace``), stop the background tasks (sends started
        by :meth:`send_nowait` and still pending fail with :class:`ClientClosedError`), close at
        the master; the connections are released afterwards."""
        self._closing.set()
        try:
            async with asyncio.timeout(self.config.close_grace):
                await self._window.drained()
        except TimeoutError:
            # The grace may end in the same turn of the loop as the last send: nothing is cut
            # short then, and there is nothing to warn about.
            if pending := self.in_flight:
                log.warning(
                    "closing with %d sends still pending after close_grace (%s s)",
                    pending,
                    self.config.close_grace,
                )
        await self._supervisor.close()
        if self._session is not None:
            await self._session.close(timeout=min(self.config.rpc_timeout, 5.0))

    # ---- publishing --------------------------------------------------------------------------

    async def publish(self, topics: Iterable[str] | str) -> None:
        """Publish more topics (TubeMQ has no way to unpublish one).

        Waits for each topic's writable partition (or the master's word that it is not deployed)
        for ``publish_timeout`` at most, however slow the master is to answer.

        Raises:
            ConfigError: ``topics`` is not a name, ``"t1,t2"`` or a collection of names, or a
                name is invalid (too long, not encodable as UTF-8).
            TopicNotDeployedError: the master says a topic is not deployed.
            TopicUnavailableError: a topic has no writable partition after ``publish_timeout``.
            ClientClosedError: the producer is not started, or ``close()`` came while the call
                waited.
        """
        checks = Checks("publish")
        names = checks.names("topics", topics, split=True, empty=False)
        for name in names:
            check_topic_name(checks, name)
        checks.done()
        session = self._require_session()
        await session.publish(names)

    def accepts_publish(self, topic: str) -> bool:
        """Whether ``topic`` can be published to right now (Java ``isTopicCurAcceptPublish``):
        it is published by this producer and the master's last heartbeat answer listed a
        writable partition of it. A topic whose brokers stop accepting publishing becomes False
        with the next heartbeat (``heartbeat_interval``) that leaves it out; no request is sent
        here. Sends may still go to the partitions last known while False: the producer keeps
        them as long as their brokers are listed (a restarted master lists no topic for a while).

        Raises:
            ConfigError: ``topic`` is not a non-blank string.
            ClientClosedError: the producer is not started or was closed.
        """
        checks = Checks("accepts_publish")
        name = checks.text("topic", topic)
        checks.done()
        session = self._require_session()
        assert name is not None
        return session.is_published(name) and session.metadata.listed(name)

    @property
    def in_flight(self) -> int:
        """Sends outstanding right now (at most ``max_in_flight_sends``)."""
        return self._window.borrowed

    @property
    def topics(self) -> tuple[str, ...]:
        """The published topics."""
        return self._session.published if self._session is not None else ()

    # ---- sending -----------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        body: bytes,
        *,
        attributes: Mapping[str, str] | None = None,
        msg_type: str | None = None,
        msg_time: datetime | str | None = None,
        key: bytes | str | None = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send one message and wait until the broker stored it.

        Args:
            topic: the topic; published on first use if it was not.
            body: the payload (bytes-like).
            attributes: user ``key -> value`` items (no ``,`` or ``=`` in them).
            msg_type: message type, usable by consumers as a server-side filter.
            msg_time: message time (``datetime`` or ``yyyyMMddHHmm``).
            key: routes every message with this key to the same partition.
            timeout: seconds the send may take, every retry and pause included (default
                ``send_timeout``).

        Returns:
            Where and when the broker stored the message.

        Raises:
            InvalidMessageError: a bad argument (nothing was sent): blank topic, empty body,
                ``timeout`` not in ``(0, 600]`` seconds, ``key`` not bytes/str (or a str that
                is not UTF-8), attributes not a mapping of strings.
            ConfigError: a custom ``partitioner`` raised (not a ``TubeMQError``) or returned
                something else than a partition of the topic (nothing was sent).
            TopicUnavailableError: the topic got no writable partition within ``timeout``
                (or ``publish_timeout``); nothing was sent.
            SendWindowFullError: every slot of the send window (``max_in_flight_sends``) stayed
                taken for the whole ``timeout``; nothing was sent.
            ConnectError: no broker of the topic could be reached before ``timeout`` passed.
            SendOutcomeUnknownError: the request was written but no answer came (timeout or lost
                connection): the message may or may not be stored.
            ServerError: the broker refused the message (e.g. 400, 403).
            ClientClosedError: the producer is closed (also ``close()`` while the send waited
                for the topic's writable partition: nothing was sent).
        """
        plain = (
            key is None
            and timeout is None
            and is_plain_send(topic, body, attributes, msg_type, msg_time)
        )
        if not plain:
            check_send_args(
                topic,
                body,
                key=key,
                timeout=timeout,
                attributes=attributes,
                msg_type=msg_type,
                msg_time=msg_time,
            )
            body, attributes = snapshot(body, attributes)
        session = self._session
        if (
            self._close_task is not None
            or not self._started
            or session is None
            or self._supervisor.crash is not None
        ):  # _require_session inlined for the running producer
            session = self._require_session()  # raises
        telemetry = self.telemetry
        if telemetry is not None and telemetry.active():
            message = Outgoing(topic, body, attributes, msg_type, msg_time, key, timeout)
            return await self._traced_send(session, False, message)
        if (
            not plain
            or len(body) > session.send_limits.get(topic, -1)  # -1: not published yet
            or not self._window.try_acquire()
        ):
            message = Outgoing(topic, body, attributes, msg_type, msg_time, key, timeout)
            return await self._send(session, False, message)
        # The hot path: a plain send with a free window slot makes its first attempt in this
        # frame (no coroutine of its own); a retry goes on in _send, which books it as before.
        fast = self._fast
        assert fast is not None
        attempt_timeout = self._send_timeout
        now = time.monotonic()
        try:
            partition, conn, serial, started = fast.begin_plain(
                topic, body, now, self._send_timeout_ms, attempt_timeout
            )
            try:
                if isinstance(started, bytes):  # no open connection or no room on it right now
                    assert self._rpc is not None
                    answer = await self._rpc.call_payload(
                        partition.broker, started, attempt_timeout
                    )
                else:
                    try:
                        answer = await started
                    except asyncio.CancelledError:
                        assert conn is not None  # a written request has its connection
                        conn.abandon(serial)
                        raise
            except TubeMQError as exc:
                assert self._attempts is not None
                first = (self._attempts.failed(exc, partition, now), partition, now)
            else:
                outcome = fast.answered(answer, partition)
                if isinstance(outcome, SendResult):
                    self._window.release()
                    self._counts.sent += 1
                    return outcome
                first = (outcome, partition, now)
        except asyncio.CancelledError:
            self._window.release()
            self._counts.ended(True, self.closed)  # closed: the caller sees ClientClosedError
            raise
        except BaseException as exc:
            self._window.release()
            self._counts.failed += 1
            self._raise_if_other_loop(exc)
            raise
        return await self._send(session, True, Outgoing(topic, body), first)

    async def send_many(
        self,
        topic: str,
        bodies: Sequence[bytes],
        *,
        attributes: Mapping[str, str] | None = None,
        msg_type: str | None = None,
        msg_time: datetime | str | None = None,
        key: bytes | str | None = None,
        timeout: float | None = None,
    ) -> list[SendResult | TubeMQError]:
        """Send many messages of one topic from one task; each keeps its own outcome.

        Every message is its own request and takes its own slot of the send window (waiting
        for room as :meth:`send` does); it is retried, routed and counted as a :meth:`send` of
        it would be. Messages are sent in list order, but like concurrent sends they may be
        stored in another order across partitions (and on a retry). Cheaper than one task per
        message.

        Args:
            topic: the topic; published on first use if it was not.
            bodies: a list or tuple of non-empty ``bytes``, at most ``max_send_many``.
            attributes: user attributes of every message (as for :meth:`send`).
            msg_type: message type of every message.
            msg_time: message time of every message.
            key: routes every message to the key's partition.
            timeout: seconds the whole call may take, every message's waits, attempts and
                retries included (default ``send_timeout``): one deadline from the call's
                start, however many messages and however small the send window.

        Returns:
            One entry per body, in order: its :class:`SendResult`, or the error :meth:`send`
            would have raised for it (a :class:`~tubemq_aio.errors.TubeMQError`: e.g.
            :class:`SendOutcomeUnknownError`, a :class:`ServerError`,
            :class:`ClientClosedError` for the messages not yet sent when ``close()`` began,
            :class:`SendWindowFullError` for those that found every window slot taken by other
            sends until the deadline, :class:`WriteTimeoutError` for those whose turn came
            after it: they were not sent).
            Errors are returned, not raised, so one refused message never hides the others'
            results. An empty ``bodies`` returns ``[]`` without any I/O.

        Raises:
            InvalidMessageError: a bad argument: ``bodies`` not a list/tuple, longer than
                ``max_send_many``, a body (named by its index) empty, not bytes or too large
                for the topic, or a bad shared argument. Nothing was sent.
            TopicUnavailableError: the topic got no writable partition within ``timeout``
                (or ``publish_timeout``); nothing was sent.
            ClientClosedError: the producer is not started or is closed (also ``close()``
                while the call waited for the topic's writable partition: nothing was sent).
            asyncio.CancelledError: the call was cancelled; no list comes back. The messages
                answered before were booked as they came (counted in ``sent`` or ``failed``);
                those whose requests were already written may still be stored by the broker
                (counted as cancelled, as a cancelled :meth:`send` is); the others were not
                sent. Bound the call with ``timeout`` instead to get every message's outcome.
        """
        options = SendOptions(
            attributes=attributes, msg_type=msg_type, msg_time=msg_time, key=key, timeout=timeout
        )
        items = check_send_many_args(topic, bodies, self.config.max_send_many, options)
        session = self._require_session()
        if not items:
            return []
        first_body, attributes = snapshot(items[0], attributes)  # (the bodies are copies)
        call_timeout = self._send_timeout if timeout is None else timeout
        deadline = time.monotonic() + call_timeout
        if not session.is_published(topic) or not session.metadata.writable_partitions(topic):
            await writable_by(session, topic, deadline, call_timeout)
        first = Outgoing(topic, first_body, attributes, msg_type, msg_time, key, timeout)
        encoded = encode_all(first, items, session.metadata.max_message_size(topic))
        path = self._path
        assert path is not None
        traced = live(self.telemetry) is not None
        return await SendMany(path, first, items, encoded, call_timeout, deadline, traced).run()

    async def _traced_send(
        self,
        session: ProducerSession,
        holding: bool,
        message: Outgoing,
        first_failure: Failed | None = None,
    ) -> SendResult:
        """:meth:`_send` inside a PRODUCER span that also carries the ``traceparent``."""
        telemetry = self.telemetry
        assert telemetry is not None
        with telemetry.send_span(message.topic, len(message.body), message.attributes) as span:
            traced = replace(message, attributes=span.attributes)
            result = await self._send(session, holding, traced, first_failure)
            broker = session.metadata.broker(result.broker_id)
            if broker is not None:
                span.stored(result.message_id, result.partition_key, broker.host, broker.port)
            return result

    async def _send_one(self, message: Outgoing, first_failure: Failed | None) -> SendResult:
        """A send already holding its window slot (``send_nowait``, a message of ``send_many``):
        :meth:`_send`, inside a span when telemetry is on."""
        attempts = self._attempts
        assert attempts is not None
        if live(self.telemetry) is not None:
            return await self._traced_send(attempts.session, True, message, first_failure)
        return await self._send(attempts.session, True, message, first_failure)

    async def _send(
        self,
        session: ProducerSession,
        holding: bool,
        message: Outgoing,
        first_failure: Failed | None = None,
    ) -> SendResult:
        """One send, counted once as sent, failed or cancelled; ``holding``: a window slot was
        reserved for it already; ``first_failure``: its first attempt (made by ``send`` or
        ``send_many``) failed retriably: go on with the retries."""
        topic = message.topic
        attempt_timeout = send_timeout = (
            self._send_timeout if message.timeout is None else message.timeout
        )
        # The send's own deadline: the wait for the topic and for a window slot, every attempt
        # and every pause end by it (a send handed over after a failed first attempt counts
        # from that attempt).
        began = time.monotonic() if first_failure is None else first_failure[2]
        deadline = began + attempt_timeout
        waited = False
        try:
            if not session.is_published(topic):
                await writable_by(session, topic, deadline, send_timeout)
                waited = True
            encoded = message.encode(session.metadata.max_message_size(topic))
            if not holding:
                window = self._window
                if not window.try_acquire():
                    await slot_by(window, deadline, send_timeout)
                    waited = True
                holding = True
            # The attempts run in this frame (no coroutine per attempt), and the request goes out
            # without an intermediate coroutine when the connection has room (the hot path).
            attempts = self._attempts
            assert attempts is not None
            rpc = attempts.rpc
            key = message.key
            if waited:  # the attempts get what the waits left
                attempt_timeout, timeout_ms = attempt_left(deadline)
            else:
                timeout_ms = rpc.wire_timeout(attempt_timeout)
            avoid: Set[str] = NO_AVOID  # a set of its own from the first retry on
            failures = 0
            while True:
                if first_failure is not None:
                    last, partition, now = first_failure
                    first_failure = None
                else:
                    now = time.monotonic()
                    try:
                        partition, started = attempts.begin(
                            topic, key, avoid, now, encoded, timeout_ms, attempt_timeout
                        )
                    except TopicUnavailableError as exc:
                        if isinstance(exc, TopicNotDeployedError) or (
                            session.metadata.writable_partitions(topic)
                        ):  # the master's verdict, or a partitioner's (NoPartitionError)
                            raise
                        # No writable partition now (a topic whose brokers are not publishing
                        # yet): wait for one, as the first publish does.
                        await writable_by(session, topic, deadline, send_timeout)
                        attempt_timeout, timeout_ms = attempt_left(deadline)
                        continue
                    try:
                        if isinstance(started, bytes):
                            answer = await rpc.call_payload(
                                partition.broker, started, attempt_timeout
                            )
                        else:
                            conn, serial, future = started
                            try:
                                answer = await future
                            except asyncio.CancelledError:
                                conn.abandon(serial)
                                raise
                    except TubeMQError as exc:
                        last = attempts.failed(exc, partition, now)
                    else:
                        outcome = attempts.fast.answered(answer, partition)
                        if isinstance(outcome, SendResult):
                            result = outcome
                            break
                        last = outcome
                if self.closed:  # certainly not stored; close() ends it as it ends a pause
                    raise ClientClosedError(
                        "the producer was closed before this send could be retried"
                    ) from last
                failures += 1
                avoid = {*avoid, partition.partition_key}
                pause = attempts.retry_pause(last, topic, failures, time.monotonic(), deadline)
                if pause is None:
                    raise last
                if pause > 0.0:
                    await self._pause(pause)
                    avoid = NO_AVOID  # after a pause every partition is worth a try again
                remaining = deadline - time.monotonic()
                if remaining <= 0.0:
                    raise last
                # The next attempt gets what is left of the send's timeout.
                attempt_timeout = remaining
                timeout_ms = wire_timeout_ms(remaining)
                self._counts.retried += 1
        except asyncio.CancelledError:
            self._counts.ended(True, self.closed)  # closed: the caller sees ClientClosedError
            raise
        except BaseException as exc:
            self._counts.failed += 1
            self._raise_if_other_loop(exc)
            raise
        finally:
            if holding:
                self._window.release()
        self._counts.sent += 1
        return result

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds`` between two attempts of a send, ending early on close.

        Raises:
            ClientClosedError: the producer was closed meanwhile.
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._closing.wait()
        if self.closed:
            raise ClientClosedError("the producer was closed while this send waited to retry")

    def send_nowait(
        self,
        topic: str,
        body: bytes,
        *,
        callback: Callback | None = None,
        **kwargs: Unpack[SendOptions],
    ) -> asyncio.Future[SendResult]:
        """Start a send and return its future at once (optionally with a completion callback).

        The send takes a slot of the send window (``max_in_flight_sends``, shared with
        :meth:`send`) before this returns, so ``close()`` lets it finish within
        ``close_grace``; one still pending after that fails with :class:`ClientClosedError`.
        Cancelling the future cancels the send. Arguments as for :meth:`send`; the future
        fails as :meth:`send` raises.

        Raises:
            InvalidMessageError: the topic, ``key`` or ``timeout`` is invalid (nothing started).
            ConfigError: ``callback`` is not callable (nothing started).
            ClientClosedError: the producer is not started or already closed.
            SendWindowFullError: every slot of the window is taken (nothing was sent).
        """
        check_send_args(topic, body, **kwargs)
        body, attributes = snapshot(body, kwargs.get("attributes"))
        if callback is not None and not callable(callback):
            Checks("send_nowait").fail(f"callback must be callable, got {type(callback).__name__}")
        self._require_session()
        message = Outgoing(
            topic,
            body,
            attributes,
            kwargs.get("msg_type"),
            kwargs.get("msg_time"),
            kwargs.get("key"),
            kwargs.get("timeout"),
        )
        return self._nowait.start(message, callback)

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every send :meth:`send_nowait` started before this call has ended
        (stored, failed or cancelled), as aiokafka's ``flush``. Their outcomes stay in their
        futures (and callbacks): ``flush`` raises none of them. A :meth:`send` ends in the
        task that awaits it and is not waited for.

        Args:
            timeout: seconds to wait at most; None (default): until they have all ended, which
                each does by its own deadline (its ``timeout``, default ``send_timeout``) or
                at ``close()``.

        Raises:
            ConfigError: ``timeout`` is not None nor a number of seconds in (0, 86 400].
            FlushTimeoutError: sends were still pending when ``timeout`` passed (they go on;
                also a ``TimeoutError``).
        """
        await self._nowait.flush(timeout)

    # ---- internals ---------------------------------------------------------------------------

    def _build_send_path(self, rpc: RpcClient, session: ProducerSession) -> None:
        """Build the attempts collaborator and the send path over ``rpc`` and ``session``."""
        retry = RetryPolicy(immediate=self.config.send_retries)
        attempts = SendAttempts(rpc, session, self._blocker, self.config.partitioner, retry)
        self._attempts = attempts
        self._fast = attempts.fast
        self._path = SendPath(attempts, self._window, self._counts, self._send_one, self._is_closed)

    def _is_closed(self) -> bool:
        """Whether ``close()`` has begun (:attr:`closed`, as a callable for ``send_many``)."""
        return self._close_task is not None

    def _require_session(self) -> ProducerSession:
        self._check_running()
        assert self._session is not None
        return self._session

    def _gauges(self) -> list[Gauge]:
        """This producer's observable gauges (read from the exporter's thread: plain reads)."""
        me = {"tubemq.client.id": self._session.client_id if self._session else ""}
        blocked = len(self._blocker.last_blocked)
        reconnects = self._pool.stats.reconnects if self._pool is not None else 0
        return [
            ("tubemq.client.sends.in_flight", self._window.borrowed, me),
            ("tubemq.client.brokers.blocked", blocked, me),
            ("tubemq.client.reconnects", reconnects, me),
        ]

    def metrics(self) -> dict[str, Any]:
        """A snapshot of the producer's counters and the broker-blocking state."""
        return {
            "sent": self.sent,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "retried": self.retried,
            "in_flight": self._window.borrowed,
            "blocking": self._blocker.snapshot(),
            "transport": self._pool.stats.snapshot() if self._pool is not None else {},
            "heartbeats_ok": self._session.heartbeats_ok if self._session else 0,
            "heartbeats_failed": self._session.heartbeats_failed if self._session else 0,
            "reregistrations": self._session.reregistrations if self._session else 0,
        }
