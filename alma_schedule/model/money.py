"""Money shapes: a daily ceiling a run reserves against, and what ``reserve`` answers."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from alma_schedule.model.data import Data
from alma_schedule.model.run import RunRecord

__all__ = ["Ceiling", "ReserveResult"]


@dataclass(frozen=True, slots=True)
class Ceiling(Data):
    """A daily money ceiling a run reserves against, by ``key`` (the ``spend`` row's ceiling key).

    Keys are FIXED-LENGTH whatever the ids (an id may be 200 characters, more than a store accepts
    for a whole key once three are joined), and unambiguous: ids never contain NUL, and the two
    kinds have distinct prefixes. Build them with :meth:`routine_key` / :meth:`org_key`:

    * per routine: ``routine:`` + sha256 hex of ``org NUL uid NUL routine_id`` (72 characters);
    * per org: ``org:`` + sha256 hex of ``org`` (68 characters).

    Every store validates a ceiling key as an id (at most 200 characters), identically.
    """

    key: str
    limit_micros: int

    @staticmethod
    def routine_key(org: str, uid: str, routine_id: str) -> str:
        """The ceiling key of one routine ``(org, uid, routine_id)``."""
        raw = "\x00".join((org, uid, routine_id)).encode("utf-8")
        return "routine:" + hashlib.sha256(raw).hexdigest()

    @staticmethod
    def org_key(org: str) -> str:
        """The ceiling key of one org."""
        return "org:" + hashlib.sha256(org.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class ReserveResult(Data):
    """``reserve``'s answer: ``ok``, or the first ceiling that would be exceeded."""

    ok: bool
    ceiling: str | None = None
    record: RunRecord | None = None
