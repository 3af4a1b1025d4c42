"""Money shapes: a daily ceiling a run reserves against, what ``reserve`` answers, and the one
reading of an amount in USD a routine's budget names (:func:`usd_micros`)."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from alma_schedule.errors import RegistrationRefused
from alma_schedule.model.data import Data
from alma_schedule.model.run import RunRecord

__all__ = ["MAX_MONEY_CHARS", "MAX_MONEY_DECIMALS", "MAX_STORABLE_USD", "Ceiling", "ReserveResult", "usd_micros"]

#: An amount given as text has at most this many characters, and at most this many decimals.
MAX_MONEY_CHARS = 24
MAX_MONEY_DECIMALS = 6
#: The largest amount whose micro-USD fit a signed 64-bit column (what a store can hold at all).
MAX_STORABLE_USD = (2**63 - 1) // 1_000_000
_PLAIN_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+", re.ASCII)


def usd_micros(name: str, value: object, *, max_usd: int, setting: str = "", plain: bool = True) -> int:
    """``value`` (USD: an int, a float or a plain decimal text such as ``"0.25"``) in micro-USD.

    docs/architecture.md, "The modules, in detail" (model/money.py, usd_micros).
    """
    where = f"budget.{name}"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise RegistrationRefused(f"{where}: expected an amount in USD, got {type(value).__name__}")
    if isinstance(value, str):
        if len(value) > MAX_MONEY_CHARS:
            raise RegistrationRefused(f"{where}: an amount is at most {MAX_MONEY_CHARS} characters")
        amount = _plain(where, value) if plain else _literal(where, value)
    else:
        if (isinstance(value, float) and not math.isfinite(value)) or value < 0:
            raise RegistrationRefused(f"{where}: must be a finite amount >= 0, got {_show(value)}")
        if value > max_usd:  # before any conversion: 10**5000 is never turned into text
            raise RegistrationRefused(f"{where}: more than {max_usd} USD{_named(setting)}")
        amount = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if amount > max_usd:
        raise RegistrationRefused(f"{where}: more than {max_usd} USD{_named(setting)}")
    micros = amount * 1_000_000
    if micros != micros.to_integral_value():
        raise RegistrationRefused(f"{where}: {_show(value)} is finer than a micro-USD (at most 6 decimals)")
    return int(micros)


def _plain(where: str, value: str) -> Decimal:
    if not _PLAIN_DECIMAL.fullmatch(value):
        raise RegistrationRefused(f"{where}: {value!r} is not a plain decimal amount in USD (like '0.25')")
    if len(value.partition(".")[2]) > MAX_MONEY_DECIMALS:
        raise RegistrationRefused(f"{where}: {value!r} is finer than a micro-USD (at most 6 decimals)")
    return Decimal(value)


def _literal(where: str, value: str) -> Decimal:
    """Any decimal literal of at most 24 ASCII characters (the caller compares its magnitude next)."""
    try:
        amount = Decimal(value) if value.isascii() else None
    except InvalidOperation:
        amount = None
    if amount is None or not amount.is_finite() or amount < 0:
        raise RegistrationRefused(f"{where}: {value!r} is not a finite amount >= 0 in USD")
    return amount


def _show(value: int | float | str) -> str:
    """``repr`` of an amount, short: an int of thousands of digits is never turned into text."""
    if isinstance(value, int) and not -(10**18) < value < 10**18:
        return "a number of more than 18 digits"
    return repr(value)


def _named(setting: str) -> str:
    return f" ({setting})" if setting else ""


@dataclass(frozen=True, slots=True)
class Ceiling(Data):
    """A daily money ceiling a run reserves against, by ``key`` (the ``spend`` row's ceiling key).

    docs/architecture.md, "The modules, in detail" (model/money.py, Ceiling).
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
