"""The server versions LocalCluster can run, without starting a JVM: the version table, the
Maven command lines per version, the 1.x ini files (ZooKeeper instead of BDB-JE), the ZooKeeper
node's configuration, and what ``cluster up`` accepts and prints (the real 1.x cluster runs in
tests/integration/test_server_versions.py)."""

from __future__ import annotations

import configparser
from importlib import resources
from pathlib import Path

import pytest

from tubemq_aio.testing import SERVER_VERSIONS, JvmLaunch, LocalCluster, UnsupportedVersionError
from tubemq_aio.testing._config import (
    BrokerLayout,
    MasterLayout,
    MasterSettings,
    render_broker_ini,
    render_master_ini,
)
from tubemq_aio.testing._maven import DEFAULT_VERSION, _maven_runs
from tubemq_aio.testing._up_report import up_lines
from tubemq_aio.testing._versions import server_version
from tubemq_aio.testing._zookeeper import ZOOKEEPER_MAIN, ZooKeeperNode
from tubemq_aio.testing.cluster import main as cluster_main


def _ini(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(comment_prefixes=(";", "#"))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep key case
    parser.read_string(text)
    return parser


def _layouts(tmp_path: Path) -> tuple[MasterLayout, BrokerLayout]:
    master = MasterLayout("127.0.0.1", 1001, 1002, 1003, 1004, 1005, tmp_path / "m")
    broker = BrokerLayout(1, "127.0.0.1", 2001, 2002, 2003, 2004, tmp_path / "b")
    return master, broker


def test_version_table_names_framing_and_zookeeper() -> None:
    assert DEFAULT_VERSION in SERVER_VERSIONS
    assert server_version(DEFAULT_VERSION).framing == "standard"
    assert not server_version(DEFAULT_VERSION).zookeeper
    for old in ("1.1.0-incubating", "1.2.0-incubating"):
        spec = server_version(old)
        assert spec.framing == "legacy-length"
        assert spec.zookeeper
        assert spec.plain_jars == (f"org.apache.inlong:tubemq-core:{old}",)
    for spec in SERVER_VERSIONS.values():  # every POM named is packaged
        assert resources.files("tubemq_aio.testing").joinpath(spec.pom).is_file(), spec.pom


@pytest.mark.parametrize("bad", ["1.3.0", "", "2.4", "latest", None, 240])
def test_unknown_versions_are_refused_with_the_known_ones(bad: object) -> None:
    known = r"supported versions: 2\.4\.0, 1\.2\.0"
    with pytest.raises(UnsupportedVersionError, match=known) as info:
        server_version(bad)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)
    with pytest.raises(UnsupportedVersionError):
        LocalCluster(version=bad)  # type: ignore[arg-type]  # at construction, not at start


def test_an_ha_group_needs_a_2x_server(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUBEMQ_AIO_STATE", str(tmp_path / "state.json"))
    with pytest.raises(ValueError, match=r"masters must be 1 with tubemq-server 1\.2\.0"):
        LocalCluster(masters=3, version="1.2.0-incubating")
    assert cluster_main(["up", "--masters", "3", "--version", "1.1.0-incubating"]) == 2
    assert "--masters needs a 2.x server" in capsys.readouterr().err


def test_cluster_framing_is_known_before_start() -> None:
    assert LocalCluster().framing == "standard"
    assert LocalCluster(version="1.2.0-incubating").framing == "legacy-length"
    assert LocalCluster(version="1.1.0-incubating").framing == "legacy-length"


def test_maven_runs_per_version(tmp_path: Path) -> None:
    pom, out = tmp_path / "pom.xml", tmp_path / "lib"
    (only,) = _maven_runs("mvn", pom, server_version(DEFAULT_VERSION), out)
    assert "-Dartifact=org.apache.inlong:tubemq-server:2.4.0:jar" in only
    assert f"-DoutputDirectory={out}" in only
    first, core = _maven_runs("mvn", pom, server_version("1.1.0-incubating"), out)
    assert "-Dspring.version=5.3.18" in first
    assert "-Dguava.version=19.0" in first
    assert "-Dartifact=org.apache.inlong:tubemq-server:1.1.0-incubating:jar" in first
    assert "-Dartifact=org.apache.inlong:tubemq-core:1.1.0-incubating:jar" in core
    assert f"-DoutputDirectory={out}" in core
    first12, _ = _maven_runs("mvn", pom, server_version("1.2.0-incubating"), out)
    assert not [a for a in first12 if a.startswith(("-Dspring", "-Dguava"))]  # the pom's own


def test_1x_ini_files_keep_metadata_and_offsets_in_zookeeper(tmp_path: Path) -> None:
    master, broker = _layouts(tmp_path)
    zk = MasterSettings(zookeeper="127.0.0.1:3181")
    m = _ini(render_master_ini(zk, master))
    assert "meta_bdb" not in m  # a 1.x master refuses both sections at once
    assert m["meta_zookeeper"]["zkServerAddr"] == "127.0.0.1:3181"
    assert m["meta_zookeeper"]["zkNodeRoot"] == "/tubemq"
    b = _ini(render_broker_ini(zk, broker, "127.0.0.1:1001"))
    assert b["zookeeper"]["zkServerAddr"] == "127.0.0.1:3181"
    assert b["broker"]["masterAddressList"] == "127.0.0.1:1001"
    # 2.x: BDB-JE and no ZooKeeper anywhere.
    plain = MasterSettings()
    assert "meta_zookeeper" not in _ini(render_master_ini(plain, master))
    assert "meta_bdb" in _ini(render_master_ini(plain, master))
    assert "zookeeper" not in _ini(render_broker_ini(plain, broker, "127.0.0.1:1001"))


def test_zookeeper_node_config_and_command_line(tmp_path: Path) -> None:
    home = tmp_path / "zk"
    node = ZooKeeperNode(
        home,
        "127.0.0.1",
        3181,
        JvmLaunch("java", "lib/*", tmp_path, tmp_path / "log4j2.xml", detached=False),
    )
    cfg = dict(line.split("=", 1) for line in (home / "zoo.cfg").read_text().splitlines() if line)
    assert cfg["clientPort"] == "3181"
    assert cfg["clientPortAddress"] == "127.0.0.1"
    assert cfg["dataDir"] == str(home / "data")
    assert cfg["admin.enableServer"] == "false"  # no Jetty admin server on 8080
    assert "ruok" in cfg["4lw.commands.whitelist"]
    assert node.addr == "127.0.0.1:3181"
    assert node.process.argv[-2:] == [ZOOKEEPER_MAIN, str(home / "zoo.cfg")]
    assert not node.running


def test_cluster_up_refuses_an_unknown_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cluster_main(["up", "--version", "0.9.0"])
    assert "1.2.0-incubating" in capsys.readouterr().err


def test_up_lines_name_the_framing_of_a_1x_server(tmp_path: Path) -> None:
    info = {
        "version": "1.2.0-incubating",
        "framing": "legacy-length",
        "master_addr": "127.0.0.1:8715",
        "master_web": "http://127.0.0.1:8080/webapi.htm",
        "log_dir": "logs",
        "bring_up_seconds": 40.0,
    }
    lines = up_lines(info, tmp_path / "state.json")
    assert lines[1] == "  server:   1.2.0-incubating: clients need framing='legacy-length'"
    standard = up_lines({**info, "framing": "standard"}, tmp_path / "state.json")
    assert not [x for x in standard if "framing=" in x]
