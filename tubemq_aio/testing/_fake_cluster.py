"""``FakeCluster``: an in-process TubeMQ master and brokers that speak the real wire protocol.

Clients connect to it exactly as to a real cluster (``masters=cluster.master_addr``); it keeps
messages in memory with real index offsets (the partitions of a store share one index, as on a
broker), balances server-balanced consumer groups with
rebalance events, serves the client-balanced V2 calls, and lets a test inject a fault into any
method: an error code, a delay, no answer at all, a connection reset, or a request executed
late (after its client gave up on it).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterable, Mapping

from tubemq_aio.protocol.legacy_framing import FRAMINGS, Framing
from tubemq_aio.protocol.message import decode_payload
from tubemq_aio.protocol.rpc import Method
from tubemq_aio.testing._address import split_host_port
from tubemq_aio.testing._fake_broker import FakeBroker
from tubemq_aio.testing._fake_master import FakeMaster
from tubemq_aio.testing._fake_offsets import OFFSET_HISTORY_SECONDS
from tubemq_aio.testing._fake_rpc import Fault, FaultPlan, Injection, RpcNode
from tubemq_aio.testing._fake_store import STORE_BASE, StoredMessage, TopicLayout
from tubemq_aio.testing._service import AsyncService, check_serving_loop, loop_ended
from tubemq_aio.testing.polling import check_seconds

__all__ = ["FakeCluster"]


class FakeCluster(AsyncService):
    """An in-memory master plus ``brokers`` brokers on free loopback ports.

    The constructor takes keyword configuration like the SDK's clients (the public
    convention): every keyword has a default, and a test names only what it changes.

    Args:
        topics: topic -> partitions per broker (an int) or a full :class:`TopicLayout`.
        brokers: how many brokers (ids 1..n); every topic lives on every broker.
        client_timeout: seconds the master keeps a producer/consumer without heartbeats.
        registration_timeout: seconds a broker keeps a consumer's partition without
            heartbeats or fetches.
        event_timeout: seconds an unacknowledged rebalance event blocks its consumer.
        balance_period: seconds between two rebalance events the master hands one member
            (its first comes at once), as the real master's balance cycle
            (``consumerBalancePeriodMs``: 2 s on :class:`LocalCluster`, 60 s by default) paces
            them; 0 hands one out on every heartbeat.
        max_batch: most messages one fetch returns.
        max_batch_bytes: about how many payload bytes one fetch returns.
        framing: ``"standard"``, or ``"legacy-length"`` to speak as TubeMQ servers 1.1.0 and
            1.2.0 do: a 4-byte length before every frame, answers padded to their 8 KiB
            buffer, units over 5 MiB refused. Like the real servers, a node answers nothing more
            on a connection that speaks the other framing (docs/protocol/wire.md §1.7).

    Example::

        async with FakeCluster(topics={"demo": 2}) as cluster:
            async with Producer(cluster.master_addr, topics=["demo"]) as producer:
                await producer.send("demo", b"hello")
            assert cluster.message_count("demo") == 1
            cluster.inject(Method.BROKER_PRODUCER_SEND_MESSAGE, Fault.error(503))
    """

    def __init__(
        self,
        topics: Mapping[str, int | TopicLayout] | Iterable[str] = (),
        *,
        brokers: int = 1,
        client_timeout: float = 30.0,
        registration_timeout: float = 30.0,
        event_timeout: float = 10.0,
        balance_period: float = 1.0,
        max_batch: int = 64,
        max_batch_bytes: int = 512 * 1024,
        framing: Framing = "standard",
    ) -> None:
        if type(brokers) is not int or brokers < 1:
            raise ValueError(f"brokers must be an int >= 1, got {brokers!r}")
        if framing not in FRAMINGS:
            raise ValueError(f"framing must be one of {FRAMINGS}, got {framing!r}")
        if isinstance(balance_period, bool) or balance_period != 0:  # 0: one on every heartbeat
            check_seconds("FakeCluster", "balance_period", balance_period)
        check_seconds("FakeCluster", "client_timeout", client_timeout)
        check_seconds("FakeCluster", "registration_timeout", registration_timeout)
        check_seconds("FakeCluster", "event_timeout", event_timeout)
        for name, count in (("max_batch", max_batch), ("max_batch_bytes", max_batch_bytes)):
            if type(count) is not int or count < 1:
                raise ValueError(f"{name} must be an int >= 1, got {count!r}")
        if isinstance(topics, str):  # "a,b": two topics, as the clients read it; never letters
            topics = [t.strip() for t in topics.split(",") if t.strip()]
        if not isinstance(topics, Iterable):
            raise ValueError(f"topics must be a mapping or names of topics, got {topics!r}")
        self.topics: dict[str, TopicLayout] = {}
        items = topics.items() if isinstance(topics, Mapping) else ((t, 1) for t in topics)
        for name, spec in items:
            self.add_topic(spec if isinstance(spec, TopicLayout) else TopicLayout(name, spec))
        self.plan = FaultPlan()
        ids = itertools.count(1)
        self.brokers = [
            FakeBroker(
                i,
                self.topics,
                self.plan,
                ids,
                registration_timeout=registration_timeout,
                max_batch=max_batch,
                max_batch_bytes=max_batch_bytes,
            )
            for i in range(1, brokers + 1)
        ]
        self.master = FakeMaster(
            self.topics,
            self.brokers,
            self.plan,
            client_timeout=client_timeout,
            event_timeout=event_timeout,
            balance_period=balance_period,
        )
        for node in (self.master.node, *(broker.node for broker in self.brokers)):
            node.framing = framing
        self._started = False
        #: The event loop the nodes were started on (they serve only while it runs).
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        state = f"master={self.master.node.addr}" if self._started else "stopped"
        return f"<FakeCluster {state} brokers={len(self.brokers)} topics={sorted(self.topics)}>"

    # ---- lifecycle ---------------------------------------------------------------------------

    async def start(self, master_port: int = 0) -> None:
        """Start listening (master and brokers; brokers always on free ports).

        Starts and stops run one at a time: a second ``start()`` while one runs waits for it
        and returns, a :meth:`stop` called meanwhile stops the cluster once it has started.
        A cluster whose event loop has ended (``asyncio.run`` returned) served nothing since:
        ``start()`` on another loop starts it afresh (new ports).

        Args:
            master_port: the master's port (0: a free one).

        Raises:
            ValueError: ``master_port`` is not an int in 0..65535 (``True`` or ``1.5`` bound
                port 1).
            RuntimeError: the cluster runs on another event loop that still exists (its nodes
                answer only while that loop runs): stop it there, or make one cluster per loop.
        """
        if type(master_port) is not int or not 0 <= master_port <= 65535:
            raise ValueError(f"master_port must be an int in 0..65535, got {master_port!r}")
        async with self._lifecycle_lock():
            loop = asyncio.get_running_loop()
            if self._started and loop_ended(self._loop, "FakeCluster"):
                await self._stop_nodes()
            if self._started:
                return
            try:
                for broker in self.brokers:
                    await broker.node.start()
                await self.master.node.start(master_port)
            except BaseException:
                await self._stop_nodes()
                raise
            self._started = True
            self._loop = loop

    async def stop(self) -> None:
        """Stop every node and abort every connection (after a :meth:`start` under way)."""
        async with self._lifecycle_lock():
            await self._stop_nodes()

    async def _stop_nodes(self) -> None:
        self._started = False
        self._loop = None
        await self.master.node.stop()
        for broker in self.brokers:
            await broker.node.stop()

    @property
    def master_addr(self) -> str:
        """``host:port`` of the master, for ``masters=``.

        Raises:
            RuntimeError: asked from a running event loop while the loop the cluster was
                started on does not run: nobody would answer a client there (a
                session-scoped pytest fixture's cluster used by a test on a loop of its own;
                docs/testing.md).
        """
        check_serving_loop(self._loop, "FakeCluster")
        return self.master.node.addr

    def broker_addr(self, broker_id: int) -> str:
        """``host:port`` of broker ``broker_id``.

        Raises:
            RuntimeError: as :attr:`master_addr`.
            KeyError: no broker ``broker_id``.
        """
        check_serving_loop(self._loop, "FakeCluster")
        return self._broker(broker_id).node.addr

    def advertise_broker(self, broker_id: int, addr: str | None) -> None:
        """Make the master announce broker ``broker_id`` at ``addr`` (e.g. a
        :class:`~tubemq_aio.testing.FaultProxy` in front of it); None restores its own address.

        Raises:
            ValueError: ``addr`` is not ``host:port`` (a port in 1..65535).
            KeyError: no broker ``broker_id``.
        """
        if addr is not None and split_host_port(addr) is None:
            raise ValueError(f"addr must be 'host:port' or None, got {addr!r}")
        self._broker(broker_id).advertised = addr

    async def stop_broker(self, broker_id: int) -> None:
        """Kill broker ``broker_id``: its port refuses connects and its connections are reset.
        The port stays bound (not listening) until :meth:`start_broker`, so no other socket is
        given it meanwhile."""
        broker = self._broker(broker_id)
        await broker.node.stop(hold_port=True)
        broker.stopped_at = broker.clock()

    async def start_broker(
        self, broker_id: int, *, lose_newest: int = 0, lose_offsets: float = 0.0
    ) -> list[StoredMessage]:
        """Restart a stopped broker on its old port, with its data. Like a real broker
        process started again, it has forgotten every consumer registration (they live in the
        broker's memory), so its consumers' next fetch or heartbeat gets "not registered".

        Args:
            broker_id: the broker.
            lose_newest: > 0 makes it come back as a broker killed with SIGKILL before its
                last flush: the newest ``lose_newest`` messages of each of its stores are gone
                (their offsets go to the next messages); group offsets stay as stored, so one
                can lie beyond its store's end (docs/protocol/consumer.md §3.2). 0 (default):
                every message is kept.
            lose_offsets: > 0 makes it come back as a broker killed with SIGKILL before it
                wrote its offset file: every group offset change of the last ``lose_offsets``
                seconds before :meth:`stop_broker` is undone, so those groups read again what
                they committed then (a 2.4.0 broker writes the file about 5 s + 6 s apart: up
                to about 11 s; at most 60). 0 (default): every committed offset is kept.

        Returns:
            The messages lost (empty with ``lose_newest=0``).

        Raises:
            TypeError: ``lose_newest`` is not an int, or ``lose_offsets`` not a number.
            ValueError: ``lose_newest`` is negative, or ``lose_offsets`` outside [0, 60].
            RuntimeError: the broker is running (:meth:`stop_broker` it first), or the cluster
                is stopped (a broker of it would serve on after its :meth:`stop`).
            KeyError: no broker ``broker_id``.
        """
        if isinstance(lose_newest, bool) or not isinstance(lose_newest, int):
            raise TypeError(f"lose_newest must be an int, got {lose_newest!r}")
        if lose_newest < 0:
            raise ValueError(f"lose_newest must be >= 0, got {lose_newest}")
        if isinstance(lose_offsets, bool) or not isinstance(lose_offsets, int | float):
            raise TypeError(f"lose_offsets must be a number of seconds, got {lose_offsets!r}")
        if not 0 <= lose_offsets <= OFFSET_HISTORY_SECONDS:
            raise ValueError(
                f"lose_offsets must be within [0, {OFFSET_HISTORY_SECONDS:g}] s, got {lose_offsets}"
            )
        broker = self._broker(broker_id)
        if broker.node.running:
            raise RuntimeError(f"broker {broker_id} is running: stop_broker({broker_id}) first")
        self._require_started(f"start_broker({broker_id})")
        lost = broker.crash(lose_newest, float(lose_offsets))
        await broker.node.start(broker.node.port)
        return lost

    def expire_oldest(self, broker_id: int, topic: str, count: int, *, store: int = 0) -> int:
        """Raise the minimum offset of one store of ``topic`` on ``broker_id`` past its oldest
        ``count`` messages, as the broker's retention (``deletePolicy``) deleting old segments
        does. Like a 2.4.0 broker, a group whose offset then lies below the minimum is moved
        up to it by its next fetch, which reads from there; a register asking for an offset
        below it is raised to it, one without an offset answers the stored offset as it is.

        Args:
            broker_id: the broker.
            topic: a topic of the cluster.
            count: messages to expire (>= 0; more than the store holds stops at its end).
            store: the store of ``topic`` (0 up to its layout's ``stores`` - 1).

        Returns:
            The store's new minimum offset (index bytes).

        Raises:
            TypeError: ``broker_id``, ``count`` or ``store`` is not an int (a bool is not
                one), or ``topic`` not a str.
            ValueError: ``count`` or ``store`` is negative.
            KeyError: no broker ``broker_id``, no topic ``topic``, or no such store of it.
        """
        for name, value in (("broker_id", broker_id), ("count", count), ("store", store)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, got {topic!r}")
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        if store < 0:
            raise ValueError(f"store must be >= 0, got {store}")
        broker = self._broker(broker_id)
        layout = self.topics.get(topic)
        if layout is None:
            raise KeyError(f"no topic {topic!r}")
        if store >= layout.stores:
            raise KeyError(f"topic {topic!r} has no store {store} (it has {layout.stores})")
        return broker.log(topic, store * STORE_BASE).expire_oldest(count)

    async def stop_master(self) -> None:
        """Kill the master (brokers keep serving, as in a real cluster); its port refuses
        connects, and stays bound until :meth:`start_master` (as :meth:`stop_broker`)."""
        await self.master.node.stop(hold_port=True)

    async def start_master(self) -> None:
        """Restart the master on its old port; it has forgotten every client.

        Raises:
            RuntimeError: the master is running (:meth:`stop_master` it first: a restart of a
                running master failed to bind after wiping its clients), or the cluster is
                stopped.
        """
        if self.master.node.running:
            raise RuntimeError("the master is running: stop_master() first")
        self._require_started("start_master()")
        self.master.producers.clear()
        self.master.groups.clear()
        await self.master.node.start(self.master.node.port)

    def drop_connections(self) -> None:
        """Reset every client connection of every node (the nodes keep listening)."""
        self.master.node.drop_connections()
        for broker in self.brokers:
            broker.node.drop_connections()

    # ---- topics and data ---------------------------------------------------------------------

    def add_topic(self, layout: TopicLayout | str, partitions: int = 1) -> None:
        """Deploy a topic (a name plus ``partitions``, or a full layout) on every broker.

        Raises:
            ValueError: the name is not a non-empty str, or ``partitions`` (per store) not an
                int in [1, 10000] (partition ids are ``store * 10000 + i``), or ``stores`` not
                an int >= 1 (a bool is not an int here).
        """
        if isinstance(layout, str):
            layout = TopicLayout(layout, partitions)
        if not isinstance(layout, TopicLayout):
            raise ValueError(f"a topic is a name or a TopicLayout, got {layout!r}")
        name, parts, stores = layout.name, layout.partitions, layout.stores
        if not isinstance(name, str) or not name:
            raise ValueError(f"a topic name must be a non-empty str, got {name!r}")
        if type(parts) is not int or not 1 <= parts <= STORE_BASE:
            raise ValueError(
                f"topic {name!r}: partitions must be an int in [1, {STORE_BASE}], got {parts!r}"
            )
        if type(stores) is not int or stores < 1:
            raise ValueError(f"topic {name!r}: stores must be an int >= 1, got {stores!r}")
        self.topics[name] = layout

    def set_consume_from_max(self, group: str) -> None:
        """Tell a client-balanced group's members to consume from the max offset now, as the
        master's ``admin_set_client_balance_group_consume_from_max`` web call does: the next V2
        heartbeat answers carry a new control id (docs/protocol/consumer.md §8.2)."""
        self.master.consume_from_max[group] = time.time_ns() // 1_000_000

    def messages(self, topic: str) -> list[StoredMessage]:
        """Every stored message of ``topic`` (all brokers and partitions, by message id)."""
        found = [
            m
            for b in self.brokers
            for (t, _), log in b.logs.items()
            if t == topic
            for m in log.messages
        ]
        return sorted(found, key=lambda m: m.message_id)

    def bodies(self, topic: str) -> list[bytes]:
        """The bodies (attribute block removed) of :meth:`messages`."""
        return [decode_payload(m.payload, m.flag, m.checksum).body for m in self.messages(topic)]

    def message_count(self, topic: str) -> int:
        """How many messages ``topic`` holds."""
        return len(self.messages(topic))

    def group_offset(self, group: str, broker_id: int, topic: str, partition_id: int) -> int:
        """The committed offset of ``group`` on one partition (-1: none stored)."""
        return self._broker(broker_id).offsets.get((group, topic, partition_id), -1)

    def committed_messages(self, group: str, topic: str) -> int:
        """How many messages of ``topic`` ``group`` committed, over all partitions."""
        return sum(
            b.log(t, pid).count_before(pid, offset)
            for b in self.brokers
            for (g, t, pid), offset in b.offsets.items()
            if g == group and t == topic
        )

    # ---- faults and observation --------------------------------------------------------------

    def inject(
        self, method: int, fault: Fault, *, times: int | None = 1, node: str | None = None
    ) -> Injection:
        """Make the next ``times`` requests of ``method`` (None: all) meet ``fault``.

        Args:
            method: a :class:`~tubemq_aio.protocol.rpc.Method` id.
            fault: what happens instead of the normal answer.
            times: how many requests it applies to; None for every one until :meth:`clear_faults`.
            node: only requests to this node (``"master"``, ``"broker1"``...).

        Returns:
            The rule; its ``hits`` counts the requests it applied to.

        Raises:
            ValueError: ``times`` is not an int >= 1 or None, ``node`` names no node, or
                ``method`` is no :class:`~tubemq_aio.protocol.rpc.Method` that ``node`` (or,
                without ``node``, any node) serves: the rule would never match.
            TypeError: ``fault`` is not a :class:`Fault`.
        """
        if times is not None and (type(times) is not int or times < 1):
            raise ValueError(f"times must be an int >= 1, or None; got {times!r}")
        if not isinstance(fault, Fault):
            raise TypeError(f"fault must be a Fault, got {type(fault).__name__}")
        names = [n.name for n in self._nodes()]
        if node is not None and node not in names:  # it would never match, silently
            raise ValueError(f"node must be one of {names} or None, got {node!r}")
        served = {m for n in self._nodes() if node in (None, n.name) for m in n.handlers}
        if isinstance(method, bool) or method not in served:  # it would never match either
            where = "any node" if node is None else node
            known = ", ".join(Method(m).name for m in sorted(served))
            raise ValueError(f"{where} serves no method {method!r}; it serves {known}")
        return self.plan.add(Injection(int(method), fault, node, times))

    def corrupt_next_fetches(
        self, count: int, broker_id: int | None = None, *, after: int = 0
    ) -> None:
        """Flip one payload bit in the first message of the next ``count`` successful fetch
        answers (of one broker, or of each), another bit each time: corruption on the way, the
        stored data intact. ``after``: that many successful answers with messages are left
        intact first (to damage a later batch of one gathered read).

        Raises:
            ValueError: ``count`` or ``after`` is not an int >= 0.
            KeyError: no broker ``broker_id``.
        """
        for name, value in (("count", count), ("after", after)):
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        if broker_id is not None:
            self._broker(broker_id)  # raises for an unknown broker
        for broker in self.brokers:
            if broker_id is None or broker.broker_id == broker_id:
                broker.corrupt_fetches = count
                broker.corrupt_after = after

    def clear_faults(self) -> None:
        """Remove every injected fault (requests already held by a ``late`` fault stay held)."""
        self.plan.clear()

    def held_late(self, method: int | None = None) -> int:
        """How many requests of ``method`` (None: of any) a :meth:`Fault.late` holds now, on
        every node: they arrived and have not run yet."""
        return sum(
            1
            for node in self._nodes()
            for late in node.held
            if method is None or late.request.method == method
        )

    def release_late(self, method: int | None = None) -> int:
        """Run now the requests of ``method`` (None: every one) that a :meth:`Fault.late`
        holds, in the order each node received them, whether or not their clients still wait
        (an answer goes back only on a connection still open).

        Returns:
            How many ran.
        """
        return sum(node.release_late(method) for node in self._nodes())

    def requests(self, method: int) -> int:
        """How many requests of ``method`` all nodes received (held ones included)."""
        return sum(n.requests.get(int(method), 0) for n in self._nodes())

    def assignment(self, group: str) -> dict[str, set[tuple[int, str, int]]]:
        """What the master believes each member of ``group`` holds (``(broker, topic, pid)``)."""
        return {cid: set(m.held) for cid, m in self.master.groups.get(group, {}).items()}

    def members(self, group: str) -> list[str]:
        """Client ids of the registered members of ``group``."""
        return sorted(self.master.groups.get(group, {}))

    def _require_started(self, call: str) -> None:
        if not self._started:
            raise RuntimeError(f"{call}: the cluster is stopped; start() it first")

    def _nodes(self) -> list[RpcNode]:
        return [self.master.node, *(b.node for b in self.brokers)]

    def _broker(self, broker_id: int) -> FakeBroker:
        for broker in self.brokers:
            if broker.broker_id == broker_id:
                return broker
        raise KeyError(f"no broker {broker_id}")
