"""Argument checks shared by every config dataclass and public call, in every layer.

The one dialect of checking user input: the pure protocol code (which only imports the ground
layer this module belongs to), the clients, and the applications on top of the SDK (Spark
options, CLI input) all check with :class:`Checks`.

A :class:`Checks` collects every problem of one constructor or call and raises them together as
one :class:`~tubemq_aio.errors.ConfigError` (a ``ValueError``), so a user fixes all of them in
one go and nothing is half-configured. Each check also rejects the values Python lets slip
through a bare comparison: ``bool`` where a number is wanted (``True`` is an ``int``), NaN
(every comparison with it is false), infinities, and a ``str`` where a collection is wanted
(iterating ``"demo"`` gives ``"d"``, ``"e"``, ...).

No secret is ever echoed: a check reports a value with ``repr`` only when it is not text
marked ``secret``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from typing import NoReturn
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tubemq_aio.errors import ConfigError

__all__ = [
    "MAX_SECONDS",
    "Checks",
    "check_options",
    "iana_zone",
    "integer_of_text",
    "is_seconds",
    "is_utf8",
    "kinds",
    "number_of_text",
    "shown",
]

#: The longest duration any option or call accepts, in seconds (one day). Larger values are
#: rejected: they overflow deadline arithmetic (``1e300 * 1000``) and mean "never" in practice.
MAX_SECONDS = 86_400.0

_MAX_SHOWN = 60
_MAX_SHOWN_BITS = 128
#: A number written as text: ASCII digits only (``int()`` and ``float()`` also take ``1_000``
#: and other scripts' digits, which no option file or URL means), optional sign, fraction and
#: exponent, or ``nan``/``inf`` (refused by the range check, which names them).
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_NUMBER_TEXT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
    re.ASCII | re.IGNORECASE,
)
#: The most digits an integer written as text may have (Python refuses over 4300).
_MAX_INTEGER_DIGITS = 100
_MAX_PROBLEM = 300


def shown(value: object) -> str:
    """``repr(value)`` for an error text, cut to 60 characters (an int too long to print, over
    128 bits, is shown by its size)."""
    if isinstance(value, int) and value.bit_length() > _MAX_SHOWN_BITS:
        # repr of an int over 4300 digits raises ValueError; a long one says nothing more
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _type_name(value: object) -> str:
    return type(value).__name__


def iana_zone(value: object) -> ZoneInfo | None:
    """The IANA time zone ``value`` names (``"UTC"``, ``"Asia/Shanghai"``), or None when it
    names none this Python knows (a non-string, an empty or malformed name included)."""
    if not isinstance(value, str):
        return None
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: "America" is a directory
        return None


def integer_of_text(text: object) -> int | None:
    """The integer ``text`` writes (``" 12 "``, ``"-3"``), or None when it writes none: ASCII
    digits with an optional sign, at most 100 of them (``int()`` also takes ``"1_000"``,
    other scripts' digits such as ``"٣"``, and fails past 4300 digits)."""
    digits = text.strip() if isinstance(text, str) else ""
    if not _INTEGER_TEXT.fullmatch(digits) or len(digits) > _MAX_INTEGER_DIGITS:
        return None
    return int(digits)


def number_of_text(text: object) -> float | None:
    """The number ``text`` writes (``"2.5"``, ``" 1e3 "``, ``"-.5"``, ``"nan"``, ``"inf"``), or
    None when it writes none: ASCII digits only, no ``_`` (which ``float()`` takes). NaN and
    infinities are returned, for the range check that names them."""
    if not isinstance(text, str) or not _NUMBER_TEXT.fullmatch(text.strip()):
        return None
    return float(text)


def kinds(classes: type | tuple[type, ...]) -> str:
    """``"bytes, bytearray or memoryview"``: the names of ``classes`` for an error text."""
    if isinstance(classes, type):
        return classes.__name__
    names = [c.__name__ for c in classes]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


class Checks:
    """Collects the problems of one constructor or call; :meth:`done` raises them together.

    Every ``check`` method returns the value to keep (normalised where that is documented) or,
    when the value is invalid, records why and returns the value unchanged.

    Args:
        what: names the constructor or call in the error text (e.g. ``"ProducerConfig"``).
        error: the class raised for several problems, or for one recorded by :meth:`problem`.
    """

    __slots__ = ("_error", "_problems", "_what")

    def __init__(self, what: str, *, error: type[ConfigError] = ConfigError) -> None:
        self._what = what
        self._error = error
        self._problems: list[tuple[str, type[ConfigError]]] = []

    def problem(self, text: str) -> None:
        """Record one problem in words (``"<name> must be ..."``)."""
        self._problems.append((text, self._error))

    def adopt(self, exc: ConfigError) -> None:
        """Record a problem raised by another check; raised alone, it keeps its class."""
        text = str(exc)
        if len(text) > _MAX_PROBLEM:  # e.g. a 10 000-character topic name quoted back
            text = text[: _MAX_PROBLEM - 3] + "..."
        self._problems.append((text, type(exc)))

    def fail(self, text: str) -> NoReturn:
        """Record one problem and raise at once with everything recorded so far: for a check
        that cannot go on (a parser stopped by what it cannot read).

        Raises:
            ConfigError: always (the class this :class:`Checks` raises).
        """
        self.problem(text)
        self._raise()

    @property
    def ok(self) -> bool:
        """Whether no problem was recorded so far."""
        return not self._problems

    def done(self) -> None:
        """Raise the recorded problems as one :class:`ConfigError`; return when there are none.

        Raises:
            ConfigError: at least one problem was recorded.
        """
        if self._problems:
            self._raise()

    def _raise(self) -> NoReturn:
        problems = self._problems
        if len(problems) == 1:
            text, error = problems[0]
            raise error(text if text.startswith(self._what) else f"{self._what}: {text}")
        raise self._error(f"{self._what}: " + "; ".join(text for text, _ in problems))

    # ---- scalars -----------------------------------------------------------------------------

    def number(
        self,
        name: str,
        value: object,
        *,
        low: float,
        high: float,
        low_open: bool = False,
        unit: str = "",
    ) -> float:
        """A finite real number (not a ``bool``) in ``[low, high]`` (``(low, high]`` if
        ``low_open``)."""
        suffix = f" {unit}" if unit else ""
        rule = f"{'(' if low_open else '['}{low:g}, {high:g}]{suffix}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.problem(f"{name} must be a number in {rule}, got {_type_name(value)}")
            return 0.0
        try:
            number = float(value)
        except OverflowError:  # an int past 1.8e308
            number = math.inf
        if (
            not math.isfinite(number)
            or number > high
            or number < low
            or (low_open and number == low)
        ):
            self.problem(f"{name} must be in {rule}, got {shown(value)}")
        return number

    def seconds(
        self,
        name: str,
        value: object,
        *,
        low: float = 0.0,
        high: float = MAX_SECONDS,
        low_open: bool = True,
    ) -> float:
        """A duration in seconds: finite, in ``(low, high]`` (``[low, high]`` unless
        ``low_open``); ``high`` is at most :data:`MAX_SECONDS`."""
        return self.number(
            name, value, low=low, high=min(high, MAX_SECONDS), low_open=low_open, unit="seconds"
        )

    def optional_seconds(
        self, name: str, value: object, *, low: float = 0.0, high: float = MAX_SECONDS
    ) -> float | None:
        """``None`` or a duration as :meth:`seconds` checks it (low bound excluded)."""
        return None if value is None else self.seconds(name, value, low=low, high=high)

    def integer(self, name: str, value: object, *, low: int, high: int | None = None) -> int:
        """An ``int`` (not a ``bool``, not a float such as ``1.5`` or ``2.0``) in
        ``[low, high]``."""
        rule = f">= {low}" if high is None else f"in [{low}, {high}]"
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(f"{name} must be an integer {rule}, got {_type_name(value)}")
            return 0
        if value < low or (high is not None and value > high):
            self.problem(f"{name} must be an integer {rule}, got {shown(value)}")
        return value

    def flag(self, name: str, value: object) -> bool:
        """A ``bool`` (``"no"`` or ``0`` are not booleans)."""
        if not isinstance(value, bool):
            self.problem(f"{name} must be True or False, got {_type_name(value)}")
            return False
        return value

    def text(
        self,
        name: str,
        value: object,
        *,
        optional: bool = False,
        secret: bool = False,
        max_length: int | None = None,
    ) -> str | None:
        """A non-blank ``str`` (or ``None`` when ``optional``) of at most ``max_length``
        characters once stripped; returned stripped unless ``secret`` (a password is kept
        byte for byte and never shown)."""
        if value is None and optional:
            return None
        if not isinstance(value, str):
            self.problem(f"{name} must be a string, got {_type_name(value)}")
            return None
        stripped = value.strip()
        if not stripped:
            self.problem(f"{name} must not be blank")
        elif max_length is not None and len(stripped) > max_length:
            detail = "" if secret else f": {shown(stripped)}"
            self.problem(f"{name} must be at most {max_length} characters{detail}")
        return value if secret else stripped

    def choice(self, name: str, value: object, options: Iterable[object]) -> None:
        """``value`` is one of ``options`` (compared with ``==``; ``True`` is not ``1``)."""
        allowed = tuple(options)
        if isinstance(value, bool) != any(isinstance(o, bool) for o in allowed) or not any(
            value == o for o in allowed
        ):
            listed = ", ".join(map(repr, allowed))
            self.problem(f"{name} must be one of {listed}, got {shown(value)}")

    def time_zone(self, name: str, value: object) -> ZoneInfo | None:
        """``value`` names an IANA time zone (see :func:`iana_zone`); returns it, or None."""
        zone = iana_zone(value)
        if zone is None:
            self.problem(
                f"{name} must be an IANA time zone such as 'UTC' or 'Asia/Shanghai', "
                f"got {shown(value)}"
            )
        return zone

    def instance(
        self,
        name: str,
        value: object,
        cls: type | tuple[type, ...],
        *,
        optional: bool = False,
    ) -> bool:
        """``value`` is an instance of ``cls`` (one class or a tuple of them), or ``None`` when
        ``optional``; returns whether it is."""
        if value is None and optional:
            return True
        if not isinstance(value, cls):
            self.problem(f"{name} must be a {kinds(cls)}, got {_type_name(value)}")
            return False
        return True

    # ---- values written as text (CLI arguments, Spark options, JSON fields) ------------------

    def number_text(
        self,
        name: str,
        text: str,
        *,
        low: float,
        high: float,
        low_open: bool = False,
        unit: str = "",
    ) -> float:
        """A number written as text (``"2.5"``, ``" 1e3 "``; ASCII digits, no ``_``), then
        checked as :meth:`number` checks it."""
        value = number_of_text(text)
        if value is None:
            self.problem(f"{name} must be a number, got {shown(text)}")
            return 0.0
        return self.number(name, value, low=low, high=high, low_open=low_open, unit=unit)

    def integer_text(self, name: str, text: str, *, low: int, high: int | None = None) -> int:
        """An integer written as text (``"12"``: ASCII digits, no ``_``, at most 100 of them),
        then checked as :meth:`integer` checks it."""
        value = integer_of_text(text)
        if value is None:
            self.problem(f"{name} must be an integer, got {shown(text)}")
            return 0
        return self.integer(name, value, low=low, high=high)

    def flag_text(self, name: str, text: str) -> bool:
        """A yes/no written as text: ``true``/``1``/``yes`` or ``false``/``0``/``no`` in any
        case."""
        lowered = text.strip().lower() if isinstance(text, str) else ""
        if lowered in ("true", "1", "yes"):
            return True
        if lowered not in ("false", "0", "no"):
            self.problem(f"{name} must be true or false, got {shown(text)}")
        return False

    # ---- collections -------------------------------------------------------------------------

    def names(
        self,
        name: str,
        value: object,
        *,
        split: bool = False,
        empty: bool = True,
        unique: bool = True,
    ) -> tuple[str, ...]:
        """A collection of non-blank names, stripped, order kept (duplicates dropped when
        ``unique``).

        A single ``str`` is one name, or with ``split`` a comma-separated list (``"t1,t2"``;
        a blank entry, as in ``"t1,,t2"`` or ``"t1,"``, is refused like a blank name in a
        list, and an empty or blank string is no name); it is never iterated character by
        character. ``bytes`` and mappings are rejected.

        Args:
            name: the argument's name, for the error text.
            value: a ``str`` or an iterable of ``str``.
            split: whether a single string is a comma-separated list.
            empty: whether an empty collection is allowed.
            unique: whether to drop repeated names.
        """
        items: list[object]
        if isinstance(value, str):
            # "t1,,t2" and "t1," hold a blank name (refused below, as in a list); "" none
            parts: list[str] = value.split(",") if value.strip() else []
            items = list(parts) if split else [value]
        elif isinstance(value, bytes | bytearray | memoryview | Mapping) or not isinstance(
            value, Iterable
        ):
            self.problem(
                f"{name} must be a string or a collection of strings, got {_type_name(value)}"
            )
            return ()
        else:
            items = list(value)
        result: list[str] = []
        for item in items:
            if not isinstance(item, str):
                self.problem(f"{name} must contain only strings, got {_type_name(item)}")
                return ()
            stripped = item.strip()
            if not stripped:
                self.problem(f"{name} must not contain a blank name")
                return ()
            if not unique or stripped not in result:
                result.append(stripped)
        if not result and not empty:
            self.problem(f"{name} must name at least one item")
        return tuple(result)


def check_options(cls: type, options: Mapping[str, object], *, what: str) -> None:
    """Refuse keyword options that are not fields of the config dataclass ``cls``.

    Raises:
        ConfigError: an option name is unknown (values are not shown: one may be a secret).
    """
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"{what}: unknown option(s) {', '.join(map(repr, unknown))}")


def is_seconds(value: object, high: float) -> bool:
    """Fast check of a duration argument on a hot path: an ``int``/``float`` (not ``bool``)
    in ``(0, high]`` (false for NaN)."""
    return (type(value) is float or type(value) is int) and 0 < value <= high


def is_utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8, as every text sent on the wire must (a lone
    surrogate, from a JSON escape or an argument decoded with ``surrogateescape``, does not)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
