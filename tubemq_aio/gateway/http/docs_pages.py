"""``/docs`` (Swagger UI) and ``/redoc`` with their scripts served by the gateway itself.

FastAPI's own pages load Swagger UI and ReDoc from a public CDN, so they stay blank on a
network without internet access. The assets come from the ``fastapi-offline`` package (the
gateway extra installs it) and are served under ``/docs/assets``.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from tubemq_aio.errors import ConfigError

__all__ = ["ASSETS_PATH", "install_docs"]

#: Where the Swagger UI and ReDoc scripts are served.
ASSETS_PATH = "/docs/assets"


def _assets_dir() -> Path:
    try:
        package = importlib.resources.files("fastapi_offline")
    except ModuleNotFoundError:
        raise ConfigError(
            "docs = true needs the fastapi-offline package (the `gateway` extra: "
            "pip install '.[gateway]' in a clone), "
            "or set docs = false"
        ) from None
    return Path(str(package / "static"))


def install_docs(app: FastAPI, title: str) -> None:
    """Serve ``/docs`` and ``/redoc`` for ``app``'s OpenAPI document, assets included.

    Raises:
        ConfigError: the package that ships the assets is not installed.
    """
    app.mount(ASSETS_PATH, StaticFiles(directory=_assets_dir()), name="docs-assets")

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
        )

    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )

    app.add_api_route("/docs", swagger_ui, methods=["GET"], include_in_schema=False)
    app.add_api_route("/redoc", redoc, methods=["GET"], include_in_schema=False)
