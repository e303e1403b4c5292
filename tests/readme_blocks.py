"""Runs the README's code blocks as written: every ```python and ```bash block, in document order, in the current folder.

Layer: tests (a helper of tests/test_readme.py; imports nothing of icelog itself, the blocks do).

Usage::

    cd "$(mktemp -d)" && python /path/to/tests/readme_blocks.py /path/to/README.md \
        --section-env 'PostgreSQL:ICELOG_CATALOG_DIR=postgresql://...'

Python blocks share one namespace, as if pasted one after another into one interpreter; a traceback names
README.md and the block's own line numbers. Shell blocks run through bash (``-e -o pipefail``, so a failing command
stops its block and names its README line), with the environment of this process. Two HTML comments, on the line
right before a block, change how it runs:

- ``<!-- not run by tests: REASON -->``: the block is skipped and reported with its reason.
- ``<!-- runs until stopped: REASON -->``: a shell block whose commands serve forever; each command line starts on
  its own, its first line of output is read (it must print one within a minute), and then it is stopped.

``--section-env SECTION:NAME=VALUE`` sets an environment variable while the blocks under the heading SECTION run
(and their sub-sections'), for a block that reads a documented variable such as ICELOG_CATALOG_DIR.

Every block is reported on stdout as ``README.md:LINE <kind> ran|skipped|stopped ...``, one line each, and the process
exits 1 at the first block that fails.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

#: fence languages that run, and the kind each runs as
RUNNABLE_LANGUAGES = {"python": "python", "bash": "shell", "sh": "shell"}
NOT_RUN_MARKER = "not run by tests:"
UNTIL_STOPPED_MARKER = "runs until stopped:"
#: how long a block marked "runs until stopped" may take to print its first line
FIRST_LINE_TIMEOUT_S = 60.0

_FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_MARKER = re.compile(r"^<!--\s*(.*?)\s*-->\s*$")


class ReadmeBlockError(Exception):
    """A README block is malformed (an unclosed fence, a marker on a block it cannot apply to)."""


@attrs.frozen(kw_only=True)
class Block:
    """One fenced code block of the README that the tests execute (or skip, saying why)."""

    kind: str                      # "python" or "shell"
    line: int                      # README line of the block's first code line (1-based)
    text: str
    sections: tuple[str, ...]      # the headings it sits under, outermost first
    not_run_reason: str | None = None
    until_stopped_reason: str | None = None


def read_blocks(markdown: str) -> tuple[Block, ...]:
    """The runnable blocks of a Markdown document, in order.

    :param markdown: the document's text
    :raises ReadmeBlockError: a fence is never closed, or "runs until stopped" marks a block that is not shell
    """
    lines = markdown.splitlines()
    blocks: list[Block] = []
    headings: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        heading = _HEADING.match(lines[i])
        if heading:
            level = len(heading.group(1))
            headings = [h for h in headings if h[0] < level] + [(level, heading.group(2))]
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        ticks, language = fence.group(1), fence.group(2).lower()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == ticks), None)
        if end is None:
            raise ReadmeBlockError(f"README line {i + 1}: the ``` fence is never closed")
        marker = _MARKER.match(lines[i - 1]) if i > 0 else None
        note = marker.group(1) if marker else ""
        if language in RUNNABLE_LANGUAGES:
            not_run = note[len(NOT_RUN_MARKER):].strip() if note.startswith(NOT_RUN_MARKER) else None
            until_stopped = (note[len(UNTIL_STOPPED_MARKER):].strip() if note.startswith(UNTIL_STOPPED_MARKER)
                             else None)
            kind = RUNNABLE_LANGUAGES[language]
            if until_stopped is not None and kind != "shell":
                raise ReadmeBlockError(f"README line {i}: '{UNTIL_STOPPED_MARKER}' marks a {language} block; "
                                       f"only shell blocks can be stopped")
            blocks.append(Block(kind=kind, line=i + 2, text="\n".join(lines[i + 1:end]) + "\n",
                                sections=tuple(h[1] for h in headings), not_run_reason=not_run,
                                until_stopped_reason=until_stopped))
        i = end + 1
    return tuple(blocks)


class BlockFailed(Exception):
    """A README block did not run as written; the message names its README line."""


def run_python(block: Block, namespace: dict[str, object], readme: str) -> None:
    """Execute a Python block in the shared namespace; tracebacks name README.md and the block's lines."""
    code = compile("\n" * (block.line - 1) + block.text, readme, "exec")
    exec(code, namespace)  # noqa: S102 - running the README's own examples is the point


def run_shell(block: Block, readme: str) -> None:
    """Run a shell block through bash; the first failing command stops it and is named by its README line."""
    trap = f"trap 'echo \"{readme}:$(({block.line} + LINENO - 2)): exit status $?\" >&2' ERR\n"
    sys.stdout.flush()
    result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", trap + block.text], check=False)
    if result.returncode != 0:
        raise BlockFailed(f"{readme}:{block.line}: the shell block failed (exit status {result.returncode})")


def command_lines(text: str) -> Iterator[tuple[int, str]]:
    """The commands of a shell block with their offsets: non-empty, non-comment lines, continuations joined."""
    pending: list[str] = []
    start = 0
    for offset, line in enumerate(text.splitlines()):
        if not pending:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            start = offset
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        pending.append(line)
        yield start, " ".join(part.strip() for part in pending)
        pending = []
    if pending:
        yield start, " ".join(part.strip() for part in pending)


def run_until_stopped(block: Block, readme: str) -> list[str]:
    """Start each command of the block, read its first line of output, stop it; returns those first lines."""
    first_lines = []
    for offset, command in command_lines(block.text):
        where = f"{readme}:{block.line + offset}"
        process = subprocess.Popen(["bash", "-c", "exec " + command], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, start_new_session=True, text=True)
        try:
            deadline = time.monotonic() + FIRST_LINE_TIMEOUT_S
            ready: list[object] = []
            while not ready and time.monotonic() < deadline and process.poll() is None:
                ready, _, _ = select.select([process.stdout], [], [], 0.5)
            if not ready:
                raise BlockFailed(f"{where}: printed nothing within {FIRST_LINE_TIMEOUT_S:.0f} s "
                                  f"(exit status {process.poll()}): {command}")
            line = process.stdout.readline().rstrip("\n")
            if process.poll() is not None:
                rest = process.stdout.read()
                raise BlockFailed(f"{where}: exited with status {process.returncode} instead of running until "
                                  f"stopped: {command}\n{line}\n{rest}")
            first_lines.append(line)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            process.stdout.close()
    return first_lines


def parse_section_env(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """``SECTION:NAME=VALUE`` options as {section: {name: value}}.

    :raises ValueError: an item without the colon or the equals sign (the message names it)
    """
    out: dict[str, dict[str, str]] = {}
    for item in items:
        section, colon, assignment = item.partition(":")
        name, equals, value = assignment.partition("=")
        if not colon or not equals or not section or not name:
            raise ValueError(f"--section-env {item.split('=', 1)[0]!r}: expected SECTION:NAME=VALUE")
        out.setdefault(section, {})[name] = value
    return out


def run_blocks(readme_path: str, section_env: dict[str, dict[str, str]]) -> None:
    """Run every block of the README in order in the current folder; raises BlockFailed at the first failure."""
    readme = Path(readme_path)
    blocks = read_blocks(readme.read_text(encoding="utf-8"))
    name = readme.name
    namespace: dict[str, object] = {"__name__": "__main__"}
    base_env = dict(os.environ)
    for block in blocks:
        os.environ.clear()
        os.environ.update(base_env)
        for section in block.sections:
            os.environ.update(section_env.get(section, {}))
        where = f"{name}:{block.line} {block.kind}"
        if block.not_run_reason is not None:
            print(f"{where} skipped: {block.not_run_reason}", flush=True)
            continue
        started = time.perf_counter()
        if block.until_stopped_reason is not None:
            first_lines = run_until_stopped(block, name)
            print(f"{where} stopped after its first line: {' | '.join(first_lines)}", flush=True)
            continue
        if block.kind == "python":
            try:
                run_python(block, namespace, name)
            except Exception as e:
                raise BlockFailed(f"{name}:{block.line}: the Python block failed: {type(e).__name__}: {e}") from e
        else:
            run_shell(block, name)
        sys.stdout.flush()
        print(f"{where} ran in {time.perf_counter() - started:.1f} s", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a README's python and bash blocks in order, here.")
    parser.add_argument("readme")
    parser.add_argument("--section-env", action="append", default=[], metavar="SECTION:NAME=VALUE")
    args = parser.parse_args(argv)
    # as in an interpreter started here: the current folder first, and not this script's folder (tests/, whose
    # sub-folders would shadow icelog's packages)
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [os.getcwd()] + [p for p in sys.path if p and str(Path(p).resolve()) != here]
    try:
        run_blocks(args.readme, parse_section_env(args.section_env))
    except BlockFailed as e:
        import traceback

        if e.__cause__ is not None:
            traceback.print_exception(e.__cause__)
        print(f"FAILED {e}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
