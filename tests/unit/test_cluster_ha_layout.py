"""A LocalCluster HA group on disk and its admin client, without starting a JVM: the ini files
of three masters and three brokers, and the web API client following the active master past
standbys (which refuse, or redirect to a web port that is their own on one machine)."""

from __future__ import annotations

import asyncio
import configparser
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from tubemq_aio.testing._build import NodePlan, build_nodes, prepare_work_dir
from tubemq_aio.testing._config import MasterSettings
from tubemq_aio.testing._ports import PortLease, reserved_ports
from tubemq_aio.testing._webapi import MasterWebApi, is_standby_reply
from tubemq_aio.testing.cluster import LocalCluster
from tubemq_aio.testing.cluster import main as cluster_main


def _ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(comment_prefixes=(";", "#"))
    parser.read(path)
    return parser


def test_three_masters_form_one_bdb_group_and_brokers_know_them_all(tmp_path: Path) -> None:
    work = prepare_work_dir(tmp_path / "c")
    plan = NodePlan(work, work / "lib", "java", 3, None, None, False, masters=3)
    lease = PortLease()
    masters, brokers, api = build_nodes(MasterSettings(), plan, lease)
    assert len(lease.ports) == 5 * 3 + 4 * 3  # every port reserved, until the cluster stops
    assert reserved_ports() >= set(lease.ports)
    lease.release()
    assert [m.name for m in masters] == ["master1", "master2", "master3"]
    bdb = [_ini(m.layout.home / "master.ini")["meta_bdb"] for m in masters]
    assert {s["repGroupName"] for s in bdb} == {"tubemqAioGroup"}
    assert [s["repNodeName"] for s in bdb] == ["tubemqAioNode1", "tubemqAioNode2", "tubemqAioNode3"]
    first_ha = masters[0].layout.ha_addr
    assert [s["repHelperHost"] for s in bdb] == [first_ha, first_ha, first_ha]
    assert len({s["repNodePort"] for s in bdb}) == 3
    assert len({s["metaDataPath"] for s in bdb}) == 3
    ports = [p for m in masters for p in (m.layout.port, m.layout.web_port, m.layout.ha_port)]
    ports += [p for b in brokers for p in (b.layout.port, b.layout.web_port)]
    assert len(set(ports)) == len(ports)
    every_master = ",".join(m.addr for m in masters)
    for idx, broker in enumerate(brokers, start=1):
        conf = _ini(broker.layout.home / "broker.ini")["broker"]
        assert conf["masterAddressList"] == every_master
        assert conf["hostName"] == f"127.0.0.{idx}"
    assert api.url.endswith(f":{masters[0].layout.web_port}/webapi.htm")


def test_one_master_keeps_the_single_node_layout(tmp_path: Path) -> None:
    work = prepare_work_dir(tmp_path / "c")
    plan = NodePlan(work, work / "lib", "java", 1, None, None, False)
    lease = PortLease()
    masters, brokers, _ = build_nodes(MasterSettings(), plan, lease)
    lease.release()
    assert [m.name for m in masters] == ["master"]
    bdb = _ini(masters[0].layout.home / "master.ini")["meta_bdb"]
    assert bdb["repHelperHost"] == masters[0].layout.ha_addr  # a group of one names itself
    assert _ini(brokers[0].layout.home / "broker.ini")["broker"]["masterAddressList"] == (
        masters[0].addr
    )


@pytest.mark.parametrize(("brokers", "masters"), [(1, 0), (1, 4), (4, 1), (0, 3)])
def test_out_of_range_counts_are_refused(brokers: int, masters: int) -> None:
    with pytest.raises(ValueError, match=r"must be an int in 1\.\.3"):
        LocalCluster(brokers, masters=masters)


class _Master(BaseHTTPRequestHandler):
    mode = "active"  # "active" | "refuse" | "redirect"
    hits = 0

    def do_POST(self) -> None:
        type(self).hits += 1
        if self.mode == "redirect":
            self.send_response(302)
            port = self.headers.get("Host", "").rsplit(":", 1)[-1]
            self.send_header("Location", f"http://127.0.0.1:{port}/webapi.htm")
            self.end_headers()
            return
        body = (
            {"result": True, "errCode": 0, "errMsg": "OK", "data": [{"version": "2.4.0"}]}
            if self.mode == "active"
            else {
                "result": False,
                "errCode": 400,
                "errMsg": "Please send your request to the master Node.",
            }
        )
        raw = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[list[HTTPServer]]:
    started = []
    for mode in ("redirect", "refuse", "active"):
        handler = type(f"M_{mode}", (_Master,), {"mode": mode, "hits": 0})
        srv = HTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        started.append(srv)
    yield started
    for srv in started:
        srv.shutdown()
        srv.server_close()


def test_group_api_moves_past_a_redirecting_and_a_refusing_standby(
    servers: list[HTTPServer],
) -> None:
    ports = [s.server_port for s in servers]
    api = MasterWebApi(
        "127.0.0.1", ports[0], "t", standbys=[("127.0.0.1", ports[1]), ("127.0.0.1", ports[2])]
    )
    data = asyncio.run(api.call("admin_query_server_version"))
    assert data == [{"version": "2.4.0"}]
    assert api.url.endswith(f":{ports[2]}/webapi.htm")  # it stays on the active one
    asyncio.run(api.call("admin_query_server_version"))
    hits = [getattr(s.RequestHandlerClass, "hits", None) for s in servers]
    assert hits == [1, 1, 2]  # the second call went straight to the active master


def test_a_lone_standby_reply_is_returned_not_followed(servers: list[HTTPServer]) -> None:
    redirecting = MasterWebApi("127.0.0.1", servers[0].server_port, "t")
    reply = asyncio.run(redirecting.raw("admin_query_server_version"))
    assert is_standby_reply(reply)
    assert reply["errCode"] == 302
    assert "redirects to" in reply["errMsg"]
    refusing = MasterWebApi("127.0.0.1", servers[1].server_port, "t")
    assert is_standby_reply(asyncio.run(refusing.raw("admin_query_server_version")))
    assert not is_standby_reply({"result": True, "errMsg": "send your request to the master"})


def test_cluster_up_refuses_several_masters_with_the_fake(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUBEMQ_AIO_STATE", str(tmp_path / "state.json"))
    assert cluster_main(["up", "--fake", "--masters", "3"]) == 2
    assert "--masters needs the real cluster" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--version", "1.1.0-incubating"], "--version needs the real cluster"),
        (["--web-port", "9000"], "--web-port needs the real cluster (the fake has no web API)"),
    ],
)
def test_cluster_up_refuses_real_cluster_flags_with_the_fake(
    flags: list[str],
    problem: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both were ignored: the fake served the default framing, without a web API, on and on."""
    monkeypatch.setenv("TUBEMQ_AIO_STATE", str(tmp_path / "state.json"))
    assert cluster_main(["up", "--fake", "--port", "0", *flags]) == 2
    assert problem in capsys.readouterr().err
