"""``trusted`` keys: the same frozen slots objects the constructors build, without the checks."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass

import pytest

from alma_schedule.model.keys import RoutineKey, RunKey, Scope, trusted


@pytest.mark.parametrize(
    ("cls", "values"),
    [
        (Scope, ("acme", "alice")),
        (RoutineKey, ("acme", "alice", "brief")),
        (RunKey, ("acme", "alice", "brief", "2027-01-04T09:00:00Z")),
    ],
)
def test_a_trusted_key_is_the_constructed_one(cls: type, values: tuple[str, ...]) -> None:
    key, built = trusted(cls, *values), cls(*values)
    assert type(key) is cls and key == built and hash(key) == hash(built) and str(key) == str(built)
    assert key.to_dict() == built.to_dict() and pickle.loads(pickle.dumps(key)) == built
    assert dataclasses.astuple(key) == values
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.org = "other"  # type: ignore[misc]
    assert not hasattr(key, "__dict__")


def test_trusted_does_not_validate_and_refuses_a_wrong_number_of_values() -> None:
    assert trusted(Scope, "not/an id", "").org == "not/an id"  # the caller vouches for the parts
    with pytest.raises(ValueError):
        trusted(RunKey, "acme", "alice", "brief")
    with pytest.raises(ValueError):
        trusted(Scope, "acme", "alice", "extra")


def test_a_subclass_takes_the_generic_path() -> None:
    @dataclass(frozen=True, slots=True)
    class Tagged(Scope):
        pass

    key = trusted(Tagged, "acme", "alice")
    assert type(key) is Tagged and (key.org, key.uid) == ("acme", "alice")


def test_the_keys_of_rows_are_trusted_keys() -> None:
    from alma_schedule.model import Routine

    r = Routine("acme", "alice", "brief", "script", {"every": "1h"}, {}, registered_at=None, config_revision="x")  # type: ignore[arg-type]
    assert r.key == RoutineKey("acme", "alice", "brief") and r.scope == Scope("acme", "alice")
