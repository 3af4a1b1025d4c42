"""The scheduling core: schedule values, parsing/validation, fire computation and previews.

Pure functions of (schedule, registered_at, now/after, tzdata); nothing here reads a clock.
DST policy (Vixie/cronie): see docs/dst-policy.md.
"""

from __future__ import annotations

from alma_schedule.core.bounds import bounded_latest_fire, bounded_next_fire, bounded_next_fires
from alma_schedule.core.fires import fire_id, latest_fire, next_fire, next_fires
from alma_schedule.core.parse import parse_schedule, validate_schedule
from alma_schedule.core.policy import SchedulePolicy, parse_policy, policy_of
from alma_schedule.core.preview import FirePreview, preview_fires
from alma_schedule.core.types import After, At, Cron, Every, ScheduleValue, Solar

__all__ = [
    "After",
    "At",
    "Cron",
    "Every",
    "FirePreview",
    "SchedulePolicy",
    "ScheduleValue",
    "Solar",
    "bounded_latest_fire",
    "bounded_next_fire",
    "bounded_next_fires",
    "fire_id",
    "latest_fire",
    "next_fire",
    "next_fires",
    "parse_policy",
    "parse_schedule",
    "policy_of",
    "preview_fires",
    "validate_schedule",
]
