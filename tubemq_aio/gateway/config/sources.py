"""Where the gateway's settings come from: the TOML file, the environment, and files they name.

Precedence, highest first: command-line flags (``--host``/``--port``/``--workers`` only),
environment variables, the TOML file, the defaults. Every top-level setting of a plain value
(a string, number, boolean or list of strings) may be given as ``TUBEMQ_GATEWAY_<KEY>`` (the
TOML key in upper case: ``TUBEMQ_GATEWAY_REDIS``, ``TUBEMQ_GATEWAY_SECRET``,
``TUBEMQ_GATEWAY_MASTERS``, ``TUBEMQ_GATEWAY_PRODUCE_TIMEOUT``, …); a list is comma-separated,
a boolean ``true``/``false`` (also ``1``/``0``, ``yes``/``no``). Any of them may instead be
``TUBEMQ_GATEWAY_<KEY>_FILE``, the path of a file holding the value (secrets mounted by an
orchestrator), its surrounding whitespace stripped. ``[[keys]]`` may also come from a separate
TOML file of ``[[keys]]`` tables: ``keys_file = "…"`` in the file or
``TUBEMQ_GATEWAY_KEYS_FILE``; they are added to the file's own ``[[keys]]``. The tables
(``[[groups]]``, ``[tubemq]``, ``[cors]``, ``[housekeeper]``) come from the file only; with a
``[redis]`` table, ``TUBEMQ_GATEWAY_REDIS`` replaces its ``url`` (and the ``redis_*`` settings
its other keys).
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tubemq_aio.checks import Checks
from tubemq_aio.errors import ConfigError

__all__ = [
    "CONFIG_ENV",
    "ENV_PREFIX",
    "KEYS_FILE_KEY",
    "SERVER_VARIABLES",
    "Sources",
    "env_settable",
    "gather_sources",
]

ENV_PREFIX = "TUBEMQ_GATEWAY_"
#: The gateway TOML file's path when ``--config`` is not given.
CONFIG_ENV = "TUBEMQ_GATEWAY_CONFIG"
#: The top-level key (and, upper-cased, the variable) naming a TOML file of ``[[keys]]``.
KEYS_FILE_KEY = "keys_file"
#: Variables of the server process, not of the configuration (read by ``__main__``).
SERVER_VARIABLES = frozenset(
    {CONFIG_ENV, *(ENV_PREFIX + name for name in ("HOST", "PORT", "WORKERS", "LOG_LEVEL"))}
)
_KINDS = {
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "tuple[str, ...]": "list",
    "tuple[str, ...] | None": "list",
}
#: ``[redis]`` table keys standing for top-level settings (the table's own names).
_REDIS_TABLE = {
    "redis": "url",
    "redis_max_connections": "max_connections",
    "redis_ack_replicas": "ack_replicas",
    "redis_ack_wait_ms": "ack_wait_ms",
}
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def env_settable(config_type: type) -> dict[str, str]:
    """``{top-level key: kind}`` of ``config_type``'s settings the environment may give
    (kind: ``str``, ``int``, ``float``, ``bool`` or ``list``), derived from its fields."""
    return {
        f.name: _KINDS[str(f.type)]
        for f in dataclasses.fields(config_type)
        if str(f.type) in _KINDS
    }


@dataclasses.dataclass(frozen=True, slots=True)
class Sources:
    """The merged settings and where each top-level one came from.

    Attributes:
        data: the parsed TOML document with the environment's values laid over it (the input
            of ``GatewayConfig.from_mapping``).
        origins: top-level key -> ``"file"``, ``"env $NAME"`` or ``"file $NAME"`` (a ``_FILE``
            variable); a key absent here has its default.
    """

    data: dict[str, Any]
    origins: dict[str, str]


def _read_toml(path: str | Path, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"cannot read {what} {str(path)!r}: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{what} {str(path)!r} is not valid TOML: {err}") from None


def _typed(checks: Checks, name: str, text: str, kind: str) -> object:
    """``text`` of the variable ``name`` as a ``kind`` value (a problem recorded if it is not)."""
    if kind == "int":
        try:
            return int(text.strip())
        except ValueError:
            checks.problem(f"{name}: {text!r} is not an integer")
    elif kind == "float":
        try:
            return float(text.strip())
        except ValueError:
            checks.problem(f"{name}: {text!r} is not a number")
    elif kind == "bool":
        word = text.strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        checks.problem(f"{name}: {text!r} is not true or false")
    elif kind == "list":
        return [item.strip() for item in text.split(",") if item.strip()]
    else:
        return text
    return None


def _env_values(
    checks: Checks, env: Mapping[str, str], settable: Mapping[str, str]
) -> dict[str, tuple[object, str]]:
    """``key -> (value, origin)`` of every setting the environment gives."""
    out: dict[str, tuple[object, str]] = {}
    variables = {ENV_PREFIX + k.upper() for k in [*settable, KEYS_FILE_KEY]}
    known = SERVER_VARIABLES | variables | {v + "_FILE" for v in variables}
    for name in sorted(env):
        if name.startswith(ENV_PREFIX) and name not in known:
            checks.problem(f"unknown variable {name} (a typo? see the gateway docs)")
    for key, kind in [*settable.items(), (KEYS_FILE_KEY, "str")]:
        name = ENV_PREFIX + key.upper()
        plain, path = env.get(name), env.get(name + "_FILE")
        if plain is not None and path is not None:
            checks.problem(f"give {name} or {name}_FILE, not both")
            continue
        if path is not None:
            try:
                text = Path(path).read_text(encoding="utf-8").strip()
            except OSError as err:
                checks.problem(f"{name}_FILE: cannot read {path!r}: {err.strerror}")
                continue
            origin = f"file ${name}_FILE"
        elif plain is not None:
            text, origin = plain, f"env ${name}"
        else:
            continue
        value = _typed(checks, origin.split("$", 1)[1], text, kind)
        if value is not None:
            out[key] = (value, origin)
    return out


def gather_sources(path: str | Path | None, env: Mapping[str, str], config_type: type) -> Sources:
    """Read the TOML file at ``path`` (None: none) and lay ``env``'s settings over it.

    Raises:
        ConfigError: a file cannot be read or is not TOML, a ``TUBEMQ_GATEWAY_*`` variable
            is unknown or its value not of its setting's type, or a setting is given both
            plainly and as ``_FILE`` (every problem of the environment named at once).
    """
    data: dict[str, Any] = {} if path is None else _read_toml(path, "the gateway config")
    origins = dict.fromkeys(data, "file")
    checks = Checks("gateway environment")
    values = _env_values(checks, env, env_settable(config_type))
    checks.done()
    redis_table = data.get("redis") if isinstance(data.get("redis"), Mapping) else None
    for key, (value, origin) in values.items():
        if redis_table is not None and key in _REDIS_TABLE:
            data["redis"] = redis_table = {**redis_table, _REDIS_TABLE[key]: value}
        else:
            data[key] = value
        origins[key] = origin
    keys_file = data.pop(KEYS_FILE_KEY, None)
    if keys_file is not None:
        if not isinstance(keys_file, str) or not keys_file:
            raise ConfigError(f"{KEYS_FILE_KEY} must be a file path")
        extra = _read_toml(keys_file, "the keys file")
        unknown = sorted(set(extra) - {"keys"})
        if unknown:
            raise ConfigError(f"the keys file may hold only [[keys]] tables, not {unknown[0]!r}")
        own = data.get("keys", [])
        listed = extra.get("keys", [])
        if not isinstance(own, list) or not isinstance(listed, list):
            raise ConfigError("keys must be [[keys]] tables")
        data["keys"] = [*own, *listed]
        origins["keys"] = " + ".join(
            where for where, held in (("file", own), (KEYS_FILE_KEY, listed)) if held
        )
    origins.pop(KEYS_FILE_KEY, None)
    return Sources(data, origins)
