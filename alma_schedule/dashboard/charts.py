"""Server-rendered SVG charts of the dashboard: pure functions of their data returning escaped
markup (no script, nothing fetched: the page's CSP allows neither). Each chart is a ``<figure>``
whose ``<svg role="img">`` carries a ``<title>``, followed by a table of the same numbers.
Every mark has a class naming what it counts (``tick``, ``claimed``, ``gap``, ``fire``, ``run``...)
so a test counts the marks against the data.

docs/architecture.md, section "The modules, in detail" (dashboard/charts.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from alma_schedule.dashboard.html import attr, esc, table

__all__ = ["Mark", "Span", "clock_health", "duration_text", "figure", "heat_strip", "hhmm", "lag_ms", "timeline"]

W = 720  # plot width, px (viewBox units)
LEFT = 90  # room for the row labels
DAY = timedelta(days=1)
COLOURS = {
    "completed": "#1b8a3a",
    "failed": "#c62828",
    "timed_out": "#e07b00",
    "refused": "#7b3fa0",
    "skipped": "#8a8f98",
    "running": "#1565c0",
    "claimed": "#5c8ed6",
    "submitted": "#1565c0",
    "collecting": "#1565c0",
    "buffered": "#8a8f98",
}


def lag_ms(seconds: float | None) -> str:
    """A lag in whole milliseconds (``7,550 ms``) up to 10 s, beyond in seconds or minutes; ``-`` for None."""
    if seconds is None:
        return "-"
    return f"{seconds * 1000:,.0f} ms" if seconds < 10 else duration_text(seconds)


def duration_text(seconds: float | None) -> str:
    """``850 ms``, ``12.3 s``, ``4.5 min``, ``2.0 h`` (``-`` for None)."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def hhmm(at: datetime) -> str:
    return at.strftime("%H:%M")


def _n(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def figure(title: str, body: str, height: int, fallback: str, *, caption: str = "") -> str:
    """The chart's figure: the SVG (its ``<title>`` first) then its table fallback."""
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return (
        f'<figure class="chart"><svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{attr(title)}" '
        f'viewBox="0 0 {W + LEFT + 30} {height}" width="{W + LEFT + 30}" height="{height}" font-size="11" '
        f'font-family="sans-serif"><title>{esc(title)}</title>{body}</svg>{cap}'
        f"<details><summary>the numbers behind the chart</summary>{fallback}</details></figure>"
    )


class Axis:
    """Instants from ``start`` to ``end`` onto ``LEFT .. LEFT + W``."""

    def __init__(self, start: datetime, end: datetime) -> None:
        self.start, self.span = start, max((end - start).total_seconds(), 1.0)

    def x(self, at: datetime) -> float:
        return LEFT + max(0.0, min(1.0, (at - self.start).total_seconds() / self.span)) * W

    def ticks(self, y: int, label: str | None = None) -> str:
        """Axis ticks every round step (1 min .. 7 days) that gives at most 8 of them, UTC."""
        step = next((s for s in _STEPS if s.total_seconds() >= self.span / 8), _STEPS[-1])
        fmt = label or ("%H:%M" if self.span <= 86_400 else "%m-%d %H:%M")
        unit = int(step.total_seconds())
        first = datetime.fromtimestamp(-(-self.start.timestamp() // unit) * unit, tz=self.start.tzinfo)
        out, at = [], first
        end = self.start + timedelta(seconds=self.span)
        while at <= end:
            x = _n(self.x(at))
            out.append(f'<line x1="{x}" x2="{x}" y1="{y}" y2="{y + 4}" stroke="#999"/>')
            out.append(f'<text x="{x}" y="{y + 15}" text-anchor="middle">{esc(at.strftime(fmt))}</text>')
            at += step
        return "".join(out)


_STEPS = [timedelta(minutes=m) for m in (1, 5, 15, 30, 60, 180, 360, 720, 1440, 2880, 10080, 43200)]


def _label(y: float, text: str) -> str:
    return f'<text x="4" y="{_n(y)}">{esc(text)}</text>'


@dataclass(frozen=True)
class Minute:
    """One minute of the clock chart (from ``tick_log``): lags in seconds."""

    at: datetime
    ticks: int
    claimed: int
    p50: float | None
    p95: float | None


def clock_health(minutes: Iterable[Minute], now: datetime) -> str:
    """Ticks and fires claimed per minute (bars), fire lag p50/p95 per minute in ms (lines) and the
    gaps where no tick came (shaded), over the 24 h before ``now``."""
    start = (now - DAY).replace(second=0, microsecond=0)
    axis = Axis(start, now)
    rows = sorted((m for m in minutes if start <= m.at <= now), key=lambda m: m.at)
    bar_w = _n(max(W / 1440, 0.5))
    max_ticks = max((m.ticks for m in rows), default=1) or 1
    max_claimed = max((m.claimed for m in rows), default=1) or 1
    lags = [v for m in rows for v in (m.p50, m.p95) if v is not None]
    max_lag = max(lags, default=0.001) or 0.001
    parts = [_label(30, f"ticks/min (≤{max_ticks:,})"), _label(80, f"fires/min (≤{max_claimed:,})")]
    parts.append(_label(140, f"lag (≤{lag_ms(max_lag)})"))
    seen = {m.at for m in rows}
    gap_start: datetime | None = None
    gaps: list[tuple[datetime, datetime]] = []
    at = start
    while at <= now:
        if at not in seen and gap_start is None:
            gap_start = at
        elif at in seen and gap_start is not None:
            gaps.append((gap_start, at))
            gap_start = None
        at += timedelta(minutes=1)
    if gap_start is not None:
        gaps.append((gap_start, now))
    for a, b in gaps:
        x, w = axis.x(a), max(axis.x(b) - axis.x(a), 0.5)
        parts.append(f'<rect class="gap" x="{_n(x)}" y="5" width="{_n(w)}" height="150" fill="#fde7e7"/>')
    for m in rows:
        xt = _n(axis.x(m.at))
        if m.ticks:
            h = 40 * m.ticks / max_ticks
            parts.append(
                f'<rect class="tick" x="{xt}" y="{_n(45 - h)}" width="{bar_w}" height="{_n(h)}" fill="#1d2330"/>'
            )
        if m.claimed:
            h = 40 * m.claimed / max_claimed
            parts.append(
                f'<rect class="claimed" x="{xt}" y="{_n(95 - h)}" width="{bar_w}" height="{_n(h)}" fill="#1565c0"/>'
            )
    for name, colour in (("p50", "#1b8a3a"), ("p95", "#c62828")):
        lagged = [(m.at, getattr(m, name)) for m in rows]
        pts = [f"{_n(axis.x(at))},{_n(155 - 45 * v / max_lag)}" for at, v in lagged if v is not None]
        if pts:
            parts.append(
                f'<polyline class="{name}" points="{" ".join(pts)}" fill="none" stroke="{colour}" '
                f'stroke-width="1.2" data-points="{len(pts)}"/>'
            )
    parts.append(axis.ticks(160))
    title = (
        f"Clock health, the 24 h to {hhmm(now)} UTC: {sum(m.ticks for m in rows):,} ticks, "
        f"{sum(m.claimed for m in rows):,} fires claimed, {len(gaps)} gap(s) without a tick"
    )
    hours: dict[datetime, list[Minute]] = {}
    for m in rows:
        hours.setdefault(m.at.replace(minute=0), []).append(m)
    fallback = table(
        ["hour (UTC)", "minutes with a tick", "ticks", "fires claimed", "lag p50 (worst)", "lag p95 (worst)"],
        [
            [
                esc(h.strftime("%Y-%m-%d %H:00")),
                esc(len(ms)),
                esc(f"{sum(m.ticks for m in ms):,}"),
                esc(f"{sum(m.claimed for m in ms):,}"),
                esc(lag_ms(max((m.p50 for m in ms if m.p50 is not None), default=None))),
                esc(lag_ms(max((m.p95 for m in ms if m.p95 is not None), default=None))),
            ]
            for h, ms in sorted(hours.items())
        ],
        empty="no tick logged in the last 24 h",
    )
    caption = "red bands: minutes without a tick; lines: fire lag p50 (green) and p95 (red) per minute"
    return figure(title, "".join(parts), 180, fallback, caption=caption)


def heat_strip(
    title: str, start: datetime, counts: Sequence[int], notes: Sequence[tuple[datetime, str]], fallback: str
) -> str:
    """Fires per minute over ``len(counts)`` minutes from ``start`` as a strip (darker: more fires;
    one ``fire`` cell per minute holding any), ``notes`` (DST changes) as named marks."""
    end = start + timedelta(minutes=len(counts))
    axis = Axis(start, end)
    top = max(counts, default=0) or 1
    w = _n(max(W / max(len(counts), 1), 2))
    parts = [_label(30, "fires/min")]
    for i, n in enumerate(counts):
        if n:
            x = _n(axis.x(start + timedelta(minutes=i)))
            opacity = 0.15 + 0.85 * n / top
            parts.append(
                f'<rect class="fire" x="{x}" y="10" width="{w}" height="36" fill="#b3261e" '
                f'fill-opacity="{opacity:.2f}"><title>{esc(hhmm(start + timedelta(minutes=i)))} UTC: '
                f"{n:,} fires</title></rect>"
            )
    for k, (at, text) in enumerate(notes):
        x = _n(axis.x(at))
        parts.append(f'<line class="dst" x1="{x}" x2="{x}" y1="4" y2="52" stroke="#1d2330" stroke-dasharray="3 2"/>')
        parts.append(f'<text class="dst" x="{x}" y="{64 + 12 * k}" text-anchor="middle">{esc(text)}</text>')
    parts.append(axis.ticks(52 + 12 * len(notes) + 14))
    return figure(title, "".join(parts), 90 + 12 * len(notes), fallback)


@dataclass(frozen=True)
class Mark:
    """One mark of a timeline: ``start`` to ``end`` (None: a point), its kind (the class) and its text."""

    start: datetime
    end: datetime | None
    kind: str
    text: str


@dataclass(frozen=True)
class Span:
    """A shaded span of a timeline (a pause), ``end`` None: still open."""

    start: datetime
    end: datetime | None
    text: str


def timeline(
    title: str, start: datetime, end: datetime, marks: Sequence[Mark], spans: Sequence[Span], fallback: str
) -> str:
    """Marks on a time axis: a bar from start to end coloured by kind (an outcome), a point as a
    diamond; ``spans`` shaded behind them (pauses)."""
    axis = Axis(start, end)
    parts: list[str] = []
    for s in spans:
        x, x2 = axis.x(s.start), axis.x(s.end or end)
        parts.append(
            f'<rect class="span" x="{_n(x)}" y="6" width="{_n(max(x2 - x, 1))}" height="44" fill="#fff4d6">'
            f"<title>{esc(s.text)}</title></rect>"
        )
    for m in marks:
        x = axis.x(m.start)
        colour = COLOURS.get(m.kind, "#1d2330")
        if m.end is None:
            parts.append(
                f'<path class="{attr(m.kind)}" d="M{_n(x)} 22 l5 6 l-5 6 l-5 -6 z" fill="{colour}">'
                f"<title>{esc(m.text)}</title></path>"
            )
        else:
            w = max(axis.x(m.end) - x, 2)
            parts.append(
                f'<rect class="run {attr(m.kind)}" x="{_n(x)}" y="14" width="{_n(w)}" height="28" fill="{colour}">'
                f"<title>{esc(m.text)}</title></rect>"
            )
    parts.append(f'<line x1="{LEFT}" x2="{LEFT + W}" y1="50" y2="50" stroke="#999"/>')
    parts.append(axis.ticks(50, "%m-%d %H:%M" if end - start > timedelta(hours=20) else "%H:%M"))
    return figure(title, "".join(parts), 75, fallback)
