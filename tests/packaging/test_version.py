"""The version has ONE source, ``[project] version`` in pyproject.toml: the installed metadata carries it to
``alma_schedule.__version__`` and ``alma-schedule --version``, and CHANGELOG.md's latest release is it."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

import alma_schedule

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "alma-schedule"
#: Every second-level heading of the changelog names a version: ``## [Unreleased]``, ``## [0.1.0] - 2026-11-30``.
HEADING = re.compile(r"^## (.*)$", re.M)
RELEASE = re.compile(r"\[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})")

Version = tuple[int, int, int]


def _metadata_version() -> str:
    return importlib.metadata.version(DISTRIBUTION)


def _plain(version: str) -> Version:
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    assert match, f"{version!r} is not a MAJOR.MINOR.PATCH release version"
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def _next_releases(version: Version) -> set[Version]:
    major, minor, patch = version
    return {(major, minor, patch + 1), (major, minor + 1, 0), (major + 1, 0, 0)}


def test_dunder_version_is_the_installed_metadata() -> None:
    assert alma_schedule.__version__ == _metadata_version()


def test_the_installed_metadata_is_pyproject_version() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    stated = pyproject["project"]["version"]
    assert _metadata_version() == stated, f"the installed metadata is stale: pip install -e . (pyproject: {stated})"


def test_no_module_states_a_version_of_its_own() -> None:
    literal = re.compile(r"""__version__\s*(?::\s*str\s*)?=\s*["']|version_option\(\s*["']""")
    stating = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "alma_schedule").rglob("*.py"))
        if literal.search(path.read_text(encoding="utf-8"))
    ]
    assert stating == []


def test_the_console_script_prints_the_version() -> None:
    (script,) = importlib.metadata.distribution(DISTRIBUTION).entry_points.select(
        group="console_scripts", name="alma-schedule"
    )
    assert script.value == "alma_schedule.cli:main"
    main = script.load()
    with CliRunner().isolation() as (stdout, _stderr, _output):
        with pytest.raises(SystemExit) as ended:
            main(["--version"])
        printed = stdout.getvalue().decode()
    assert ended.value.code == 0
    assert printed == f"alma-schedule, version {alma_schedule.__version__}\n"


def test_the_changelog_has_unreleased_on_top_then_dated_releases_newest_first() -> None:
    headings = HEADING.findall((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))
    assert headings[0] == "[Unreleased]"
    releases = [RELEASE.fullmatch(heading) for heading in headings[1:]]
    assert None not in releases, headings  # every other section is one release, dated
    versions = [(int(m[1]), int(m[2]), int(m[3])) for m in releases if m]
    dates = [m[4] for m in releases if m]
    assert versions, "no release section"
    assert versions == sorted(set(versions), reverse=True)
    assert dates == sorted(dates, reverse=True)


def test_the_changelog_latest_release_is_the_metadata_version() -> None:
    """Equal, or the package already carries the NEXT version while its changes still sit under Unreleased
    (never a version the changelog skipped, never one older than its latest release)."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    latest = next(RELEASE.finditer(text))
    released: Version = (int(latest[1]), int(latest[2]), int(latest[3]))
    current = _plain(_metadata_version())
    if current != released:
        assert current in _next_releases(released), (current, released)
        unreleased = text.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]
        assert re.search(r"^- ", unreleased, re.M), "the next version's changes are not under Unreleased"
