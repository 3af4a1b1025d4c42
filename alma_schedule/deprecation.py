"""Deprecated aliases: 0.1.0's names that moved or were renamed keep working for one release.

Each alias warns (:class:`DeprecationWarning`, naming the new place) on access and returns the new
object, so ``isinstance`` and identity hold. They go away in 0.3.0.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["resolve_alias"]


def resolve_alias(module: str, name: str, aliases: Mapping[str, tuple[str, str]]) -> Any:
    """The object an old ``module.name`` now is (warning once per access), or AttributeError."""
    target = aliases.get(name)
    if target is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new_module, new_name = target
    warnings.warn(
        f"{module}.{name} is deprecated (removed in 0.3.0): use {new_module}.{new_name}",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(new_module), new_name)
