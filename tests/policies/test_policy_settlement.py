"""Money settlement, as pure functions."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from alma_schedule.policies import settlement
from alma_schedule.policies.settlement import Move, Settlement


def test_settle_moves_every_ceiling_in_key_order() -> None:
    got = settlement.settle(100, "2026-03-01", ("org:a", "routine:b", "day:c"), 30)
    assert got == Settlement(
        "2026-03-01",
        (Move("day:c", -100, 30), Move("org:a", -100, 30), Move("routine:b", -100, 30)),
    )
    assert got.clears and got.run_values() == {"reserved_micros": 0, "reserve_ceilings": ()}
    assert [m.spend_delta for m in got.moves] == [-70, -70, -70]


def test_no_reservation_settles_nothing() -> None:
    for money in (settlement.settle(100, None, ("org:a",), 5), settlement.settle(0, "2026-03-01", (), 5)):
        assert money.moves == () and not money.clears and money.run_values() == {}


def test_release_is_a_settlement_to_zero() -> None:
    assert settlement.release(100, "d", ("org:a",)) == Settlement("d", (Move("org:a", -100, 0),))


def test_finish_cost_prefers_the_result() -> None:
    assert settlement.finish_cost(30, 77) == 30
    assert settlement.finish_cost(0, 77) == 0
    assert settlement.finish_cost(None, 77) == 77


def test_fits_up_to_the_limit_exactly() -> None:
    assert settlement.fits(400, 100, 500) and not settlement.fits(401, 100, 500)
    assert settlement.fits(0, 0, 0) and not settlement.fits(0, 1, 0)


@given(
    st.integers(0, 10**9),
    st.integers(0, 10**9),
    st.sets(st.text("abc:", min_size=1, max_size=5), max_size=4),
)
def test_settlement_conserves_per_ceiling(reserved: int, cost: int, ceilings: set[str]) -> None:
    money = settlement.settle(reserved, "d", ceilings, cost)
    assert [m.ceiling for m in money.moves] == sorted(ceilings)
    for m in money.moves:
        assert (m.reserved_delta, m.settled_delta, m.spend_delta) == (-reserved, cost, cost - reserved)
