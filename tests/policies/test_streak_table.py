"""docs/architecture.md's failure-streak table says what :func:`streak_effect` does, for every
terminal ``(state, reason)`` and both values of ``streak_counts_refused``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from alma_schedule.model import REASONS, TERMINAL
from alma_schedule.policies.streak import StreakEffect, streak_effect

DOC = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8")
EFFECTS = {"+ 1": StreakEffect.COUNT, "reset to 0": StreakEffect.RESET, "unchanged": StreakEffect.NONE}
PATTERN = re.compile(r"`([a-z_]+)\(([a-z_*]+)\)`")

Row = tuple[list[tuple[str, str]], list[tuple[str, str]], bool | None, StreakEffect]


def _rows() -> list[Row]:
    """(included patterns, excluded patterns, the streak_counts_refused the row is about or None for
    both, effect) of each row of the table that names results."""
    section = DOC.split("\n## The failure streak\n", 1)[1].split("\n## ", 1)[0]
    rows: list[Row] = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[1] not in EFFECTS:
            continue
        left = cells[0]
        if not PATTERN.search(left):
            continue  # record, resume/enable: not a finish
        included, _, excluded = left.partition(" except ")
        setting: bool | None = None
        if "ALMA_STREAK_COUNTS_REFUSED=false" in left:
            setting = False
        elif "with `streak_counts_refused`" in left:
            setting = True
        rows.append((PATTERN.findall(included), PATTERN.findall(excluded), setting, EFFECTS[cells[1]]))
    return rows


def _matches(patterns: list[tuple[str, str]], state: str, reason: str | None) -> int:
    """2 for an exact match of the reason, 1 for ``state(*)``, 0 for none."""
    best = 0
    for p_state, p_reason in patterns:
        if p_state == state:
            best = max(best, 2 if p_reason == reason else 1 if p_reason == "*" else 0)
    return best


def test_the_table_has_its_rows() -> None:
    assert len(_rows()) >= 8


@pytest.mark.parametrize("counts_refused", [True, False], ids=["counts_refused", "refusals_never_count"])
@pytest.mark.parametrize("state", sorted(TERMINAL))
def test_the_table_is_streak_effect(state: str, counts_refused: bool) -> None:
    rows = _rows()
    for reason in [None, *sorted(REASONS)]:
        found: dict[int, set[StreakEffect]] = {}
        for included, excluded, setting, effect in rows:
            if setting is not None and setting != counts_refused:
                continue
            strength = _matches(included, state, reason)
            if strength and not _matches(excluded, state, reason):
                found.setdefault(strength, set()).add(effect)
        assert found, f"the streak table says nothing of {state}({reason})"
        said = found[max(found)]
        assert len(said) == 1, f"the streak table contradicts itself on {state}({reason}): {said}"
        assert said == {streak_effect(state, reason, counts_refused=counts_refused)}, (state, reason)
