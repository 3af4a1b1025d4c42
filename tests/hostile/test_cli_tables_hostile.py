"""Stored text reaches a terminal as text, never as markup or control (issue 45, items 3 and 6).

Every CLI table goes through :func:`alma_schedule.cli.terminal.terminal_text` (the one escape of
the terminal medium): rich markup is never interpreted (``[/]`` once crashed six commands with an
untyped ``MarkupError``, ``[link=...]`` printed a hyperlink, ``[green]`` printed green), and control
and format characters (C0, C1, bidi overrides) are shown as ``\\uXXXX``. Ids refuse every Unicode
control and format character (categories Cc and Cf); a row stored before that check still prints
safely. All on a real SQLite store through the real click group."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alma_schedule.cli import cli
from alma_schedule.cli.terminal import terminal_text
from alma_schedule.errors import InvalidInput
from alma_schedule.model import check_new_id

SCOPE = "acme/alice"
DEFINITION = json.dumps({"goal": "Morning briefing", "budget": {"per_turn_usd": {"usd": 0.05}}})
EVERY = '{"every": "1h"}'
FUTURE = "2099-01-01T00:00:00Z"
LINK = "[link=https://evil.example]click-me[/link]"
#: What no output may carry raw: C0 and C1 controls (but newline), DEL, format characters (the
#: bidi overrides and isolates, zero-width joiners, tags), line and paragraph separators.
UNSAFE = ("Cc", "Cf", "Cs", "Zl", "Zp")


def _env(url: str, **extra: str) -> dict[str, str | None]:
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ALMA_")}
    sink = "file:" + url.removeprefix("sqlite:///") + ".out.jsonl"
    return {**unset, "ALMA_DATABASE_URL": url, "ALMA_PROVIDER": "scripted", "ALMA_SINK": sink, **extra}


def cli_run(url: str, *args: str, **env: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=_env(url, **env))


def ok(result: Result) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 0, result.output
    return result.stdout


def add(url: str, rid: str) -> None:
    ok(cli_run(url, "routines", "add", SCOPE, rid, "--kind", "turn", "--schedule", EVERY, "--definition", DEFINITION))


def raw_characters(text: str) -> list[str]:
    """The characters of ``text`` no terminal should receive raw (newline is the line break)."""
    return [f"U+{ord(c):04X}" for c in text if c != "\n" and unicodedata.category(c) in UNSAFE]


def unfolded(out: str) -> str:
    """``out`` and, after it, each table column's cells joined across lines (a long cell folds
    onto the next lines of its column): a text without spaces is found whole in one of them."""
    columns: dict[int, list[str]] = {}
    for line in out.splitlines():
        if line.startswith("\N{BOX DRAWINGS LIGHT VERTICAL}"):
            for i, cell in enumerate(line.split("\N{BOX DRAWINGS LIGHT VERTICAL}")[1:-1]):
                columns.setdefault(i, []).append(cell.strip())
        else:
            for i in columns:
                columns[i].append("\n")
    return out + "\n" + "\n".join("".join(cells) for cells in columns.values())


def shows(text: str, out: str) -> bool:
    """``text`` is in the printed ``out``, however its cell folded or wrapped (whitespace ignored)."""
    return "".join(terminal_text(text).split()) in "".join(unfolded(out).split())


def render_all(url: str, rid: str) -> dict[str, str]:
    """Every CLI table that shows a routine or its runs, as printed (each must exit 0)."""
    commands = {
        "routines list": ("routines", "list", SCOPE),
        "routines list --all": ("routines", "list", "--all"),
        "plan": ("plan", "--at", FUTURE),
        "routines show": ("routines", "show", SCOPE, rid),
        "routines describe": ("routines", "describe", SCOPE, rid),
        "runs list": ("runs", "list", SCOPE),
    }
    return {name: ok(cli_run(url, *args)) for name, args in commands.items()}


def legacy_rewrite(url: str, column: str, value: str, where_id: str) -> None:
    """Write a row as a version without today's id check could have (raw SQL on the SQLite file)."""
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        if column == "routine_id":
            for table in ("alma_routines", "alma_runs", "alma_routine_versions"):
                db.execute(f"UPDATE {table} SET routine_id = ? WHERE routine_id = ?", (value, where_id))
        else:
            db.execute(f"UPDATE alma_routines SET {column} = ? WHERE routine_id = ?", (value, where_id))


# ------------------------------------------------------------------ item 3: markup injection


def test_an_id_of_closing_markup_prints_in_every_table(migrated_sqlite_url: str) -> None:
    url = migrated_sqlite_url
    add(url, "[/]")
    ok(cli_run(url, "routines", "trigger", SCOPE, "[/]"))
    for name, out in render_all(url, "[/]").items():  # each raised rich.errors.MarkupError before
        assert "[/]" in unfolded(out), name


def test_a_link_in_an_id_is_shown_not_followed(migrated_sqlite_url: str) -> None:
    url = migrated_sqlite_url
    add(url, LINK)
    ok(cli_run(url, "routines", "trigger", SCOPE, LINK))
    for name, out in render_all(url, LINK).items():
        assert LINK in unfolded(out), name
    # on a terminal (forced): no OSC 8 hyperlink, the literal text
    out = ok(cli_run(url, "routines", "list", SCOPE, FORCE_COLOR="1", TTY_COMPATIBLE="1"))
    assert "\x1b]8;" not in out
    assert "[link=https://evil.example]" in out


def test_a_pause_reason_of_markup_is_text_not_colour(migrated_sqlite_url: str) -> None:
    url = migrated_sqlite_url
    add(url, "briefing")
    ok(cli_run(url, "routines", "pause", SCOPE, "briefing", "--reason", "[green]all good[/green]"))
    for args in (
        ("routines", "list", SCOPE),
        ("routines", "list", "--all"),
        ("routines", "describe", SCOPE, "briefing"),
    ):
        out = ok(cli_run(url, *args, FORCE_COLOR="1", TTY_COMPATIBLE="1"))
        assert "[green]all good[/green]" in out, args
        assert "\x1b[32m" not in out, args  # green, as the markup printed it


def test_emoji_codes_and_titles_are_text_too(migrated_sqlite_url: str) -> None:
    url = migrated_sqlite_url
    add(url, ":smile: [bold]x")
    out = ok(cli_run(url, "routines", "show", SCOPE, ":smile: [bold]x"))
    assert "routine acme/alice/:smile: [bold]x" in out  # the title, built from the key
    assert "\N{SMILING FACE WITH OPEN MOUTH}" not in out


# ------------------------------------------------------------------ item 6: control and format characters


@pytest.mark.parametrize(
    "rid", ["invoice\u202egnp.exe", "csi\u009b31m", "osc\u009d8;;x\u009c", "zw\u200bj", "tag\U000e0041", "bom\ufeff"]
)
def test_ids_refuse_control_and_format_characters(rid: str, migrated_sqlite_url: str) -> None:
    bad = next(c for c in rid if unicodedata.category(c) in ("Cc", "Cf"))
    shown = f"\\u{ord(bad):04x}" if ord(bad) <= 0xFFFF else f"\\U{ord(bad):08x}"
    with pytest.raises(InvalidInput) as caught:
        check_new_id("routine_id", rid)
    message = str(caught.value)
    assert shown in message and "routine_id" in message
    assert raw_characters(message) == []  # the message names the id without carrying the character
    with pytest.raises(InvalidInput):
        check_new_id("org", rid, allow_slash=False)
    result = cli_run(migrated_sqlite_url, "routines", "add", SCOPE, rid, "--kind", "turn", "--schedule", EVERY,
                     "--definition", DEFINITION)  # fmt: skip
    assert result.exit_code == 1, result.output
    assert shown in result.stderr and raw_characters(result.output) == []
    add(migrated_sqlite_url, "briefing")  # a pause reason is a new id too
    paused = cli_run(migrated_sqlite_url, "routines", "pause", SCOPE, "briefing", "--reason", rid)
    assert paused.exit_code == 1 and shown in paused.stderr and raw_characters(paused.output) == []
    # a lookup of such an id is not a registration: one escaped "not found" line, never the raw character
    missing = cli_run(migrated_sqlite_url, "routines", "show", SCOPE, rid)
    assert missing.exit_code == 1 and raw_characters(missing.output) == [], missing.output


def test_a_stored_bidi_id_prints_escaped(migrated_sqlite_url: str) -> None:
    url = migrated_sqlite_url
    add(url, "invoice")
    ok(cli_run(url, "routines", "trigger", SCOPE, "invoice"))
    legacy_rewrite(url, "routine_id", "invoice\u202egnp.exe", "invoice")  # stored before the check
    legacy_rewrite(url, "paused_reason", "csi\u009b31m\x1b[31mred", "invoice\u202egnp.exe")
    legacy_rewrite(url, "last_error", "osc\x1b]8;;https://evil.example\x07here", "invoice\u202egnp.exe")
    for args in (("routines", "list", SCOPE), ("routines", "list", "--all"), ("plan", "--at", FUTURE)):
        out = ok(cli_run(url, *args))
        assert raw_characters(out) == [], args
        assert "invoice\\u202egnp.exe" in unfolded(out), args
    runs = ok(cli_run(url, "runs", "list", SCOPE))
    assert raw_characters(runs) == [] and "invoice\\u202egnp.exe" in unfolded(runs)
    listed = unfolded(ok(cli_run(url, "routines", "list", SCOPE)))
    assert "csi\\u009b31m\\u001b[31mred" in listed
    assert "osc\\u001b]8;;https://evil.example\\u0007here" in listed
    # the stored row is still addressed by its id (lookups keep the older rule), and echoed escaped
    legacy = "invoice\u202egnp.exe"
    for args in (("routines", "show", SCOPE, legacy), ("routines", "describe", SCOPE, legacy)):
        out = ok(cli_run(url, *args))
        assert raw_characters(out) == [] and "invoice\\u202egnp.exe" in unfolded(out), args
    refused = cli_run(url, "routines", "trigger", SCOPE, legacy)  # paused: one escaped error line
    assert refused.exit_code == 1 and raw_characters(refused.output) == []
    assert "acme/alice/invoice\\u202egnp.exe is paused" in refused.stderr
    for verb in ("resume", "trigger", "disable"):
        args = ("routines", verb, SCOPE, legacy)
        out = ok(cli_run(url, *args))
        assert raw_characters(out) == [] and "acme/alice/invoice\\u202egnp.exe" in out, args


def test_terminal_text_is_the_one_escape() -> None:
    assert terminal_text("[/]") == "[/]"  # markup stays literal text: cells are rich Text, never markup
    assert terminal_text("a\u202eb\u009bc\x00d\ne") == "a\\u202eb\\u009bc\\u0000d\\u000ae"
    assert terminal_text("tag\U000e0041") == "tag\\U000e0041"
    assert terminal_text(None) == ""
    assert terminal_text(42) == "42"
    assert terminal_text("café ☕ 日本") == "café ☕ 日本"


# ------------------------------------------------------------------ the property: every table, any text


def _accepted(text: str) -> bool:
    if text.startswith("-"):  # typed after the scope, click reads it as an option (a user writes `-- -x`)
        return False
    try:
        check_new_id("routine_id", text)
    except InvalidInput:
        return False
    return True


MARKUPISH = st.sampled_from(["[", "]", "[/]", "[b]", "[link=https://e.x]", "\\", ":smile:", "[/link]", "[red]"])
ANY_CHAR = st.characters(exclude_categories=["Cs"])  # SQLite stores UTF-8: no lone surrogates
CONTROLS = st.sampled_from(
    ["\x1b", "\x1b[31m", "\x07", "\x9b", "\x9d", "\u202e", "\u2066", "\u200b", "\r", "\t", "\x00"]
)
RAW = st.lists(st.one_of(MARKUPISH, CONTROLS, st.text(ANY_CHAR, max_size=3)), min_size=1, max_size=8).map("".join)
IDS = st.lists(st.one_of(MARKUPISH, st.text(ANY_CHAR, max_size=3)), min_size=1, max_size=8).map("".join)


@pytest.fixture
def fresh_store(_sqlite_template: Path, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """A new migrated SQLite file per hypothesis example (the fixture runs once per test)."""
    counter = iter(range(10**6))

    def make() -> str:
        target = tmp_path / f"p{next(counter)}.sqlite3"
        shutil.copyfile(_sqlite_template, target)
        return f"sqlite:///{target}"

    yield make


@pytest.mark.integration  # every table over a store, many examples / unreachable servers
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rid=IDS.filter(_accepted), reason=IDS.filter(_accepted), legacy=RAW, error=RAW)
def test_no_markup_control_or_bidi_reaches_the_output(
    fresh_store: Callable[[], str], rid: str, reason: str, legacy: str, error: str
) -> None:
    url = fresh_store()
    add(url, rid)
    paused = rid + "-p"
    add(url, paused)
    ok(cli_run(url, "routines", "trigger", SCOPE, rid))
    ok(cli_run(url, "routines", "pause", SCOPE, paused, "--reason", reason))
    for name, out in render_all(url, rid).items():  # ids and reasons the check accepts: shown literally
        assert raw_characters(out) == [], name
        if name in ("routines show", "routines describe"):
            assert shows(rid, out), name
    assert shows(reason, render_all(url, paused)["routines describe"])
    # rows written before the check (any text): every table still prints, nothing raw
    legacy_rewrite(url, "paused_reason", legacy, paused)
    legacy_rewrite(url, "last_error", error, rid)
    # an id a version before the check could store (ASCII controls were always refused): never rid
    legacy_id = "\u202e" + "".join(c for c in legacy if c.isascii() is False or c.isprintable()).strip()
    legacy_rewrite(url, "routine_id", legacy_id, paused)
    for args in (("routines", "list", SCOPE), ("routines", "list", "--all"), ("plan", "--at", FUTURE)):
        assert raw_characters(ok(cli_run(url, *args))) == [], args
    for name, out in render_all(url, rid).items():
        assert raw_characters(out) == [], name
