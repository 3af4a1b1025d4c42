"""The chaos suite's CI variant as a pytest test (``pytest -m chaos tests/chaos``; ``.ci/run``
runs the same thing as ``scripts/chaos``): its own Redis and PostgreSQL, 3 clocks (one sending
every tick twice, one 20 s behind), 3 prefork workers, ~220 routines of every kind, and from a
printed seed 3 child SIGKILLs, 2 parent SIGKILLs, a Redis restart, a PostgreSQL immediate restart,
a backend termination and raw bytes pushed on ``alma.run`` and the fleet's queue. Every count that
must be 0 is asserted 0 (``chaos_count``; a worker that died without being killed is one).

``ALMA_CHAOS_SEED`` fixes the seed (default: a random one, printed).
"""

from __future__ import annotations

import os
import random

import pytest
from chaos_count import MUST_BE_ZERO
from chaos_faults import ROUND
from chaos_main import table
from chaos_run import Options, run

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_ci_variant_counts_zero_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    seed = int(os.environ.get("ALMA_CHAOS_SEED") or random.SystemRandom().randrange(1, 1_000_000))
    with capsys.disabled():
        print(f"\nchaos seed: {seed}", flush=True)
        result = run(Options(seed=seed))
        report = table(result)
        print(report, flush=True)
    kinds = sorted(f.kind for f in result.faults)
    assert kinds == sorted(ROUND)  # the CI minimum: 3 child, 2 parent kills, redis, postgres, backends, bytes
    assert all(f.killed for f in result.faults if f.kind in ("child", "parent")), report
    assert result.figures.info["ticks completed"] > 0 and result.figures.info["slots a tick ran in"] > 0, report
    assert {name: getattr(result.figures, name) for name in MUST_BE_ZERO} == dict.fromkeys(MUST_BE_ZERO, 0), report
