"""The README tells the truth: every setting is in its reference, every command it names exists."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from alma_schedule.cli import cli
from alma_schedule.settings import Settings, env_name

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_every_setting_is_documented() -> None:
    missing = [
        env_name(f.name)
        for f in dataclasses.fields(Settings)
        if f.metadata.get("kind") != "code" and f"`{env_name(f.name)}`" not in README
    ]
    assert missing == []


def test_every_cli_command_in_the_readme_exists() -> None:
    section = README.split("## The CLI", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"^\| `([a-z-]+)", section, flags=re.M))
    assert {"routines", "runs", "plan", "tick", "migrate", "reindex", "demo", "import-beat", "clock"} <= named
    assert named - set(cli.commands) == set()


def test_the_two_setup_commands_come_first() -> None:
    head = README.split("## ", 1)[0]
    assert "scripts/demo" in head and "scripts/test" in head
    assert (Path(__file__).resolve().parents[1] / "scripts" / "test").exists()
    assert "scripts/test" in (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()


def test_the_library_example_runs_as_written() -> None:
    import contextlib
    import io

    section = README.split("## Use it as a library", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
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


def _section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


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


@pytest.mark.integration  # subprocesses
def test_every_command_of_the_adoption_steps_and_the_kinds_runs_as_written(tmp_path: Path) -> None:
    """The README's fleet module (its python block, plus a task and a beat_schedule) in ``proj/``; then
    each command line of "Adopt it in your fleet" and of the kinds, in order, from that folder: the
    store commands for real on SQLite (migrate, import-beat, routines add / list, runs list, plan),
    the long-running ones (workers, beat, flower, clocks) parsed by their own --help."""
    import os
    import shlex
    import subprocess
    import sys
    import textwrap
    import tomllib

    adopt, kinds = _section("Adopt it in your fleet"), _section("The kinds: `task`, `turn`, `job`")
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
    extras = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
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
        "alma-schedule -A proj import-beat proj.celery:app acme/ops --apply",
        "celery -A proj worker -Q alma.tick -c 1 -E",
        "celery -A proj worker -Q alma.run,alma.collect,celery -E",
        "celery -A proj beat",
        "alma-schedule -A proj clock run",
        "alma-schedule -A proj clock send",
        "celery -A proj flower --basic-auth=",
        "--kind task",
        "--kind turn",
        "--kind job",
    ):
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
    assert ops == {"reports": "task", "nightly-report": "task"}
    assert alice == {"briefing": "turn", "digest": "job"}
