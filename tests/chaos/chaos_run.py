"""One chaos run: its own Redis and PostgreSQL, the fakes, 3 clocks, 3 prefork workers, ~220
routines of every kind, the seeded faults (raw bytes on the run workers' queues among them), the
quiesce, then the figures (:mod:`chaos_count`; a worker that died unkilled is one).

:func:`run` is what ``scripts/chaos`` and ``tests/chaos/test_chaos.py`` call. Everything it starts
(servers, workers, clocks, the fakes' threads) is stopped and its temp dir removed when it returns
or raises, and by an ``atexit`` hook if the interpreter is leaving some other way.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import chaos_effects
import chaos_gather
from chaos_count import Figures, count
from chaos_fakes import API_KEY, WEBHOOK_SECRET, TimedProvider, TimedReceiver
from chaos_faults import Injected, Injector, plan
from chaos_procs import HERE, Procs, entry_points
from chaos_servers import PgCluster, RedisServer

from alma_schedule.stores import migrate_store
from alma_schedule.testing.servers import serve_asgi

TICK_PERIOD = 2  # seconds
PRICE_PER_MTOK = 100_000_000  # micro-USD per million tokens: 100 µ$ a token, so ceilings bind
CEILING_ORG = 600_000
CAP_PER_RUN = 50_000
CI_SECONDS = 100.0


@dataclass
class Options:
    seed: int
    seconds: float = CI_SECONDS  # the chaos window (faults are injected inside it)
    keep: bool = False  # keep the temp dir (logs) for a post-mortem
    say: Callable[[str], None] = field(default=lambda line: print(line, flush=True))


@dataclass
class Result:
    seed: int
    figures: Figures
    faults: list[Injected]
    resume: list[tuple[Injected, float | None]]
    wall_seconds: float
    root: Path


def routines(seed: int) -> list[list[Any]]:
    """The plan: ``[org, uid, routine_id, kind, schedule, definition]`` of every routine."""
    rng = random.Random(seed)
    out: list[list[Any]] = []
    for i in range(160):
        rid = f"untracked-{i:03d}"
        out.append(
            [
                "fleet",
                "chaos",
                rid,
                "task",
                {"every": f"{rng.choice((3, 4, 6, 10))}s"},
                {"task": "chaos.untracked", "args": [rid]},
            ]
        )
    for i in range(16):
        rid = f"tracked-{i:02d}"
        seconds = round(rng.uniform(0.2, 1.5), 2)
        out.append(
            [
                "fleet",
                "chaos",
                rid,
                "task",
                {"every": "6s"},
                {"task": "chaos.tracked", "args": [rid, seconds], "track": True, "deadline": "20s"},
            ]
        )
    budget = {"max_output_tokens": 64}
    for org in ("acme-a", "acme-b"):
        out += [
            [
                org,
                "chaos",
                f"turn-{i:02d}",
                "turn",
                {"every": "5s"},
                {"goal": f"Summarise the {org} queue, turn {i}", "budget": budget},
            ]
            for i in range(12)
        ]
        out += [
            [
                org,
                "chaos",
                f"job-{i:02d}",
                "job",
                {"every": "8s"},
                {"goal": f"Digest the {org} tickets, job {i}", "budget": budget},
            ]
            for i in range(6)
        ]
    out += [
        ["fleet", "chaos", f"slow-{i:02d}", "slow", {"every": "6s"}, {"seconds": round(rng.uniform(1, 6), 2)}]
        for i in range(6)
    ]
    return out


def fleet_env(root: Path, redis: RedisServer, pg: PgCluster, provider: str, receiver: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ALMA_", "CHAOS_"))}
    env.update(
        {
            "PYTHONPATH": entry_points(root),
            "PYTHONUNBUFFERED": "1",
            "TZ": "UTC",
            "CHAOS_EFFECTS": str(root / "effects.db"),
            "ALMA_DATABASE_URL": pg.url,
            "ALMA_BROKER_URL": f"{redis.url}/0",
            "ALMA_RESULT_BACKEND": f"{redis.url}/1",
            "ALMA_TICK_PERIOD": f"{TICK_PERIOD}s",
            "ALMA_RESEND_FIRST": "3s",
            "ALMA_RESEND_MAX": "10s",
            "ALMA_POLL_FIRST": "2s",
            "ALMA_POLL_MAX": "4s",
            "ALMA_FAILURE_THRESHOLD": "0",
            "ALMA_PROVIDER": "openai",
            "ALMA_OPENAI_BASE_URL": provider,
            "ALMA_OPENAI_API_KEY": API_KEY,
            "ALMA_OPENAI_TIMEOUT": "10s",
            "ALMA_SINK": "webhook",
            "ALMA_WEBHOOK_URL": f"{receiver}/hook",
            "ALMA_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "ALMA_WEBHOOK_TIMEOUT": "5s",
            "ALMA_PRICE_INPUT_PER_MTOK_MICROS": str(PRICE_PER_MTOK),
            "ALMA_PRICE_OUTPUT_PER_MTOK_MICROS": str(PRICE_PER_MTOK),
            "ALMA_CEILING_ORG_DAILY_MICROS": str(CEILING_ORG),
            "ALMA_CAP_PER_RUN_MICROS": str(CAP_PER_RUN),
        }
    )
    return env


def _admin(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(HERE / "chaos_admin.py"), *args],
        env=env,
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"chaos_admin {args[0]} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


@contextlib.contextmanager
def _cleanup_on_exit(action: Callable[[], None]) -> Iterator[None]:
    """``action`` when the block ends, and at interpreter exit if the block never got to end."""
    atexit.register(action)
    try:
        yield
    finally:
        atexit.unregister(action)
        action()


def run(options: Options) -> Result:
    say = options.say
    began = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="alma-chaos-"))
    redis, pg = RedisServer(root), PgCluster(root)
    procs = Procs(root, {})

    def cleanup() -> None:
        procs.stop_all(timeout=15)
        redis.kill()
        pg.stop()
        if not options.keep:
            shutil.rmtree(root, ignore_errors=True)

    with contextlib.ExitStack() as stack:
        stack.enter_context(_cleanup_on_exit(cleanup))
        provider, receiver = TimedProvider(), TimedReceiver()
        provider_url = stack.enter_context(serve_asgi(provider.app)).url
        receiver_url = stack.enter_context(serve_asgi(receiver.app)).url
        redis.start()
        pg.create()
        pg.start()
        pg.create_database()
        migrate_store(pg.url)
        chaos_effects.create(root / "effects.db")
        procs.env = fleet_env(root, redis, pg, provider_url, receiver_url)
        plan_file = root / "plan.json"
        plan_file.write_text(json.dumps(routines(options.seed)))
        registered = json.loads(_admin(procs.env, "register", str(plan_file)))
        say(f"servers: redis :{redis.port}, postgres :{pg.port}; {len(registered)} routines registered")
        procs.add_worker("tick", "alma.tick", 1)
        procs.add_worker("run-a", "alma.run,alma.collect,celery", 4)
        procs.add_worker("run-b", "alma.run,alma.collect,celery", 4)
        procs.wait_ready()
        every = str(TICK_PERIOD)
        procs.add_clock("clock-plain", "--every", every)
        procs.add_clock("clock-twice", "--every", every, "--copies", "2")
        procs.add_clock("clock-behind", "--every", every, "--skew", "-20")
        injector = Injector(options.seed, procs, redis, pg, root / "effects.db")
        faults = _chaos(options, procs, injector)
        say("quiescing: every routine paused, the clocks tick on until nothing is in flight")
        paused_at = time.time()
        _admin(procs.env, "pause")
        chaos_gather.quiesce(pg, procs, timeout=120)
        stuck = chaos_gather.runs_stuck(procs.env)
        stuck_by_age = chaos_gather.runs_stuck(procs.env, "--older-than", "1s")
        procs.stop_all()
        observed = chaos_gather.observe(
            root,
            pg,
            provider,
            receiver,
            faults,
            stuck,
            stuck_by_age,
            paused_at,
            PRICE_PER_MTOK,
            CEILING_ORG,
            CAP_PER_RUN,
        )
        observed.worker_deaths, observed.bytes_lost = list(procs.unexpected), list(injector.bytes_lost)
        figures = count(observed)
        resume = chaos_gather.resume_times(faults, observed.ticks)
    return Result(options.seed, figures, faults, resume, time.monotonic() - began, root)


def _chaos(options: Options, procs: Procs, injector: Injector) -> list[Injected]:
    faults = plan(options.seed, options.seconds)
    start = time.monotonic()
    done: list[Injected] = []
    for fault in faults:
        while time.monotonic() - start < fault.at:
            procs.revive()
            time.sleep(0.2)
        injected = injector.inject(fault.kind)
        options.say(f"t+{time.monotonic() - start:5.1f}s  {fault.kind:8}  {injected.target}")
        done.append(injected)
    while time.monotonic() - start < options.seconds:
        procs.revive()
        time.sleep(0.2)
    procs.revive()
    return done
