"""Healthcheck of the clock service (``python -m deploy.clock_health`` from the fleet's folder).

Healthy (exit 0) while the last tick that RAN is younger than ``ALMA_HEARTBEAT_MAX_AGE``, the
answer of ``GET /healthz``. The clock only enqueues, so its process being up proves little; a tick
that ran proves the clock, the broker, the tick worker and the store together. Unhealthy: exit 1
and one line. When nothing has consumed alma.run for that long, a second line says
so (still exit 0). The settings are the fleet app's (``install(app)``: its ``alma_*`` keys, ``ALMA_*``).
"""

from __future__ import annotations

import sys

from alma_schedule.errors import AlmaScheduleError
from alma_schedule.run_queue_watch import unconsumed
from alma_schedule.tasks import composition_of


def main() -> int:
    from fleet import app

    composition = composition_of(app)
    if composition is None:
        print("error: the fleet app did not call install(app)", file=sys.stderr)
        return 1
    try:
        settings = composition.settings
        last = composition.store().last_tick()
        idle = unconsumed(composition.store(), settings.time_source(), settings, detail=False)
    except AlmaScheduleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        composition.close()
    if last is None:
        print("error: no tick has run yet", file=sys.stderr)
        return 1
    age = (settings.time_source() - last).total_seconds()
    limit = settings.heartbeat_max_age.total_seconds()
    if age > limit:
        print(f"error: the last tick ran {age:.0f}s ago (ALMA_HEARTBEAT_MAX_AGE is {limit:.0f}s)", file=sys.stderr)
        return 1
    print(f"ok: the last tick ran {age:.0f}s ago")
    if idle is not None:  # the clock is well; the workers are not: said, not failed (a restart fixes nothing here)
        print(f"warning: {idle}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
