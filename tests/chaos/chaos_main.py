"""``scripts/chaos [--seed N] [--soak 30m] [--keep]``: one chaos run, its seed first, its figures
as a table at the end; exit 1 when a count that must be 0 is not (2 when the run itself broke).

Without ``--soak`` it is the CI variant (a 100 s chaos window: 3 child SIGKILLs, 2 parent
SIGKILLs, a Redis restart, a PostgreSQL immediate restart, a backend termination and raw bytes on
``alma.run`` and the fleet's queue); ``--soak`` widens the window and repeats that round of faults
every ~90 s.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import traceback
from typing import Any

from chaos_count import MUST_BE_ZERO
from chaos_run import CI_SECONDS, Options, Result, run

from alma_schedule.setting_values import parse_duration


def table(result: Result) -> str:
    f = result.figures
    lines = [f"chaos seed {result.seed}: {result.wall_seconds:.0f} s wall", "", f"{'count':<28}{'value':>10}  must be"]
    for name in MUST_BE_ZERO:
        value = getattr(f, name)
        lines.append(f"{name:<28}{value:>10}  0{'' if value == 0 else '   <-- FAILED'}")
    lines += ["", f"{'fault':<10}{'resume (s)':>11}  target"]
    for fault, seconds in result.resume:
        shown = "never" if seconds is None else f"{seconds:.1f}"
        lines.append(f"{fault.kind:<10}{shown:>11}  {fault.target}")
    known = [s for _, s in result.resume if s is not None]
    if known:
        lines.append(f"{'max':<10}{max(known):>11.1f}")
    lines.append("")
    lines += [f"{name}: {value}" for name, value in f.info.items()]
    for name, examples in f.examples.items():
        if examples and getattr(f, name, 0):
            lines.append(f"examples of {name}: {examples}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=None, help="the seed of the faults (default: random)")
    parser.add_argument("--soak", default=None, help="a longer chaos window, e.g. 30m (default: the CI variant)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (logs, effects) afterwards")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    seconds = CI_SECONDS if args.soak is None else parse_duration("--soak", args.soak).total_seconds()
    print(f"chaos seed: {seed}", flush=True)

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # unwinds through run()'s cleanup

    signal.signal(signal.SIGTERM, stop)
    try:
        result = run(Options(seed=seed, seconds=seconds, keep=args.keep))
    except Exception:
        traceback.print_exc()
        print(f"chaos seed {seed}: the run itself failed (see above)", flush=True)
        return 2
    print(table(result), flush=True)
    if args.keep:
        print(f"kept: {result.root}")
    failing = result.figures.failing()
    if failing:
        print(f"chaos seed {seed}: FAILED {failing}", flush=True)
        return 1
    print(f"chaos seed {seed}: every count is 0", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
