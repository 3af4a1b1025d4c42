"""The sun's apparent place and local altitude at an epoch second (pure; no clock, no dependency).

Meeus, *Astronomical Algorithms*, chapters 12, 22 and 25 ("higher accuracy": the largest terms of
VSOP87 for the Earth, about one arcsecond). docs/architecture.md, "Solar schedules".
"""

from __future__ import annotations

import math

__all__ = ["altitude", "hour_angle", "semidiameter"]

_RAD = math.pi / 180
_DAY = 86400

# (amplitude 1e-8, phase, frequency per Julian millennium): the terms above 1e-6 of VSOP87 series
_L0 = (
    (175347046, 0, 0), (3341656, 4.6692568, 6283.07585), (34894, 4.6261, 12566.1517), (3497, 2.7441, 5753.3849),
    (3418, 2.8289, 3.5231), (3136, 3.6277, 77713.7715), (2676, 4.4181, 7860.4194), (2343, 6.1352, 3930.2097),
    (1324, 0.7425, 11506.7698), (1273, 2.0371, 529.691), (1199, 1.1096, 1577.3435), (990, 5.233, 5884.927),
    (902, 2.045, 26.298), (857, 3.508, 398.149), (780, 1.179, 5223.694), (753, 2.533, 5507.553),
    (505, 4.583, 18849.228), (492, 4.205, 775.523), (357, 2.92, 0.067), (317, 5.849, 11790.629),
    (284, 1.899, 796.298), (271, 0.315, 10977.079), (243, 0.345, 5486.778), (206, 4.806, 2544.314),
    (205, 1.869, 5573.143), (202, 2.458, 6069.777), (156, 0.833, 213.299), (132, 3.411, 2942.463),
    (126, 1.083, 20.775), (115, 0.645, 0.98), (103, 0.636, 4694.003), (102, 0.976, 15720.839),
    (102, 4.267, 7.114), (99, 6.21, 2146.17), (98, 0.68, 155.42), (86, 5.98, 161000.69), (85, 1.3, 6275.96),
    (85, 3.67, 71430.7), (80, 1.81, 17260.15),
)  # fmt: skip
_L1 = (
    (628331966747, 0, 0), (206059, 2.678235, 6283.07585), (4303, 2.6351, 12566.1517), (425, 1.59, 3.523),
    (119, 5.796, 26.298), (109, 2.966, 1577.344), (93, 2.59, 18849.23), (72, 1.14, 529.69), (68, 1.87, 398.15),
    (67, 4.41, 5507.55), (59, 2.89, 5223.69), (56, 2.17, 155.42), (45, 0.4, 796.3), (36, 0.47, 775.52),
)  # fmt: skip
_L2 = ((52919, 0, 0), (8720, 1.0721, 6283.0758), (309, 0.867, 12566.152), (27, 0.05, 3.52), (16, 5.19, 26.3))
_L3 = ((289, 5.844, 6283.076), (35, 0, 0), (17, 5.49, 12566.15))
_R0 = (
    (100013989, 0, 0), (1670700, 3.0984635, 6283.07585), (13956, 3.05525, 12566.1517), (3084, 5.1985, 77713.7715),
    (1628, 1.1739, 5753.3849), (1576, 2.8469, 7860.4194), (925, 5.453, 11506.77), (542, 4.564, 3930.21),
    (472, 3.661, 5884.927),
)  # fmt: skip
_R1 = ((103019, 1.10749, 6283.07585), (1721, 1.0644, 12566.1517), (702, 3.142, 0))


def _series(terms: tuple[tuple[float, float, float], ...], tau: float) -> float:
    cos = math.cos
    return sum([a * cos(b + c * tau) for a, b, c in terms])


def _place(u: float) -> tuple[float, float, float, float]:
    """(apparent right ascension, declination, Greenwich apparent sidereal time, distance in AU)."""
    jd = u / _DAY + 2440587.5
    y = (jd - 2451545.0) / 365.25  # TT - UT: Espenak and Meeus's 2005-2050 polynomial, as ephem extrapolates
    t = (jd + (62.92 + 0.32217 * y + 0.005589 * y * y) / _DAY - 2451545.0) / 36525
    tau = t / 10
    lon = (_series(_L0, tau) + tau * (_series(_L1, tau) + tau * (_series(_L2, tau) + tau * _series(_L3, tau)))) / 1e8
    dist = (_series(_R0, tau) + tau * _series(_R1, tau)) / 1e8
    omega = (125.04452 - 1934.136261 * t) * _RAD
    l_sun, l_moon = (280.4665 + 36000.7698 * t) * _RAD, (218.3165 + 481267.8813 * t) * _RAD
    args = (omega, 2 * l_sun, 2 * l_moon, 2 * omega)  # nutation in longitude and obliquity, arcseconds
    dpsi = sum(k * math.sin(x) for k, x in zip((-17.20, -1.32, -0.23, 0.21), args, strict=True))
    deps = sum(k * math.cos(x) for k, x in zip((9.20, 0.57, 0.10, -0.09), args, strict=True))
    # geocentric, FK5, nutation and aberration (arcseconds folded in degrees)
    lam = (math.degrees(lon) + 180 + (-0.09033 + dpsi - 20.4898 / dist) / 3600) * _RAD
    eps0 = 23.0 + (26.0 + (21.448 - t * (46.815 + t * (0.00059 - t * 0.001813))) / 60) / 60
    eps = (eps0 + deps / 3600) * _RAD
    ra = math.degrees(math.atan2(math.cos(eps) * math.sin(lam), math.cos(lam)))
    dec = math.degrees(math.asin(math.sin(eps) * math.sin(lam)))
    gmst = 280.46061837 + 360.98564736629 * (jd - 2451545.0) + 0.000387933 * t * t
    return ra, dec, gmst + dpsi / 3600 * math.cos(eps), dist


def hour_angle(u: float, lon: float) -> float:
    """The sun's local hour angle at epoch second ``u`` and east longitude ``lon``, in [-180, 180)."""
    ra, _, gast, _ = _place(u)
    return (gast + lon - ra + 180) % 360 - 180


def semidiameter(u: float) -> float:
    """The sun's apparent radius at ``u``, in degrees (the distance from the mean anomaly: 1e-5 AU)."""
    m = (357.52911 + 0.98560028 * (u / _DAY - 10957.5)) * _RAD
    return 959.63 / 3600 / (1.00014 - 0.01671 * math.cos(m) - 0.00014 * math.cos(2 * m))


def altitude(u: float, lat: float, lon: float) -> float:
    """The geometric altitude of the sun's centre seen from (lat, lon) at sea level, in degrees
    (topocentric: with the parallax; without refraction, which the event's altitude carries)."""
    ra, dec, gast, dist = _place(u)
    h = (gast + lon - ra) * _RAD
    phi, delta = lat * _RAD, dec * _RAD
    sin_alt = math.sin(phi) * math.sin(delta) + math.cos(phi) * math.cos(delta) * math.cos(h)
    alt = math.degrees(math.asin(max(-1.0, min(1.0, sin_alt))))
    return alt - 8.794 / 3600 / dist * math.cos(alt * _RAD)
