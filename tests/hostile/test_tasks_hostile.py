"""The Celery tasks' own checks of what a message brings (their bodies are thin over the Scheduler,
which ``test_scheduler_hostile`` covers): ``tick``'s ``now`` (:func:`parse_now`), ``run`` /
``collect``'s key parts (:class:`RunKey`) and ``run_many``'s packed fires (:func:`unpack`), given
hostile values: accepted, or refused with an ``alma_schedule.errors`` type. Issue 14, defect 8.
(A message whose BODY is not a call of our task at all is the poison-message part of the issue.)"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hostile_support import T0
from hypothesis import given
from hypothesis import strategies as st

from alma_schedule.errors import AlmaScheduleError
from alma_schedule.model import RunKey
from alma_schedule.model.time import SettableTime
from alma_schedule.settings import Settings
from alma_schedule.tasks.batch import unpack
from alma_schedule.tasks.definitions import parse_now
from alma_schedule.testing.hostile import HOSTILE, anything, texts

ISO = st.one_of(
    texts(),
    st.sampled_from(
        [
            "2026-03-02T09:00:00Z",
            "0001-01-01T00:00:00+14:00",
            "9999-12-31T23:59:59.999999-12:00",
            "2026-03-02T09:00:00",
            "2026-02-30T00:00:00Z",
            "1969-12-31T23:59:59Z",
        ]
    ),
    st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat()),
)
SETTINGS = Settings(clock=SettableTime(T0))


def typed(call: Any) -> Any:
    try:
        return call()
    except AlmaScheduleError:
        return None


@HOSTILE
@given(st.one_of(ISO, anything()))
def test_tick_now(value: Any) -> None:
    at = typed(lambda: parse_now(value, SETTINGS))
    assert at is None or (isinstance(at, datetime) and at <= T0)


@HOSTILE
@given(st.lists(st.one_of(texts(), anything()), min_size=4, max_size=4))
def test_run_and_collect_keys(parts: list[Any]) -> None:
    key = typed(lambda: RunKey(*parts))
    assert key is None or key.args() == parts


@HOSTILE
@given(
    st.one_of(
        st.lists(st.one_of(st.tuples(texts(), texts(), texts(), texts(), ISO).map(list), anything()), max_size=3),
        anything(),
    )
)
def test_run_many_fires(fires: Any) -> None:
    out = typed(lambda: unpack(fires))
    assert out is None or len(out) == len(fires)
