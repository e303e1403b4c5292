"""The README is a test: its python and bash blocks run as written, in order, in a fresh folder; its links stay inside
the repository; its CLI reference is each command's real --help."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.readme_blocks import ReadmeBlockError, read_blocks
from tools.readme_cli_reference import REGENERATE, current_section, reference_section

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RUNNER = ROOT / "tests" / "readme_blocks.py"
#: the README blocks the suite does not run, each with its reason in the README; a new one must be added here
NOT_RUN = 4
#: the bucket the README's S3 example names, made on the suite's loopback S3 server
README_BUCKET = "bucket"


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def run_readme(readme: Path, folder: Path, env: dict[str, str], *section_env: str,
               timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUNNER), str(readme),
                           *(f"--section-env={item}" for item in section_env)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)


def block_env(**extra: str) -> dict[str, str]:
    """The environment of a user with the venv's bin on PATH, and none of icelog's own settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ICELOG_", "AWS_"))}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return {**env, **extra}


@pytest.mark.spark  # its Spark blocks start a JVM (in the runner's process, not the suite's shared session)
def test_readme_runs_as_written(tmp_path, s3_endpoint, postgres_url):
    """Every python and bash block of README.md, in order, in an empty folder: S3 blocks against the suite's S3
    server (through the AWS_* variables the README documents), the PostgreSQL blocks against a new database
    (through ICELOG_CATALOG_DIR), Spark in the runner's own process."""
    if os.environ.get("ICELOG_SKIP_SPARK") == "1":
        pytest.skip("ICELOG_SKIP_SPARK=1: the README's Spark blocks need a JVM")
    import pyarrow.fs as pafs

    from tests.conftest import S3_ACCESS_KEY, S3_SECRET_KEY

    s3 = pafs.S3FileSystem(access_key=S3_ACCESS_KEY, secret_key=S3_SECRET_KEY, region="us-east-1", scheme="http",
                           endpoint_override=s3_endpoint.split("//")[1], allow_bucket_creation=True)
    s3.create_dir(README_BUCKET)
    folder = tmp_path / "reader"
    folder.mkdir()
    env = block_env(AWS_ENDPOINT_URL_S3=s3_endpoint, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID=S3_ACCESS_KEY,
                    AWS_SECRET_ACCESS_KEY=S3_SECRET_KEY)
    result = run_readme(README, folder, env, f"PostgreSQL:ICELOG_CATALOG_DIR={postgres_url}")
    report = [line for line in result.stdout.splitlines() if line.startswith("README.md:")]
    assert result.returncode == 0, (result.stdout[-6000:] + result.stderr[-6000:])
    blocks = read_blocks(readme_text())
    assert [line.split()[0] for line in report] == [f"README.md:{b.line}" for b in blocks]
    assert sum(" skipped: " in line for line in report) == NOT_RUN
    assert sum(" stopped after its first line: icelog REST catalog on " in line for line in report) == 1
    # what the blocks left behind: the tour's tables, and the file appended in place still there
    assert (folder / "warehouse" / "db" / "events" / "metadata" / "version-hint.text").is_file()
    assert (folder / "data" / "x.parquet").is_file()
    assert s3.get_file_info(f"{README_BUCKET}/lake/db/events/metadata/version-hint.text").is_file
    assert (folder / "lake-copy" / "catalog.db").is_file()


def test_every_block_not_run_says_why_and_they_are_few():
    not_run = [b for b in read_blocks(readme_text()) if b.not_run_reason is not None]
    assert all(len(b.not_run_reason) > 20 for b in not_run), [b.line for b in not_run]
    assert len(not_run) == NOT_RUN, [(b.line, b.not_run_reason) for b in not_run]
    # none of them is an example of the Python API or of changing a table
    assert all(b.kind == "shell" for b in not_run)


def test_the_runner_names_the_readme_line_of_a_failing_command(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# T\n\n```python\nx = 41\n```\n\n```bash\necho ok\n\ntest $((1 + 1)) = 3\necho never\n```\n")
    result = run_readme(readme, tmp_path, block_env(), timeout_s=60)
    assert result.returncode == 1
    assert "README.md:4 python ran" in result.stdout
    assert "README.md:10: exit status 1" in result.stderr
    assert "FAILED README.md:8: the shell block failed" in result.stdout
    assert "never" not in result.stdout


def test_python_blocks_share_one_namespace_and_tracebacks_name_readme_lines(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("```python\nx = 41\n```\n\n```python\nassert x + 1 == 42\nundefined_name\n```\n")
    result = run_readme(readme, tmp_path, block_env(), timeout_s=60)
    assert result.returncode == 1
    assert 'File "README.md", line 7' in result.stderr
    assert "FAILED README.md:6: the Python block failed: NameError" in result.stdout


def test_markers_skip_a_block_or_run_it_until_stopped(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- not run by tests: it needs a tape drive -->\n```bash\nexit 3\n```\n\n"
                      "<!-- runs until stopped: it serves forever -->\n```bash\n"
                      "python -c 'import time; print(\"ready\", flush=True); time.sleep(600)'\n```\n")
    result = run_readme(readme, tmp_path, block_env(), timeout_s=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == ["README.md:3 shell skipped: it needs a tape drive",
                                          "README.md:8 shell stopped after its first line: ready"]


def test_until_stopped_marks_only_shell_blocks():
    with pytest.raises(ReadmeBlockError, match="only shell blocks"):
        read_blocks("<!-- runs until stopped: x -->\n```python\nwhile True: pass\n```\n")
    with pytest.raises(ReadmeBlockError, match="never closed"):
        read_blocks("```bash\necho\n")


def test_section_env_applies_only_under_its_heading(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("## A\n\n```bash\ntest -z \"${NAME:-}\"\n```\n\n## B\n\n### B.1\n\n```bash\ntest \"$NAME\" = v\n```\n"
                      "\n## C\n\n```bash\ntest -z \"${NAME:-}\"\n```\n")
    result = run_readme(readme, tmp_path, block_env(), "B:NAME=v", timeout_s=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(result.stdout.splitlines()) == 3


# ---------------------------------------------------------------- links

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_REFERENCE_DEFINITION = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^>]+)>")
_HREF = re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)["']""")
_BARE_URL = re.compile(r"\b(?:https?|ftp)://[^\s)>\]]+")


def prose(markdown: str) -> str:
    """The text outside fenced blocks and code spans (where a URL is a value, not a link)."""
    without_fences = re.sub(r"^(`{3,}).*?^\1\s*$", "", markdown, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"(`+).+?\1", "", without_fences, flags=re.DOTALL)


def github_anchor(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped (but - and _), spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    body = re.sub(r"^(`{3,}).*?^\1\s*$", "", markdown, flags=re.MULTILINE | re.DOTALL)
    for match in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", body, flags=re.MULTILINE):
        slug = github_anchor(match.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def link_problems(markdown: str, root: Path) -> list[str]:
    """Why each link of a Markdown document does not point inside the repository at ``root``."""
    text = prose(markdown)
    targets = (_LINK.findall(text) + _REFERENCE_DEFINITION.findall(text) + _AUTOLINK.findall(text)
               + _HREF.findall(text))
    plain = text
    for pattern in (_LINK, _REFERENCE_DEFINITION, _AUTOLINK, _HREF):
        plain = pattern.sub("", plain)
    problems = [f"{url}: a URL outside the repository" for url in _BARE_URL.findall(plain)]
    known = anchors(markdown)
    for target in targets:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.IGNORECASE) or target.startswith("//"):
            problems.append(f"{target}: a URL outside the repository")
            continue
        path, _, fragment = target.partition("#")
        if not path:
            if fragment not in known:
                problems.append(f"{target}: no heading of README.md has that anchor")
            continue
        resolved = (root / path).resolve()
        if resolved != root and root not in resolved.parents:
            problems.append(f"{target}: outside the repository")
        elif not resolved.exists():
            problems.append(f"{target}: no such file in the repository")
    return problems


def test_every_readme_link_points_inside_the_repository():
    assert link_problems(readme_text(), ROOT) == []
    assert "](tests/test_layers.py)" in readme_text()  # the check does see links


def test_the_link_check_finds_each_kind_of_outside_link(tmp_path):
    (tmp_path / "there.md").write_text("x")
    doc = ("# Top\n\n[ok](there.md) [ok too](#top) [gone](missing.md) [up](../shared/DESIGN.md)\n"
           "[web](https://example.com) <https://example.org> see http://example.net\n"
           "[anchor](#nowhere) `http://127.0.0.1:8181` is a value\n\n```\nhttp://in.a.block\n```\n")
    assert link_problems(doc, tmp_path) == [
        "http://example.net: a URL outside the repository",
        "missing.md: no such file in the repository",
        "../shared/DESIGN.md: outside the repository",
        "https://example.com: a URL outside the repository",
        "#nowhere: no heading of README.md has that anchor",
        "https://example.org: a URL outside the repository",
    ]


# ---------------------------------------------------------------- CLI reference

def test_cli_reference_is_each_commands_help():
    assert current_section(readme_text()) == reference_section(), f"the README's CLI reference is stale: run {REGENERATE}"


def test_cli_reference_covers_every_command_with_its_options():
    section = reference_section()
    for name in ("create-table", "expire-snapshots", "serve", "bench"):
        assert f"#### icelog {name}\n" in section
    assert "--delete-external-files" in section and "--max-body-bytes" in section
    assert "--sizes SIZES" in section  # icelog bench's options come from the benchmarks' own parser
