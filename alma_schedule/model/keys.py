"""Keys: a tenant scope, a routine's key and a fire's key. Each validates when it is built.

A key that exists is a valid one: every id is checked by :func:`alma_schedule.model.ids.check_id`
in ``__post_init__`` (so the layers below never check again), and the error is an
:class:`~alma_schedule.errors.InvalidInput` naming the field.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TypeVar

from alma_schedule.errors import InvalidInput
from alma_schedule.model.data import Data
from alma_schedule.model.ids import check_id

__all__ = ["RoutineKey", "RunKey", "Scope", "check_scope", "governed_key", "trusted"]

_K = TypeVar("_K", "Scope", "RoutineKey", "RunKey")


def trusted(cls: type[_K], *values: str) -> _K:
    """A key built from parts that are already valid (a stored row's, another key's), unchecked.

    Only for values that came out of a validated key or a stored row: user input always goes
    through the constructor.
    """
    key = object.__new__(cls)
    for name, value in zip(cls.__dataclass_fields__, values, strict=True):
        object.__setattr__(key, name, value)
    return key


@dataclass(frozen=True, slots=True)
class Scope(Data):
    """A tenant scope ``(org, uid)``. Every tenant-facing operation takes one."""

    org: str
    uid: str

    def __str__(self) -> str:
        return f"{self.org}/{self.uid}"

    def __post_init__(self) -> None:
        check_id("org", self.org, allow_slash=False)
        check_id("uid", self.uid, allow_slash=False)

    @classmethod
    def parse(cls, text: str) -> Scope:
        """Parse ``ORG/UID`` (the CLI's positional form)."""
        org, sep, uid = text.partition("/")
        if not sep:
            raise InvalidInput(f"scope {text!r} must be ORG/UID")
        return cls(org, uid)


@dataclass(frozen=True, slots=True)
class RoutineKey(Data):
    """One routine of one scope: ``(org, uid, routine_id)``."""

    org: str
    uid: str
    routine_id: str

    def __post_init__(self) -> None:
        check_id("org", self.org, allow_slash=False)
        check_id("uid", self.uid, allow_slash=False)
        check_id("routine_id", self.routine_id)

    @classmethod
    def of(cls, scope: Scope, routine_id: str) -> RoutineKey:
        return cls(scope.org, scope.uid, routine_id)

    @property
    def scope(self) -> Scope:
        return trusted(Scope, self.org, self.uid)

    def __str__(self) -> str:
        return f"{self.org}/{self.uid}/{self.routine_id}"


@dataclass(frozen=True, slots=True)
class RunKey(Data):
    """One fire: ``(org, uid, routine_id, run_id)``. ``run_id`` is ``fire_id(instant)`` or ``manual:<ULID>``."""

    org: str
    uid: str
    routine_id: str
    run_id: str

    def __post_init__(self) -> None:
        check_id("org", self.org, allow_slash=False)
        check_id("uid", self.uid, allow_slash=False)
        check_id("routine_id", self.routine_id)
        check_id("run_id", self.run_id)

    @classmethod
    def of(cls, scope: Scope, routine_id: str, run_id: str) -> RunKey:
        return cls(scope.org, scope.uid, routine_id, run_id)

    @property
    def scope(self) -> Scope:
        return trusted(Scope, self.org, self.uid)

    @property
    def routine_key(self) -> RoutineKey:
        return trusted(RoutineKey, self.org, self.uid, self.routine_id)

    def args(self) -> list[str]:
        """The positional arguments of the run / collect task message."""
        return [self.org, self.uid, self.routine_id, self.run_id]

    def __str__(self) -> str:
        return f"{self.org}/{self.uid}/{self.routine_id}/{self.run_id}"


def check_scope(scope: object) -> Scope:
    """``scope`` if it is a :class:`Scope` (built, so valid); else :class:`InvalidInput`."""
    if not isinstance(scope, Scope):
        raise InvalidInput(f"scope must be a Scope, not {type(scope).__name__}")
    return scope


def governed_key(scope: Scope, routine_id: str, run_id: str) -> str:
    """The idempotency key of a fire's delivery, stable across processes (sha256, hex)."""
    raw = "\x1f".join((scope.org, scope.uid, routine_id, run_id)).encode()
    return hashlib.sha256(raw).hexdigest()
