"""Minimal async client of the TubeMQ master's HTTP admin API (``/webapi.htm``)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tubemq_aio.testing._errors import WebApiError

__all__ = ["STANDBY_REDIRECT", "MasterWebApi", "is_standby_reply"]

JsonObj = dict[str, Any]
_STANDBY = "send your request to the master"
#: ``errCode`` of the envelope :class:`MasterWebApi` makes of a standby's HTTP redirect.
STANDBY_REDIRECT = 302


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


class MasterWebApi:
    """Calls ``http://host:port/webapi.htm?method=...`` and checks every reply.

    With several masters (an HA group) give the others as ``standbys``: a call answered by a
    standby ("send your request to the master Node") or failing to connect moves on to the
    next master, and the client stays on the one that answered.

    Args:
        host: Master host.
        web_port: Master ``webPort``.
        token: ``confModAuthToken`` sent with modifying calls.
        log_file: Master log named in errors.
        standbys: ``(host, web_port)`` of the other masters of the group.
    """

    def __init__(
        self,
        host: str,
        web_port: int,
        token: str,
        log_file: Path | None = None,
        *,
        standbys: Sequence[tuple[str, int]] = (),
    ) -> None:
        """Store the endpoints (see class docstring)."""
        self._urls = [f"http://{h}:{p}/webapi.htm" for h, p in [(host, web_port), *standbys]]
        self._current = 0
        self.token = token
        self.log_file = log_file

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
        reply = json.loads(body)
        if not isinstance(reply, dict):
            raise WebApiError(f"{params['method']}: unexpected reply {body[:200]!r}", self.log_file)
        return reply

    async def raw(
        self, method: str, params: dict[str, object] | None = None, *, timeout: float = 10.0
    ) -> JsonObj:
        """Call ``method`` and return the decoded JSON envelope without checking it.

        Args:
            method: Web API method name, e.g. ``admin_query_topic_info``.
            params: Query parameters; lists are joined with commas, bools lower-cased.
            timeout: Seconds for the HTTP request.

        Returns:
            The reply envelope.

        Raises:
            OSError: If the HTTP request fails (connection refused, timeout, HTTP 5xx).
            ValueError: If the reply is not JSON.
        """
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
                reply = await asyncio.to_thread(self._get, url, query, timeout)
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

    async def call(self, method: str, *, modify: bool = False, **params: object) -> list[JsonObj]:
        """Call ``method``, check the envelope and every item, and return ``data``.

        Args:
            method: Web API method name.
            modify: Send the auth token and a user name (add/update/delete methods).
            **params: Query parameters.

        Returns:
            The reply's ``data`` list.

        Raises:
            WebApiError: If the request fails, the envelope says ``result: false`` or any item
                of a batch reply has ``success: false``.
        """
        if modify:
            params.setdefault("confModAuthToken", self.token)
            params.setdefault("createUser", "tubemq_aio")
            params.setdefault("modifyUser", "tubemq_aio")
        try:
            reply = await self.raw(method, params)
        except (OSError, ValueError) as exc:
            raise WebApiError(f"master web API {method} failed: {exc}", self.log_file) from exc
        if not reply.get("result"):
            raise WebApiError(
                f"master web API {method} refused: errCode={reply.get('errCode')} "
                f"errMsg={reply.get('errMsg')!r}",
                self.log_file,
            )
        data = reply.get("data") or []
        if not isinstance(data, list):
            data = [data]
        failed = [item for item in data if isinstance(item, dict) and item.get("success") is False]
        if failed:
            raise WebApiError(f"master web API {method}: items failed: {failed}", self.log_file)
        return [item for item in data if isinstance(item, dict)]
