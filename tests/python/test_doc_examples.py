"""The examples of README.md and docs/: every fenced Rust, Python and C block is run.

Python blocks run here, each in a fresh interpreter. Rust blocks run as doctests of a crate
whose documentation includes their page (``cargo test --doc``), C blocks as whole programs
through ``tests/c/doc_examples.sh`` (``make test-c``). The guards at the end fail when a block
would be run by none of these.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Generous: the Python example is paced to real time for about three seconds.
TIMEOUT = 60.0

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
# Info strings that name a language whose examples must run, by the language's tests.
RUST = {"rust", "rs"}
PYTHON = {"python", "py", "python3", "pycon"}
C = {"c", "h"}


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page."""

    page: Path
    line: int  # of the opening fence, from 1
    indent: str
    fence: str
    info: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def lang(self) -> str:
        """The info string's first word (rustdoc's attributes follow after commas)."""
        return re.split(r"[\s,]", self.info.strip(), maxsplit=1)[0].lower()

    @property
    def attributes(self) -> set[str]:
        return {a.strip() for a in self.info.split(",")[1:]}


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order (CommonMark's rules for fences)."""
    found: list[Block] = []
    opened: tuple[int, str, str, str] | None = None
    body: list[str] = []
    for n, text in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        m = FENCE.match(text)
        if opened is None:
            if m:
                opened = (n, m[1], m[2], m[3].strip())
                body = []
        elif m and m[2][0] == opened[2][0] and len(m[2]) >= len(opened[2]) and not m[3].strip():
            line, indent, fence, info = opened
            found.append(Block(page, line, indent, fence, info, "\n".join(body) + "\n"))
            opened = None
        else:
            body.append(text)
    if opened is not None:
        raise AssertionError(f"{page.relative_to(ROOT)}:{opened[0]}: the code block is not closed")
    return found


BLOCKS = [b for page in PAGES for b in blocks(page)]
PYTHON_EXAMPLES = [b for b in BLOCKS if b.info == "python" and not b.indent]


@pytest.mark.parametrize("block", [pytest.param(b, id=b.where) for b in PYTHON_EXAMPLES])
def test_python_example(block: Block, tmp_path: Path) -> None:
    # Blank lines first, so a traceback's line numbers are the page's.
    script = tmp_path / "example.py"
    script.write_text("\n" * block.line + block.code, encoding="utf-8")
    try:
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the example at {block.where} did not finish within {TIMEOUT:.0f} s")
    if done.returncode != 0:
        pytest.fail(
            f"the example at {block.where} failed (exit status {done.returncode}); "
            f"line numbers are {block.page.name}'s:\n{done.stdout}{done.stderr}"
        )


def test_there_are_examples() -> None:
    assert PYTHON_EXAMPLES, "no ```python block found in README.md or docs/"
    assert any(b.lang == "rust" for b in BLOCKS)
    assert any(b.info == "c" for b in BLOCKS)


def doctest_pages() -> set[Path]:
    """The pages some crate includes in its documentation, so their Rust blocks are doctests."""
    pages: set[Path] = set()
    for source in ROOT.glob("crates/*/src/**/*.rs"):
        for rel in re.findall(r'include_str!\(\s*"([^"]+\.md)"\s*\)', source.read_text("utf-8")):
            pages.add((source.parent / rel).resolve())
    return pages


def test_every_example_is_run() -> None:
    """Each Rust, Python or C block is one the tests run, in the form they look for."""
    included = doctest_pages()
    problems: list[str] = []
    for b in BLOCKS:
        if not b.lang:
            problems.append(f"{b.where}: name the block's language (rustdoc runs untagged ones)")
        elif b.lang in RUST | PYTHON | C and (b.indent or b.fence != "```"):
            problems.append(f"{b.where}: open the block with ``` at the start of the line")
        elif b.lang in RUST:
            if b.lang != "rust":
                problems.append(f"{b.where}: write ```rust, which rustdoc runs")
            elif b.attributes & {"ignore", "no_run"}:
                problems.append(f"{b.where}: examples run: drop {b.info.split(',', 1)[1]}")
            elif b.page.resolve() not in included:
                problems.append(
                    f"{b.where}: no crate includes {b.page.name} in its docs, so its Rust "
                    "blocks are not doctests (add an include_str! under #[cfg(doctest)])"
                )
        elif b.lang in PYTHON and b.info != "python":
            problems.append(f"{b.where}: write ```python, which this module runs")
        elif b.lang in C and b.info != "c":
            problems.append(f"{b.where}: write ```c, which tests/c/doc_examples.sh runs")
    assert not problems, "examples that make test would not run:\n" + "\n".join(problems)


def test_c_examples_are_part_of_test_c() -> None:
    makefile = (ROOT / "Makefile").read_text("utf-8")
    assert (ROOT / "tests/c/doc_examples.sh").is_file()
    assert re.search(r"^test-c:.*(\n\t.*)*tests/c/doc_examples\.sh", makefile, re.M)
