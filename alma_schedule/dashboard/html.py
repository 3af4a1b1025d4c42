"""The dashboard's HTML: one layout, tables and forms, every value escaped.

docs/architecture.md, section "The modules, in detail" (dashboard/html.py).
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from alma_schedule.model.printable import escape_unprintable, unprintable

__all__ = ["STYLE", "STYLE_PATH", "attr", "esc", "form", "instant", "layout", "link", "table"]

#: The capped count's text ("10,000+") when a read stopped at its cap.
CAP = 10_000

STYLE_PATH = "/dashboard/static/dashboard.css"
STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
nav{background:#1d2330;padding:.6rem 1rem}nav a{color:#fff;margin-right:1.2rem;text-decoration:none}
main{padding:1rem 1.5rem}table{border-collapse:collapse;background:#fff;margin:.5rem 0 1rem}
td,th{border:1px solid #d8dbe0;padding:.3rem .55rem;text-align:left;font-size:.9rem;vertical-align:top}
th{background:#eceef2}.ok{color:#11772b}.bad{color:#b3261e;font-weight:600}
.note{color:#555;font-size:.85rem}code,pre{font-size:.85rem}form.inline{display:inline}
.msg{padding:.5rem .8rem;background:#fff4d6;border:1px solid #e0c060;margin:.5rem 0}
.err{padding:.5rem .8rem;background:#fde7e7;border:1px solid #d08080;margin:.5rem 0}
nav .who{color:#aab}
"""

_NAV = (
    ("/dashboard/", "Overview"),
    ("/dashboard/scopes", "Scopes"),
    ("/dashboard/routines", "Routines"),
    ("/dashboard/ledger", "Ledger"),
    ("/dashboard/stuck", "Stuck"),
)


def esc(value: Any) -> str:
    """Text of ``value`` safe inside HTML text and quoted attributes (None = ``-``)."""
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return html.escape(value.isoformat())
    if isinstance(value, (dict, list, tuple)) or isinstance(value, Mapping):
        return html.escape(escape_unprintable(json.dumps(value, sort_keys=True, default=str)))
    return html.escape(escape_unprintable(str(value)), quote=True)


def attr(value: Any) -> str:
    """``value`` as a quoted attribute that a form sends back unchanged (see the module docstring)."""
    text = html.escape("" if value is None else str(value), quote=True)
    if text.isprintable():
        return text
    return "".join(f"&#x{ord(c):x};" if unprintable(c) else c for c in text)


def instant(value: datetime | None) -> str:
    return "-" if value is None else esc(value.isoformat().replace("+00:00", "Z"))


def count_text(n: int, capped: bool) -> str:
    return f"{CAP:,}+" if capped else f"{n:,}"


def url(path: str, **query: Any) -> str:
    """A dashboard URL with its query (values None left out), escaped for an attribute."""
    q = {k: v for k, v in query.items() if v not in (None, "")}
    return path + ("?" + urlencode(q) if q else "")


def link(href: str, text: Any) -> str:
    return f'<a href="{html.escape(href, quote=True)}">{esc(text)}</a>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, empty: str = "none") -> str:
    """A table; the cells are already escaped markup (build them with :func:`esc` / :func:`link`)."""
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="note">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def hidden(name: str, value: str) -> str:
    return f'<input type="hidden" name="{attr(name)}" value="{attr(value)}">'


def form(action: str, csrf: str, fields: Mapping[str, str], button: str, *, extra: str = "") -> str:
    """A POST form carrying the CSRF token and the given hidden fields."""
    inputs = hidden("csrf", csrf) + "".join(hidden(k, v) for k, v in fields.items())
    return (
        f'<form method="post" action="{html.escape(action, quote=True)}">{inputs}{extra}'
        f'<button type="submit">{esc(button)}</button></form>'
    )


def layout(title: str, body: str, *, user: str, read_only: bool, refresh: int | None = None) -> str:
    """The page around ``body`` (markup); ``refresh`` seconds adds a meta refresh (no script)."""
    nav = "".join(f'<a href="{href}">{esc(text)}</a>' for href, text in _NAV)
    mode = "read-only" if read_only else "actions enabled"
    meta = f'<meta http-equiv="refresh" content="{int(refresh)}">' if refresh else ""
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">{meta}'
        f'<title>{esc(title)} · alma-schedule</title><link rel="stylesheet" href="{STYLE_PATH}"></head><body>'
        f'<nav>{nav}<span class="note who">{esc(user)} · {mode}</span></nav>'
        f"<main><h1>{esc(title)}</h1>{body}</main></body></html>"
    )


def routine_path(org: str, uid: str, routine_id: str) -> str:
    """The path of a routine's page (its key in the query, escaped by :func:`url`)."""
    return url("/dashboard/routine", scope=f"{org}/{uid}", id=routine_id)
