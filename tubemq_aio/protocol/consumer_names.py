"""Checks of the names a consumer is configured with: group, topics, filter items, the
subscription map (docs/protocol/consumer.md §1.2); the topic check is also every producer's,
Spark option's and gateway setting's.

Each ``validate_*`` raises :class:`~tubemq_aio.errors.ConsumerConfigError` (a ``ConfigError``)
naming every problem at once; :func:`check_topic_name` records its problems on a caller's
:class:`~tubemq_aio.checks.Checks` instead, in the caller's error class. The limits are the
Java client's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from tubemq_aio.checks import Checks, is_utf8
from tubemq_aio.errors import (
    ConsumerConfigError,
)
from tubemq_aio.protocol.client_id import MAX_CLIENT_ID_LENGTH, MAX_CONSUMER_GROUP_LENGTH

__all__ = [
    "MAX_FILTER_ITEM_COUNT",
    "MAX_FILTER_ITEM_LENGTH",
    "MAX_GROUP_NAME_LENGTH",
    "MAX_TOPIC_COUNT",
    "MAX_TOPIC_NAME_LENGTH",
    "PLANNER_SUFFIX",
    "check_topic_name",
    "planner_group",
    "validate_filters",
    "validate_group_name",
    "validate_subscriptions",
    "validate_topic_name",
]


#: Filter limits of the Java client (``CFG_FLT_MAX_FILTER_ITEM_*``, §1.2).
MAX_FILTER_ITEM_COUNT = 500
MAX_FILTER_ITEM_LENGTH = 256
#: Name limits (``META_MAX_*``, §1.2).
MAX_GROUP_NAME_LENGTH = 1024
MAX_TOPIC_NAME_LENGTH = 64
MAX_TOPIC_COUNT = 1024

_GROUP_RE = re.compile(r"[a-zA-Z][\w-]+", re.ASCII)
# Characters that would corrupt the wire strings if they appeared inside a name or filter.
_SEPARATORS = frozenset("#:@,=")


def validate_group_name(group: str) -> str:
    """Return ``group`` if it matches ``^[a-zA-Z][\\w-]+$`` within 927 characters.

    The master's rule is 1024 (§1.2 field 2), but a consumer's id is ``<group>_`` and up to
    96 characters more, within 1024 too
    (:data:`~tubemq_aio.protocol.client_id.MAX_CONSUMER_GROUP_LENGTH`).

    Raises:
        ConsumerConfigError: the name breaks the rule.
    """
    checks = Checks("group name", error=ConsumerConfigError)
    if not isinstance(group, str):
        checks.fail(f"group name must be a string, got {type(group).__name__}")
    if len(group) > MAX_CONSUMER_GROUP_LENGTH:
        checks.fail(
            f"group name of {len(group)} characters is too long: a consumer's id is the "
            f"group, '_' and up to {MAX_CLIENT_ID_LENGTH - 1 - MAX_CONSUMER_GROUP_LENGTH} "
            "characters of host, process, clock, kind and version, and the master takes ids "
            f"of at most {MAX_CLIENT_ID_LENGTH} characters, so a group may have at most "
            f"{MAX_CONSUMER_GROUP_LENGTH}"
        )
    if not _GROUP_RE.fullmatch(group):
        checks.fail(
            f"group name {group!r} must be at least 2 characters, start with a letter and "
            "hold only letters, digits, '_' and '-' (^[a-zA-Z][\\w-]+$)"
        )
    return group


#: What :func:`planner_group` appends to a group's name.
PLANNER_SUFFIX = "_planner"


def planner_group(group: str) -> str:
    """The group a client uses beside ``group`` to look at partitions without touching
    ``group``'s stored offsets: store bounds (the Spark source), time searches (a
    server-balanced ``Consumer``, ``tubemq-aio reset``, the gateway), ``{group}_planner``.

    Raises:
        ConsumerConfigError: ``group`` is longer than 919 characters, so that its planner
            group would pass the 927 of a consumer's group (:func:`validate_group_name`); the
            message names ``group``'s length and the limit, not the derived name.
    """
    name = f"{group}{PLANNER_SUFFIX}"
    if len(name) > MAX_CONSUMER_GROUP_LENGTH:
        most = MAX_CONSUMER_GROUP_LENGTH - len(PLANNER_SUFFIX)
        raise ConsumerConfigError(
            f"group name of {len(group)} characters is too long to look at its partitions "
            f"beside it (a time search, offsets_for_times, store bounds): that reads with the "
            f"group '<group>{PLANNER_SUFFIX}', and a consumer's group has at most "
            f"{MAX_CONSUMER_GROUP_LENGTH} characters, so such a group may have at most {most}"
        )
    return name


def validate_topic_name(topic: str) -> str:
    """Return the trimmed topic name if :func:`check_topic_name` finds nothing wrong with it.

    Raises:
        ConsumerConfigError: the name is invalid.
    """
    checks = Checks("topic name", error=ConsumerConfigError)
    name = check_topic_name(checks, topic)
    checks.done()
    return name or ""  # never "": done() raised then


def check_topic_name(checks: Checks, topic: object, *, name: str = "topic name") -> str | None:
    """Record on ``checks`` what is wrong with one topic name; return it trimmed (``None`` when
    it is not a ``str``).

    A topic name is non-blank once trimmed, at most 64 characters, holds no separator
    (``#:@,=``), whitespace or control character, and is encodable as UTF-8. Java only trims
    and checks the length; the separators would corrupt every metadata string the topic appears
    in, and the master creates no topic with a control character (``^[a-zA-Z]\\w+$``,
    docs/protocol/consumer.md §1.2).

    Args:
        checks: where the problems go; they are raised in its error class by its ``done()``.
        topic: the value to check.
        name: what the problems call the value (``"option 'topic'"``, a settings key).
    """
    text = checks.text(name, topic, max_length=MAX_TOPIC_NAME_LENGTH)
    if text and (_SEPARATORS.intersection(text) or any(c.isspace() for c in text)):
        checks.problem(f"{name}: {text!r} contains a separator or blank character")
    elif text and not text.isprintable():
        checks.problem(f"{name}: {text!r} contains a control character")
    if text and not is_utf8(text):
        checks.problem(f"{name}: {text!r} is not encodable as UTF-8 (a lone surrogate?)")
    return text


def validate_filters(filters: Iterable[str] | None) -> frozenset[str]:
    """Return the trimmed set of a topic's filter items (``$msgType$`` values), §1.2 field 6.

    At most 500 items of at most 256 characters (Java limits), none blank, none with a wire
    separator. ``None`` gives the empty set; one string is one item (never its characters).

    Raises:
        ConsumerConfigError: a limit is exceeded or an item is invalid.
    """
    checks = Checks("filter items", error=ConsumerConfigError)
    result = _checked_filters(checks, filters)
    checks.done()
    return result


def _checked_filters(checks: Checks, filters: object) -> frozenset[str]:
    items = checks.names("filter items", () if filters is None else filters)
    if len(items) > MAX_FILTER_ITEM_COUNT:
        checks.problem(f"filter items: over {MAX_FILTER_ITEM_COUNT} of them")
    for item in items:
        if len(item) > MAX_FILTER_ITEM_LENGTH:
            checks.problem(f"filter item over {MAX_FILTER_ITEM_LENGTH} characters: {item[:40]!r}")
        elif _SEPARATORS.intersection(item):
            checks.problem(f"filter item {item!r} contains a separator character")
    return frozenset(items)


def validate_subscriptions(
    subscriptions: Mapping[str, Iterable[str] | None],
) -> dict[str, frozenset[str]]:
    """Validate a topic → filters mapping (§1.2 fields 4 and 6); returns trimmed names and sets.

    Raises:
        ConsumerConfigError: empty, too many topics, duplicate after trimming, or bad names.
    """
    checks = Checks("subscriptions", error=ConsumerConfigError)
    if not subscriptions:
        checks.problem("no topic subscribed")
    elif len(subscriptions) > MAX_TOPIC_COUNT:
        checks.problem(f"over {MAX_TOPIC_COUNT} topics")
    result: dict[str, frozenset[str]] = {}
    for topic, filters in subscriptions.items():
        name = check_topic_name(checks, topic)
        if name is not None and name in result:
            checks.problem(f"topic {name!r} subscribed twice")
        filter_set = _checked_filters(checks, filters)
        if name is not None:
            result[name] = filter_set
    checks.done()
    return result
