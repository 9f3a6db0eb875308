"""Every protocol citation in the code and the docs names a section that exists in docs/protocol/.

A citation names its page, ``docs/protocol/wire.md §5.11`` or ``docs/protocol/consumer.md §4.3``
(in the docs, a link such as ``[§4.3](protocol/consumer.md#s4-3)``); a bare ``§N.M`` later in the
same file refers to the page named last before it. The sections are the numbered headings of the
pages, each with an explicit anchor ``{#sN-M}``. The old forms ("protocol notes §...",
"wire-and-producer.md §...") pointed at documents outside the repository and are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_DIR = REPO_ROOT / "docs" / "protocol"
#: The pages citations may name, by short name.
PAGES = ("wire", "consumer", "time")
#: Where citations are looked for, and in which kinds of files.
SCANNED_DIRS = ("tubemq_aio", "tests", "benchmarks", "docs", "protos", "examples")
SCANNED_TOP_FILES = ("README.md", "CHANGELOG.md")
SCANNED_SUFFIXES = frozenset({".py", ".pyi", ".pyx", ".c", ".h", ".md", ".proto"})
#: Not scanned: the protocol pages themselves (their links are checked by ``mkdocs --strict``),
#: benchmark results, and this file (its docstring and patterns show the old forms).
SKIPPED = ("docs/protocol/", "benchmarks/results/", "tests/unit/test_protocol_citations.py")

#: ``## 5.11 Title {#s5-11}``: a numbered heading with its explicit anchor.
HEADING = re.compile(r"^#{2,6} +(?P<num>\d+(?:\.\d+)?)\.? .*?\{#(?P<anchor>[\w-]+)\} *$")
#: A Markdown link to a protocol page, from any docs directory.
LINK = re.compile(
    r"\[(?P<text>[^\]\n]*)\]\((?:\.\./)*protocol/(?P<page>wire|consumer|time)\.md(?:#(?P<anchor>[\w-]+))?\)"
)
TOKEN = re.compile(
    r"docs/protocol/(?P<page>wire|consumer|time)\.md"
    r"|§ ?(?P<num>\d+(?:\.\d+)?)(?: ?[–-] ?§?(?P<end>\d+(?:\.\d+)?))?"
)
#: Citation texts of documents that never were in the repository.
OLD_FORM = re.compile(
    r"(?:\b(?:protocol|wire|consumer)\s+notes?|\bnotes?)\b'?,?\s*"
    r"(?:\(?(?:wire-and-producer|consumer)\.md)?\s*\(?§"
    r"|wire-and-producer\.md|(?<!protocol/)\bconsumer\.md\s?§|\b(?:protocol|wire|consumer)\s+notes?\b",
    re.IGNORECASE,
)
#: ``§`` of other documents, which are not protocol citations: the shared design and facts
#: notes, and an issue's own sections ("issue 31 §4", as in CHANGELOG headings).
OTHER_DOCUMENT = re.compile(r"\b(?:DESIGN|FACTS|[Ii]ssue \d+) *$")


@dataclass(frozen=True)
class Problem:
    """A citation that does not resolve."""

    path: str
    line: int
    text: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text!r}: {self.reason}"


def section_anchor(number: str) -> str:
    """The explicit anchor of section ``number``: ``"5.11"`` → ``"s5-11"``."""
    return "s" + number.replace(".", "-")


def page_sections(markdown: str) -> set[str]:
    """The section numbers of one protocol page, from its numbered headings.

    Raises:
        ValueError: a numbered heading without the anchor its number implies, or twice.
    """
    found: set[str] = set()
    in_fence = False
    for no, line in enumerate(markdown.splitlines(), start=1):
        if line.startswith("```"):
            in_fence = not in_fence
        if in_fence or not re.match(r"#{2,6} +\d", line):
            continue
        m = HEADING.match(line)
        if m is None or m.group("anchor") != section_anchor(m.group("num")):
            raise ValueError(f"line {no}: numbered heading without its anchor: {line!r}")
        if m.group("num") in found:
            raise ValueError(f"line {no}: section {m.group('num')} twice")
        found.add(m.group("num"))
    return found


def load_sections() -> dict[str, set[str]]:
    """Section numbers of every citable page."""
    return {
        page: page_sections((PROTOCOL_DIR / f"{page}.md").read_text(encoding="utf-8"))
        for page in PAGES
    }


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def check_text(path: str, text: str, sections: dict[str, set[str]]) -> Iterator[Problem]:
    """Every citation in ``text`` that does not resolve to a section of ``sections``."""

    def problem(offset: int, reason: str) -> Problem:
        no = _line_of(text, offset)
        return Problem(path, no, text.splitlines()[no - 1].strip(), reason)

    for m in OLD_FORM.finditer(text):
        yield problem(m.start(), "old citation form: cite docs/protocol/<page>.md §N")
    # Links name their page and section themselves; hide their text from the scan below.
    events: list[tuple[int, str]] = []
    masked = list(text)
    for link in LINK.finditer(text):
        linked, anchor = link.group("page"), link.group("anchor")
        if anchor is not None and anchor not in {section_anchor(n) for n in sections[linked]}:
            yield problem(link.start(), f"no anchor #{anchor} in docs/protocol/{linked}.md")
        events.append((link.start(), linked))
        for i in range(link.start("text"), link.end("text")):
            if masked[i] != "\n":
                masked[i] = " "
    scan = "".join(masked)
    for m in TOKEN.finditer(scan):
        events.append((m.start(), m.group("page") or ""))
        if m.group("num") is None:
            continue
        line_start = scan.rfind("\n", 0, m.start()) + 1
        if OTHER_DOCUMENT.search(scan[line_start : m.start()]):
            events.pop()
    page: str | None = None
    for offset, event_page in sorted(events):
        if event_page:
            page = event_page
            continue
        cite = TOKEN.match(scan, offset)
        assert cite is not None
        if page is None:
            yield problem(
                offset,
                "no docs/protocol page named before this citation"
                " (write docs/protocol/wire.md §N or docs/protocol/consumer.md §N)",
            )
            continue
        for number in (cite.group("num"), cite.group("end")):
            if number is not None and number not in sections[page]:
                yield problem(offset, f"no section {number} in docs/protocol/{page}.md")


def scanned_files() -> Iterator[Path]:
    """The files whose citations are checked."""
    yield from (REPO_ROOT / name for name in SCANNED_TOP_FILES)
    for top in SCANNED_DIRS:
        for path in sorted((REPO_ROOT / top).rglob("*")):
            rel = path.relative_to(REPO_ROOT).as_posix()
            if path.suffix in SCANNED_SUFFIXES and path.is_file() and not rel.startswith(SKIPPED):
                yield path


@pytest.fixture(scope="module")
def sections() -> dict[str, set[str]]:
    """The citable sections, read once."""
    return load_sections()


def test_every_citation_resolves(sections: dict[str, set[str]]) -> None:
    problems: list[Problem] = []
    cited = 0
    for path in scanned_files():
        text = path.read_text(encoding="utf-8")
        if "§" not in text and not OLD_FORM.search(text):
            continue
        cited += 1
        problems.extend(check_text(path.relative_to(REPO_ROOT).as_posix(), text, sections))
    assert cited > 30, "the scan found almost no citations: is SCANNED_DIRS right?"
    assert not problems, "dangling protocol citations:\n" + "\n".join(map(str, problems))


def test_pages_number_every_section_with_its_anchor(sections: dict[str, set[str]]) -> None:
    # The sections the code leans on most exist on the right page.
    assert {"1.1", "1.4", "2.5", "4.6", "5.11", "8", "9"} <= sections["wire"]
    assert {"0", "0.2", "2.4", "3.2", "4.3", "7.3", "8.4", "11", "12"} <= sections["consumer"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x (docs/protocol/wire.md §5.11) y", []),
        ("docs/protocol/consumer.md §1.2\n\nlater (§4.3, §12 item 8)", []),
        ("docs/protocol/wire.md §5.2–5.5, docs/protocol/consumer.md §5", []),
        ("docs/protocol/consumer.md §1–§4, §6", []),
        ("see [consumer protocol §9.3](protocol/consumer.md#s9-3), then (§7)", []),
        ("[§8](../protocol/consumer.md#s8)", []),
        ("bare (§4.3)", ["no docs/protocol page named before this citation"]),
        ("### Added (the read-ahead, issue 31 §4: model only)", []),
        ("Issue 32 §1 checked again", []),
        ("a tissue 3 §4", ["no docs/protocol page named before this citation"]),
        ("docs/protocol/wire.md §5.99", ["no section 5.99 in docs/protocol/wire.md"]),
        ("docs/protocol/wire.md §5.2–5.99", ["no section 5.99 in docs/protocol/wire.md"]),
        ("docs/protocol/wire.md §1.1, then consumer-side §0.2", ["no section 0.2 in"]),
        ("[x](protocol/wire.md#s77)", ["no anchor #s77 in docs/protocol/wire.md"]),
        ("(shared protocol notes §1.1)", ["old citation form", "no docs/protocol page"]),
        ("(wire notes §5.11)", ["old citation form", "no docs/protocol page"]),
        ("(consumer note §8)", ["old citation form", "no docs/protocol page"]),
        ("wire-and-producer.md §4.4", ["old citation form", "no docs/protocol page"]),
        ("docs/protocol/wire.md §1, consumer.md §5", ["old citation form"]),
        ("docs/protocol/wire.md §1, the notes' §1.1", ["old citation form"]),
    ],
)
def test_checker_accepts_the_new_form_only(
    text: str, expected: list[str], sections: dict[str, set[str]]
) -> None:
    problems = list(check_text("f.py", text, sections))
    assert len(problems) == len(expected), problems
    for problem, reason in zip(
        sorted(problems, key=lambda p: p.reason), sorted(expected), strict=True
    ):
        assert problem.reason.startswith(reason)
        assert problem.path == "f.py"


def test_problem_names_file_and_line(sections: dict[str, set[str]]) -> None:
    text = "a\nb\ndocs/protocol/consumer.md §3.1\nc (§3.9)\n"
    (problem,) = check_text("pkg/mod.py", text, sections)
    assert str(problem) == ("pkg/mod.py:4: 'c (§3.9)': no section 3.9 in docs/protocol/consumer.md")


@pytest.mark.parametrize(
    "heading",
    ["## 5.11 Broker flow control", "## 5.11 Broker flow control {#s5-12}", "### 3 x {#s3-0}"],
)
def test_a_numbered_heading_needs_its_own_anchor(heading: str) -> None:
    with pytest.raises(ValueError, match="without its anchor"):
        page_sections(f"# Page\n\n{heading}\n")


def test_a_section_number_is_unique() -> None:
    with pytest.raises(ValueError, match="twice"):
        page_sections("## 1. A {#s1}\n\n## 1 B {#s1}\n")


def test_headings_in_code_fences_are_not_sections() -> None:
    assert page_sections("## 2. Real {#s2}\n\n```\n## 3 not a heading\n```\n") == {"2"}
