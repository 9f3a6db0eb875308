"""Minimal async client of the TubeMQ master's HTTP admin API (``/webapi.htm``)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tubemq_aio.testing._errors import WebApiError

__all__ = ["MasterWebApi"]

JsonObj = dict[str, Any]


class MasterWebApi:
    """Calls ``http://host:port/webapi.htm?method=...`` and checks every reply.

    Args:
        host: Master host.
        web_port: Master ``webPort``.
        token: ``confModAuthToken`` sent with modifying calls.
        log_file: Master log named in errors.
    """

    def __init__(self, host: str, web_port: int, token: str, log_file: Path | None = None) -> None:
        """Store the endpoint (see class docstring)."""
        self.url = f"http://{host}:{web_port}/webapi.htm"
        self.token = token
        self.log_file = log_file

    def _get(self, params: dict[str, str], timeout: float) -> JsonObj:
        data = urllib.parse.urlencode(params).encode()
        req = urllib.request.Request(self.url, data=data, method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
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
        return await asyncio.to_thread(self._get, query, timeout)

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
