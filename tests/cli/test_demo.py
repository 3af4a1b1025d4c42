"""The README's first command: `alma-schedule demo` runs the whole flow with no servers and exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_demo_runs_end_to_end() -> None:
    exe = Path(sys.executable).with_name("alma-schedule")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
    proc = subprocess.run(
        [str(exe), "demo", "--hours", "3", "--step", "10"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    # the broken routine is ONE error entry; everything else ran
    assert "errors reported 1" in out
    assert "demo/alice/broken: InvalidSchedule: minute field '61' out of range 0-59" in out
    # the ledger shows what fired, what was skipped and why
    assert "heartbeat" in out and "completed" in out
    assert "overlap" in out  # the hourly job overlaps its still-submitted batch
    assert "delivered" in out
    # real Celery ticks through the in-memory transport, each claiming the live heartbeat
    assert out.count("celery tick at") == 3
    assert "claimed 1" in out
    assert "Traceback" not in proc.stderr
