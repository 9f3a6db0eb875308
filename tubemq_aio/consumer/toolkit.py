"""What our own packages build on below the consumers' public API (the gateway, the Spark source).

A documented internal surface: these names are stable for ``tubemq_aio.gateway`` and
``tubemq_aio.spark``, which import nothing private of the SDK (``tests/unit/test_layering.py``
fails when they do); applications use :mod:`tubemq_aio.consumer` instead. See "The SDK surface of
the gateway and the Spark source" in ``docs/architecture.md``.

* :class:`SharedIdConsumer`: a :class:`ClientBalancedConsumer` that registers under a client id
  several processes share, and hands out its running :class:`ClientBalanceSession`.
* :func:`resolve_partition`: a partition key's :class:`Partition` (broker, topic, id).
* :func:`decode_raw_messages`, :data:`attribute_cache`, :func:`attribute_info`,
  :data:`NO_ATTRIBUTES`: the consume decode and the attribute-block cache it shares;
  :func:`crc_address`: the C function behind its CRC-32, for compiled loops to call directly.
* :class:`BatchCodec`, :class:`BatchRead`, :class:`DecodeContext`: a codec of its own for
  :meth:`ClientBalancedConsumer.read_with` and what such a read returns.
"""

from __future__ import annotations

from typing import Any

from tubemq_aio.consumer._cb_models import BatchCodec, BatchRead, DecodeContext, PartitionMeta
from tubemq_aio.consumer._cb_ops import resolve_partition
from tubemq_aio.consumer._cb_session import ClientBalanceSession
from tubemq_aio.consumer._decode import (
    NO_ATTRIBUTES,
    attribute_cache,
    attribute_info,
    crc_address,
    decode_raw_messages,
)
from tubemq_aio.consumer._session_base import ConsumerWiring
from tubemq_aio.consumer.client_balanced import ClientBalancedConsumer

__all__ = [
    "NO_ATTRIBUTES",
    "BatchCodec",
    "BatchRead",
    "ClientBalanceSession",
    "DecodeContext",
    "PartitionMeta",
    "SharedIdConsumer",
    "attribute_cache",
    "attribute_info",
    "crc_address",
    "decode_raw_messages",
    "resolve_partition",
]


class _SharedSession(ClientBalanceSession):
    async def close_at_master(self, timeout: float) -> None:
        """Never close the shared id: other processes still use it (the master times it out)."""


class SharedIdConsumer(ClientBalancedConsumer):
    """A client-balanced consumer registered under ``client_id``, which other processes share.

    Closing it neither closes the id at the master nor unregisters its partitions at their
    brokers: both belong to every process of the id and lapse on their own.

    Args:
        client_id: the consumer id every process of the group uses (Java shape).
        **kwargs: :class:`ClientBalancedConsumer` arguments.
    """

    def __init__(self, client_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._shared_id = client_id

    def _open(self) -> tuple[ConsumerWiring, ClientBalanceSession]:
        parts = self._wire("Balance")
        parts.broker.client_id = self._shared_id  # read by the session and every broker call
        session = _SharedSession(self.config, *self._wire_node, parts)
        return parts, session

    async def _release_all(self, session: ClientBalanceSession) -> None:
        # No unregister: the registration belongs to every process; it lapses on its own.
        session.readers.clear()
        session.unsure.clear()

    def session(self) -> ClientBalanceSession:
        """The running session (master registration and broker calls).

        Raises:
            ClientClosedError: the consumer is not started, or closed.
        """
        session, _ = self._running()
        return session
