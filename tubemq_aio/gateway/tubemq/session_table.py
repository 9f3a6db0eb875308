"""The TubeMQ sessions of one replica: one :class:`TubeGroup` per group, opened on first use.

It also keeps what the housekeeper needs to close idle ones: when a client fetch last ended per
group and how many fetches use a group's session right now.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterator, Sequence
from zoneinfo import ZoneInfo

from tubemq_aio.errors import ServerError, TubeMQError
from tubemq_aio.gateway.config.engine_settings import EngineSettings
from tubemq_aio.gateway.config.tables import GroupSpec
from tubemq_aio.gateway.errors import TubeUnavailableError, UnknownTopicError
from tubemq_aio.gateway.tubemq.tube_group import TubeGroup, TubeReach
from tubemq_aio.protocol.deployment import Deployment, deployment_of

__all__ = ["SessionTable"]


class SessionTable:
    """The replica's TubeMQ sessions by group.

    Args:
        settings: the engine settings (masters, TLS, credentials, timeouts).
    """

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        #: The SDK options of every session (one TLS context: the sessions share a pool).
        #: How every group's TubeMQ session reaches the cluster.
        self.reach = TubeReach(
            masters=settings.masters,
            deployment=settings.deployment,
            rpc_timeout=settings.rpc_timeout,
            client_options=settings.tubemq.client_options(),
            # with kept_batch_bytes the engine reads ahead after the answer (next_batch), and
            # the reads on a fetch's critical path end with a CommitOffset as without it
        )
        self._tubes: dict[str, TubeGroup] = {}
        self._last_use: dict[str, float] = {}  # group -> loop time a client fetch last ended
        self._busy: Counter[str] = Counter()  # group -> fetches running now
        #: Why the last readiness query of the master failed (None: it answered, or none ran).
        self.master_error: BaseException | None = None

    def open_groups(self) -> list[str]:
        """The groups with a session open now."""
        return list(self._tubes)

    async def get(self, spec: GroupSpec) -> TubeGroup:
        """The group's started session (created if needed).

        Raises:
            TubeUnavailableError: the master cannot be reached.
            UnknownTopicError: the master says a topic of the group is not deployed (431): no
                retry helps until it is created (404, not retriable).
        """
        tube = self._tubes.get(spec.name)
        if tube is None:
            tube = TubeGroup(
                self.reach,
                group=spec.name,
                topics=spec.topics,
                msg_time_zone=ZoneInfo(spec.msg_time_zone),
            )
            self._tubes[spec.name] = tube
        try:
            await tube.start()
        except ServerError as exc:
            if deployment_of(exc.err_code, False) is Deployment.NOT_DEPLOYED:
                topics = ", ".join(repr(t) for t in spec.topics)
                raise UnknownTopicError(
                    f"a topic of this group ({topics}) is not deployed on the TubeMQ cluster"
                ) from exc
            raise TubeUnavailableError(f"TubeMQ master unavailable: {exc!r}") from exc
        except TubeMQError as exc:
            raise TubeUnavailableError(f"TubeMQ master unavailable: {exc!r}") from exc
        return tube

    @contextlib.contextmanager
    def in_use(self, group: str) -> Iterator[None]:
        """Count a client fetch as using the group's session (the housekeeper leaves it open)."""
        self._busy[group] += 1
        try:
            yield
        finally:
            self._busy[group] -= 1
            self.mark_used(group)

    def mark_used(self, group: str) -> None:
        """Note that the group's session was used now."""
        self._last_use[group] = asyncio.get_running_loop().time()

    def usage(self) -> tuple[list[str], dict[str, float], dict[str, int]]:
        """Open sessions, when a client fetch last ended per group, fetches running now."""
        return list(self._tubes), dict(self._last_use), dict(self._busy)

    async def close_unused(self, group: str) -> bool:
        """Close the group's session unless a fetch is using it; the next fetch opens a new one.
        Returns whether one was closed."""
        if self._busy[group] > 0 or group not in self._tubes:
            return False
        tube = self._tubes.pop(group)  # synchronously: a fetch from now on opens a new one
        await self._close(tube)
        return True

    async def close_all(self) -> None:
        """Close every session (each bounded by twice the RPC timeout)."""
        tubes, self._tubes = list(self._tubes.values()), {}
        for tube in tubes:
            await self._close(tube)

    async def master_answers(self, specs: Sequence[GroupSpec]) -> bool:
        """Whether the master answered a metadata query just now (readiness). An open session
        answers without a new master registration; opening one counts as use, so an idle
        group's session is not reopened by every readiness probe."""
        spec = next((s for s in specs if s.name in self._tubes), None)
        if spec is None:
            spec = specs[0]
            self.mark_used(spec.name)
        try:
            async with asyncio.timeout(self.settings.rpc_timeout):
                tube = await self.get(spec)
                await tube.partitions()
        except (TubeMQError, TimeoutError) as exc:
            self.master_error = exc
            return False
        self.master_error = None
        return tube.master_ok

    async def _close(self, tube: TubeGroup) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2 * self.settings.rpc_timeout):
                await tube.close()
