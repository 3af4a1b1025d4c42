"""Which zone data the core reads: the pinned ``tzdata`` package, never the system's copy first."""

from __future__ import annotations

import shutil
import zoneinfo
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib.resources import as_file, files
from pathlib import Path

import pytest
import tzdata

from alma_schedule.core.zones import get_zone, zone_data

SUMMER = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def system_lies(tmp_path: Path) -> Iterator[None]:
    """A system zoneinfo whose Europe/Lisbon is really Asia/Karachi (UTC+5 all year)."""
    (tmp_path / "Europe").mkdir()
    with as_file(files("tzdata.zoneinfo").joinpath("Asia", "Karachi")) as karachi:
        shutil.copy(karachi, tmp_path / "Europe" / "Lisbon")
    zoneinfo.reset_tzpath(to=[str(tmp_path)])
    get_zone.cache_clear()
    try:
        yield
    finally:
        zoneinfo.reset_tzpath()
        get_zone.cache_clear()


def test_zone_data_names_the_package_and_its_iana_version() -> None:
    assert zone_data() == f"tzdata {tzdata.IANA_VERSION}"


def test_the_package_wins_over_the_system_copy(system_lies: None) -> None:
    assert SUMMER.astimezone(zoneinfo.ZoneInfo.no_cache("Europe/Lisbon")).utcoffset().total_seconds() == 5 * 3600
    assert SUMMER.astimezone(get_zone("Europe/Lisbon")).utcoffset().total_seconds() == 3600  # WEST, from tzdata


def test_a_name_that_is_not_a_zone_is_never_read_as_a_path() -> None:
    with pytest.raises((zoneinfo.ZoneInfoNotFoundError, ValueError)):
        get_zone("../../../etc/passwd")
