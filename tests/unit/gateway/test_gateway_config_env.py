"""Settings from the environment over the TOML file, ``*_FILE`` secrets, a keys file,
``tubemq-gateway check`` (masked) and ``--version``."""

from __future__ import annotations

import dataclasses
import hashlib
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tubemq_aio import __version__
from tubemq_aio.errors import ConfigError
from tubemq_aio.gateway import GatewayConfig, dev
from tubemq_aio.gateway.__main__ import _parser, _server_settings, main
from tubemq_aio.gateway.config.report import masked_url, render_config
from tubemq_aio.gateway.config.sources import env_settable, gather_sources
from tubemq_aio.gateway.dev import DevOptions

ROOT = Path(__file__).resolve().parents[3]
BASE = """
masters = "10.0.0.1:8715"
redis = "redis://127.0.0.1:6379/0"
secret = "file-secret-0123456789"
produce_topics = ["a"]
max_batch = 100
[[keys]]
name = "ops"
key = "ops-key-0123456789"
scopes = ["admin:*"]
"""


@pytest.fixture
def toml(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(BASE)
    return path


def test_env_wins_over_the_file_and_the_file_over_defaults(toml: Path) -> None:
    env = {
        "TUBEMQ_GATEWAY_REDIS": "redis://:pw@redis.internal:6380/2",
        "TUBEMQ_GATEWAY_PRODUCE_TOPICS": "a, b ,c",
        "TUBEMQ_GATEWAY_RPC_TIMEOUT": "7.5",
        "TUBEMQ_GATEWAY_DOCS": "false",
        "UNRELATED": "x",
        "TUBEMQ_GATEWAY_PORT": "9000",  # the server's, not the configuration's
    }
    config = GatewayConfig.load(toml, env)
    assert config.redis == "redis://:pw@redis.internal:6380/2"
    assert config.produce_topics == ("a", "b", "c")
    assert config.rpc_timeout == 7.5
    assert config.docs is False
    assert config.max_batch == 100  # the file's
    assert config.produce_timeout == 10.0  # the default
    origins = gather_sources(toml, env, GatewayConfig).origins
    assert origins["redis"] == "env $TUBEMQ_GATEWAY_REDIS"
    assert origins["max_batch"] == "file"
    assert "produce_timeout" not in origins


def test_a_config_from_the_environment_alone(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("mounted-secret-0123456789\n")
    keys = tmp_path / "keys.toml"
    keys.write_text('[[keys]]\nname = "app"\nkey = "app-key-0123456789"\nscopes = ["produce:*"]\n')
    env = {
        "TUBEMQ_GATEWAY_MASTERS": "10.0.0.1:8715,10.0.0.2:8715",
        "TUBEMQ_GATEWAY_REDIS": "redis://127.0.0.1:6379/0",
        "TUBEMQ_GATEWAY_SECRET_FILE": str(secret),
        "TUBEMQ_GATEWAY_KEYS_FILE": str(keys),
        "TUBEMQ_GATEWAY_PRODUCE_TOPICS": "t1",
    }
    config = GatewayConfig.load(None, env)
    assert config.secret == "mounted-secret-0123456789"  # whitespace around it stripped
    assert [k.name for k in config.keys] == ["app"]
    assert config.keys[0].digest == hashlib.sha256(b"app-key-0123456789").digest()


def test_keys_file_adds_to_the_files_own_keys(toml: Path, tmp_path: Path) -> None:
    keys = tmp_path / "more.toml"
    keys.write_text('[[keys]]\nname = "app"\nkey = "app-key-0123456789"\nscopes = ["produce:*"]\n')
    toml.write_text(f'keys_file = "{keys}"\n' + BASE)
    sources = gather_sources(toml, {}, GatewayConfig)
    assert sources.origins["keys"] == "file + keys_file"
    assert [k.name for k in GatewayConfig.from_mapping(sources.data).keys] == ["ops", "app"]
    keys.write_text('masters = "x:1"\n')
    with pytest.raises(ConfigError, match="only \\[\\[keys\\]\\] tables"):
        gather_sources(toml, {}, GatewayConfig)


def test_a_redis_table_takes_the_url_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(
        BASE.replace('redis = "redis://127.0.0.1:6379/0"\n', "")
        + '[redis]\nurl = "redis://old:1/0"\nmax_connections = 8\n'
    )
    env = {"TUBEMQ_GATEWAY_REDIS": "redis://new:2/0", "TUBEMQ_GATEWAY_REDIS_MAX_CONNECTIONS": "9"}
    config = GatewayConfig.load(path, env)
    assert config.redis == "redis://new:2/0"
    assert config.redis_max_connections == 9


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        (
            {"TUBEMQ_GATEWAY_MAX_BATCH": "many"},
            "TUBEMQ_GATEWAY_MAX_BATCH: 'many' is not an integer",
        ),
        ({"TUBEMQ_GATEWAY_RPC_TIMEOUT": "soon"}, "is not a number"),
        ({"TUBEMQ_GATEWAY_DOCS": "maybe"}, "is not true or false"),
        (
            {"TUBEMQ_GATEWAY_SECRET": "x" * 20, "TUBEMQ_GATEWAY_SECRET_FILE": "/nonexistent"},
            "not both",
        ),
        ({"TUBEMQ_GATEWAY_SECRET_FILE": "/nonexistent/secret"}, "cannot read"),
        ({"TUBEMQ_GATEWAY_RPC_TIMEOUT": "nan"}, "rpc_timeout"),
        ({"TUBEMQ_GATEWAY_MAX_BATCH": "0"}, "max_batch"),
        ({"TUBEMQ_GATEWAY_BODY_TIMEOUT": "soon"}, "TUBEMQ_GATEWAY_BODY_TIMEOUT: 'soon' is not a"),
        ({"TUBEMQ_GATEWAY_BODY_TIMEOUT": "inf"}, "body_timeout must be in (0, 3600] seconds"),
        ({"TUBEMQ_GATEWAY_BODY_TIMEOUT": "0"}, "body_timeout must be in (0, 3600] seconds"),
        ({"TUBEMQ_GATEWAY_SECERT": "x" * 20}, "unknown variable TUBEMQ_GATEWAY_SECERT"),
        ({"TUBEMQ_GATEWAY_GROUPS": "g1"}, "unknown variable TUBEMQ_GATEWAY_GROUPS"),
    ],
)
def test_bad_environment_values_are_named(toml: Path, env: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem.replace("(", "\\(")):
        GatewayConfig.load(toml, env)


def test_body_timeout_from_the_environment(toml: Path) -> None:
    config = GatewayConfig.load(toml, {"TUBEMQ_GATEWAY_BODY_TIMEOUT": " 2.5 "})
    assert config.body_timeout == 2.5
    assert GatewayConfig.load(toml, {}).body_timeout == 30.0


def test_every_plain_top_level_setting_is_env_settable() -> None:
    settable = env_settable(GatewayConfig)
    assert {"masters", "redis", "secret", "produce_topics", "max_batch", "docs"} <= set(settable)
    assert not {"groups", "keys", "tubemq", "cors", "housekeeper"} & set(settable)
    assert settable["anonymous_scopes"] == "list"


def test_check_prints_the_effective_config_with_secrets_masked(
    toml: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    toml.write_text(
        BASE.replace("10.0.0.1:8715", "tubemq://alice:tube-pw@10.0.0.1:8715")
        + '[[groups]]\nname = "g1"\ntopics = ["a"]\n'
    )
    monkeypatch.setenv(
        "TUBEMQ_GATEWAY_REDIS", "redis+sentinel://:redis-pw@r:26379/svc/0?sentinel_password=sp"
    )
    assert main(["check", "--config", str(toml)]) == 0
    out = capsys.readouterr().out
    for secret in ("redis-pw", "file-secret", "tube-pw", "ops-key", "=sp"):
        assert secret not in out
    shown = "redis+sentinel://***@r:26379/svc/0?sentinel_password=***"
    assert f'redis = "{shown}"  # env $TUBEMQ_GATEWAY_REDIS' in out
    assert 'secret = "*** (22 bytes)"  # file' in out
    assert 'masters = "10.0.0.1:8715"  # file' in out
    assert "produce_timeout = 10.0  # default" in out
    assert '[[groups]]\nname = "g1"' in out
    assert 'user = "alice"\npassword = "***"' in out
    assert 'name = "ops"\nscopes = ["admin:*"]\nkey = "***"' in out


def test_check_refuses_a_bad_config_with_status_2(
    toml: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml.write_text(BASE.replace("max_batch = 100", "max_batch = -1"))
    assert main(["check", "--config", str(toml)]) == 2
    assert "max_batch" in capsys.readouterr().err


def test_masked_url_leaves_a_plain_url_alone() -> None:
    assert masked_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert masked_url("rediss://u:p@h:1/0?ssl_cert_reqs=none") == (
        "rediss://***@h:1/0?ssl_cert_reqs=none"
    )


def test_render_marks_defaults(toml: Path) -> None:
    text = render_config(GatewayConfig.from_toml(toml), {})
    assert "max_batch = 100  # default" in text  # no origins given: nothing is claimed


def test_the_report_is_toml_with_every_table_a_table(toml: Path) -> None:
    # `[stream]` was printed as one quoted Python repr, `stream = "StreamConfig(window=4, …)"`,
    # which no TOML reader takes back as the table it is
    config = GatewayConfig.from_toml(toml)
    report = tomllib.loads(render_config(config, {}))
    assert report["stream"] == dataclasses.asdict(config.stream)
    assert report["housekeeper"] == dataclasses.asdict(config.housekeeper)


@pytest.mark.system  # `tubemq-gateway --version` as a process
def test_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tubemq_aio.gateway", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"tubemq-gateway {__version__}"


def test_server_settings_flags_over_environment_over_defaults() -> None:
    parser = _parser()
    env = {"TUBEMQ_GATEWAY_PORT": "9000", "TUBEMQ_GATEWAY_HOST": "0.0.0.0"}
    assert _server_settings(parser.parse_args([]), {}) == ("127.0.0.1", 8080, 1)
    assert _server_settings(parser.parse_args([]), env) == ("0.0.0.0", 9000, 1)
    assert _server_settings(parser.parse_args(["--port", "9100"]), env) == ("0.0.0.0", 9100, 1)
    # each bad one named with its value and where it came from (was one sentence naming both
    # variables, whichever was wrong, and the flags when the environment had set them)
    bad = _server_settings(parser.parse_args([]), {"TUBEMQ_GATEWAY_PORT": "http"})
    assert bad == "TUBEMQ_GATEWAY_PORT: 'http' is not an integer"
    both = {"TUBEMQ_GATEWAY_PORT": "99999", "TUBEMQ_GATEWAY_WORKERS": "x"}
    assert _server_settings(parser.parse_args([]), both) == (
        "TUBEMQ_GATEWAY_PORT must be 0-65535, got 99999;"
        " TUBEMQ_GATEWAY_WORKERS: 'x' is not an integer"
    )
    flag = _server_settings(parser.parse_args(["--port", "70000"]), {})
    assert flag == "--port must be 0-65535, got 70000"


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        # `dev` forgotten: was "gateway config: masters is required; redis is required; ..."
        (["--fake"], "--fake: only `tubemq-gateway dev` takes it"),
        (["check", "--masters", "h:1", "--topic", "t"], "--masters, --topic: only"),
        (["init", "--group", "g", "--key-file", "k"], "--group, --key-file: only"),
        (["dev", "--fake", "--workers", "4"], "dev runs one replica"),  # ran one, silently
        # serve's masters are a setting: the hint says where they go instead of "use dev"
        (
            ["--master", "h:8715"],
            "--masters: only `tubemq-gateway dev` takes it; serve reads the masters from "
            "$TUBEMQ_GATEWAY_MASTERS or `masters` in the --config file",
        ),
        (["check", "--masters", "h:1"], "check reads the masters from $TUBEMQ_GATEWAY_MASTERS"),
    ],
)
def test_a_flag_of_another_command_is_a_usage_error(
    argv: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("tubemq-gateway: ")
    assert problem in line


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        # found only after Redis and the fake cluster had started: "cannot start: ...", exit 1
        (["dev", "--fake", "--group", "x"], "group name 'x' must be at least 2 characters"),
        (["dev", "--fake", "--topic", "a b"], "'a b' is not a valid name"),
        (["dev", "--masters", "garbage::"], "address 'garbage::'"),
        # the SDK CLI's spelling reaches the same option (it was only an abbreviation)
        (["dev", "--master", "garbage::"], "address 'garbage::'"),
        # taken as "no --group": the gateway served demo-group instead
        (["dev", "--fake", "--group", ""], "groups['']: name: '' is not a valid name"),
        # neither given: was told "give --masters HOST:PORT or --fake, not both"
        (["dev"], "give --masters HOST:PORT or --fake (neither was given)"),
    ],
)
def test_dev_refuses_bad_options_before_it_starts_anything(
    argv: list[str],
    problem: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server: a start would say so, exit 1
    monkeypatch.delenv("TUBEMQ_GATEWAY_MASTERS", raising=False)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # not even the dev notice: nothing was started
    (line,) = captured.err.splitlines()
    assert line.startswith("tubemq-gateway dev: ")
    assert problem in line


def test_dev_will_not_take_over_a_file_it_did_not_write(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--key-file`` is truncated, filled with the key and removed on exit: given a file of the
    user's own by mistake (``--key-file gateway.toml``), dev destroyed it. A file that is not a
    key an earlier dev left behind is now refused before anything starts."""
    monkeypatch.setenv("PATH", str(tmp_path))
    mine = tmp_path / "gateway.toml"
    mine.write_text('masters = "h:8715"\n')
    assert main(["dev", "--fake", "--key-file", str(mine)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"--key-file {str(mine)!r} exists and is not a key file" in line
    assert mine.read_text() == 'masters = "h:8715"\n'
    (tmp_path / "dir").mkdir()
    assert main(["dev", "--fake", "--key-file", str(tmp_path / "dir")]) == 2
    assert "exists and is not a key file" in capsys.readouterr().err
    left = tmp_path / "gw.key"  # what a dev killed before its clean-up leaves: taken again
    left.write_text("Q" * 32 + "\n")
    # Port 0 (any free one): 8080, the default, may be a running cluster's web API.
    free_port = ["--port", "0"]
    assert main(["dev", "--fake", "--key-file", str(left), *free_port]) == 1  # no redis-server
    assert "redis-server" in capsys.readouterr().err


def test_dev_serves_a_topic_given_twice_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`dev --topic demo --topic demo` served "demo, demo" (the fake made it twice)."""
    seen: list[DevOptions] = []

    async def run_dev(options: DevOptions) -> int:
        seen.append(options)
        return 0

    monkeypatch.setattr(dev, "run_dev", run_dev)
    argv = ["dev", "--fake", "--topic", "demo", "--topic", "other", "--topic", "demo"]
    assert main(argv) == 0
    (options,) = seen
    assert options.topics == ("demo", "other")


def test_dev_on_a_busy_port_says_which_and_what_to_do_before_it_starts_anything(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`tubemq-aio cluster up` puts the master's web API on 8080, dev's default port. Dev
    started its Redis, then failed with "cannot start: [Errno 98] Address already in use",
    naming neither the address nor the way out; now the port is taken first."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server: a start would say so instead
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        assert main(["dev", "--fake", "--port", str(port)]) == 1
    captured = capsys.readouterr()
    assert "redis:" not in captured.out  # nothing was started
    (line,) = captured.err.splitlines()
    assert line.startswith(f"tubemq-gateway dev: cannot listen on 127.0.0.1:{port}: the port is")
    assert "--port PORT or $TUBEMQ_GATEWAY_PORT" in line
