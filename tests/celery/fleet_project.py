"""A fleet project outside the package: its own ``fleet.py`` (a Celery app, one task, ``install(app)``),
and helpers to run our commands and Celery's from its folder, as its operator would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from celery_support import ALMA, CELERY

FLEET = """\
from celery import Celery
from alma_schedule.celery import install

app = Celery("fleet", broker={broker!r})
app.conf.update({conf!r})


@app.task(name="fleet.add")
def add(x, y):
    return x + y


{install}
"""


def write_fleet(
    root: Path, *, broker: str, conf: Mapping[str, Any] | None = None, install: str = "install(app)"
) -> Path:
    """Write ``root/fleet.py`` and return ``root`` (the folder its operator works in)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "fleet.py").write_text(FLEET.format(broker=broker, conf=dict(conf or {}), install=install))
    return root


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any ALMA_* variable or PYTHONPATH, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_") and k != "PYTHONPATH"}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_in(
    root: Path, argv: list[str], env: Mapping[str, str], timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=root, env=dict(env), capture_output=True, text=True, timeout=timeout)


def alma(root: Path, *args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """``alma-schedule ARGS`` from the fleet's folder (the console script, as an operator runs it)."""
    return run_in(root, [ALMA, *args], env)


def celery(root: Path, *args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return run_in(root, [CELERY, *args], env)


def python(root: Path, code: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return run_in(root, [sys.executable, "-c", code], env)


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The refusal of a process that must exit 1 with ONE ``error:`` line and no traceback."""
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output, output
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    return errors[0]
