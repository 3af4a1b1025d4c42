"""What a well-formed message of one of our tasks looks like: pure checks, no Celery import.

docs/architecture.md, section "The modules, in detail" (tasks/message_shape.py).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

#: The parameter specs of a function: ``(name, annotation, has a default)`` in order.
Spec = tuple[tuple[str, Any, bool], ...]


@lru_cache(maxsize=64)
def signature_spec(function: Callable[..., Any]) -> Spec:
    """``(name, type hint, has_default)`` per parameter of ``function`` (hints resolved once)."""
    try:
        hints = typing.get_type_hints(function)
    except (NameError, TypeError, AttributeError):  # one annotation does not resolve (a bound
        hints = _hints_one_by_one(function)  # task's ``self: Task`` under TYPE_CHECKING): the others still do
    out: list[tuple[str, Any, bool]] = []
    for param in inspect.signature(function).parameters.values():
        if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            continue  # *args / **kwargs: none of our tasks takes them
        out.append((param.name, hints.get(param.name, Any), param.default is not param.empty))
    return tuple(out)


def _hints_one_by_one(function: Callable[..., Any]) -> dict[str, Any]:
    """Each parameter's type hint resolved on its own (one that does not resolve: no hint)."""
    target = inspect.unwrap(getattr(function, "__func__", function))
    scope = getattr(target, "__globals__", {})
    out: dict[str, Any] = {}
    for name, annotation in getattr(target, "__annotations__", {}).items():
        try:
            out[name] = eval(annotation, scope) if isinstance(annotation, str) else annotation
        except Exception:  # a name only imported for type checking: no hint for that parameter
            continue
    return out


def fits(value: Any, hint: Any) -> bool:
    """Whether the JSON value ``value`` has the type ``hint`` names (unknown hints: True)."""
    return checker(hint)(value)


def _always(_value: Any) -> bool:
    return True


@lru_cache(maxsize=128)
def checker(hint: Any) -> Callable[[Any], bool]:
    """A predicate for ``hint``, built once per hint (a message is checked on the consumer's thread)."""
    if hint is Any:
        return _always
    if hint is None or hint is type(None):
        return lambda v: v is None
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        options = tuple(checker(arg) for arg in typing.get_args(hint))
        return lambda v: any(option(v) for option in options)
    if origin in (list, tuple):
        (item, *_rest) = typing.get_args(hint) or (Any,)
        each = checker(item)
        return lambda v: isinstance(v, list) and all(each(x) for x in v)
    if origin is dict:
        _key, item = typing.get_args(hint) or (str, Any)
        each = checker(item)
        return lambda v: isinstance(v, dict) and all(isinstance(k, str) and each(x) for k, x in v.items())
    if hint is bool:
        return lambda v: isinstance(v, bool)
    if hint is int:
        return lambda v: isinstance(v, int) and not isinstance(v, bool)
    if hint is float:
        return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    if hint in (str, list, dict):
        return lambda v: isinstance(v, hint)
    return _always


def json_name(hint: Any) -> str:
    """A short name of ``hint`` for a refusal (``str``, ``str | None``, ``list[list[str]]``)."""
    if hint is type(None):
        return "null"
    return str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")


def call_problem(name: str, spec: Spec, args: Any, kwargs: Any) -> str | None:
    """Why ``args``/``kwargs`` are not a call of the task ``name`` with parameters ``spec``, or None."""
    if not isinstance(args, list):
        return f"args is {type(args).__name__}, not a list"
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        return f"kwargs is {type(kwargs).__name__}, not an object"
    if len(args) > len(spec):
        return f"{name} takes {len(spec)} argument(s), {len(args)} given"
    given: dict[str, Any] = {}
    for (param, _hint, _default), value in zip(spec, args, strict=False):
        given[param] = value
    names = {param for param, _h, _d in spec}
    for key, value in kwargs.items():
        if key not in names:
            return f"{name} has no argument {key!r}"
        if key in given:
            return f"{name} got {key!r} twice"
        given[key] = value
    for param, hint, has_default in spec:
        if param not in given:
            if not has_default:
                return f"{name} is missing the argument {param!r}"
            continue
        if not fits(given[param], hint):
            return f"{name} argument {param!r} must be {json_name(hint)}, not {type(given[param]).__name__}"
    return None


def body_problem(name: str, spec: Spec, payload: Any) -> str | None:
    """Why the decoded body ``payload`` is not ``[args, kwargs, embed]`` calling ``name``, or None."""
    if not isinstance(payload, (list, tuple)) or len(payload) != 3:
        shape = f"a list of {len(payload)}" if isinstance(payload, (list, tuple)) else type(payload).__name__
        return f"the body is {shape}, not [args, kwargs, embed]"
    args, kwargs, embed = payload
    if embed is not None and not isinstance(embed, Mapping):
        return f"embed is {type(embed).__name__}, not an object"
    return call_problem(name, spec, list(args) if isinstance(args, tuple) else args, kwargs)


def header_problem(headers: Any, name: str) -> str | None:
    """Why ``headers`` are not those of a protocol-2 message of the task ``name``, or None."""
    if not isinstance(headers, Mapping):
        return f"headers are {type(headers).__name__}, not an object"
    if headers.get("task") != name:
        return f"the task header is {headers.get('task')!r}, not {name!r}"
    if not isinstance(headers.get("id"), str) or not headers["id"]:
        return "the id header is not a text"
    for name in ("shadow", "root_id", "parent_id", "group"):
        if headers.get(name) is not None and not isinstance(headers[name], str):
            return f"the {name} header is not a text"
    limits = headers.get("timelimit")
    if limits is not None and not (
        isinstance(limits, (list, tuple))
        and len(limits) == 2
        and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in limits)
    ):
        return "the timelimit header is not [soft, hard]"
    return None


__all__ = ["Spec", "body_problem", "call_problem", "checker", "fits", "header_problem", "signature_spec"]
