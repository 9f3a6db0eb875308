"""Whether a GetMessage right after a broker batch would find more, judged from that batch alone.

With ``kept_batch_bytes`` > 0 the gateway reads a partition's next batch after a fetch's answer
(``docs/gateway.md``, "Read-ahead off the critical path"). When the partition has nothing after
the batch just answered, that read is answered 404: two broker calls for nothing, and the
partition held by the read's mark in Redis meanwhile. :func:`may_continue` tells the two apart
before the call.

What the broker does (2.4.0 ``MessageStore.getMessages``, ``MsgMemStore.getMessages``,
``MsgFileStore.getMessages``; ``docs/protocol/consumer.md`` §4.2): one read scans the index of the
partition's *store* from the cursor, and a store usually holds several partitions, so their records
interleave; it skips the other partitions' records and stops at the first of

* the end of the index (then the batch reached the end, and the next GetMessage is answered 404
  unless something was written meanwhile);
* a count of index records scanned, never fewer than :data:`MIN_SCAN_RECORDS` (memory 6000–10000,
  file 8000–13500: ``indexTransCount`` × partitions in the store, clamped);
* the stored bytes of the messages kept reaching the transfer size, checked after each message
  (512 KiB by default, 327 680 for the first file read after a register; a message is stored as
  :data:`STORED_HEADER_BYTES` plus its data).

The answer's ``maxOffset`` is the store's, not the partition's, and the batch's own end is not in
it. So a batch whose stored bytes stayed below :data:`MIN_TRANSFER_BYTES` and whose store had at
most :data:`MIN_SCAN_RECORDS` records between its start and ``maxOffset`` cannot have been cut
short by a limit: its scan went to the end of the index, and nothing follows it. Anything else
may continue. A wrong "may continue" costs the 404 and the CommitOffset; a wrong "ends" (a
broker configured below these floors, a data-limit rule, a write right after) only costs what a
read without read-ahead costs: a CommitOffset now and a GetMessage of its own next time.
"""

from __future__ import annotations

from collections.abc import Sequence

from tubemq_aio.protocol.consumer_meta import INDEX_MSG_UNIT_SIZE
from tubemq_aio.protocol.consumer_replies import RawMessage, payload_bytes

__all__ = ["MIN_SCAN_RECORDS", "MIN_TRANSFER_BYTES", "STORED_HEADER_BYTES", "may_continue"]

#: Index records a broker read scans at least before its count limit can stop it (2.4.0
#: ``MessageStore``: ``memMaxIndexReadCnt`` is at least 6000, ``fileMaxIndexReadCnt`` 8000).
MIN_SCAN_RECORDS = 6000
#: Stored bytes below which no default transfer size stops a read (2.4.0: 512 KiB
#: ``transferSize``; 327 680, ``CFG_STORE_DEFAULT_MSG_READ_UNIT``, for a first file read).
MIN_TRANSFER_BYTES = 327_680
#: Bytes the broker stores before each message's data (2.4.0 ``STORE_DATA_HEADER_LEN``).
STORED_HEADER_BYTES = 52


def may_continue(start: int, batch: Sequence[RawMessage], max_offset: int) -> bool:
    """Whether the partition may hold messages right after ``batch``.

    Args:
        start: the index offset ``batch`` was read at (its answer's ``currOffset``).
        batch: the batch's messages as the broker sent them.
        max_offset: the ``maxOffset`` its answer reported (-1 or less: not said).

    Returns:
        False when the batch's scan must have reached the end of the store's index (see the
        module docstring); True otherwise, and whenever ``max_offset`` is unknown.
    """
    if max_offset < 0:
        return True
    if max_offset <= start + INDEX_MSG_UNIT_SIZE * len(batch):
        return False  # the batch's own records reach the max: nothing beyond it
    if max_offset - start > INDEX_MSG_UNIT_SIZE * MIN_SCAN_RECORDS:
        return True  # a count limit may have stopped the scan before the max
    stored = payload_bytes(batch) + STORED_HEADER_BYTES * len(batch)
    return stored >= MIN_TRANSFER_BYTES  # the transfer size may have stopped it
