"""The producer's session with the master: register, heartbeats, publish, close
(docs/protocol/wire.md §4)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import platform
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tubemq_aio._client import auth_stamp, local_ip_towards, new_client_id
from tubemq_aio.auth import TokenState
from tubemq_aio.errors import (
    ClientClosedError,
    RequestTimeoutError,
    ServerError,
    TopicNotDeployedError,
    TopicUnavailableError,
    TubeMQError,
    server_error,
)
from tubemq_aio.master import MasterInvoker
from tubemq_aio.producer.config import ProducerConfig
from tubemq_aio.protocol.consumer_replies import parse_master_response
from tubemq_aio.protocol.deployment import Deployment, build_deployment_check, deployment_of
from tubemq_aio.protocol.message import ip_to_int, validate_topic
from tubemq_aio.protocol.producer_master_values import HeartbeatResponse
from tubemq_aio.protocol.producer_meta import Broker, ProducerMetadata
from tubemq_aio.protocol.producer_rpc import (
    build_close_request,
    build_heartbeat_request,
    build_register_request,
    parse_close_response,
    parse_heartbeat_response,
    parse_register_response,
)
from tubemq_aio.protocol.retry import (
    REGISTER_RETRY,
    FailureStreak,
    register_deadline,
    retry_can_help,
)
from tubemq_aio.protocol.rpc import Method

__all__ = ["ProducerSession"]

log = logging.getLogger("tubemq_aio.producer")

# Java sleeps between register attempts: 1 s after a refusal, 1.2 s after an exception (§4.8).
_REGISTER_PAUSE_REFUSED = 1.0
_REGISTER_PAUSE_ERROR = 1.2
# How often publish() asks again while a topic has no writable partition yet.
_PUBLISH_POLL = 1.0
_NOT_READY = 201
_HB_NO_NODE = 411


class ProducerSession:
    """Registration and metadata of one producer at the master.

    Args:
        config: the producer configuration.
        invoker: sends master calls with failover.
        on_metadata: called with every known broker after each metadata change (used to
            pre-connect them).
        clock: monotonic seconds.
    """

    def __init__(
        self,
        config: ProducerConfig,
        invoker: MasterInvoker,
        *,
        on_metadata: Callable[[Iterable[Broker]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._invoker = invoker
        self._on_metadata = on_metadata
        self._clock = clock
        self.host = config.client_host or local_ip_towards(
            config.masters[0].host, config.masters[0].port
        )
        self.client_id = new_client_id(self.host)
        #: ``sentAddr`` of every send: the local IPv4 address as int32 (0 when not IPv4).
        self.sent_addr = _sent_addr(self.host)
        self.metadata = ProducerMetadata(tls=config.ssl_context is not None)
        self.tokens = TokenState(config.credentials)
        self._published: dict[str, None] = {}
        #: Topics whose first publish is under way; set when it ends (either way).
        self._publishing: dict[str, asyncio.Event] = {}
        #: The shared wait of :meth:`ensure_writable` per topic, while one runs.
        self._writable_waits: dict[str, _SharedWait] = {}
        #: Every such wait not ended yet (one cancelled by its last caller may still be ending).
        self._wait_tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        #: Set by :meth:`close`: ends the pauses of a :meth:`publish` waiting for a topic.
        self._closing = asyncio.Event()
        #: ``topic -> max message size`` of every topic a send may go to now (published, its
        #: first publish ended): :meth:`is_published` and ``metadata.max_message_size`` in one
        #: lookup for the send's hot path. Rebuilt (a new dict) whenever either changes.
        self.send_limits: dict[str, int] = {}
        self._heartbeat_lock = asyncio.Lock()
        self.registered = False
        self.heartbeats_ok = 0
        self.heartbeats_failed = 0
        #: Failed heartbeats since the master last answered (a heartbeat or a register).
        self.heartbeat_streak = FailureStreak()
        self.reregistrations = 0

    def __repr__(self) -> str:
        return (
            f"<ProducerSession id={self.client_id} master={self._invoker.current} "
            f"registered={self.registered} topics={list(self._published)} {self.metadata!r}>"
        )

    @property
    def published(self) -> tuple[str, ...]:
        """Topics published by this producer, in publish order."""
        return tuple(self._published)

    def is_published(self, topic: str) -> bool:
        """Whether ``topic`` was published and its first publish has ended."""
        return topic in self._published and topic not in self._publishing

    async def ensure_writable(self, topic: str) -> None:
        """Publish ``topic`` on first use, and wait for a writable partition when it has none
        now; returns once it has one. Concurrent callers share one such wait (a master
        heartbeat a second per topic, however many sends wait): a caller that leaves (its
        deadline, a cancel) does not end it for the others; the last one to leave does.

        Raises:
            InvalidMessageError: the topic name is invalid.
            TopicNotDeployedError: the master says the topic is not deployed.
            TopicUnavailableError: no writable partition after ``publish_timeout``.
            ClientClosedError: the producer closed meanwhile.
        """
        if self._closed:
            raise _closed_while_waiting(topic)
        shared = self._writable_waits.get(topic)
        if shared is None:
            if self.is_published(topic) and self.metadata.writable_partitions(topic):
                return
            shared = self._writable_waits[topic] = _SharedWait(
                asyncio.create_task(self.publish([topic]), name=f"publish {topic!r}")
            )
            self._wait_tasks.add(shared.task)
            shared.task.add_done_callback(lambda task: self._wait_ended(topic, task))
        shared.users += 1
        try:
            await asyncio.shield(shared.task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._closed and current is not None and not current.cancelling():
                raise _closed_while_waiting(topic) from None  # ended by close(), not the caller
            raise
        finally:
            shared.users -= 1
            if not shared.users:  # nobody waits for it any more: a caller from now on starts anew
                shared.task.cancel()
                if self._writable_waits.get(topic) is shared:
                    del self._writable_waits[topic]

    def _wait_ended(self, topic: str, task: asyncio.Task[None]) -> None:
        self._wait_tasks.discard(task)
        shared = self._writable_waits.get(topic)
        if shared is not None and shared.task is task:
            del self._writable_waits[topic]
        if not task.cancelled():
            task.exception()  # retrieved: every waiter may have left as it ended

    async def register(self) -> None:
        """Register at the master, retrying like the Java client (§4.8) for as long as its
        ``register_attempts`` attempts would take (:func:`register_deadline`); a master that
        does not answer is tried round the master list until then (issue 30, fault 1).

        Raises:
            TubeMQError: the last failure once that time has passed.
        """
        deadline = register_deadline(self._clock(), self._config.register_attempts)
        failures = 0
        while True:
            try:
                await self._register_once(deadline)
                return
            except TubeMQError as exc:
                if not retry_can_help(exc):
                    raise
                failures += 1
                refused = isinstance(exc, ServerError)
                pause = REGISTER_RETRY.pause(
                    failures,
                    self._clock(),
                    deadline,
                    0.0,
                    at_least=_REGISTER_PAUSE_REFUSED if refused else _REGISTER_PAUSE_ERROR,
                )
                if pause is None:
                    raise
                log.warning("master register attempt %d failed: %s", failures, exc)
                await asyncio.sleep(pause)

    async def _register_once(self, deadline: float | None = None) -> None:
        body = build_register_request(
            client_id=self.client_id,
            host_name=self.host,
            topics=self._published,
            broker_checksum=self.metadata.broker_checksum,
            config_id=self.metadata.config_id,
            auth=self.tokens.register_auth(*auth_stamp()),
            runtime_version=f"python-{platform.python_version()}",
        )
        response = parse_register_response(
            await self._invoker.call(Method.MASTER_PRODUCER_REGISTER, body, deadline=deadline)
        )
        if not response.success:
            raise server_error(response.err_code, response.err_msg)
        self.tokens.apply(response.authorization)
        self.metadata.apply_register(response, self._clock())
        self.registered = True
        self.heartbeat_streak.succeeded()  # the master serves us: as good as a heartbeat
        self._changed()

    async def heartbeat(self) -> None:
        """Send one heartbeat (one at a time) and apply its metadata; re-register on 411.

        Raises:
            TubeMQError: the heartbeat failed.
        """
        async with self._heartbeat_lock:
            try:
                response = await self._heartbeat_once()
            except TubeMQError:
                self.heartbeats_failed += 1
                self.heartbeat_streak.failed()
                raise
            if response.err_code == _HB_NO_NODE:
                # The master forgot us (restart, failover, expiry): register again (§4.8).
                self.reregistrations += 1
                log.info("master answered 411 to a heartbeat; registering again")
                await self.register()
                response = await self._heartbeat_once()
            if not response.success:
                self.heartbeats_failed += 1
                self.heartbeat_streak.failed()
                raise server_error(response.err_code, response.err_msg)
            self.heartbeats_ok += 1
            self.heartbeat_streak.succeeded()

    async def _heartbeat_once(self) -> HeartbeatResponse:
        body = build_heartbeat_request(
            client_id=self.client_id,
            host_name=self.host,
            topics=self._published,
            broker_checksum=self.metadata.heartbeat_checksum(self._clock()),
            config_id=self.metadata.config_id,
            auth=self.tokens.heartbeat_auth(*auth_stamp()),
        )
        response = parse_heartbeat_response(
            await self._invoker.call(Method.MASTER_PRODUCER_HEARTBEAT, body)
        )
        if response.success:
            self.tokens.apply(response.authorization, require_auth=response.require_auth)
            self.metadata.apply_heartbeat(response, self._clock())
            if response.err_code != _NOT_READY:
                self._changed()
        return response

    async def publish(self, topics: Iterable[str]) -> None:
        """Publish topics and wait until the master reports writable partitions for each.

        A topic the master says is not deployed fails at once (it is not published, so a later
        send asks again); only a deployed one, whose brokers may still be loading it, is waited
        for (see :mod:`tubemq_aio.protocol.deployment`). A topic new to this producer whose
        wait ends otherwise (cancelled, or ``publish_timeout``) before it had a writable
        partition or a deployment check that did not refuse it is not kept published either.

        Raises:
            InvalidMessageError: a topic name is invalid.
            TopicNotDeployedError: the master says a topic is not deployed on the cluster.
            TopicUnavailableError: a topic still has no writable partition after
                ``publish_timeout`` seconds, the master's answers included (it stays
                published: it is used once it appears).
            ClientClosedError: :meth:`close` came while the call waited.
        """
        wanted = [validate_topic(t) for t in topics]
        new = [t for t in wanted if t not in self._published]
        vouched: set[str] = set()  # asked whether deployed, and not refused (see _poll_writable)
        # This call's own waits: a topic new to this producer, or one without a writable
        # partition now that no other publish waits for.
        first = {
            t: asyncio.Event()
            for t in wanted
            if t not in self._published
            or (t not in self._publishing and not self.metadata.writable_partitions(t))
        }
        for topic in wanted:
            self._published.setdefault(topic, None)
        self._publishing.update(first)
        try:
            await self._await_writable(wanted, vouched)
        except TopicNotDeployedError as exc:
            for topic in exc.topics:
                if topic in first:
                    self._published.pop(topic, None)
            raise
        except BaseException:
            # Kept published only what may be used later: a topic that exists (heartbeats
            # would otherwise carry every unknown name ever sent to, for good).
            writable = self.metadata.writable_partitions
            for topic in new:
                if topic not in vouched and not writable(topic):
                    self._published.pop(topic, None)
            raise
        finally:
            for topic, done in first.items():
                done.set()
                if self._publishing.get(topic) is done:
                    del self._publishing[topic]
            self._refresh_send_limits()

    async def _await_writable(self, wanted: list[str], vouched: set[str]) -> None:
        """Heartbeat until every topic of ``wanted`` has a writable partition, for
        ``publish_timeout`` at most: a heartbeat or a deployment check still waiting for the
        master then is cut short (each would take up to ``rpc_timeout``). The topics whose
        deployment check ended without the master refusing them (deployed, or no verdict to
        be had, as before such checks) are added to ``vouched``."""
        timeout = self._config.publish_timeout
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                await self._poll_writable(wanted, self._clock() + timeout, vouched)
        except TimeoutError:
            if not scope.expired():
                raise
            missing = [t for t in wanted if not self.metadata.writable_partitions(t)]
            raise TopicUnavailableError(
                f"topics {missing} have no writable partition after {timeout:g} s "
                f"(publish_timeout): is each topic created, does its broker accept publishing, "
                f"and does the master answer?"
            ) from None

    async def _poll_writable(self, wanted: list[str], deadline: float, vouched: set[str]) -> None:
        checked: set[str] = set()
        while True:
            self._raise_if_closed(wanted)
            try:
                await self.heartbeat()
            except TubeMQError as exc:
                self._raise_if_closed(wanted)  # a closed pool's error, not the master's silence
                if self._clock() >= deadline:
                    raise TopicUnavailableError(
                        f"cannot publish {wanted}: the master did not answer ({exc})"
                    ) from exc
            missing = [t for t in wanted if not self.metadata.writable_partitions(t)]
            if not missing:
                return
            unknown = [t for t in missing if t not in checked]
            checked.update(unknown)
            gone = []
            for topic in unknown:
                if await self._deployment(topic) is Deployment.NOT_DEPLOYED:
                    gone.append(topic)
                else:
                    vouched.add(topic)
            if gone:
                raise TopicNotDeployedError(gone)
            if self._clock() >= deadline:
                raise TopicUnavailableError(
                    f"topics {missing} have no writable partition after "
                    f"{self._config.publish_timeout:g} s: is each topic created, and does its "
                    f"broker accept publishing?"
                )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_PUBLISH_POLL):
                    await self._closing.wait()

    def _raise_if_closed(self, wanted: list[str]) -> None:
        if self._closed:
            missing = [t for t in wanted if not self.metadata.writable_partitions(t)]
            raise ClientClosedError(
                f"the producer was closed while publishing waited for a writable partition of "
                f"{missing}"
            )

    async def _deployment(self, topic: str) -> Deployment:
        """Ask the master whether ``topic`` is deployed (no state changes at the master)."""
        body = build_deployment_check(
            client_id=self.client_id,
            host_name=self.host,
            topic=topic,
            auth=self.tokens.register_auth(*auth_stamp()),
        )
        try:
            data = await self._invoker.call(Method.MASTER_CONSUMER_REGISTER_V2, body)
            rsp = parse_master_response(Method.MASTER_CONSUMER_REGISTER_V2, data)
        except TubeMQError as exc:  # no verdict: wait for the topic as before
            log.info("deployment check of topic %r failed: %r", topic, exc)
            return Deployment.UNKNOWN
        return deployment_of(rsp.err_code, rsp.success)

    async def run_heartbeats(self) -> None:
        """Heartbeat forever at the configured period (an owned background task)."""
        config = self._config
        while True:
            pause = config.heartbeat_interval
            # The streak ends with any success: this loop's, a publish's heartbeat, a register.
            if self.heartbeat_streak.count >= config.heartbeat_failures_before_backoff:
                pause = config.heartbeat_backoff
            await asyncio.sleep(pause)
            if not self._published:
                continue
            try:
                await self.heartbeat()
            except TubeMQError as exc:
                streak = self.heartbeat_streak.count
                log.warning("producer heartbeat failed (%d in a row): %s", streak, exc)

    async def close(self, timeout: float) -> None:
        """End the sends' waits for a writable topic (:class:`ClientClosedError`) and tell the
        master this producer is gone, within ``timeout`` seconds in all (every master address
        included: one that does not answer is not waited for once per address); errors are
        logged, not raised."""
        self._closed = True
        self._closing.set()
        waits = list(self._wait_tasks)
        for task in waits:
            task.cancel()
        await asyncio.gather(*waits, return_exceptions=True)  # nothing outlives close()
        if not self.registered:
            return
        self.registered = False
        body = build_close_request(
            client_id=self.client_id, auth=self.tokens.close_auth(*auth_stamp())
        )
        try:
            # One round over the masters (a close does not wait for one to come back), ending
            # by ``timeout`` as a whole: silent masters do not add up (the invoker bounds it).
            data = await self._invoker.call(
                Method.MASTER_PRODUCER_CLOSE, body, timeout=timeout, deadline=self._clock()
            )
            response = parse_close_response(data)
            if not response.success:
                log.info("master refused the producer close: %s", response.err_msg)
        except RequestTimeoutError as exc:
            log.info("no master answered the producer close within %s s: %s", timeout, exc)
        except TubeMQError as exc:
            log.info("could not close the producer at the master: %s", exc)

    def _changed(self) -> None:
        self._refresh_send_limits()
        if self._on_metadata is not None:
            self._on_metadata(self.metadata.brokers())

    def _refresh_send_limits(self) -> None:
        """Rebuild :attr:`send_limits` from the published topics and the metadata (a topic
        without a writable partition now is left out: its sends wait for one)."""
        metadata = self.metadata
        max_size, writable = metadata.max_message_size, metadata.writable_partitions
        self.send_limits = {
            t: max_size(t) for t in self._published if self.is_published(t) and writable(t)
        }


@dataclass(slots=True)
class _SharedWait:
    """One topic's wait for a writable partition and the number of callers awaiting it."""

    task: asyncio.Task[None]
    users: int = 0


def _closed_while_waiting(topic: str) -> ClientClosedError:
    return ClientClosedError(
        f"the producer was closed while this send waited for a writable partition of {topic!r}"
    )


def _sent_addr(host: str) -> int:
    try:
        return ip_to_int(host)
    except TubeMQError:
        return 0
