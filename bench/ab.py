"""A/B against another checkout: the tick and end-to-end ratios of two trees, interleaved, in one run.

    .venv-bench/bin/python bench/ab.py --base ../wt-base --new . --redis redis://127.0.0.1:PORT/0 \
        [--pg-admin URL] [--reps 5] [--routines 100000]

Each repetition runs, in each tree's own ``.venv-bench`` (its own code), the tick at scale
(``bench/scale.py``'s contenders: ours against our floor at ``--routines``, 1 % due) and the end to
end section (``bench/e2e.py``: 1,000 fires over 10,000 routines, one repetition), the trees in
alternating order (A B, B A, ...). Reported: each tree's ratios (ours / our floor; ours / bare
Celery), median (min-max) over the repetitions, and new / base. Ratios, never milliseconds: the
machine's speed cancels inside each pair. Issue 44 used it against the commit before it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ONE = """
import json, sys
sys.path.insert(0, "bench")
import scale, e2e
redis_url, pg_admin, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
import os
os.environ["ALMA_BENCH_PG_ADMIN"] = pg_admin
os.environ["ALMA_BENCH_REDIS"] = redis_url.rsplit("/", 1)[0]
tick = scale.run([n], 1, redis_url, pg_admin, parts="contenders")["cells"][0]["tick"]
end = e2e.run(redis_url, routines=10_000, fires=1_000, reps=1)
print("AB-RESULT " + json.dumps({"tick": tick["ours_over_our_floor"]["median"], "e2e": end["ours_over_bare"]}))
"""


def once(tree: Path, redis_url: str, pg_admin: str, n: int) -> dict[str, float]:
    out = subprocess.run(
        [str(tree / ".venv-bench/bin/python"), "-c", ONE, redis_url, pg_admin, str(n)],
        cwd=tree, capture_output=True, text=True, check=False,
    )  # fmt: skip
    for line in out.stdout.splitlines():
        if line.startswith("AB-RESULT "):
            return dict(json.loads(line.removeprefix("AB-RESULT ")))
    raise SystemExit(f"{tree}: no result\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")


def summary(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--redis", required=True)
    ap.add_argument("--pg-admin", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--routines", type=int, default=100_000)
    args = ap.parse_args()
    trees = {"base": Path(args.base).resolve(), "new": Path(args.new).resolve()}
    got: dict[str, dict[str, list[float]]] = {k: {"tick": [], "e2e": []} for k in trees}
    for rep in range(args.reps):
        order = ["base", "new"] if rep % 2 == 0 else ["new", "base"]
        for name in order:
            r = once(trees[name], args.redis, args.pg_admin, args.routines)
            for k, v in r.items():
                got[name][k].append(v)
            print(json.dumps({"rep": rep, "tree": name} | r), flush=True)
    print(f"| ratio | base {trees['base'].name} | new {trees['new'].name} | new / base (medians) |")
    print("|---|---:|---:|---:|")
    for k, label in (("tick", f"tick: ours / our floor at {args.routines:,}"), ("e2e", "end to end: ours / bare")):
        b, n = got["base"][k], got["new"][k]
        print(f"| {label} | {summary(b)} | {summary(n)} | {statistics.median(n) / statistics.median(b):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
