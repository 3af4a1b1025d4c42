"""The end of a chaos run: wait until nothing is in flight, ask ``runs stuck``, and gather what the
runners, the fakes and the ledger hold into one :class:`chaos_count.Observed`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import chaos_effects
import psycopg
from chaos_count import LedgerRow, Observed
from chaos_fakes import TimedProvider, TimedReceiver
from chaos_faults import Injected
from chaos_procs import Procs
from chaos_servers import PgCluster

from alma_schedule.model import RunKey
from alma_schedule.runners.adapters.openai import TokenPrices
from alma_schedule.stores import open_store

ALMA = str(Path(sys.executable).parent / "alma-schedule")
LEDGER = (
    "SELECT r.org, r.uid, r.routine_id, r.run_id, t.kind, r.state, r.reason, r.state_at, r.owner "
    "FROM alma.runs r JOIN alma.routines t USING (org, uid, routine_id)"
)


def _in_flight(pg: PgCluster) -> tuple[int, frozenset[tuple[str, ...]]]:
    """How many rows are ``claimed`` / ``submitted``, and the set of every non-terminal row."""
    with psycopg.connect(pg.libpq, connect_timeout=5) as conn:
        rows = conn.execute(
            "SELECT org, uid, routine_id, run_id, state FROM alma.runs "
            "WHERE state IN ('claimed', 'running', 'submitted', 'collecting')"
        ).fetchall()
    pending = sum(1 for row in rows if row[4] in ("claimed", "submitted"))
    return pending, frozenset(tuple(row) for row in rows)


def quiesce(pg: PgCluster, procs: Procs, timeout: float) -> None:
    """Until no run is ``claimed`` or ``submitted`` and the non-terminal rows stayed the same for
    three checks in a row (what is left is what the chaos stranded); dead workers are revived."""
    deadline = time.monotonic() + timeout
    last: frozenset[tuple[str, ...]] | None = None
    same = 0
    while time.monotonic() < deadline:
        procs.revive()
        try:
            pending, rows = _in_flight(pg)
        except psycopg.Error:
            pending, rows = 1, frozenset()
        same = same + 1 if pending == 0 and rows == last else 0
        if same >= 3:
            return
        last = rows
        time.sleep(2.0)
    raise RuntimeError(f"the fleet did not quiesce in {timeout}s: {sorted(last or ())[:10]}")


def runs_stuck(env: dict[str, str], *options: str) -> set[RunKey]:
    """What ``alma-schedule runs stuck`` lists (the operator's view), with its defaults unless ``options``."""
    done = subprocess.run(
        [ALMA, "runs", "stuck", "--json", "--limit", "10000", *options],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"runs stuck failed:\n{done.stdout}{done.stderr}")
    return {RunKey(r["org"], r["uid"], r["routine_id"], r["run_id"]) for r in json.loads(done.stdout)}


def observe(
    root: Path,
    pg: PgCluster,
    provider: TimedProvider,
    receiver: TimedReceiver,
    faults: list[Injected],
    stuck: set[RunKey],
    stuck_by_age: set[RunKey],
    paused_at: float,
    price_per_mtok: int,
    ceiling_org: int,
    cap_per_run: int,
) -> Observed:
    store = open_store(pg.url)
    try:
        routines = list(store.iter_routines())
    finally:
        store.close()
    with psycopg.connect(pg.libpq) as conn:
        ledger = [
            LedgerRow(RunKey(org, uid, rid, run_id), kind, state, reason, state_at, owner)
            for org, uid, rid, run_id, kind, state, reason, state_at, owner in conn.execute(LEDGER)
        ]
    deaths = {pid: (f.started, f.kind) for f in faults for pid in f.killed}
    return Observed(
        routines=routines,
        ledger=ledger,
        effects=chaos_effects.read_effects(root / "effects.db"),
        sends=chaos_effects.read_sends(root / "effects.db"),
        ticks=chaos_effects.read_ticks(root / "effects.db"),
        model_calls=provider.model_calls(),
        billed_lines=provider.billed_lines(),
        deliveries=receiver.attempts(),
        stuck=stuck,
        stuck_by_age=stuck_by_age,
        takers=chaos_effects.last_takers(root / "effects.db"),
        requests=chaos_effects.request_pids(root / "effects.db"),
        deaths=deaths,
        paused_at=paused_at,
        prices=TokenPrices(price_per_mtok, price_per_mtok),
        ceiling_org_micros=ceiling_org,
        cap_per_run_micros=cap_per_run,
    )


def resume_times(faults: list[Injected], ticks: list[tuple[str, float]]) -> list[tuple[Injected, float | None]]:
    """Per fault: seconds from its start to the first tick that completed after it ended."""
    done = sorted(d for _, d in ticks)
    out: list[tuple[Injected, float | None]] = []
    for f in faults:
        after = next((d for d in done if d > f.ended), None)
        out.append((f, None if after is None else after - f.started))
    return out
