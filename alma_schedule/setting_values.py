"""Values of settings: their conversion from text, durations as settings write them (``90``,
``90s``, ``15m``, ``2h``, ``1d``, ``1h30m``), the derived tick expiry, the store's schema name,
serve-http's proxies, origin and the exporter's address (:func:`check_http`, :func:`origin_parts`) and
the refusal of a production store with the in-memory broker. Re-exported by
:mod:`alma_schedule.settings`, which reads every setting."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

from alma_schedule.errors import ConfigurationError
from alma_schedule.model.secret import Secret, mask_url

ENV_PREFIX = "ALMA_"


def env_name(name: str) -> str:
    """The environment variable of the setting ``name`` (``ALMA_<NAME>``)."""
    return ENV_PREFIX + name.upper()


class StoreAndBroker(Protocol):
    """What :func:`refuse_lost_sends` reads of the settings (no import of the settings module)."""

    @property
    def database_url(self) -> str: ...

    @property
    def broker_url(self) -> str: ...


__all__ = [
    "DEFAULT_DATABASE_SCHEMA",
    "ENV_PREFIX",
    "check_dashboard",
    "check_database_schema",
    "check_http",
    "convert_value",
    "dashboard_scope_grants",
    "derived_tick_expires",
    "env_name",
    "glob_list",
    "is_embedded_store",
    "origin_parts",
    "parse_duration",
    "refuse_lost_sends",
    "seconds_text",
    "shown_value",
]

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$")


def parse_duration(name: str, text: str | float | int | timedelta) -> timedelta:
    """Parse ``90``, ``90s``, ``15m``, ``2h``, ``1d``, ``1h30m`` into a timedelta (> 0 not required).

    ASCII digits only (``float`` would read other scripts' digits), finite, and within a
    timedelta's range (about 2.7 million years): anything else is a :class:`ConfigurationError`."""
    if isinstance(text, timedelta):
        return text
    if isinstance(text, bool) or not isinstance(text, (int, float, str)):
        raise ConfigurationError(f"{name}: expected a duration, got {text!r}")
    if isinstance(text, (int, float)):
        return _span(name, text, lambda: timedelta(seconds=text))
    raw = text.strip().lower()
    if not raw.isascii():
        raise ConfigurationError(f"{name}: {text!r} is not a duration (use e.g. 90s, 15m, 2h, 1d)")
    try:
        seconds = float(raw)
    except ValueError:
        pass
    else:
        return _span(name, text, lambda: timedelta(seconds=seconds))
    m = _DURATION.match(raw)
    if not raw or not m or not any(m.groups()):
        raise ConfigurationError(f"{name}: {text!r} is not a duration (use e.g. 90s, 15m, 2h, 1d)")
    d, h, mi, s = m.groups()
    return _span(
        name, text, lambda: timedelta(days=int(d or 0), hours=int(h or 0), minutes=int(mi or 0), seconds=float(s or 0))
    )


def _span(name: str, text: object, build: Callable[[], timedelta]) -> timedelta:
    try:
        return build()
    except (OverflowError, ValueError):  # NaN, infinities, beyond timedelta's range
        shown = text if isinstance(text, str) and len(text) <= 40 else type(text).__name__
        raise ConfigurationError(f"{name}: {shown!r} is not a finite duration within range") from None


def derived_tick_expires(period: timedelta) -> timedelta:
    """The default ``tick_expires``: ``period - max(1 s, period / 12)`` (55 s at 60 s, 9 s at 10 s):
    a tick expires before the next one is sent, so ticks piled up in an outage never fire late."""
    return period - max(timedelta(seconds=1), period / 12)


def seconds_text(value: timedelta) -> str:
    """``90s``: a duration as a setting's message shows it."""
    return f"{value.total_seconds():g}s"


#: The store's own namespace in a shared database: a PostgreSQL schema, or a table prefix on SQLite.
DEFAULT_DATABASE_SCHEMA = "alma"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def shown_value(kind: str, value: Any) -> Any:
    """A setting's value as ``repr(Settings)``, ``describe()`` and logs show it: a :class:`Secret` as
    ``********``, a URL with its password (and query credentials) masked (:func:`mask_url`), anything
    else as it is. Never the value the code uses."""
    if isinstance(value, Secret):
        return "********"
    if kind == "url" and isinstance(value, str):
        return mask_url(value)
    return value


def check_database_schema(value: str, label: str = "ALMA_DATABASE_SCHEMA") -> str:
    """``value`` if it is a plain lower-case identifier (``^[a-z_][a-z0-9_]{0,62}$``, not ``pg_*``,
    which PostgreSQL reserves), else a one-line :class:`ConfigurationError` naming ``label``."""
    if not isinstance(value, str) or not _SCHEMA_NAME.match(value) or value.startswith("pg_"):
        raise ConfigurationError(
            f"{label}: {value!r} is not a schema name (lower-case letters, digits and _, "
            "at most 63, not starting with a digit or pg_)"
        )
    return value


def convert_value(name: str, kind: str, default: Any, raw: Any, label: str) -> Any:
    """One raw setting value (text from the environment, or a Python value from the app's
    configuration or a flag) converted to its field's ``kind``; a malformed one is a
    :class:`ConfigurationError` naming ``label``."""
    if raw is None or (isinstance(raw, str) and raw == "" and default is None):
        return None
    if kind == "duration":
        return parse_duration(label, raw)
    if kind == "int":
        if isinstance(raw, bool):
            raise ConfigurationError(f"{label}: expected an integer, got {raw!r}")
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise ConfigurationError(f"{label}: expected an integer, got {raw!r}") from None
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in {"1", "true", "yes", "on"}:
            return True
        if text in {"0", "false", "no", "off"}:
            return False
        raise ConfigurationError(f"{label}: expected true/false, got {raw!r}")
    if kind == "list":
        return glob_list(label, raw)
    if kind == "secret":
        return raw if isinstance(raw, Secret) else Secret(str(raw))
    if kind == "code":
        if not callable(raw):
            raise ConfigurationError(f"{name}: expected a callable")
        return raw
    if not isinstance(raw, str):
        raise ConfigurationError(f"{label}: expected text, got {type(raw).__name__}")
    return raw


def glob_list(label: str, raw: Any) -> tuple[str, ...]:
    """A list of globs: comma-separated text (``ALMA_TASK_ALLOW=reports.*,billing.close``), or a
    list/tuple of texts from the app's configuration; blanks around commas dropped. A pattern with
    whitespace inside, or a value of another type, is a :class:`ConfigurationError` naming ``label``."""
    if isinstance(raw, str):
        parts = [p.strip() for p in raw.split(",")]
    elif isinstance(raw, (list, tuple)) and all(isinstance(p, str) for p in raw):
        parts = [p.strip() for p in raw]
    else:
        raise ConfigurationError(f"{label}: expected comma-separated globs or a list of them, got {raw!r}")
    out = tuple(p for p in parts if p)
    for pattern in out:
        if any(c.isspace() for c in pattern):
            raise ConfigurationError(f"{label}: {pattern!r} is not a glob (no whitespace inside a pattern)")
    return out


def is_embedded_store(database_url: str) -> bool:
    """The embedded default: a SQLite or in-memory store (no servers). Everything else is production."""
    return database_url.startswith(("sqlite", "memory"))


def refuse_lost_sends(
    settings: StoreAndBroker, broker_url: str | None = None, *, broker: str = "ALMA_BROKER_URL"
) -> None:
    """Refuse to send from a production store to the ``memory://`` broker: every message would stay
    in this process and nothing would ever run it (a tick lost silently). ``broker_url`` defaults to
    ``settings.broker_url``; ``broker`` names where it came from."""
    url = settings.broker_url if broker_url is None else broker_url
    if not is_embedded_store(settings.database_url) and str(url).startswith("memory"):
        raise ConfigurationError(
            f"ALMA_DATABASE_URL is a production store but {broker} is {url}: messages sent there never "
            f"leave this process and nothing would run them; set {broker} to the fleet's broker"
        )


#: One entry of ALMA_DASHBOARD_SCOPES: (org, uid), uid None for ORG/* (every uid of the org).
ScopeGrant = tuple[str, "str | None"]


def dashboard_scope_grants(text: str, label: str = "ALMA_DASHBOARD_SCOPES") -> tuple[ScopeGrant, ...] | None:
    """Parse ALMA_DASHBOARD_SCOPES: ``*`` (the whole fleet: None) or a comma list of ORG/UID and ORG/*."""
    from alma_schedule.errors import InvalidInput
    from alma_schedule.model.keys import Scope

    if text.strip() == "*":
        return None
    grants: list[ScopeGrant] = []
    for part in (p.strip() for p in text.split(",")):
        org, sep, uid = part.partition("/")
        if not sep:
            raise ConfigurationError(f"{label}: {part!r} must be '*', ORG/UID or ORG/*")
        try:
            Scope(org, "x" if uid == "*" else uid)
        except InvalidInput as exc:
            raise ConfigurationError(f"{label}: {part!r}: {exc}") from None
        grants.append((org, None if uid == "*" else uid))
    return tuple(grants)


def origin_parts(text: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an origin or URL (``https://ops.example.com``, a Referer), the host
    lower-cased and the port its scheme's default when not given; None for anything else (``null``,
    no host, not http/https, a port out of range)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else (443 if scheme == "https" else 80)


def check_http(trusted_proxies: tuple[str, ...], dashboard_origin: str | None, metrics_bind: str) -> None:
    """ALMA_TRUSTED_PROXIES are addresses or networks, ALMA_DASHBOARD_ORIGIN is an origin (scheme, host
    and port only), ALMA_METRICS_BIND is an address: else one line naming the setting."""
    import ipaddress
    from urllib.parse import urlsplit

    for proxy in trusted_proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise ConfigurationError(
                f"ALMA_TRUSTED_PROXIES: {proxy!r} is not an address or network (e.g. 10.0.0.5 or 10.0.0.0/8)"
            ) from None
    if dashboard_origin is not None:
        extra = urlsplit(dashboard_origin.strip())
        if origin_parts(dashboard_origin) is None or extra.path not in ("", "/") or extra.query or extra.username:
            raise ConfigurationError(
                f"ALMA_DASHBOARD_ORIGIN: {dashboard_origin!r} is not an origin (scheme://host[:port], "
                "e.g. https://ops.example.com)"
            )
    try:
        ipaddress.ip_address(metrics_bind)
    except ValueError:
        raise ConfigurationError(
            f"ALMA_METRICS_BIND: {metrics_bind!r} is not an address (127.0.0.1, 0.0.0.0, ::1, ...)"
        ) from None


def check_dashboard(scopes: str | None, user: str | None, password_hash: Secret | None) -> None:
    """The dashboard is on once ALMA_DASHBOARD_SCOPES is set: then its user and password hash are needed."""
    if scopes is None:
        return
    dashboard_scope_grants(scopes)
    if not user or password_hash is None or not password_hash:
        raise ConfigurationError(
            "ALMA_DASHBOARD_SCOPES is set: ALMA_DASHBOARD_USER and ALMA_DASHBOARD_PASSWORD_HASH are needed too"
        )
