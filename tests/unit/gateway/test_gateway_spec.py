"""The published OpenAPI document matches the code; the core SDK does not import the gateway."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient

from tests.support.gateway_fakes import CFG
from tubemq_aio.gateway.app import create_app, openapi_document

ROOT = Path(__file__).resolve().parents[3]
SPEC = ROOT / "docs" / "gateway" / "openapi.json"
OPERATIONS = {
    "produce",
    "produce_batch",
    "fetch",
    "ack",
    "nack",
    "extend",
    "reset_offsets",
    "pause",
    "resume",
    "set_rate",
    "get_lag",
    "healthz",
    "readyz",
    "metrics",
    "list_topics",
    "get_topic",
    "list_groups",
    "get_group",
    "stream",
}


def test_published_spec_has_not_drifted() -> None:
    published = json.loads(SPEC.read_text())
    assert published == openapi_document(), (
        "docs/gateway/openapi.json is stale: regenerate it with "
        "`python -m tubemq_aio.gateway --openapi > docs/gateway/openapi.json`"
    )


def test_published_spec_is_what_a_running_app_serves() -> None:
    published = json.loads(SPEC.read_text())
    client = TestClient(create_app(CFG))  # a real config, not the placeholder; no lifespan
    served = client.get("/openapi.json")
    assert served.status_code == 200
    assert served.json() == published


def test_operation_ids_are_fixed() -> None:
    ids = {
        op["operationId"] for path in openapi_document()["paths"].values() for op in path.values()
    }
    assert ids == OPERATIONS


def test_core_sdk_does_not_import_gateway_dependencies() -> None:
    code = (
        "import sys, tubemq_aio, tubemq_aio.consumer, tubemq_aio.producer;"
        "bad = [m for m in ('fastapi', 'uvicorn', 'redis', 'orjson', 'prometheus_client',"
        " 'tubemq_aio.gateway') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    for path in (ROOT / "tubemq_aio").rglob("*.py"):
        if "gateway" in path.relative_to(ROOT / "tubemq_aio").parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names.append(node.module)
            assert not any(n.startswith("tubemq_aio.gateway") for n in names), path
