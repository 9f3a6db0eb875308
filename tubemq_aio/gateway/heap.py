"""The replica's heap and Python's cyclic garbage collector.

A fetch answer allocates thousands of short-lived container objects (a message object and a
JSON mapping per message), so the collector runs several young collections per fetch and,
every few dozen fetches, a full one. A full collection walks every object the process holds:
the modules, the app's routes and schemas, the clients, most of which were allocated at start
and live as long as the process. :func:`freeze_startup_heap` collects once after start and
moves what survives into the collector's permanent generation, so later full collections walk
only what was allocated since (a full collection of a replica took tens of milliseconds, with
the event loop stopped for all of them).
"""

from __future__ import annotations

import gc

from tubemq_aio.checks import Checks

__all__ = ["YOUNG_THRESHOLD", "freeze_startup_heap"]

#: Container allocations (net of frees) between two young collections (CPython's default is
#: 700, fewer than one fetch answer makes: its objects, all alive until the answer is sent,
#: were walked and promoted to an older generation several times per fetch).
YOUNG_THRESHOLD = 20_000


def freeze_startup_heap(young_threshold: int = YOUNG_THRESHOLD) -> int:
    """Collect once, exempt every object alive now from later collections, and make the young
    generation hold ``young_threshold`` allocations (the older ones keep their thresholds).

    Objects frozen here are never freed, even when they become garbage later: call it once
    the process holds what it keeps for its life (the app built), not in a loop.

    Returns:
        How many objects were frozen.

    Raises:
        ConfigError: ``young_threshold`` is not an integer of at least 1 (nothing changed).
    """
    checks = Checks("freeze_startup_heap")
    young = checks.integer("young_threshold", young_threshold, low=1)
    checks.done()
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, old)
    return gc.get_freeze_count()
