"""Every code block of ``README.md`` and ``docs/`` runs as written, or says why it cannot.

Each fenced block of a page is one of:

* ``python``: run against a :class:`FakeCluster` (``127.0.0.1:8715`` is replaced by the fake's
  master address), in the page's namespace, with top-level ``await`` as in ``python -m asyncio``
  (a block without one is a script and runs in a thread of its own, for its ``asyncio.run``);
  each block within :data:`BLOCK_DEADLINE` seconds. A block that defines ``async def test_...``
  functions has them awaited too.
* ``bash``: run with ``bash -e -o pipefail`` against the same fake (``$TUBEMQ_AIO_MASTER`` set,
  the venv's scripts first on ``PATH``) when marked ``run``.
* ``console``: a transcript; its ``$ `` lines run like a bash block when marked ``run`` (the
  output shown is not compared: times and ports differ from run to run).
* ``json`` / ``toml`` / ``yaml``: parsed.
* ``text``: output, diagrams and file layouts; not code.

A comment on the line right before a fence changes that: ``<!-- docs-test: skip REASON -->``
(not runnable here; the reason is required), ``<!-- docs-test: run -->`` (a bash block to run),
``<!-- docs-test: given NAME ... -->`` (a fragment that uses names of :data:`GIVENS`, e.g. an
open ``producer``), ``<!-- docs-test: include -->`` is implied by a ``--8<--`` line (the
included file must exist and be run by a test of its own). A shell block must be marked: most
are ``make`` or ``pip`` commands, which need the network or minutes. ``<!-- docs-test: topics
NAME ... -->`` anywhere on a page adds topics to the page's fake beyond the quickstart's
``demo`` (the page must show the ``cluster up ... --topic NAME`` that creates them).

The blocks of one page share one fake cluster, in page order, so a page can produce in one block
and consume in the next as a reader would.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import os
import re
import shlex
import sys
import tomllib
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML comes with mkdocs (dev group)

from tests.support.cli_run import SOURCE_ROOT, cli_env
from tests.support.public_modules import PUBLIC_MODULES
from tubemq_aio import Consumer, Producer
from tubemq_aio.testing import FakeCluster

#: Seconds one block may take (the fake answers in milliseconds; a busy machine is slow).
BLOCK_DEADLINE = 30.0
DOC_ADDR = "127.0.0.1:8715"
#: The topics of the fake cluster every page runs against: only the quickstart's ``demo:3``, so
#: that a block publishing to a topic the reader never created fails here as it would for them
#: (it hung 15 s once). A page using other topics says so with ``<!-- docs-test: topics NAME
#: ... -->`` and tells its reader how to create them (a ``cluster up ... --topic NAME`` line).
TOPICS = {"demo": 3}
TOPICS_MARK = re.compile(r"<!--\s*docs-test:\s*topics\s+(?P<names>[^>]*?)\s*-->")
LANGUAGES = {"python", "bash", "console", "json", "toml", "yaml", "text", "javascript"}
#: Shell blocks: run only when marked ``run``.
SHELLS = {"bash", "console"}
FENCE = re.compile(
    r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.S | re.M
)
MARK = re.compile(r"<!--\s*docs-test:\s*(?P<kind>skip|run|given)\b(?P<arg>.*?)-->")
INCLUDE = re.compile(r'^--8<--\s+"(?P<path>[^"]+)"\s*$')
PAGES = sorted([SOURCE_ROOT / "README.md", *(SOURCE_ROOT / "docs").rglob("*.md")])


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, text and marker."""

    page: Path
    line: int
    lang: str
    body: str
    kind: str  # "default", "skip", "run" or "given"
    arg: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(SOURCE_ROOT)}:{self.line} ({self.lang})"


def _dedent(body: str, indent: int) -> str:
    return "".join(
        line[indent:] if line[:indent].isspace() else line
        for line in body.splitlines(keepends=True)
    )


def page_blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` in order, each with the marker on the line before it."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        blocks.append(
            Block(
                page=page,
                line=text.count("\n", 0, m.start()) + 1,
                lang=m.group("lang"),
                body=_dedent(m.group("body"), len(m.group("indent"))),
                kind=mark.group("kind") if mark else "default",
                arg=mark.group("arg").strip() if mark else "",
            )
        )
    return blocks


ALL_BLOCKS = [block for page in PAGES for block in page_blocks(page)]


def page_topics(page: Path) -> dict[str, int]:
    """The quickstart's topics, plus (one partition each) those the page declares."""
    text = page.read_text(encoding="utf-8")
    names = [n for m in TOPICS_MARK.finditer(text) for n in m.group("names").split()]
    return {**TOPICS, **dict.fromkeys(names, 1)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(SOURCE_ROOT)))
def test_a_page_that_needs_more_topics_tells_its_reader_to_create_them(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for name in set(page_topics(page)) - set(TOPICS):
        assert re.search(rf"cluster up\b[^\n`]*--topic {re.escape(name)}\b", text), (
            f"{page.name} declares topic {name!r} but never shows `cluster up ... --topic {name}`"
        )


# ---- what a fragment may take as given ---------------------------------------------------------


class _Handled:
    """What ``handle(...)`` returns: awaitable, and harmless when not awaited."""

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()


def _handle(*args: object) -> _Handled:
    return _Handled()


async def _given(name: str, cluster: FakeCluster, stack: list[Callable[[], Awaitable[Any]]]) -> Any:
    """The value of one name a fragment uses (opened clients are closed through ``stack``)."""
    if name == "handle":
        return _handle
    if name == "bodies":
        return [b"a", b"b", b"c"]
    if name == "producer":
        producer = Producer(cluster.master_addr, topics=["demo"])
        await producer.start()
        stack.append(producer.close)
        return producer
    if name == "consumer":
        consumer = Consumer(
            cluster.master_addr,
            group="docs",
            topics=["demo"],
            consume_from="earliest",
            heartbeat_interval=1,
        )
        await consumer.start()
        stack.append(consumer.close)
        return consumer
    if name == "message":
        async with Producer(cluster.master_addr, topics=["demo"]) as producer:
            await producer.send("demo", b"given")
        async with Consumer(
            cluster.master_addr,
            group="docs-message",
            topics=["demo"],
            consume_from="earliest",
            heartbeat_interval=1,
        ) as consumer:
            async for msg in consumer:
                return msg
    raise AssertionError(f"no given named {name!r}")


GIVENS = {"handle", "bodies", "producer", "consumer", "message"}


# ---- running -----------------------------------------------------------------------------------


async def _run_python(block: Block, cluster: FakeCluster, namespace: dict[str, Any]) -> None:
    source = block.body.replace(DOC_ADDR, cluster.master_addr)
    code = compile(source, str(block), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    closers: list[Callable[[], Awaitable[Any]]] = []
    try:
        for name in block.arg.split() if block.kind == "given" else ():
            namespace[name] = await _given(name, cluster, closers)
        defined = set(namespace)
        async with asyncio.timeout(BLOCK_DEADLINE):
            if code.co_flags & inspect.CO_COROUTINE:  # top-level await, as in `python -m asyncio`
                await eval(code, namespace)
            else:  # a script (`asyncio.run(main())`): its own thread and event loop
                await asyncio.to_thread(exec, code, namespace)
            for name, value in list(namespace.items()):
                if name.startswith("test_") and name not in defined:
                    assert inspect.iscoroutinefunction(value), name
                    await value()
    finally:
        for close in reversed(closers):
            await close()


async def _run_bash(block: Block, cluster: FakeCluster, cwd: Path) -> None:
    env = cli_env()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["TUBEMQ_AIO_MASTER"] = cluster.master_addr
    env["TUBEMQ_AIO_STATE"] = str(cwd / "cluster.json")
    script = block.body.replace(DOC_ADDR, cluster.master_addr)
    if block.lang == "console":
        script = "\n".join(line[2:] for line in script.splitlines() if line.startswith("$ "))
    proc = await asyncio.create_subprocess_exec(
        *shlex.split("bash -e -o pipefail -c"),
        script,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(BLOCK_DEADLINE * 2):
            out, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, (str(block), out.decode()[-2000:], err.decode()[-2000:])


def _check_data(block: Block) -> None:
    if block.lang == "json":
        json.loads(block.body)
    elif block.lang == "toml":
        tomllib.loads(block.body)
    elif block.lang == "yaml":
        assert yaml.safe_load(block.body), str(block)


def _included(block: Block) -> Path | None:
    found = INCLUDE.match(block.body.strip())
    return SOURCE_ROOT / found.group("path") if found else None


# ---- the tests ---------------------------------------------------------------------------------


def test_every_block_is_classified() -> None:
    """Every block has a known language, and every block that is not run says why."""
    wrong = []
    for block in ALL_BLOCKS:
        if block.lang not in LANGUAGES:
            wrong.append(f"{block}: language {block.lang!r} is not one of {sorted(LANGUAGES)}")
        elif block.kind == "skip" and len(block.arg) < 10:
            wrong.append(f"{block}: a skipped block needs its reason")
        elif block.lang in SHELLS and block.kind == "default":
            wrong.append(f"{block}: a shell block is marked `run` or `skip REASON`")
        elif block.kind == "run" and block.lang not in SHELLS:
            wrong.append(f"{block}: `run` is for shell blocks ({block.lang} blocks run anyway)")
        elif block.kind == "given" and (not block.arg or set(block.arg.split()) - GIVENS):
            wrong.append(f"{block}: `given` takes names of {sorted(GIVENS)}")
    assert wrong == []
    assert len(ALL_BLOCKS) > 80, "the fences were not found"


def test_included_examples_exist_and_are_tested() -> None:
    """A block that includes a file (``--8<--``) names a file a test runs."""
    tests_text = "\n".join(p.read_text() for p in (SOURCE_ROOT / "tests").rglob("*.py"))
    included = [(block, _included(block)) for block in ALL_BLOCKS if _included(block)]
    assert included
    for block, path in included:
        assert path is not None
        assert path.is_file(), str(block)
        assert f"{path.stem}" in tests_text, (str(block), path)


def test_guides_import_only_public_modules() -> None:
    """A guide's code imports ``tubemq_aio`` names from the package or a module docs/api.md
    names, never from the modules behind them (``tubemq_aio.consumer.bound``, ...)."""
    wrong = []
    for block in ALL_BLOCKS:
        if block.lang != "python" or _included(block) or "docs/protocol" in str(block):
            continue
        for node in ast.walk(ast.parse(block.body)):
            module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
            if module.startswith("tubemq_aio") and module not in PUBLIC_MODULES:
                wrong.append(f"{block}: from {module} import ...")
    assert wrong == []


def test_data_blocks_parse() -> None:
    """Every JSON, TOML and YAML block parses (a config or an alert rule pasted as shown)."""
    data = [b for b in ALL_BLOCKS if b.lang in {"json", "toml", "yaml"} and b.kind != "skip"]
    assert data
    for block in data:
        _check_data(block)


def _runs(block: Block) -> bool:
    return block.kind != "skip" and block.lang in {"python", *SHELLS} and not _included(block)


def _runs_shell(page: Path) -> bool:
    return any(b.lang in SHELLS and b.kind == "run" for b in page_blocks(page))


#: The pages with blocks to run; a page with a shell block to run starts the CLI as processes,
#: so its test is a ``system`` one (``make test`` runs it, ``make unit`` does not).
RUN_PAGES = [
    pytest.param(
        page,
        marks=[pytest.mark.system] if _runs_shell(page) else [],
        id=str(page.relative_to(SOURCE_ROOT)),
    )
    for page in PAGES
    if any(_runs(b) for b in page_blocks(page))
]


@pytest.mark.parametrize("page", RUN_PAGES)
async def test_page_blocks_run(page: Path, tmp_path: Path) -> None:
    """The page's blocks, in order, against one fake cluster."""
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    ran = 0
    async with FakeCluster(topics=page_topics(page)) as cluster:
        for block in page_blocks(page):
            if block.kind == "skip" or _included(block):
                continue
            if block.lang == "python":
                await _run_python(block, cluster, namespace)
            elif block.lang in SHELLS and block.kind == "run":
                await _run_bash(block, cluster, tmp_path)
            else:
                continue
            ran += 1
    assert ran > 0
