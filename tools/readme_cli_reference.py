"""The README's "CLI reference" section, generated from each command's real ``--help`` output.

Layer: tools (top; imports the CLI's parser, nothing imports it).

Usage::

    .venv/bin/python -m tools.readme_cli_reference           # print the section
    .venv/bin/python -m tools.readme_cli_reference --check   # exit 1 when README.md's section differs
    .venv/bin/python -m tools.readme_cli_reference --write   # regenerate README.md's section in place

The section sits between the two marker lines :data:`START` and :data:`END`. Help is rendered at a fixed width
(``COLUMNS`` = :data:`HELP_COLUMNS`), so the text does not depend on the terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from tools.cli import build_parser

README = Path(__file__).resolve().parent.parent / "README.md"
REGENERATE = ".venv/bin/python -m tools.readme_cli_reference --write"
START = f"<!-- cli-reference: start (generated from each command's --help by `{REGENERATE}`; do not edit) -->"
END = "<!-- cli-reference: end -->"
HELP_COLUMNS = 100


class ReferenceMarkersError(ValueError):
    """README.md lacks the section's marker lines, or has them out of order or more than once."""


@contextlib.contextmanager
def _columns(width: int) -> Iterator[None]:
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


def help_text(argv: Sequence[str]) -> str:
    """What ``icelog <argv> --help`` prints, at :data:`HELP_COLUMNS` columns."""
    out = io.StringIO()
    with _columns(HELP_COLUMNS), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        if list(argv) == ["bench"]:  # icelog bench hands every argument to the benchmarks' own parser
            from tools.bench import build_parser as bench_parser

            bench_parser().parse_args(["--help"])
        else:
            build_parser().parse_args([*argv, "--help"])
    return out.getvalue().rstrip() + "\n"


def command_names() -> list[str]:
    """The subcommands, in the order ``icelog --help`` lists them."""
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


def reference_section() -> str:
    """The generated Markdown between (and including) the markers."""
    parts = [START, "", "```text", "$ icelog --help", help_text([]).rstrip(), "```"]
    for name in command_names():
        parts += ["", f"#### icelog {name}", "", "```text", help_text([name]).rstrip(), "```"]
    return "\n".join([*parts, "", END])


def _span(readme_text: str) -> tuple[int, int]:
    if readme_text.count(START) != 1 or readme_text.count(END) != 1:
        raise ReferenceMarkersError(f"README.md must hold each CLI reference marker once: {START!r} and {END!r}")
    start, end = readme_text.index(START), readme_text.index(END)
    if end < start:
        raise ReferenceMarkersError("README.md's CLI reference end marker comes before its start marker")
    return start, end + len(END)


def current_section(readme_text: str) -> str:
    """The section as README.md holds it now, markers included."""
    start, end = _span(readme_text)
    return readme_text[start:end]


def with_section(readme_text: str, section: str) -> str:
    """README.md's text with the section replaced."""
    start, end = _span(readme_text)
    return readme_text[:start] + section + readme_text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.readme_cli_reference", description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="regenerate the section in README.md")
    mode.add_argument("--check", action="store_true", help="exit 1 when README.md's section is not current")
    parser.add_argument("--readme", default=str(README), help="the README to read or write (default: the repo's)")
    args = parser.parse_args(argv)
    section = reference_section()
    if not (args.write or args.check):
        print(section)
        return 0
    path = Path(args.readme)
    text = path.read_text(encoding="utf-8")
    try:
        current = current_section(text)
    except ReferenceMarkersError as e:
        print(f"readme_cli_reference: {e}", file=sys.stderr)
        return 1
    if current == section:
        return 0
    if args.check:
        print(f"readme_cli_reference: {path}'s CLI reference is not current; run {REGENERATE}", file=sys.stderr)
        return 1
    path.write_text(with_section(text, section), encoding="utf-8")
    print(f"readme_cli_reference: regenerated the CLI reference in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
