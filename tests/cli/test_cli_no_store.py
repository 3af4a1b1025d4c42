"""No silent embedded store: every command that reads or writes routines or runs, run from a folder with
no store configured (a clean environment, no pyproject.toml above), refuses in one line and creates no
file; ``[tool.alma-schedule]`` of the nearest pyproject.toml names the app and the store."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from alma_schedule.cli.project import NO_STORE, find_project
from tests.cli.test_cli_one_line_errors import STORE_COMMANDS

REPO = Path(__file__).resolve().parents[2]
CONSOLE = str(Path(sys.executable).parent / "alma-schedule")
#: What a refusal names: every way to configure a store.
WAYS = ("-A", "ALMA_DATABASE_URL", "--database-url", "[tool.alma-schedule]", "sqlite:///")

FLEET = """\
from celery import Celery

from alma_schedule.celery import install

app = Celery("proj", broker="memory://")
app.conf.alma_database_url = {url!r}
install(app)
"""


def clean_env(home: Path) -> dict[str, str]:
    """No ALMA_* variable; the repository importable (import-beat's app module), nothing else."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "PYTHONPATH": str(REPO)}


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CONSOLE, *args], cwd=cwd, env=env or clean_env(cwd), capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("command", sorted(STORE_COMMANDS))
def test_each_routine_and_run_command_refuses_in_one_line_and_creates_no_file(tmp_path: Path, command: str) -> None:
    assert find_project(tmp_path).path is None, "a pyproject.toml with [tool.alma-schedule] above the tmp folder"
    done = cli(tmp_path, *STORE_COMMANDS[command])
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines == [f"error: {NO_STORE}"], done.stderr
    assert all(way in lines[0] for way in WAYS)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "the refusal created a file"


def test_serve_http_refuses_without_a_store(tmp_path: Path) -> None:
    env = {**clean_env(tmp_path), "ALMA_HTTP_SECRET": "a-secret-of-24-bytes-long"}
    done = cli(tmp_path, "serve-http", env=env)
    assert (done.returncode, done.stderr.splitlines()) == (1, [f"error: {NO_STORE}"])
    assert list(tmp_path.iterdir()) == []


def test_demo_keeps_its_own_store_and_schedule_next_needs_none(tmp_path: Path) -> None:
    done = cli(tmp_path, "schedule", "next", '{"every": 60}', "-n", "1")
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_explicit_sqlite_url_is_a_local_file(tmp_path: Path) -> None:
    done = cli(tmp_path, "--database-url", "sqlite:///local.sqlite3", "migrate")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "local.sqlite3").is_file()


def test_pyproject_names_the_store_from_a_subfolder(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "x"\n\n[tool.alma-schedule]\ndatabase_url = "sqlite:///{tmp_path}/p.sqlite3"\n'
    )
    below = tmp_path / "src" / "deep"
    below.mkdir(parents=True)
    assert cli(below, "migrate").returncode == 0
    done = cli(below, "routines", "list", "acme/ops")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "p.sqlite3").is_file()
    assert list(below.iterdir()) == []


def test_pyproject_names_the_app_its_folder_goes_on_the_path(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/fleet.sqlite3"
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "__init__.py").write_text("")
    (tmp_path / "proj" / "celery.py").write_text(FLEET.format(url=url))
    (tmp_path / "pyproject.toml").write_text('[tool.alma-schedule]\napp = "proj"\n')
    below = tmp_path / "docs"
    below.mkdir()
    assert cli(below, "migrate").returncode == 0
    assert cli(below, "routines", "list", "acme/ops").returncode == 0
    assert (tmp_path / "fleet.sqlite3").is_file()
    # -A wins over the pyproject's app: a module that does not exist is refused, naming -A
    done = cli(below, "-A", "nowhere_module", "routines", "list", "acme/ops")
    assert done.returncode == 1
    assert done.stderr.startswith("error: -A/--app: cannot import 'nowhere_module'"), done.stderr


def test_an_unknown_pyproject_key_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.alma-schedule]\ndatabse_url = "sqlite:///x.sqlite3"\n')
    done = cli(tmp_path, "routines", "list", "acme/ops")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: [tool.alma-schedule] in {tmp_path / 'pyproject.toml'}: unknown key 'databse_url' "
        "(known: app, database_url)"
    ]


def test_the_app_found_is_named_first_on_a_terminal_only(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/fleet.sqlite3"
    (tmp_path / "proj.py").write_text(FLEET.format(url=url))
    env = {**clean_env(tmp_path), "ALMA_CELERY_APP": "proj"}
    assert cli(tmp_path, "migrate", env=env).stderr == ""  # a pipe: nothing said
    main, tty = pty.openpty()
    try:
        done = subprocess.run(
            [CONSOLE, "migrate"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=tty, text=True, timeout=120
        )
        os.close(tty)
        said = os.read(main, 4096).decode()
    finally:
        os.close(main)
    assert done.returncode == 0
    assert said.splitlines()[0] == "alma-schedule: the Celery app 'proj' (proj, from ALMA_CELERY_APP)"


def test_the_nearest_pyproject_with_the_table_wins(tmp_path: Path) -> None:
    """As ruff finds its own: a pyproject.toml without ``[tool.alma-schedule]`` is passed over."""
    (tmp_path / "pyproject.toml").write_text('[tool.alma-schedule]\napp = "outer"\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (tmp_path / "pkg" / "inner").mkdir()
    (tmp_path / "pkg" / "inner" / "pyproject.toml").write_text('[tool.alma-schedule]\napp = "inner"\n')
    assert find_project(tmp_path / "pkg").app == "outer"
    assert find_project(tmp_path / "pkg" / "inner").app == "inner"
    (tmp_path / "pkg" / "pyproject.toml").write_text("[project\n")
    done = cli(tmp_path / "pkg", "routines", "list", "acme/ops")
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {tmp_path / 'pkg' / 'pyproject.toml'}: cannot be read as TOML")
