"""A clock of the chaos suite: ``python chaos_clock.py --every 2 [--copies 2] [--skew -20]``.

It sends ticks with the package's own ``send_tick`` (through ``ALMA_BROKER_URL``), ``--copies``
times per period (a duplicating clock), with ``now`` shifted by ``--skew`` seconds (a clock behind
the workers). A send that fails (the broker is down) is logged and the clock carries on, as cron
would at its next minute.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta

from alma_schedule.clock import send_tick
from alma_schedule.settings import load_settings


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--every", type=float, required=True)
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--skew", type=float, default=0.0)
    args = parser.parse_args()
    settings = load_settings()
    following = time.monotonic()
    while True:
        for _ in range(args.copies):
            now = None if not args.skew else datetime.now(UTC) + timedelta(seconds=args.skew)
            try:
                send_tick(settings, now)
            except Exception as exc:  # the broker is down: the next period tries again
                print(f"send failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        following += args.every
        time.sleep(max(0.0, following - time.monotonic()))


if __name__ == "__main__":
    sys.exit(main())
