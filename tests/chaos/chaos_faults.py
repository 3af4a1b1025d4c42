"""The faults of the chaos suite, planned from a seed and injected into the running fleet.

A plan is a list of :class:`Fault` (a kind and an offset in seconds from the start of the chaos),
spread over the chaos window with seeded jitter, kinds in a seeded order. One round holds the CI
minimum: 3 SIGKILLs of pool children, 2 SIGKILLs of worker parents, 1 Redis restart, 1 PostgreSQL
``restart -m immediate``, 1 ``pg_terminate_backend`` of every connection and 1 push of raw bytes
(items no kombu channel can read, :data:`RAW`) onto ``alma.run`` and the fleet's ``celery`` queue,
both served by the run workers; a longer run (a soak) repeats rounds. A child kill aims at a child
that is executing a ``slow`` run when there is one (so a run dies mid-run), else at any child of a
seeded worker. Each raw item must be on ``alma.dead`` as it was pushed within :data:`DEAD_WITHIN`
seconds; one that is not is in :attr:`Injector.bytes_lost` (and a worker it killed in
:attr:`Procs.unexpected`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chaos_effects
from chaos_procs import Procs
from chaos_servers import PgCluster, RedisServer

ROUND = ("child", "child", "child", "parent", "parent", "redis", "postgres", "backends", "bytes")
SECONDS_PER_FAULT = 10.0
#: Raw items pushed by a ``bytes`` fault (``%d``: the fault's number, so each push is its own).
RAW = (
    b"garbage-not-an-envelope-%d",
    b'{"body": %d}',
    b"\xff\xfe not UTF-8 %d",
    b'{"body": "aGk=", "headers": {}, "properties": {"delivery_tag": "chaos-%d"}}',
)
RAW_QUEUES = ("alma.run", "celery")
DEAD_QUEUE = "alma.dead"
DEAD_WITHIN = 30.0


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    at: float  # seconds after the chaos started


@dataclass(frozen=True, slots=True)
class Injected:
    kind: str
    started: float  # wall clock (time.time())
    ended: float
    target: str
    killed: tuple[int, ...] = ()  # pids that died by it (a parent and its pool children: billiard's pdeathsig)


def plan(seed: int, window: float) -> list[Fault]:
    """Rounds of :data:`ROUND` over ``window`` seconds (at least one round), offsets jittered."""
    rng = random.Random(seed)
    rounds = max(1, int(window // (SECONDS_PER_FAULT * len(ROUND))))
    kinds = [kind for _ in range(rounds) for kind in rng.sample(ROUND, len(ROUND))]
    step = window / (len(kinds) + 1)
    return [Fault(kind, step * (i + 1) + rng.uniform(-0.3, 0.3) * step) for i, kind in enumerate(kinds)]


class Injector:
    def __init__(self, seed: int, procs: Procs, redis: RedisServer, pg: PgCluster, effects: Path) -> None:
        self.rng = random.Random(seed ^ 0x5EED)
        self.procs = procs
        self.redis = redis
        self.pg = pg
        self.effects = effects
        self.pushed = 0
        self.bytes_lost: list[str] = []  # "queue: item" of each raw item not dead-lettered in time

    def inject(self, kind: str) -> Injected:
        started = time.time()
        target, killed = getattr(self, f"_{kind}")()
        return Injected(kind, started, time.time(), target, tuple(killed))

    def _child(self) -> tuple[str, list[int]]:
        ours = {pid: name for name in self.procs.workers for pid in self.procs.children(name)}
        busy = [pid for pid in chaos_effects.running_pids(self.effects, "slow") if pid in ours]
        if busy:
            pid = self.rng.choice(busy)
        else:
            candidates = sorted(ours)
            if not candidates:
                return "no child alive", []
            pid = self.rng.choice(candidates)
        self.procs.kill_pid(pid)
        return f"child {pid} of {ours[pid]}{' (mid-run)' if busy else ''}", [pid]

    def _parent(self) -> tuple[str, list[int]]:
        alive = sorted(n for n, w in self.procs.workers.items() if w.proc is not None and w.proc.poll() is None)
        run_workers = [n for n in alive if n != "tick"] or alive
        name = self.rng.choice(run_workers)
        pid, children = self.procs.kill_parent(name)
        time.sleep(1.0)  # the supervisor's restart delay
        self.procs.revive()
        return f"parent {pid} of {name} (its children {children} die with it)", [pid, *children]

    def _redis(self) -> tuple[str, list[int]]:
        self.redis.restart(down=2.0)
        return f"redis :{self.redis.port} killed, down 2 s, started empty", []

    def _postgres(self) -> tuple[str, list[int]]:
        self.pg.restart_immediate()
        return f"postgres :{self.pg.port} restart -m immediate", []

    def _backends(self) -> tuple[str, list[int]]:
        n = self.pg.terminate_backends()
        return f"{n} backends terminated", []

    def _bytes(self) -> tuple[str, list[int]]:
        import redis

        self.pushed += 1
        items = [(queue, raw % self.pushed) for raw in RAW for queue in RAW_QUEUES]
        client = redis.Redis.from_url(f"{self.redis.url}/0")
        try:
            for queue, item in items:
                client.lpush(queue, item)
            missing = set(items)
            deadline = time.monotonic() + DEAD_WITHIN
            while missing and time.monotonic() < deadline:
                missing -= dead_letters(client)
                self.procs.revive()
                time.sleep(0.2)
        finally:
            client.close()
        self.bytes_lost += [f"{queue}: {item!r}" for queue, item in sorted(missing)]
        return f"{len(items)} raw items on {' and '.join(RAW_QUEUES)}, {len(items) - len(missing)} dead-lettered", []


def dead_letters(client: Any) -> set[tuple[str, bytes]]:
    """``(queue, raw item)`` of each raw dead letter on ``alma.dead`` (its ``x-alma-raw`` format)."""
    out: set[tuple[str, bytes]] = set()
    for entry in client.lrange(DEAD_QUEUE, 0, -1):
        with contextlib.suppress(ValueError, KeyError, TypeError):
            letter = json.loads(entry)
            if letter["headers"].get("x-alma-raw") is True:
                out.add((letter["headers"]["x-alma-queue"], base64.b64decode(letter["body"])))
    return out
