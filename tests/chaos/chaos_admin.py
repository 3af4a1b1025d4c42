"""Registration and the quiesce lever of the chaos suite, in a process configured like the workers.

``python chaos_admin.py register PLAN.json`` registers every routine of the plan (a JSON list of
``[org, uid, routine_id, kind, schedule, definition]``) through the fleet app's own composition
(so ``task`` routines are checked against ``chaos_fleet``'s tasks) and prints one line of JSON,
``{"org/uid/routine_id": registered_at}``. ``python chaos_admin.py pause`` pauses every routine
(the suite's end: no new fires, while ticks still poll, re-send and time out what is in flight).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from chaos_fleet import app

from alma_schedule.model import RoutineSpec, Scope
from alma_schedule.tasks import composition_of


def main(argv: list[str]) -> int:
    comp = composition_of(app)
    assert comp is not None
    schedule = comp.schedule()
    try:
        if argv[0] == "register":
            out: dict[str, str] = {}
            for org, uid, rid, kind, sched, definition in json.loads(Path(argv[1]).read_text()):
                receipt = schedule.register(RoutineSpec(org, uid, rid, kind, sched, definition))
                out[f"{org}/{uid}/{rid}"] = receipt.routine.registered_at.isoformat()
            print(json.dumps(out))
        elif argv[0] == "pause":
            routines = list(comp.store().iter_routines())
            for r in routines:
                schedule.pause(Scope(r.org, r.uid), r.routine_id, "chaos-quiesce")
            print(len(routines))
        else:
            raise SystemExit(f"unknown command {argv[0]!r}")
    finally:
        comp.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
