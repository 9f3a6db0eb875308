"""The test cluster's client of the master's HTTP admin API: the SDK's read-only
:class:`tubemq_aio.admin.MasterWebApi` plus the modifying calls that deploy topics and brokers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tubemq_aio.admin import STANDBY_REDIRECT, is_standby_reply
from tubemq_aio.admin import MasterWebApi as _ReadOnlyWebApi
from tubemq_aio.errors import AdminApiError
from tubemq_aio.testing._errors import WebApiError

__all__ = ["STANDBY_REDIRECT", "MasterWebApi", "is_standby_reply"]

JsonObj = dict[str, Any]


class MasterWebApi(_ReadOnlyWebApi):
    """:class:`tubemq_aio.admin.MasterWebApi` with the token of modifying calls, and
    :meth:`call`, which checks every item of a batch reply and names the master's log.

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
        super().__init__(host, web_port, standbys=standbys)
        self.token = token
        self.log_file = log_file

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
        except (OSError, ValueError, AdminApiError) as exc:
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
