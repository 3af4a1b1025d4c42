"""`routines show` says the overlap policy and names the routine's buffered run (overlap latest)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from alma_schedule.cli import cli
from alma_schedule.stores import migrate_store, open_store
from alma_schedule.testing.builders import MINUTE, T0, TIMERS, register, running
from alma_schedule.testing.contract_buffered import LATEST


def _show(url: str, *args: str) -> str:
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ALMA_")}
    env = {**unset, "ALMA_DATABASE_URL": url}
    result = CliRunner().invoke(cli, ["routines", "show", "org-a/user-1", "r1", *args], env=env)
    assert result.exit_code == 0, result.output
    return result.output


def test_routines_show_gives_the_overlap_policy_and_the_buffered_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/show.sqlite3"
    migrate_store(url)
    store = open_store(url)
    try:
        register(store, schedule={"every": 60, "overlap": "latest"})
        assert json.loads(_show(url, "--json"))["buffered_run"] is None
        running(store)
        [buffered] = store.claim_due(T0 + MINUTE, 10, LATEST, TIMERS).buffered
    finally:
        store.close()
    shown = json.loads(_show(url, "--json"))
    assert (shown["overlap"], shown["buffered_run"]) == ("latest", buffered.run_id)
    text = _show(url)
    assert "overlap" in text and "latest" in text and buffered.run_id in text
