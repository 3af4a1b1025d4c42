"""No private name of SQLAlchemy, psycopg, kombu or Celery is used in ``alma_schedule`` outside
``alma_schedule/compat/`` (``docs/architecture.md``, "Private calls into dependencies").

A grep of the package's source with regexes, for:

* an attribute of the underscore form, ``obj._name`` (a dunder is not one), and its string forms,
  ``getattr(obj, "_name")`` (``hasattr``, ``setattr``, ``delattr``, an f-string's literal start);
  unless the name is OURS: defined somewhere in the package outside ``compat/`` (a ``def`` or a
  ``class``, a module, class or instance attribute assigned, a ``__slots__`` entry, an ``as``
  alias). A name that ``compat/`` reaches is a dependency's private name WHEREVER it appears
  outside ``self.``/``cls.`` even when we define the same name (``_publish``: ours in
  ``tasks/dispatcher.py``, Celery's on an ``EventDispatcher``);
* an import of an underscore name or module from one of the four (``from celery.x import _y``,
  ``import sqlalchemy.engine._row_cy``);
* SQLAlchemy's event dispatch fired by hand (``conn.dispatch.before_cursor_execute``);
* psycopg's libpq level and undocumented parts (``pgconn``, ``pgresult``, ``psycopg.pq``,
  ``psycopg.types.array``).

What it cannot see: a dependency's private name that is also one of ours and that ``compat/`` does
not reach, through a variable we also use for our own objects. The self-check below plants one
example of each form in a string and requires the scan to find it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pytest

import alma_schedule

pytestmark = pytest.mark.unit

PACKAGE = Path(alma_schedule.__file__).resolve().parent
COMPAT = PACKAGE / "compat"
DEPS = ("sqlalchemy", "psycopg", "kombu", "celery")
_DEP = "|".join(DEPS)

#: ``base._name``: the base (a name, or a call's or an index's close) and the private name.
_ATTRIBUTE = re.compile(r"(?P<base>\w+|[)\]])\s*\.\s*(?P<name>_[A-Za-z]\w*)")
#: ``getattr(obj, "_name"`` and the other three; an f-string's literal start (``f"_orig_{x}"``).
_BY_STRING = re.compile(r"\b(?:get|has|set|del)attr\(\s*[^,()]+,\s*f?[\"'](?P<name>_[A-Za-z][\w{}]*)")
#: ``from <dep>[.mod] import ...`` (its names, parenthesized over lines or not).
_FROM_IMPORT = re.compile(rf"^\s*from\s+(?P<module>(?:{_DEP})(?:\.\w+)*)\s+import\s+(?P<names>\([^)]*\)|[^\n]*)", re.M)
#: A dotted path into one of the four with an underscore part (``sqlalchemy.engine._row_cy``).
_PRIVATE_MODULE = re.compile(rf"\b(?:{_DEP})(?:\.\w+)*\.(?P<name>_[A-Za-z]\w*)")
#: Always private, by their form: events fired by hand, psycopg's libpq level and undocumented parts.
_ALWAYS = re.compile(
    r"\.dispatch\.(?P<event>[a-z]\w*)|\b(?P<libpq>pgconn|pgresult|psycopg\.pq|psycopg\.types\.array|ListBinaryDumper)\b"
)

#: What names the package defines (its own privates).
_OURS = (
    re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(_[A-Za-z]\w*)", re.M),
    re.compile(r"^\s*(_[A-Za-z]\w*)\s*(?::[^=\n]*)?=", re.M),  # module / class attributes, fields
    re.compile(r"^\s*(_[A-Za-z]\w*)\s*:", re.M),  # annotated fields
    re.compile(r"\b(?:self|cls|object\.__setattr__\(self,\s*\")\.?(_[A-Za-z]\w*)\"?\s*(?::[^=\n]*)?(?:[-+*/|&]?=|,)"),
    re.compile(r"\bas\s+(_[A-Za-z]\w*)"),
    re.compile(r"^\s*for\s+(_[A-Za-z]\w*)", re.M),
)
_SLOTS = re.compile(r"__slots__\s*=\s*[(\[](?P<body>[^)\]]*)[)\]]")
_QUOTED = re.compile(r"[\"'](_[A-Za-z]\w*)[\"']")


def ours_in(sources: Iterable[str]) -> set[str]:
    """The underscore names ``sources`` define."""
    names: set[str] = set()
    for text in sources:
        for pattern in _OURS:
            names.update(pattern.findall(text))
        for slots in _SLOTS.finditer(text):
            names.update(_QUOTED.findall(slots.group("body")))
    return names


def reached_in(sources: Iterable[str]) -> set[str]:
    """The private names ``sources`` (compat's) reach: attributes and attribute strings."""
    names: set[str] = set()
    for text in sources:
        names.update(m.group("name") for m in _ATTRIBUTE.finditer(text))
        names.update(m.group("name").split("{")[0] for m in _BY_STRING.finditer(text))
    return names


def violations(text: str, ours: set[str], known: set[str]) -> list[str]:
    """Each private use of the four in ``text`` (one line of source per finding)."""

    def line(at: int) -> str:
        return text[text.rfind("\n", 0, at) + 1 : text.find("\n", at) % (len(text) + 1)].strip()

    def private(name: str, base: str | None) -> bool:
        if name.startswith("__"):
            return False
        if any(name == k or (k.endswith("_") and name.startswith(k)) for k in known):
            return base not in ("self", "cls")
        if "{" in name:  # an f-string built name that compat does not reach: cannot be ours
            return True
        return name not in ours

    found = [line(m.start()) for m in _ATTRIBUTE.finditer(text) if private(m.group("name"), m.group("base"))]
    found.extend(line(m.start()) for m in _BY_STRING.finditer(text) if private(m.group("name"), None))
    for m in _FROM_IMPORT.finditer(text):
        names = m.group("names").strip("()").replace("\n", " ").split(",")
        imported = [n.split()[0] for n in names if n.strip()]
        parts = m.group("module").split(".")
        if any(n.startswith("_") for n in imported) or any(p.startswith("_") for p in parts):
            found.append(line(m.start()))
    found.extend(line(m.start()) for m in _PRIVATE_MODULE.finditer(text))
    found.extend(line(m.start()) for m in _ALWAYS.finditer(text))
    return found


def _sources(root: Path) -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.py"))}


def _package_outside_compat() -> dict[Path, str]:
    return {p: t for p, t in _sources(PACKAGE).items() if COMPAT not in p.parents}


def test_the_scan_finds_each_planted_private_use() -> None:
    ours = {"_send", "_publish", "_lock"}
    known = {"_tasks", "_publish", "_orig_", "_mapping"}
    planted = [
        "task = app._tasks.get(name)",  # a known name
        "self.dispatcher._publish(events, producer, 'task.multi')",  # known, though also ours
        "with producer.connection._reraise_as_library_errors():",  # not ours
        "self._brpop_start()",  # a dependency's private through inheritance: not ours
        'get_options = getattr(self.task, "_get_exec_options", None)',
        'text = getattr(value, f"_orig_{attr}")',
        'text = getattr(value, f"_other_{attr}")',
        "m = conn.execute(stmt).first()._mapping",
        "from celery.app.task import _compat_helper",
        "from kombu.transport import (\n    Transport,\n    _brpop_helper,\n)",
        "from kombu.transport._private import Channel",
        "import sqlalchemy.engine._row_cy",
        "for before in conn.dispatch.before_cursor_execute:",
        "if driver.pgconn.pipeline_status != OFF:",
        "res = cur.pgresult",
        "from psycopg.types.array import ListBinaryDumper",
    ]
    for source in planted:
        assert violations(source, ours, known), f"not found: {source!r}"
    clean = [
        "sent.append(hot._send(conn, sending, params))",  # ours
        "self._publish(name, messages, batched=batched)",  # ours, on self
        "with store._lock:",
        "value = obj.__dict__",
        "from celery.schedules import crontab, schedule, solar",
        "from alma_schedule.stores.sql.queries.common import (\n    _KEY_COLS,\n)",
    ]
    for source in clean:
        assert violations(source, ours, known) == [], source


def test_the_scan_finds_what_compat_holds() -> None:
    """Run on the compat modules themselves (where private uses belong), the scan finds some in each."""
    ours = ours_in(_package_outside_compat().values())
    for path, text in _sources(COMPAT).items():
        if path.name != "__init__.py":
            assert violations(text, ours, reached_in([text])), f"nothing found in {path.name}"


def test_no_private_name_of_the_four_is_used_outside_compat() -> None:
    outside = _package_outside_compat()
    ours = ours_in(outside.values())
    known = reached_in(_sources(COMPAT).values())
    assert {"_tasks", "_publish", "_mapping", "_orig_"} <= known  # the derivation works
    found = [
        f"{path.relative_to(PACKAGE.parent)}: {hit}"
        for path, text in outside.items()
        for hit in violations(text, ours, known)
    ]
    assert found == [], "private names of SQLAlchemy/psycopg/kombu/Celery outside compat/:\n" + "\n".join(found)
