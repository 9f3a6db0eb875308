"""Cross-origin requests from browser clients (``[cors]``; off unless origins are listed).

Starlette's ``CORSMiddleware`` answers the preflight and adds the headers; this module holds its
validated settings. API keys travel in the ``Authorization`` header a script sets itself, so
browser credentials (cookies) are not needed and stay off by default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from tubemq_aio.checks import Checks
from tubemq_aio.gateway.config.toml_table import checked_table
from tubemq_aio.gateway.config.value_checks import str_tuple

__all__ = ["CorsConfig", "install_cors"]

_ORIGIN = re.compile(
    r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$"
)
_HEADER = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
_METHODS = frozenset({"GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS"})
_KEYS = frozenset(
    {
        "allow_origins",
        "allow_methods",
        "allow_headers",
        "expose_headers",
        "allow_credentials",
        "max_age",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CorsConfig:
    """CORS for browser clients (``[cors]``).

    Attributes:
        allow_origins: origins (``https://app.example.com``, no path) allowed to call the
            gateway from a browser, or ``["*"]`` for any; empty (the default) = CORS off.
        allow_methods: methods a cross-origin request may use.
        allow_headers: request headers a cross-origin request may send.
        expose_headers: response headers a browser script may read.
        allow_credentials: let browsers send cookies / HTTP auth; never with ``"*"``.
        max_age: seconds a browser may cache a preflight answer (0-86400).
    """

    allow_origins: tuple[str, ...] = ()
    allow_methods: tuple[str, ...] = ("GET", "POST", "PUT")
    allow_headers: tuple[str, ...] = ("Authorization", "Content-Type")
    expose_headers: tuple[str, ...] = ("Retry-After",)
    allow_credentials: bool = False
    max_age: int = 600

    def __post_init__(self) -> None:
        checks = Checks("cors")
        for origin in self.allow_origins:
            if origin != "*" and not _ORIGIN.match(origin):
                checks.problem(f"cors.allow_origins: {origin!r} is not '*' or scheme://host[:port]")
        if "*" in self.allow_origins and len(self.allow_origins) > 1:
            checks.problem("cors.allow_origins: '*' stands alone")
        for method in self.allow_methods:
            if method not in _METHODS:
                checks.problem(f"cors.allow_methods: {method!r} is not one of {sorted(_METHODS)}")
        for key in ("allow_headers", "expose_headers"):
            for header in getattr(self, key):
                if not _HEADER.match(header):
                    checks.problem(f"cors.{key}: {header!r} is not a header name")
        if not isinstance(self.allow_credentials, bool):
            checks.problem("cors.allow_credentials must be true or false")  # TOML's spelling
        elif self.allow_credentials and "*" in self.allow_origins:
            checks.problem("cors: allow_credentials needs explicit origins, not '*'")
        checks.integer("cors.max_age", self.max_age, low=0, high=86400)
        checks.done()

    @property
    def enabled(self) -> bool:
        """Whether any origin is allowed (else no CORS headers at all)."""
        return bool(self.allow_origins)

    @classmethod
    def from_mapping(cls, raw: object) -> CorsConfig:
        """Validate a parsed ``[cors]`` table.

        Raises:
            ConfigError: not a table, an unknown key, or an invalid value.
        """
        options = checked_table(raw, "cors", _KEYS)
        checks = Checks("cors")
        for key in ("allow_origins", "allow_methods", "allow_headers", "expose_headers"):
            if key in options:
                options[key] = str_tuple(checks, options[key], f"cors.{key}")
        checks.done()
        return cls(**options)


def install_cors(app: FastAPI, cors: CorsConfig) -> None:
    """Wrap ``app`` in ``CORSMiddleware`` when ``cors`` allows any origin (call it last, so it
    is the outermost middleware and error answers carry the headers too)."""
    if not cors.enabled:
        return
    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(cors.allow_origins),
        allow_methods=list(cors.allow_methods),
        allow_headers=list(cors.allow_headers),
        expose_headers=list(cors.expose_headers),
        allow_credentials=cors.allow_credentials,
        max_age=cors.max_age,
    )
