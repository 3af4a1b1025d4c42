"""Policy, written once: pure functions the stores (and the engine) apply.

Each module is one rule of ``docs/architecture.md``, as plain inputs (counts, states, timers, ``now``)
to plain outputs. No I/O, no store, no clock: a caller passes ``now``. The stores hold no policy of
their own (:mod:`alma_schedule.stores.base`): the memory store calls these functions; the SQL store
calls them where it computes in Python and builds its set-based statements from their constants.

* :mod:`~alma_schedule.policies.streak`: the failure streak and its pause latch;
* :mod:`~alma_schedule.policies.supersession`: a newer schedule fire versus the routine's open run;
* :mod:`~alma_schedule.policies.overlap`: overlap ``latest``, the routine's one buffered fire;
* :mod:`~alma_schedule.policies.backoff`: the planning back-off of a routine that cannot be planned;
* :mod:`~alma_schedule.policies.settlement`: moving a run's reservation to what it cost;
* :mod:`~alma_schedule.policies.blocked`: why a run waits for an operator (the words shown);
* :mod:`~alma_schedule.policies.allow`: the tasks and queues a ``task`` routine may name;
* :mod:`~alma_schedule.policies.limits`: ``max_runs``, the schedule claims a routine may make;
* :mod:`~alma_schedule.policies.finished`: whether a routine is finished (the one reading).
* :mod:`~alma_schedule.policies.deadline`: a tracked message's ``expires``, and when a submitted
  run is ``timed_out`` (deadline + ``clock_tolerance``).
* :mod:`~alma_schedule.policies.backfill`: which fire of a backfill step a tick claims, and where
  the range's cursor moves; ``pruned_through`` after a prune.
* :mod:`~alma_schedule.policies.ownership`: a run's owner (``runs.owner``) and what Celery's report
  that the owner was lost does to the run;
* :mod:`~alma_schedule.policies.finish_retry`: the owner's back-off while its finish cannot reach
  the store.
* :mod:`~alma_schedule.policies.jitter`: the stable delay o(f) of a fire (``jitter``), its due
  instant, and registration's check against the smallest gap.
* :mod:`~alma_schedule.policies.missed`: the fires a claim collapses, counted on their routine
  (``fires_missed``), and how that count is shown.

Nothing here imports :mod:`alma_schedule.stores` or :mod:`alma_schedule.engine`.
"""

from __future__ import annotations
