"""``alma-schedule calendars add | list | show | refresh | delete`` through the real click group on
SQLite and PostgreSQL: a calendar stored and shown with its next holidays; a routine on it; a delete
refused naming it; the refusals (unknown country, market, calendar, roll, L) one line naming the field,
nothing written."""

from __future__ import annotations

import json

from tests.cli.test_cli_rough_edges import add, env, fails, ok, run

__all__ = ["env"]  # the fixture, shared with the rough edges

EOM = '{"cron": "0 9 L * *", "tz": "America/New_York", "calendar": "us-ny", "roll": "preceding"}'


def test_a_calendar_is_added_shown_used_refreshed_and_deleted(env: dict[str, str]) -> None:
    added = json.loads(ok(run(env, "calendars", "add", "us-ny", "--country", "US", "--subdiv", "NY",
                              "--add", "2030-12-24", "--years", "2", "--json")))  # fmt: skip
    assert (added["name"], added["version"], added["subdiv"], added["weekend"]) == ("us-ny", 1, "NY", "sat,sun")
    assert ["2030-12-24", "added"] in added["holidays"]  # an added date is closed whatever the years
    assert any(name == "Christmas Day" for _, name in added["holidays"])
    assert "us-ny" in ok(run(env, "calendars", "list"))
    ok(add(env, "month-end", EOM))
    shown = json.loads(ok(run(env, "calendars", "show", "us-ny", "--json")))
    assert shown["routines"] == ["acme/alice/month-end"] and shown["next_holidays"]
    line = fails(run(env, "calendars", "delete", "us-ny"))
    assert "'name': calendar 'us-ny' is in use by acme/alice/month-end" in line
    refreshed = json.loads(ok(run(env, "calendars", "refresh", "us-ny", "--years", "3", "--json")))
    assert refreshed["version"] == 2 and refreshed["years"][1] - refreshed["years"][0] == 2
    described = ok(run(env, "routines", "describe", "acme/alice", "month-end", "--json"))
    assert "calendar" in described
    ok(run(env, "routines", "delete", "acme/alice", "month-end"))
    assert "deleted calendar us-ny" in ok(run(env, "calendars", "delete", "us-ny"))
    assert json.loads(ok(run(env, "calendars", "list", "--json"))) == []


def test_bad_calendar_input_is_one_line_naming_the_field_and_writes_nothing(env: dict[str, str]) -> None:
    assert "'country' 'XX' is not known" in fails(run(env, "calendars", "add", "x", "--country", "XX"))
    assert "did you mean 'XNYS'?" in fails(run(env, "calendars", "add", "x", "--country", "US", "--market", "NYS"))
    assert "'subdiv'" in fails(run(env, "calendars", "add", "x", "--country", "US", "--subdiv", "ZZ"))
    assert "'weekend'" in fails(run(env, "calendars", "add", "x", "--country", "US", "--weekend", "sat,sunday"))
    assert "'name'" in fails(run(env, "calendars", "add", "Bad Name", "--country", "US"))
    assert json.loads(ok(run(env, "calendars", "list", "--json"))) == []
    ok(run(env, "calendars", "add", "us", "--country", "US", "--years", "1"))
    assert "did you mean 'us'?" in fails(add(env, "r", EOM.replace("us-ny", "su")))
    assert "'roll' must be one of" in fails(add(env, "r", EOM.replace("us-ny", "us").replace("preceding", "nearest")))
    assert "only allowed in the day-of-month field" in fails(add(env, "r", '{"cron": "0 9 * L *"}'))
    assert json.loads(ok(run(env, "routines", "list", "acme/alice", "--json"))) == []
    assert "'name': no calendar 'nope'" in fails(run(env, "calendars", "delete", "nope"))


def test_a_date_added_by_refresh_re_derives_the_next_fire_of_the_routines_on_it(env: dict[str, str]) -> None:
    ok(run(env, "calendars", "add", "us", "--country", "US", "--years", "2"))
    ok(add(env, "daily", '{"cron": "0 9 * * *", "calendar": "us", "roll": "skip"}'))

    def next_due() -> str:
        return str(json.loads(ok(run(env, "routines", "describe", "acme/alice", "daily", "--json")))["next_due_at"])

    before = next_due()
    refreshed = json.loads(ok(run(env, "calendars", "refresh", "us", "--add", before[:10], "--json")))
    assert refreshed["version"] == 2 and [before[:10], "added"] in refreshed["holidays"]
    assert refreshed["routines_rederived"] == 1
    after = next_due()
    assert after > before and after[11:] == before[11:]  # the same 09:00, a later business day
