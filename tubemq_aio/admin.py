"""Client of the TubeMQ master's HTTP web API (``/webapi.htm`` on the master's ``webPort``).

The master's client port has no call that lists topics or consumer groups; its web API has
(``admin_query_topic_info``, ``admin_query_sub_info``, and many more). Read-only queries need no
token. ``tubemq-aio topics`` / ``groups`` use this module, and so does the test cluster of
:mod:`tubemq_aio.testing` (which adds the modifying calls that deploy topics and brokers).

A standby master of an HA group answers every request with a redirect to the active master's
host at the standby's own web port, or with "Please send your request to the master"; give the
other masters as ``standbys`` and a call moves on to the next one.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from tubemq_aio.errors import AdminApiError, ConfigError

__all__ = [
    "DEFAULT_WEB_PORT",
    "INTERNAL_TOPICS",
    "STANDBY_REDIRECT",
    "MasterWebApi",
    "is_standby_reply",
]

JsonObj = dict[str, Any]
DEFAULT_WEB_PORT = 8080
"""TubeMQ's default master ``webPort`` (``master.ini``), where the web API answers."""
INTERNAL_TOPICS = frozenset({"__offset_history__"})
"""Topics the servers create for themselves (the brokers' record of group offset changes)."""
_STANDBY = "send your request to the master"
STANDBY_REDIRECT = 302
"""``errCode`` of the envelope :class:`MasterWebApi` makes of a standby's HTTP redirect."""
#: Seconds one web API request may take unless a call says otherwise.
DEFAULT_TIMEOUT = 10.0


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Do not follow redirects: a standby master redirects every request to
    ``http://<active master host>:<the standby's own webPort>``, which on one machine (one web
    port per master) is the standby itself, and following it loops."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def is_standby_reply(reply: JsonObj) -> bool:
    """Tell whether a web API reply is a standby master's refusal.

    Args:
        reply: The decoded envelope.

    Returns:
        True for ``{"result": false, "errMsg": "...Please send your request to the master..."}``
        and for a standby's redirect (``errCode`` :data:`STANDBY_REDIRECT`).
    """
    if reply.get("result"):
        return False
    return reply.get("errCode") == STANDBY_REDIRECT or _STANDBY in str(reply.get("errMsg", ""))


def _timeout(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(
            f"MasterWebApi: timeout must be a finite number of seconds, got {value!r}"
        )
    if value <= 0:
        raise ConfigError(f"MasterWebApi: timeout must be positive, got {value!r}")
    return float(value)


class MasterWebApi:
    """Calls ``http://host:port/webapi.htm?method=...`` of a TubeMQ master.

    Args:
        host: Master host.
        web_port: Master ``webPort`` (TubeMQ's default is :data:`DEFAULT_WEB_PORT`).
        standbys: ``(host, web_port)`` of the other masters of an HA group: a call answered by
            a standby or failing to connect moves on to the next master, and the client stays
            on the one that answered.
        timeout: Seconds one HTTP request may take (default 10).

    Raises:
        ConfigError: ``web_port`` is not in 1..65535 or ``timeout`` is not a positive number.
    """

    def __init__(
        self,
        host: str,
        web_port: int,
        *,
        standbys: Sequence[tuple[str, int]] = (),
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """Store the endpoints (see the class docstring)."""
        for _, port in [(host, web_port), *standbys]:
            if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
                raise ConfigError(f"MasterWebApi: web port must be in 1..65535, got {port!r}")
        self._urls = [f"http://{h}:{p}/webapi.htm" for h, p in [(host, web_port), *standbys]]
        self._current = 0
        self.timeout = _timeout(timeout)

    @property
    def url(self) -> str:
        """The endpoint the next call goes to first (the last master that answered)."""
        return self._urls[self._current]

    def _get(self, url: str, params: dict[str, str], timeout: float) -> JsonObj:
        data = urllib.parse.urlencode(params).encode()
        req = urllib.request.Request(url, data=data, method="POST")
        try:
            with _OPENER.open(req, timeout=timeout) as resp:
                body = resp.read()
        except urllib.error.HTTPError as exc:
            if exc.code not in (301, 302, 303, 307, 308):
                raise
            where = exc.headers.get("Location", "?")
            return {
                "result": False,
                "errCode": STANDBY_REDIRECT,
                "errMsg": f"standby master: it redirects to {where}",
            }
        except http.client.HTTPException as exc:
            if isinstance(exc, OSError):  # a connection lost before the answer: as it is
                raise
            # A server of another protocol (an SSH banner) or an answer cut short: an OSError
            # as a failed request is (the next master is tried; callers catch one kind).
            what = (
                "an HTTP answer cut short"
                if isinstance(exc, http.client.IncompleteRead)
                else "not an HTTP answer"
            )
            said = str(exc).strip()[:100]
            raise ConnectionError(f"{what} ({type(exc).__name__}: {said})") from exc
        reply = json.loads(body)
        if not isinstance(reply, dict):
            raise AdminApiError(f"{params['method']}: unexpected reply {body[:200]!r}")
        return reply

    async def raw(
        self, method: str, params: dict[str, object] | None = None, *, timeout: float | None = None
    ) -> JsonObj:
        """Call ``method`` and return the decoded JSON envelope without checking it.

        Args:
            method: Web API method name, e.g. ``admin_query_topic_info``.
            params: Query parameters; lists are joined with commas, bools lower-cased.
            timeout: Seconds for the HTTP request (default: the client's ``timeout``).

        Returns:
            The reply envelope (``{"result": bool, "errCode": int, "errMsg": str, "data": ...}``).

        Raises:
            OSError: If the HTTP request fails (connection refused, timeout, HTTP 5xx, an
                answer that is not HTTP or is cut short) at every master.
            ValueError: If the reply is not JSON.
            AdminApiError: If the reply is JSON but not an object.
        """
        wait = self.timeout if timeout is None else _timeout(timeout)
        query = {"method": method}
        for key, value in (params or {}).items():
            if isinstance(value, bool):
                query[key] = "true" if value else "false"
            elif isinstance(value, list | tuple):
                query[key] = ",".join(str(v) for v in value)
            else:
                query[key] = str(value)
        for attempt in range(len(self._urls)):
            url = self.url
            try:
                reply = await asyncio.to_thread(self._get, url, query, wait)
            except OSError:
                if attempt == len(self._urls) - 1:
                    raise
                self._current = (self._current + 1) % len(self._urls)
                continue
            if attempt < len(self._urls) - 1 and is_standby_reply(reply):
                self._current = (self._current + 1) % len(self._urls)
                continue
            return reply
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def query(self, method: str, **params: object) -> list[JsonObj]:
        """Call ``method``, check the envelope and return its ``data`` items.

        Args:
            method: Web API method name, e.g. ``admin_query_sub_info``.
            **params: Query parameters (as for :meth:`raw`).

        Returns:
            The reply's ``data`` as a list of objects (a single object becomes a list of one).

        Raises:
            AdminApiError: The request failed at every master, the reply is not JSON, or the
                master refused the call (``result: false``; the message carries ``errMsg``).
        """
        try:
            reply = await self.raw(method, params)
        except AdminApiError:
            raise
        except (OSError, ValueError) as exc:
            raise AdminApiError(f"master web API at {self.url}: {method} failed: {exc}") from exc
        if not reply.get("result"):
            raise AdminApiError(
                f"master web API at {self.url} refused {method}: errCode={reply.get('errCode')} "
                f"errMsg={reply.get('errMsg')!r}"
            )
        data = reply.get("data") or []
        items = data if isinstance(data, list) else [data]
        return [item for item in items if isinstance(item, dict)]
