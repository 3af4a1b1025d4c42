"""The lag section's targets (issue 44, part 4) and its Markdown (``bench/lag.py``).

Each target is reported met / NOT met for each of our two clocks (beat as the clock, ``clock run``),
never loosened: a task-start target holds only if both our p99 over every fire and our p99 over the
minute crontab fires meet it (the incumbents' p99 is over their crontab fires, or every timed fire).
"""

from __future__ import annotations

from typing import Any

NAMES = {"celery_beat": "celery beat", "redbeat": "RedBeat", "alma_beat": "alma-schedule (beat clock)",
         "alma_clock": "alma-schedule (clock run)"}  # fmt: skip


def _p(stat: Any, key: str = "p99") -> float | None:
    return stat.get(key) if isinstance(stat, dict) else None


def label(run: dict[str, Any]) -> str:
    name = NAMES.get(run["system"], run["system"])
    layout = run.get("layout")
    if layout == "shared":
        return f"{name}, one worker"
    if layout == "runs-unpacked":
        return f"{name}, runs on threads, unpacked"
    return f"{name}, runs on threads" if layout == "runs" else name


def brief(run: dict[str, Any]) -> dict[str, Any]:
    keys = ("fires", "missing", "twice", "task_start", "wake", "claim_to_run_start", "run_to_task_start", "run_start")
    return {"system": run["system"], "layout": run.get("layout"), **{k: run[k] for k in keys if k in run},
            "wall_s": run.get("wall_s")}  # fmt: skip


def _ours_p99(run: dict[str, Any]) -> float | None:
    values = [v for v in (_p(run.get("task_start")), _p(run.get("task_start_cron"))) if v is not None]
    return max(values) if values else None


def _target(text: str, value: Any, met: bool | None) -> dict[str, Any]:
    return {"target": text, "value": value, "met": met}


def targets(scenarios: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target of the scenarios that ran, for each of our runs."""
    out: list[dict[str, Any]] = []
    for name, sc in scenarios.items():
        runs = sc["runs"]
        ref = {r["system"]: r for r in runs if not r["system"].startswith("alma")}
        for run in (r for r in runs if r["system"].startswith("alma")):
            who, p99 = f"{name}: {label(run)}", _ours_p99(run)
            if name.startswith("mix"):
                beat = _p(ref.get("celery_beat", {}).get("task_start_cron"))
                start = _p(run.get("run_start"))
                out.append(_target(f"{who}: run-start p99 <= 100 ms", start, None if start is None else start <= 100))
                out.append(_target(
                    f"{who}: task start p99 <= celery beat's p99 + 150 ms ({beat} ms)", p99,
                    None if p99 is None or beat is None else p99 <= beat + 150,
                ))  # fmt: skip
                rates = run.get("rates", {})
                ok = bool(rates) and all(v["all_nominal"] for v in rates.values())
                shown = {k: f"{v['rate_min']}-{v['rate_max']}" for k, v in rates.items()}
                out.append(_target(f"{who}: every interval routine at its nominal rate", shown, ok))
            elif name in ("spread", "herd10k"):
                rb = _p(ref.get("redbeat", {}).get("task_start"))
                out.append(_target(f"{who}: task start p99 <= 1 s", p99, None if p99 is None else p99 <= 1000))
                out.append(_target(
                    f"{who}: task start p99 <= RedBeat's p99 + 200 ms ({rb} ms)", p99,
                    None if p99 is None or rb is None else p99 <= rb + 200,
                ))  # fmt: skip
            elif name == "herd":
                rb = _p(ref.get("redbeat", {}).get("task_start"))
                out.append(_target(f"{who}: task start p99 <= RedBeat's p99 ({rb} ms)", p99,
                                   None if p99 is None or rb is None else p99 <= rb))  # fmt: skip
            if name in ("mix", "mix-runs", "spread", "herd10k", "herd"):
                bad = {"missing": run.get("missing"), "twice": run.get("twice")}
                out.append(_target(f"{who}: 0 missing, 0 twice", bad, not run.get("missing") and not run.get("twice")))
    return out


def _cell(stat: Any) -> str:
    if not isinstance(stat, dict):
        return "—"
    return f"{stat['p50']:,.0f} / {stat['p99']:,.0f} / {stat['max']:,.0f}"


def _rates(rates: dict[str, Any]) -> str:
    if not rates:
        return "—"
    return "; ".join(
        f"{k}: {v['achieved_min']}-{v['achieved_max']} of {v['nominal_per_routine']:g}" for k, v in rates.items()
    )


def markdown(res: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"Lag (bench/lag.py{', --quick: the smoke, nothing asserted' if res.get('quick') else ''}; "
        f"{res['seconds'] / 60:.1f} min, code {res.get('code', '?')}): each fire's fleet task start minus its "
        "nominal instant, ms, "
        "p50 / p99 / max; one system after another, the README's worker layout (prefork `-c 2` for the "
        "fleet task and our run queue, our ticks on `-Q alma.tick -c 1`), workers with `-E`, default settings.",
    ]
    for name, sc in res["scenarios"].items():
        runs = sc["runs"]
        lines += [
            "",
            f"**{name}**: {sc['routines']:,} routines, {sc['minutes']:g} min per system.",
            "",
            "| system | fires | missing | twice | task start | minute crontab | sent (incumbents) "
            "| wake | claim to run start | run to task start | run start | interval routines (fires) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in runs:
            lines.append(
                f"| {label(r)} | {r['fires']:,} | {r['missing']:,} | {r['twice']:,} | {_cell(r.get('task_start'))} "
                f"| {_cell(r.get('task_start_cron'))} | {_cell(r.get('sent'))} | {_cell(r.get('wake'))} "
                f"| {_cell(r.get('claim_to_run_start'))} | {_cell(r.get('run_to_task_start'))} "
                f"| {_cell(r.get('run_start'))} | {_rates(r.get('rates', {}))} |"
            )
        for r in runs:
            extra = []
            if r["system"].startswith("alma"):
                extra.append(f"ledger {r.get('states')}, ticks that claimed {r.get('claiming_ticks')}")
                if r.get("fires_missed_counter") is not None:
                    extra.append(f"fires_missed counted on the routines {r['fires_missed_counter']}")
                if r.get("per_fire"):
                    extra.append(
                        "run side per fire, ms (median): " + ", ".join(f"{k} {v}" for k, v in r["per_fire"].items())
                    )
            hourly = f"result keys/h {r.get('result_keys_per_hour')}"
            if r["system"].startswith("alma"):
                hourly = f"ticks/h {r.get('ticks_per_hour')}, {hourly}"
            if "events_per_hour" in r:
                hourly += f", events/h {r['events_per_hour']} (task events {r['task_events_per_hour']})"
            extra.append(hourly)
            if r.get("busy_sent"):
                extra.append(f"busy tasks sent {r['busy_sent']}")
            lines.append(f"- {label(r)}: " + "; ".join(extra) + ".")
    if res.get("targets"):
        lines += ["", "| target | value | met |", "|---|---|---|"]
        for t in res["targets"]:
            met = "—" if t["met"] is None else ("met" if t["met"] else "**NOT met**")
            lines.append(f"| {t['target']} | {t['value']} | {met} |")
    return lines
