"""The README's first command: `alma-schedule demo` runs the whole flow with no servers and exits 0.

It opens with the Celery operator's case (import-beat of a small beat_schedule, its task routines
run by a real worker, once per claimed fire), then the governed kinds, then real Celery ticks; it
explains what it shows and prints no path into the temporary folder it removes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

HOURS, STEP = 3, 10  # the subprocess run: 19 ticks from 12:00 to 15:00


def _demo(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    exe = Path(sys.executable).with_name("alma-schedule")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALMA_")}
    env["TMPDIR"] = str(tmpdir)  # the demo's temporary folder is made here, so the test can see it go
    proc = subprocess.run(
        [str(exe), "demo", "--hours", str(HOURS), "--step", str(STEP)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, tmpdir


@pytest.mark.integration  # subprocesses
def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    proc, tmpdir = _demo(tmp_path)
    out = proc.stdout
    # the operator's case comes first, then the governed kinds, then the real ticks
    parts = [out.index(f"== part {n}:") for n in (1, 2, 3)]
    assert parts == sorted(parts)
    opening = out[parts[0] : parts[1]]
    assert "$ alma-schedule import-beat alma_schedule.cli.demo_fleet:app demo/ops" in opening
    assert "3 entries convert, 1 refused. Nothing written" in opening  # the dry run
    assert "3 created, 0 updated, 0 unchanged, 1 refused in demo/ops." in opening  # --apply
    assert "refresh-cache: every 30s is shorter than the tick period (600s)" in opening
    # every 30s on a 10-minute tick: once per tick but the first (an `every` fires one interval in);
    # */15 on a 10-minute tick: every fire from 12:00 to 15:00 is claimed, 13 of them
    ticks = HOURS * 60 // STEP + 1
    expected = {"refresh-cache": ticks - 1, "send-reminders": 13}
    for routine, n in expected.items():
        row = rf"│ {routine}\s*│ {n}\s*│ completed\(sent\) {n}\s*│ {n}\s*│ 0\s*│"
        assert re.search(row, opening), (routine, opening)
    total = sum(expected.values())
    assert f"the worker ran it once: {total} fires, {total} task runs" in opening
    assert f"ran {ticks - 1} times in {ticks} ticks" in opening
    # the governed part: the broken routine is ONE error entry; everything else ran
    assert "for 1 routine(s)" in out
    assert "demo/alice/broken: InvalidSchedule: minute field '61' out of range 0-59" in out
    assert "heartbeat" in out and "completed" in out
    assert "overlap" in out  # the hourly job overlaps its still-submitted batch
    assert "delivered to the file sink, at most once per fire: 1" in out
    # london-minutely's run count is explained: once per tick, missed minutes not replayed
    assert f"london-minutely is `* * * * *` but ran {ticks} times in {HOURS * 60} minutes" in out
    assert "not replayed (guarantee 3)" in out
    # real Celery ticks through the in-memory transport, each claiming the live heartbeat
    assert out.count("celery tick at") == 3
    assert "claimed 1" in out
    assert "Traceback" not in proc.stderr
    # nothing printed points into the folder the demo removed
    assert list(tmpdir.iterdir()) == []
    assert str(tmpdir) not in out and "alma-demo-" not in out
    for path in re.findall(r"(?<![\w.:])/(?:[\w.\-]+/)*[\w.\-]+", out):
        if path.startswith("/tmp") or path.startswith(str(tmp_path)):
            assert Path(path).exists(), path


@pytest.mark.integration  # subprocesses
def test_the_operator_part_runs_each_claimed_fire_once_on_the_worker(tmp_path: Path) -> None:
    """The opening, in process, checked from outside: the store's ledger against the worker's own count."""
    from celery import _state

    from alma_schedule.cli import demo_fleet
    from alma_schedule.cli.demo_beat import OPS, operator_part
    from alma_schedule.runners.task import task_id_for
    from alma_schedule.stores import open_store

    before = demo_fleet.executed()
    current, default = _state._tls.current_app, _state.default_app
    lines: list[str] = []
    try:  # start_worker makes the fleet app current and default
        out = operator_part(tmp_path, hours=2, step=timedelta(minutes=5), echo=lines.append)
    finally:
        _state._tls.current_app, _state.default_app = current, default
    after = demo_fleet.executed()
    ran = Counter({k: after[k] - before.get(k, 0) for k in after if after[k] > before.get(k, 0)})

    store = open_store(f"sqlite:///{tmp_path}/ops.sqlite3")
    try:
        routines = {r.routine_id: r for r in store.list_routines(OPS)}
        runs = store.list_runs(OPS, limit=10_000)
    finally:
        store.close()
    assert sorted(routines) == ["nightly-report", "refresh-cache", "send-reminders"]  # first-monday refused
    assert {r.kind for r in routines.values()} == {"task"}
    per_routine = Counter(r.routine_id for r in runs)
    assert per_routine == Counter({"refresh-cache": 24, "send-reminders": 9})  # 25 ticks, 12:00-14:00
    assert {(r.state, r.reason) for r in runs} == {("completed", "sent")}
    # each claimed fire's task (id derived from its run key) ran exactly once; nothing else ran
    assert ran == Counter({task_id_for(r.key): 1 for r in runs})
    assert out["twice"] == 0 and out["missing"] == 0
    assert out["claimed"] == dict(per_routine) == out["ran"]
    assert any("the worker ran it once: 33 fires, 33 task runs" in line for line in lines)
