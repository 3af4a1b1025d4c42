"""The README tells the truth: every setting is in its reference, every command it names exists."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

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
