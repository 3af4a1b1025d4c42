"""PostgreSQL: the run side's two per-fire statements, the tick probe, the end of a tick
(``record_tick``) and the blocked read are the only statements prepared for their generic plan, which
reads by key (the probe's: index probes, ``tests/stores/test_sql_explain.py``; the blocked read's:
``tests/stores/test_sql_blocked_read.py``; the end of a tick's: below); a claim's are prepared and
planned at each execution, and their driver errors map like SQLAlchemy's (:mod:`alma_schedule.stores.postgres.hot`).

* A store connection that has registered, claimed, started and finished 20 runs and probed a tick
  holds exactly four named statements (the probe, the start CAS, the finish and the end of a tick),
  the per-fire ones and the end of a tick run on their cached generic plan; the claim's three are
  prepared too but planned for their parameters at each of their 20 executions (their transaction
  forces custom plans; without it some run on a generic plan: checked), and the connection is back
  in ``auto`` mode after each claim; every other statement was sent unnamed.
* Over a loaded, ANALYZEd ledger, the generic plan of each (PREPAREd under ``force_generic_plan``,
  EXPLAINed) is node for node the plan PostgreSQL makes for the parameters of a real run
  (``force_custom_plan``), and reads ``routines`` and ``runs`` through indexes only.
* A backend terminated under a checked-out connection: StoreUnavailable, the connection invalidated;
  a statement error: a plain StoreError.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta, timezone
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from alma_schedule.errors import StoreError, StoreUnavailable
from alma_schedule.model import Reason, RunKey, RunResult, RunState
from alma_schedule.policies.streak import StreakEffect
from alma_schedule.stores.postgres import hot
from alma_schedule.stores.postgres import queries as pg_queries
from alma_schedule.stores.sql import queries as q
from alma_schedule.stores.sql.errors import mapped_errors
from alma_schedule.stores.sql.queries import ticklog
from alma_schedule.testing.builders import SECOND, T0, TIMERS, claim, fire_due, register
from tests.stores.sql_load import burst_ledger, copy_routines, copy_runs, history_rows, open_rows
from tests.stores.sql_support import explain_plan, libpq_url, opened, pg_admin, pg_database

pytestmark = pytest.mark.postgres

LOADED = 5_000


def _key() -> RunKey:
    return RunKey("org-1", "user-1", "routine-0000001", "2026-03-01T11:00:00Z")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with pg_database() as url:
        yield url


def _prepared(conn: sa.Connection) -> list[tuple[str, int, int]]:
    rows = conn.exec_driver_sql(
        "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements ORDER BY statement"
    ).all()
    conn.commit()  # never a ROLLBACK: psycopg deallocates its prepared statements on one
    return [(str(r[0]), int(r[1]), int(r[2])) for r in rows]


def test_only_the_start_and_the_finish_are_prepared_and_they_reuse_a_generic_plan(url: str) -> None:
    with opened(url, pool_size=1, max_overflow=0) as store:  # one connection: every call on it
        for i in range(20):
            rec = register(store, f"hot-{i}")
            run = claim(store, rec.routine_id)
            assert store.start(run.key, now=T0 + SECOND, owner=f"req-{i}", in_window=True).won
            assert store.finish(run.key, RunResult.completed(), now=T0 + 2 * SECOND, timers=TIMERS).won
            store.probe_tick(T0 + 3 * SECOND, TIMERS.run_time_limit)
            store.record_tick(T0 + 3 * SECOND, 1, 0.25, 1.5)
        with store.engine.connect() as conn:
            prepared = _prepared(conn)
            mode = conn.exec_driver_sql("SHOW plan_cache_mode").scalar()
    # the claim's writes (supersede with the cursor moves, insert the runs): prepared in the claim's
    # transaction, which forces a custom plan at each of their 20 executions; its locking select of
    # the due rows is streamed (stores/postgres/ahead.py), sent unnamed: planned at each execution too
    claiming = ("WITH a_advanced AS", "INSERT INTO alma.runs")
    claims = [p for p in prepared if p[0].startswith(claiming)]
    assert len(claims) == 2 and all((g, c) == (0, 20) for _, g, c in claims), claims
    assert not [p for p in prepared if p[0].startswith("SELECT alma.routines.org")]
    assert mode == "auto"  # SET LOCAL: back to the session's mode after each claim's COMMIT
    prepared = [p for p in prepared if p not in claims]
    # the tick probe, the start CAS (with max_runs' count: a WITH), the finish, the end of a tick
    assert sorted(s.split()[0] for s, _, _ in prepared) == ["SELECT", "WITH", "WITH", "WITH"], prepared
    ends = [p for p in prepared if "INSERT INTO alma.heartbeat" in p[0]]
    probe, finish, start = sorted((p for p in prepared if p not in ends), key=lambda p: "start_lock" in p[0])
    assert len(ends) == 1 and "tick_log" in ends[0][0]
    assert "LIMIT" in probe[0] and "state='running'" in start[0] and "RETURNING" in finish[0]
    for _statement, generic, custom in (start, finish, ends[0]):
        assert custom == 5 and generic == 15  # PostgreSQL's five custom plans, then the cached generic one


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


@pytest.fixture(scope="module")
def loaded(url: str) -> str:
    conninfo = libpq_url(url)
    copy_routines(conninfo, LOADED, 0, T0)
    copy_runs(conninfo, history_rows(LOADED, T0, per_routine=2))
    copy_runs(conninfo, open_rows(range(0, 300), "claimed", T0, due=True))
    copy_runs(conninfo, open_rows(range(300, 600), "running", T0, due=True))
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO spend SELECT 'scope:org-' || mod(i, 100) || ':' || (i / 100),"
            " '2026-03-0' || (1 + mod(i, 9)), i, i FROM generate_series(1, %s) AS i",
            (LOADED,),
        )
        done = "INSERT INTO backfills SELECT org, uid, routine_id, %s, %s, NULL, 10, NULL, %s FROM routines LIMIT 3000"
        conn.execute(done, (T0 - timedelta(days=2),) * 3)  # done ranges: the hint reads pending ones by index
        conn.execute("ANALYZE")
    return conninfo


def test_the_tick_probe_keeps_its_generic_plan_over_a_ledger_without_result_texts(url: str, loaded: str) -> None:
    """A ledger that holds no result text (a fleet of ``task`` routines): the probe's generic plan is
    index probes priced as such, so PostgreSQL keeps it after its five custom plans instead of
    planning the probe again at every tick (its ``expired_results`` arm, with a condition on
    ``result_text`` estimated to match no row, was priced as a read of the whole ledger)."""
    with opened(url, pool_size=1, max_overflow=0) as store:
        for i in range(12):
            store.probe_tick(T0 + i * SECOND, TIMERS.run_time_limit)
        with store.engine.connect() as conn:
            (probe,) = [p for p in _prepared(conn) if p[0].startswith("SELECT")]
    assert probe[2] == 5 and probe[1] == 7, probe  # five custom plans, then the cached generic one


SHAPES = [
    ("start", q.start_cas(with_routine=True, in_window=True)),
    *((f"finish {e}", q.finish_statement(("running",), str(e))) for e in StreakEffect),
    ("finish collecting", q.finish_statement(("collecting",), str(StreakEffect.COUNT))),
]


def _shape(plan: dict[str, Any]) -> tuple[Any, ...]:
    """The plan's nodes and what each reads (no costs)."""
    here = (plan["Node Type"], plan.get("Relation Name"), plan.get("Index Name"))
    return here, tuple(_shape(child) for child in plan.get("Plans", ()))


@pytest.mark.parametrize(("name", "stmt"), SHAPES, ids=[n for n, _ in SHAPES])
def test_their_generic_plan_is_the_plan_made_for_the_parameters(loaded: str, name: str, stmt: Any) -> None:
    rendered = hot.rendered(stmt, "alma")
    state = "claimed" if name == "start" else "running"
    with psycopg.connect(loaded) as conn:
        found = conn.execute("SELECT org, uid, routine_id, run_id FROM runs WHERE state = %s LIMIT 1", (state,))
        key = found.fetchone()
    assert key is not None
    params = {
        **q.run_params(RunKey(*key), now=T0, owner="req"),
        "f_state": "completed", "f_reason": "ok", "f_cost": None, "f_error_class": None,
        "f_erase_at": T0 + timedelta(days=1), "f_threshold": 3, "f_latch": None,
    }  # fmt: skip
    args = rendered.args(params)
    generic = explain_plan(loaded, rendered.sql, args)
    assert _shape(generic) == _shape(explain_plan(loaded, rendered.sql, args, mode="force_custom_plan")), name
    nodes = list(_nodes(generic))
    seq = [n.get("Relation Name") for n in nodes if n["Node Type"] == "Seq Scan"]
    assert not {"routines", "runs"} & set(seq), f"{name}: sequential scan of {seq}\n{json.dumps(generic)}"
    on_runs = {n["Index Name"] for n in nodes if "Index Name" in n and n.get("Relation Name") == "runs"}
    assert on_runs, name


def test_the_end_of_a_tick_reads_by_key_and_index_in_its_generic_plan(loaded: str) -> None:
    """``record_tick`` over a tick log of more than its 7 days (and the loaded ledger): the generic
    plan prunes through the log's primary key and computes the hint through indexes, never a
    sequential scan of ``tick_log``, ``routines`` or ``runs``."""
    with psycopg.connect(loaded, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO tick_log (minute, ticks, claimed) SELECT %s - i * interval '1 minute', 1, 0"
            " FROM generate_series(1, 12000) AS i ON CONFLICT DO NOTHING",
            (T0,),
        )
        conn.execute("ANALYZE tick_log")
    rendered = hot.rendered(pg_queries.record_tick()[0], "alma")
    args = rendered.args(ticklog.record_tick_params(T0, 3, 0.5, 2.0))
    nodes = list(_nodes(explain_plan(loaded, rendered.sql, args)))
    seq = [n.get("Relation Name") for n in nodes if n["Node Type"] == "Seq Scan"]
    assert not seq, f"sequential scan of {seq}"
    used = {n["Index Name"] for n in nodes if "Index Name" in n}
    assert {"tick_log_pkey", "ix_routines_due", "ix_runs_resend", "ix_runs_poll"} <= used, used


def test_a_backend_terminated_under_the_statement_is_unavailable(url: str) -> None:
    with opened(url) as store, store.engine.connect() as conn:
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        conn.commit()
        pg_admin(f"SELECT pg_terminate_backend({int(pid or 0)})")
        with pytest.raises(StoreUnavailable), mapped_errors(url):
            start = q.start_cas(with_routine=True, in_window=True)
            hot.one_row(conn, start, "alma", q.run_params(_key(), now=T0, owner=None))
        assert conn.invalidated


def test_a_statement_error_is_a_store_error(url: str) -> None:
    with opened(url) as store, store.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT")
        with pytest.raises(StoreError) as caught, mapped_errors(url):
            one_over = sa.select(sa.literal_column("1") / sa.bindparam("zero", type_=sa.Integer))
            hot.one_row(conn, one_over, "alma", {"zero": 0})
        assert type(caught.value) is StoreError and "division by zero" in str(caught.value)


def test_a_statement_whose_text_or_types_depend_on_the_values_is_refused() -> None:
    with pytest.raises(ValueError, match="expanding"):
        expanding = sa.bindparam("states", expanding=True)  # an IN of a list parameter: postcompiled
        hot.rendered(sa.select(sa.literal_column("1")).where(sa.literal_column("state").in_(expanding)), "alma")
    untyped = sa.select(sa.literal_column("1")).where(sa.literal_column("x") == sa.bindparam("p"))
    with pytest.raises(ValueError, match="no cast"):
        hot.rendered(untyped, "alma")


AWKWARD = ['q"uote', "back\\slash", "com,ma", "{brace}", "NULL", "sp ace", "ü-ñ-日本", "", "'single'"]


def test_arrays_of_plain_strings_and_aware_instants_travel_as_literals_any_other_list_as_it_is() -> None:
    assert hot._array(["a", "b c", "NULL", "{x},y"]) == '{"a","b c","NULL","{x},y"}'
    assert hot._array(["a", None, "NULL"]) == '{"a",NULL,"NULL"}'  # None is NULL, the text "NULL" is text
    assert hot._array([RunState.CLAIMED, None, Reason.OVERLAP]) == '{"claimed",NULL,"overlap"}'  # str enums: values
    east = timezone(timedelta(hours=2))
    at = T0.astimezone(east)
    assert hot._array([T0, None, at, T0]) == (
        f'{{"{T0.isoformat()}",NULL,"{T0.isoformat()}","{T0.isoformat()}"}}'  # equal instants: one text
    )
    assert hot._array([at]) == f'{{"{at.isoformat()}"}}'  # its own offset: the same instant
    naive = T0.replace(tzinfo=None)
    for kept in (['q"uote', "a"], ["back\\slash"], ['q"', None], [naive], [T0, naive], [1, 2], [True], [], [None]):
        assert hot._array(kept) is kept  # the binary list dumper's


def test_every_string_reaches_the_database_as_it_was(url: str) -> None:
    """Each awkward string, as one of a literal's elements or through the list dumper, arrives whole,
    in order (``unnest($1::TEXT[])`` read back)."""
    stmt = sa.select(sa.func.unnest(sa.bindparam("a", type_=sa.ARRAY(sa.Text)))).select_from(sa.text("(SELECT 1) x"))
    with opened(url) as store, store.engine.connect() as conn:
        for values in (AWKWARD, [v for v in AWKWARD if '"' not in v and "\\" not in v], ["x", "NULL", "y"]):
            got = [row[0] for row in hot.all_rows(conn, stmt, "alma", {"a": values})]
            assert got == values
        conn.commit()


def test_every_instant_and_null_reaches_the_database_as_it_was(url: str) -> None:
    """Instants in any offset, NULLs among them and among strings, as literals (``unnest`` read back
    in a session of another zone: the instants are the same, the NULLs NULL, the text "NULL" text)."""
    stamps = sa.select(sa.func.unnest(sa.bindparam("a", type_=sa.ARRAY(sa.DateTime(timezone=True))))).select_from(
        sa.text("(SELECT 1) x")
    )
    texts = sa.select(sa.func.unnest(sa.bindparam("a", type_=sa.ARRAY(sa.Text)))).select_from(sa.text("(SELECT 1) x"))
    east, west = timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))
    instants = [T0, None, T0.astimezone(east), T0 + timedelta(microseconds=7), (T0 + SECOND).astimezone(west), None]
    with opened(url) as store, store.engine.connect() as conn:
        conn.exec_driver_sql("SET TIME ZONE 'Asia/Tokyo'")
        assert isinstance(hot._array(instants), str)
        assert [row[0] for row in hot.all_rows(conn, stamps, "alma", {"a": instants})] == instants
        mixed = ["x", None, "NULL", "", None, RunState.CLAIMED]
        assert isinstance(hot._array(mixed), str)
        assert [row[0] for row in hot.all_rows(conn, texts, "alma", {"a": mixed})] == mixed
        conn.rollback()


def test_a_claim_of_routines_named_with_awkward_characters_records_each_name(url: str) -> None:
    """First names that travel as literals (no quote, no backslash), then the others (the list dumper)."""
    plain = [f"r{i}-{s}" for i, s in enumerate(AWKWARD) if '"' not in s and "\\" not in s]
    other = [f"r{i}-{s}" for i, s in enumerate(AWKWARD) if f"r{i}-{s}" not in plain]
    with opened(url) as store:
        for names in (plain, other):
            for name in names:
                register(store, name, next_due_at=T0)
            batch = store.claim_due(T0, 1000, fire_due, TIMERS)
            assert sorted(r.routine_id for r in batch.claimed) == sorted(names)
            for r in batch.claimed:
                got = store.get(r.key)
                assert got is not None and got.routine_id == r.routine_id and got.state == "claimed"


def test_rows_come_back_only_from_a_statement_that_returns_a_result_set(url: str) -> None:
    """``all_rows`` reads the result's status: a SELECT's and a RETURNING's rows (none when no row
    matched), nothing for a statement without rows to return."""
    t = sa.table("hot_rows", sa.column("x", sa.Integer), schema="alma")
    x = sa.bindparam("x", type_=sa.Integer)
    with opened(url) as store, store.engine.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE alma.hot_rows (x integer)")
        try:
            assert hot.all_rows(conn, sa.insert(t).values(x=sa.cast(x, sa.Integer)), "alma", {"x": 1}) == []
            returning = sa.update(t).values(x=t.c.x + 1).where(t.c.x == sa.cast(x, sa.Integer)).returning(t.c.x)
            assert hot.all_rows(conn, returning, "alma", {"x": 1}) == [(2,)]
            assert hot.all_rows(conn, returning, "alma", {"x": 7}) == []
            select = sa.select(t.c.x).where(t.c.x >= sa.cast(x, sa.Integer))
            assert hot.all_rows(conn, select, "alma", {"x": 0}) == [(2,)]
            assert hot.all_rows(conn, select, "alma", {"x": 3}) == []
        finally:
            conn.rollback()


@pytest.fixture(scope="module")
def burst_url() -> Iterator[str]:
    """A ledger whose statistics predate a burst of claimed and running runs (``burst_ledger``)."""
    with burst_ledger(LOADED, T0) as url:
        yield url


@pytest.fixture(scope="module")
def burst(burst_url: str) -> str:
    return libpq_url(burst_url)


#: Indexes that reach ONE run by its full key: the primary key, the open run's and the buffered
#: fire's unique indexes (one row per routine each).
BY_KEY = {"runs_pkey", "uq_runs_one_active", "uq_runs_one_buffered"}


def _routine_run(i: int) -> RunKey:
    """The open run of routine ``i`` in both ledgers (``open_rows``)."""
    fire = (T0 - timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return RunKey(f"org-{i % 100}", "user-1", f"routine-{i:07d}", fire)


def _assert_reads_runs_by_key(conninfo: str, sql: str, args: list[Any], label: str) -> None:
    """Both plans of ``sql`` (generic, and made for ``args``) scan ``runs`` only through :data:`BY_KEY`."""
    for mode in ("force_generic_plan", "force_custom_plan"):
        plan = explain_plan(conninfo, sql, args, mode=mode)
        scans = [n for n in _nodes(plan) if n.get("Relation Name") == "runs" and "Scan" in n["Node Type"]]
        assert scans and {n.get("Index Name") for n in scans} <= BY_KEY, f"{label} {mode}: {json.dumps(plan)}"


@pytest.mark.parametrize("ledger", ["loaded", "burst"])
@pytest.mark.parametrize(("name", "stmt"), SHAPES, ids=[n for n, _ in SHAPES])
def test_the_per_fire_statements_reach_their_run_by_key_whatever_the_statistics(
    request: pytest.FixtureRequest, ledger: str, name: str, stmt: Any
) -> None:
    """The generic plan (the one a warm worker runs, cached before a burst) and the plan made for the
    parameters read ``runs`` only through an index that holds one row per key, never through an
    index of one state's runs filtered by key (``ix_runs_expires`` for the start: that read grows
    with the burst, once per fire; measured end to end at 10,000 claimed runs, 0.66 ms a start
    against 0.17 by key), nor through ``ix_runs_routine_fire``, which the planner's
    one-row-per-routine estimate ties with the key and which reads the routine's whole ledger
    (``owned_states``)."""
    conninfo = request.getfixturevalue(ledger)
    rendered = hot.rendered(stmt, "alma")
    # a claimed run for the start, a running one for a finish (the plan's shape does not need the row)
    key = _routine_run(7 if name == "start" else {"loaded": 307, "burst": 3_007}[ledger])
    params = {
        **q.run_params(key, now=T0, owner="req"),
        "f_state": "completed", "f_reason": "ok", "f_cost": None, "f_error_class": None,
        "f_erase_at": T0 + timedelta(days=1), "f_threshold": 3, "f_latch": None,
    }  # fmt: skip
    _assert_reads_runs_by_key(conninfo, rendered.sql, rendered.args(params), f"{name} {ledger}")


def test_a_worker_keeps_the_generic_start_and_finish_through_a_burst(burst_url: str) -> None:
    """A store connection starting and finishing 20 of the burst's claimed runs runs the start CAS and
    the finish on their cached generic plan after PostgreSQL's five custom plans (the plan the
    test above reads), not on a custom plan made at each start."""
    with opened(burst_url, pool_size=1, max_overflow=0) as store:
        for i in range(100, 120):
            key = _routine_run(i)
            assert store.start(key, now=T0, owner=f"req-{i}", in_window=True).won
            assert store.finish(key, RunResult.completed(), now=T0 + SECOND, timers=TIMERS).won
        with store.engine.connect() as conn:
            prepared = {("start" if "start_lock" in s else s.split()[0]): (g, c) for s, g, c in _prepared(conn)}
    assert prepared == {"start": (15, 5), "WITH": (15, 5)}, prepared


def _cas_shapes() -> list[tuple[str, Any, dict[str, Any]]]:
    """The store's other by-key writes of one run (sent unnamed: planned for their parameters):
    (name, statement, parameters)."""
    key = RunKey("org-0", "user-1", "routine-0000000", "r")
    at = {"state_at": T0}
    shapes = [
        ("submit", *q.cas(key, ["running"], {"state": "submitted", **at})),
        ("collect", *q.cas(key, ["submitted"], {"state": "collecting", **at})),
        ("annotate", *q.cas(key, sorted(q.NON_TERMINAL), {"session_id": "s"})),
        ("end", *q.ending_cas(key, ["running"], {"state": "completed", **at})),
        ("release", *q.cas(key, ["buffered"], {"state": "claimed", **at})),
        ("mark_blocked", q.MARK_BLOCKED, q.run_params(key, now=T0, why="w", cost=0)),
    ]
    return [(n, stmt, dict(p)) for n, stmt, p in shapes]


CAS_SHAPES = _cas_shapes()


@pytest.mark.parametrize("ledger", ["loaded", "burst"])
@pytest.mark.parametrize(("name", "stmt", "params"), CAS_SHAPES, ids=[s[0] for s in CAS_SHAPES])
def test_a_cas_of_one_run_reaches_it_by_key(
    request: pytest.FixtureRequest, ledger: str, name: str, stmt: Any, params: dict[str, Any]
) -> None:
    """The same for the by-key compare-and-sets sent unnamed (a custom plan at each execution, made
    from the statistics of the moment: over the analyzed ledger and over the burst they predate)."""
    rendered = hot.rendered(stmt, "alma")
    key = _routine_run({"loaded": 307, "burst": 3_007}[ledger])
    args = rendered.args({**params, **q.run_params(key)})
    _assert_reads_runs_by_key(request.getfixturevalue(ledger), rendered.sql, args, f"{name} {ledger}")
