"""The documentation tells the truth: README.md and the site in docs/ (mkdocs.yml).

Every setting has a doc and is in the generated configuration reference; the generated references are fresh;
every command the CLI guide names exists; the README stays short and starts with the two set-up commands; every
code block marked runnable (``<!-- runnable -->`` on the line before its fence) runs as written; every command
of the adoption steps and of the kinds runs as written, wherever those steps live (the README and the site).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from alma_schedule.cli import cli
from alma_schedule.settings import Settings, env_name

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")
MARKER = "<!-- runnable -->"


def _page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the generated references ------------------------------------------------------------------------


def test_every_setting_has_a_doc() -> None:
    undocumented = [
        f.name
        for f in dataclasses.fields(Settings)
        if f.metadata.get("kind") != "code" and not str(f.metadata.get("doc", "")).strip()
    ]
    assert undocumented == [], "give each its doc in alma_schedule/settings.py (the field's metadata)"


def test_every_setting_is_in_the_configuration_reference() -> None:
    page = _page("reference/configuration.md")
    missing = [
        env_name(f.name)
        for f in dataclasses.fields(Settings)
        if f.metadata.get("kind") != "code" and f"`{env_name(f.name)}`" not in page
    ]
    assert missing == [], "run scripts/gen-docs"


def test_the_generated_references_are_fresh() -> None:
    gen = _gen_docs()
    stale = [str(p.relative_to(ROOT)) for p in gen.stale()]
    assert stale == [], f"{stale} differ from what the code generates: run scripts/gen-docs"


def test_every_command_is_in_the_cli_reference() -> None:
    import click

    page = _page("reference/cli.md")

    def paths(group: click.Group, prefix: str) -> list[str]:
        found = []
        for name, cmd in group.commands.items():
            found.append(f"{prefix} {name}")
            if isinstance(cmd, click.Group):
                found += paths(cmd, f"{prefix} {name}")
        return found

    missing = [p for p in paths(cli, "alma-schedule") if f"## `{p}`" not in page]
    assert missing == [], "run scripts/gen-docs"


def test_a_setting_without_a_doc_fails_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    from alma_schedule.cli import settings_cmd

    rows = settings_cmd.documented_settings()
    monkeypatch.setattr(settings_cmd, "documented_settings", lambda: [*rows, {**rows[0], "setting": "x", "doc": " "}])
    with pytest.raises(ValueError, match="setting x has no doc"):
        _gen_docs().configuration_page()


# --- the README and the CLI guide --------------------------------------------------------------------


def test_the_readme_fits_on_a_screen_and_links_into_the_site() -> None:
    assert len(README.splitlines()) <= 250, "README.md is at most 250 lines: the rest lives in docs/"
    for target in re.findall(r"\]\((docs/[^)#\s]+)", README):
        assert (ROOT / target).exists(), target


def test_every_cli_command_in_the_cli_guide_exists() -> None:
    named = set(re.findall(r"^\| `([a-z-]+)", _page("cli.md"), flags=re.M))
    assert {"routines", "runs", "plan", "tick", "migrate", "reindex", "demo", "import-beat", "clock"} <= named
    assert named - set(cli.commands) == set()


def test_the_two_setup_commands_come_first() -> None:
    head = README.split("## ", 1)[0]
    assert "scripts/demo" in head and "scripts/test" in head
    assert (ROOT / "scripts" / "test").exists()
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()


def test_code_blocks_and_nested_lists_in_list_items_are_indented_by_four() -> None:
    """Python-Markdown (mkdocs) reads a list item's content at four spaces: a fence or a nested item indented by
    1-3 (or 5-7) spaces falls out of its item (the steps' numbering restarts at 1). GitHub reads both; write four.
    docs/architecture.md (the module list, written by every change) is held to it by its own reviews."""
    bad = []
    for path in sorted(DOCS.rglob("*.md")):
        if path.name == "architecture.md":
            continue
        fence = False
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(r"^\s*```", line):
                if not fence and re.match(r"^( {1,3}| {5,7})```", line):
                    bad.append(f"{path.relative_to(ROOT)}:{n}")
                fence = not fence
            elif not fence and re.match(r"^( {1,3}| {5,7})([-*]|\d+\.) ", line):
                bad.append(f"{path.relative_to(ROOT)}:{n}")
    assert bad == []


def test_the_site_builds_in_ci() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "mkdocs build --strict" in ci
    nav = (ROOT / "mkdocs.yml").read_text()
    assert "omitted_files: warn" in nav and "anchors: warn" in nav and "strict: true" in nav


# --- runnable blocks -----------------------------------------------------------------------------------


def _runnable_blocks() -> list[tuple[str, str, str]]:
    """(where, language, code) of every fenced block preceded by the runnable marker, README and site."""
    found = []
    for path in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        found.extend(
            (f"{path.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}", m.group(1), m.group(2))
            for m in re.finditer(rf"{re.escape(MARKER)}\n```(\w+)\n(.*?)\n```", text, flags=re.S)
        )
    return found


def _clean_env(tmp_path: Path) -> dict[str, str]:
    bindir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", HOME=str(tmp_path))
    return env


def test_the_site_marks_runnable_blocks() -> None:
    where = {w.split(":")[0] for w, _, _ in _runnable_blocks()}
    assert {"docs/getting-started.md", "docs/schedules.md", "docs/reference/python-api.md"} <= where


@pytest.mark.integration  # subprocesses
@pytest.mark.parametrize(("where", "lang", "code"), _runnable_blocks(), ids=lambda v: v if ":" in str(v) else "")
def test_every_runnable_block_runs_as_written(tmp_path: Path, where: str, lang: str, code: str) -> None:
    if lang == "bash":
        argv = ["bash", "-euo", "pipefail", "-c", code]
    elif lang == "python":
        argv = [sys.executable, "-c", code]
    else:
        raise AssertionError(f"{where}: a runnable block is bash or python, not {lang}")
    done = subprocess.run(argv, cwd=tmp_path, env=_clean_env(tmp_path), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, (where, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr, where


def test_the_library_example_runs_as_written() -> None:
    import contextlib
    import io

    page = _page("reference/python-api.md")
    code = page.split(f"{MARKER}\n```python\n", 1)[1].split("```", 1)[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/reference/python-api.md", "exec"), {"__name__": "docs_example"})
    assert out.getvalue().splitlines() == ["hello from briefing at 09:05", "1 claimed"]


# --- "Adopt it in your fleet" and the kinds: every command line as written --------------------------

TOOLS = ("alma-schedule", "celery", "pip")
#: alma-schedule commands the test runs for real (on SQLite); every other line runs with --help.
RUN_FOR_REAL = ("migrate", "import-beat", "routines", "runs list", "plan")
FLEET_TAIL = """

@app.task(name="proj.reports.build")
def build_report(period):
    return period


from celery.schedules import crontab  # noqa: E402

app.conf.beat_schedule = {
    "reports": {"task": "proj.reports.build", "schedule": crontab(minute=0, hour=6), "args": ["daily"]},
    "moon": {"task": "proj.reports.build", "schedule": crontab(hour=7, day_of_month="1-7", day_of_week="mon")},
}
"""


def _section(text: str, title: str) -> str:
    """The section of ``text`` under the heading ``title`` (any level), up to the next heading of level <= 2."""
    m = re.search(rf"^#{{1,2}} {re.escape(title)}\n", text, flags=re.M)
    assert m is not None, title
    rest = text[m.end() :]
    end = re.search(r"^#{1,2} ", rest, flags=re.M)
    return rest[: end.start()] if end else rest


def _command_lines(section: str) -> list[str]:
    """Each command of ``section`` in order: lines of its bash blocks (continuations joined) and its inline
    code spans, from the tool's name on (``.venv/bin/alma-schedule ...`` in a crontab line too),
    trailing ``  # comments`` dropped."""
    found: list[tuple[int, str]] = []
    for block in re.finditer(r"```bash\n(.*?)```", section, flags=re.S):
        found.extend((block.start(), line) for line in block.group(1).replace("\\\n", " ").splitlines())
    prose = re.sub(r"```.*?```", lambda m: " " * len(m.group(0)), section, flags=re.S)
    found += [(m.start(), m.group(1)) for m in re.finditer(r"`([^`\n]+)`", prose)]
    lines = []
    for _, text in sorted(found, key=lambda pair: pair[0]):
        m = re.search(rf"(?:^|[\s/])((?:{'|'.join(map(re.escape, TOOLS))}) .*)$", text.strip())
        if m:
            lines.append(re.split(r"\s{2,}#", m.group(1))[0].strip())
    return lines


KINDS = "The kinds: `task`, `turn`, `job`"
ADOPTION = {
    # where the steps live: (the adoption steps, the kinds)
    "docs": lambda: (
        _section(_page("adopt.md"), "Adopt it in your fleet"),
        _section(_page("kinds.md"), KINDS),
    ),
    "README": lambda: (_section(README, "Adopt it in your fleet"), _section(README, KINDS)),
}


@pytest.mark.integration  # subprocesses
@pytest.mark.parametrize("where", sorted(ADOPTION))
def test_every_command_of_the_adoption_steps_and_the_kinds_runs_as_written(tmp_path: Path, where: str) -> None:
    """The fleet module of the adoption steps (its python block, plus a task and a beat_schedule) in ``proj/``;
    then each command line of "Adopt it in your fleet" and of the kinds, in order, from that folder: the
    store commands for real on SQLite (migrate, routines add / list, runs list, plan),
    the long-running ones (workers, beat, flower, clocks) parsed by their own --help. Run on the README's steps
    and on the site's (docs/adopt.md, docs/kinds.md)."""
    import shlex
    import textwrap
    import tomllib

    adopt, kinds = ADOPTION[where]()
    fleet = textwrap.dedent(adopt.split("```python\n", 1)[1].split("```", 1)[0])
    assert "install(app, beat_clock=True)" in fleet
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "__init__.py").write_text("")
    (tmp_path / "proj" / "celery.py").write_text(fleet + FLEET_TAIL)
    bindir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
    env.update(
        ALMA_DATABASE_URL=f"sqlite:///{tmp_path}/alma.sqlite3",  # over the module's alma_database_url
        ALMA_PROVIDER="scripted",  # the turn and job examples register against the demo's provider
        ALMA_SINK="stdout",
        PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}",
    )
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    ran: list[str] = []
    for line in _command_lines(adopt) + _command_lines(kinds):
        argv = shlex.split(line)
        if argv[0] == "pip":  # the extras it names exist
            assert argv[1] == "install" and re.fullmatch(r"alma-schedule\[([a-z,]+)\]", argv[2]), line
            assert set(argv[2][len("alma-schedule[") : -1].split(",")) <= set(extras), line
            continue
        words = " ".join(a for a in argv[1:] if not a.startswith("-") and a != "proj")
        real = argv[0] == "alma-schedule" and words.startswith(RUN_FOR_REAL)
        done = subprocess.run(
            [str(bindir / argv[0]), *argv[1:], *([] if real else ["--help"])],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
        assert "Traceback" not in done.stderr, line
        ran.append(line)
    joined = "\n".join(ran)
    for expected in (
        "alma-schedule -A proj migrate",
        "celery -A proj worker -E -n worker@%h",  # the fleet's workers as before (no -Q), with node names
        "celery -A proj worker -Q alma.tick -c 1 -E -n tick@%h",
        "celery -A proj beat",
        "alma-schedule -A proj beat sync --dry-run",
        "--kind task",
        "--kind turn",
        "--kind job",
    ):
        assert expected in joined, expected
    if where == "docs":  # the site's page is complete: the other clocks, Flower, looking around
        for expected in ("alma-schedule -A proj clock run", "celery -A proj flower --basic-auth="):
            assert expected in joined, expected
    # the import registered the convertible entry, refused the AND one; the kinds added theirs
    from alma_schedule.model import Scope
    from alma_schedule.stores import open_store

    store = open_store(env["ALMA_DATABASE_URL"])
    try:
        ops = {r.routine_id: r.kind for r in store.list_routines(Scope("acme", "ops"))}
        alice = {r.routine_id: r.kind for r in store.list_routines(Scope("acme", "alice"))}
    finally:
        store.close()
    assert ops == {"nightly-report": "task"}  # the schedule stays in code: beat syncs it (not run here)
    assert alice == {"briefing": "turn", "digest": "job"}
