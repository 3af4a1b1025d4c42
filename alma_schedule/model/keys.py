"""Keys: a tenant scope, a routine's key and a fire's key. Each validates when it is built.
docs/architecture.md, section "The modules, in detail" (model/keys.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from alma_schedule.errors import InvalidInput
from alma_schedule.model.data import Data
from alma_schedule.model.ids import check_id

__all__ = ["RoutineKey", "RunKey", "Scope", "check_scope", "governed_key", "trusted"]

_K = TypeVar("_K", "Scope", "RoutineKey", "RunKey")


def trusted(cls: type[_K], *values: str) -> _K:
    """A key built from parts that are already valid (a stored row's, another key's), unchecked.

    Only for values that came out of a validated key or a stored row: user input always goes
    through the constructor. Each key class has its own builder (:func:`_builder`); anything else
    (a subclass, a wrong number of values: ``ValueError``) takes the generic path.
    """
    found = _BUILDERS.get(cls)
    if found is None or len(values) != found[0]:
        return _trusted_fields(cls, values)
    return found[1](*values)  # type: ignore[no-any-return]


def _trusted_fields(cls: type[_K], values: tuple[str, ...]) -> _K:
    key = object.__new__(cls)
    for name, value in zip(cls.__dataclass_fields__, values, strict=True):
        object.__setattr__(key, name, value)
    return key


def _builder(cls: type[Any]) -> tuple[int, Callable[..., Any]]:
    """(field count, ``(values...) -> key``) for a frozen slots key class of 2, 3 or 4 fields: the
    same object as :func:`_trusted_fields` builds (``object.__new__``, each slot set once, no
    validation), with each slot written through its own descriptor instead of a loop of
    ``object.__setattr__`` by name."""
    new = object.__new__
    setters = [getattr(cls, name).__set__ for name in cls.__dataclass_fields__]
    if len(setters) == 2:
        s0, s1 = setters

        def build2(a: str, b: str) -> Any:
            key = new(cls)
            s0(key, a)
            s1(key, b)
            return key

        return 2, build2
    if len(setters) == 3:
        s0, s1, s2 = setters

        def build3(a: str, b: str, c: str) -> Any:
            key = new(cls)
            s0(key, a)
            s1(key, b)
            s2(key, c)
            return key

        return 3, build3
    s0, s1, s2, s3 = setters

    def build4(a: str, b: str, c: str, d: str) -> Any:
        key = new(cls)
        s0(key, a)
        s1(key, b)
        s2(key, c)
        s3(key, d)
        return key

    return 4, build4


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


_BUILDERS: dict[type[Any], tuple[int, Callable[..., Any]]] = {cls: _builder(cls) for cls in (Scope, RoutineKey, RunKey)}


def check_scope(scope: object) -> Scope:
    """``scope`` if it is a :class:`Scope` (built, so valid); else :class:`InvalidInput`."""
    if not isinstance(scope, Scope):
        raise InvalidInput(f"scope must be a Scope, not {type(scope).__name__}")
    return scope


def governed_key(scope: Scope, routine_id: str, run_id: str) -> str:
    """The idempotency key of a fire's delivery, stable across processes (sha256, hex)."""
    raw = "\x1f".join((scope.org, scope.uid, routine_id, run_id)).encode()
    return hashlib.sha256(raw).hexdigest()
