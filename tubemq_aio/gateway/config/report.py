"""``tubemq-gateway check``: the effective configuration as TOML, secrets masked.

Each top-level setting is followed by where it came from (``# env $TUBEMQ_GATEWAY_REDIS``,
``# file``, ``# default``). What is never shown: the HMAC ``secret`` (only its length), a
password in the Redis URL or its query, the ``[tubemq]`` password, the API keys (only their
names and scopes: the file holds at most their digests, and even those stay out of a report
meant for a ticket or a chat).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode

from tubemq_aio.config import redact_url
from tubemq_aio.gateway.config.gateway_config import GatewayConfig

__all__ = ["MASK", "masked_url", "render_config"]

MASK = "***"
_TABLES = ("groups", "keys", "tubemq", "cors", "housekeeper", "stream")


def masked_url(url: str) -> str:
    """``url`` with its user info and every ``*password*`` query value replaced by ``***``."""
    shown = redact_url(url)
    base, sep, query = shown.partition("?")
    if not sep:
        return shown
    pairs = [(k, MASK if "password" in k.lower() else v) for k, v in parse_qsl(query)]
    return f"{base}?{urlencode(pairs, safe='*/:')}"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def _shown(key: str, value: object) -> object:
    if key == "secret":
        return f"{MASK} ({len(str(value).encode())} bytes)"
    if key == "redis":
        return masked_url(str(value))
    if key == "password" and value is not None:
        return MASK
    return value


def _table(name: str, fields: Mapping[str, object], repeated: bool) -> list[str]:
    lines = [f"[[{name}]]" if repeated else f"[{name}]"]
    lines += [f"{k} = {_toml(_shown(k, v))}" for k, v in fields.items() if v is not None]
    return lines


def render_config(config: GatewayConfig, origins: Mapping[str, str]) -> str:
    """The effective ``config`` as TOML text (secrets masked), each top-level setting marked
    with its origin from ``origins`` (``default`` when absent); ends with a newline."""
    lines: list[str] = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name in _TABLES or value is None:
            continue
        where = origins.get(f.name, "default")
        lines.append(f"{f.name} = {_toml(_shown(f.name, value))}  # {where}")
    for group in config.groups:
        lines += ["", *_table("groups", group.table(), repeated=True)]
    for key in config.keys:
        lines += ["", f"[[keys]]  # {origins.get('keys', 'file')}", f"name = {_toml(key.name)}"]
        lines += [f"scopes = {_toml(key.scopes)}", f'key = "{MASK}"']
    lines += ["", *_table("tubemq", config.tubemq.table(), repeated=False)]
    for name in ("cors", "housekeeper", "stream"):
        table = dataclasses.asdict(getattr(config, name))
        lines += ["", *_table(name, table, repeated=False)]
    return "\n".join(lines) + "\n"
