"""The 12 localisable findings: specifications, placement, appearance and boxes.

A finding appearance is a :class:`FindingSpec` (class, renderer, side, anatomical window, region
name, strength, parameters). The ``_spec_*`` constructors draw one for a given anatomy,
``_place_findings`` places the present classes so that their windows rarely overlap (apart from
the two designed overlaps), the ``_delta_*`` renderers return each finding's attenuation change
inside its window, ``_finding_delta`` crops it to its tight box, and :func:`render` adds the
changes to the anatomy of :mod:`shovir.data.phantom.anatomy` and returns the 8-bit image with one
box per appearance. The appearance and box region of every class are tabulated in the docstring
of :mod:`shovir.data.phantom`.

Imports :mod:`~shovir.data.phantom.anatomy` (the base image and its geometry) and
:mod:`~shovir.data.phantom.scenarios` (the scenario names that change the placement).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shovir import labels as L
from shovir.data.phantom.anatomy import (
    AIR,
    HEART,
    MARKINGS,
    RIB,
    Anatomy,
    _bump,
    _Fields,
    _heart_extent,
    _heart_mask,
    _lung_mask,
    _posterior_ribs,
    _render_anatomy,
    _rib_visibility,
    _segment_distance,
    _smooth_field,
    _smoothstep,
    _to_image,
    _View,
)
from shovir.data.phantom.scenarios import SCENARIOS

__all__ = ["LOCALIZED_FINDINGS", "SUBTLE_STRENGTH", "FindingSpec", "render"]

LOCALIZED_FINDINGS: tuple[str, ...] = tuple(c for c in L.LOCALIZABLE if c != "Pneumonia")
"""The 12 classes the phantom draws with a box (CheXbert order)."""

SUBTLE_STRENGTH = 0.6
"""Contrast (or size) factor of a subtle finding; still several times the acquisition noise."""

# ----------------------------------------------------------------------------------------------
# Findings: specifications and renderers
# ----------------------------------------------------------------------------------------------

_SIDE_NAME = {-1: "right", 1: "left"}
_TOLERANCE = 0.003  # attenuation change below which a pixel is not part of a finding's box


@dataclass(frozen=True)
class FindingSpec:
    """One rendered appearance of a finding.

    Attributes:
        name: CheXpert class.
        kind: renderer (``"nodule"``, ``"pacemaker"``, ``"compressive"``, ...).
        side: -1 patient right (image left), +1 patient left, 0 midline.
        window: anatomical ``(u0, v0, u1, v1)`` that contains the whole appearance.
        anatomy: region name stored with the box.
        strength: 1 for a plain finding, :data:`SUBTLE_STRENGTH` for a subtle one (reported as
            uncertain).
        params: renderer parameters (plain floats / ints / strings).
    """

    name: str
    kind: str
    side: int
    window: tuple[float, float, float, float]
    anatomy: str
    strength: float = 1.0
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def subtle(self) -> bool:
        """Whether this appearance is rendered subtle (and its class reported as uncertain)."""
        return self.strength < 1.0


def _lung_span(anat: Anatomy, v: float) -> tuple[float, float]:
    """(medial, lateral) distance from the midline of a lung at height ``v``."""
    axis = float(anat.lung_axis(np.float64(v)))
    width = float(anat.lung_width(np.float64(v)))
    return max(axis - width, float(anat.medial_edge(np.float64(v)))), float(anat.lateral_edge(np.float64(v)))


def _inside_lung(anat: Anatomy, side: int, u: float, v: float, margin: float) -> bool:
    """Whether a disc of radius ``margin`` around anatomical ``(u, v)`` lies in the lung, off the heart."""
    for du, dv in ((0, 0), (margin, 0), (-margin, 0), (0, margin), (0, -margin)):
        pu, pv = u + du, v + dv
        d = (pu - 0.5) * side
        medial, lateral = _lung_span(anat, pv)
        if not (medial + 0.004 < d < lateral - 0.004):
            return False
        if pv < anat.apex + 0.02 or pv > float(anat.dome(np.float64(abs(d)), side)) - 0.008:
            return False
        if float(_heart_mask(anat, np.float64(pu), np.float64(pv))) > 0.0:
            return False
    return True


def _zone_of(v: float) -> str:
    return "upper" if v < 0.37 else ("mid" if v < 0.53 else "lower")


def _zone_range(anat: Anatomy, zone: str, side: int) -> tuple[float, float]:
    dome = float(anat.dome(np.float64(0.2), side))
    return {"upper": (anat.apex + 0.07, 0.36), "mid": (0.38, 0.52), "lower": (0.54, dome - 0.05)}[zone]


def _window_overlap(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over the smaller area of two ``(u0, v0, u1, v1)`` windows."""
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return iw * ih / smaller


def _lung_point(anat: Anatomy, rng: np.random.Generator, side: int, zone: str, margin: float) -> tuple[float, float] | None:
    lo, hi = _zone_range(anat, zone, side)
    for _ in range(12):
        v = rng.uniform(lo, max(hi, lo + 1e-3))
        medial, lateral = _lung_span(anat, v)
        d = rng.uniform(medial + margin, max(lateral - margin, medial + margin + 1e-3))
        u = 0.5 + side * d
        if _inside_lung(anat, side, u, v, margin):
            return u, v
    return None


# -- spec constructors (each draws a fixed number of values from rng per attempt) ---------------


def _spec_cardiomegaly(anat: Anatomy, rng: np.random.Generator, strength: float) -> FindingSpec:
    grow = rng.uniform(1.28, 1.42) if strength == 1.0 else rng.uniform(1.18, 1.22)
    params = dict(grow=grow, grow_y=1 + (grow - 1) * 0.45, du=(grow - 1) * 0.06, dv=(grow - 1) * 0.03)
    u0, v0, u1, v1 = _heart_extent(anat, params["grow"], params["grow_y"], params["du"], params["dv"])
    window = (u0 - 0.01, v0 - 0.01, u1 + 0.01, min(v1 + 0.01, anat.dome_left + 0.016))
    return FindingSpec("Cardiomegaly", "heart", 0, window, "cardiac silhouette", strength, params)


def _spec_ecm(anat: Anatomy, rng: np.random.Generator, strength: float) -> FindingSpec:
    big = rng.uniform(0.045, 0.065) * (1.0 if strength == 1.0 else 0.6)
    small = big * rng.uniform(0.5, 1.0)
    right, left = (big, small) if rng.random() < 0.6 else (small, big)
    top, bottom = 0.13, rng.uniform(0.33, 0.36)
    reach = 0.08 + max(right, left) + 0.01
    window = (0.5 - reach, top, 0.5 + reach, bottom)
    return FindingSpec("Enlarged Cardiomediastinum", "mediastinum", 0, window, "upper mediastinum", strength,
                       dict(right=right, left=left, top=top, bottom=bottom))


def _meniscus_top(anat: Anatomy, side: int, height: float, inner: float, lateral: float, start: float) -> float:
    """Highest point (smallest v) of an effusion's meniscus for d in ``[start, lateral]``."""
    d = np.linspace(start, lateral + 0.01, 64)
    reach = np.clip((d - inner) / (lateral - inner), 0.0, 1.0) ** 0.6
    return float(np.min(anat.dome(d, side) - height * reach))


def _spec_effusion(anat: Anatomy, rng: np.random.Generator, strength: float, side: int) -> FindingSpec:
    height = rng.uniform(0.06, 0.13) if strength == 1.0 else rng.uniform(0.035, 0.05)
    dome_lateral = float(anat.dome(np.float64(0.4), side))
    _, lateral = _lung_span(anat, dome_lateral - 0.02)
    inner = lateral - rng.uniform(0.14, 0.2)
    top = _meniscus_top(anat, side, height, inner, lateral, inner) - 0.016
    window = (0.5 + side * (inner - 0.01), top, 0.5 + side * (lateral + 0.012), dome_lateral + 0.012)
    window = (min(window[0], window[2]), window[1], max(window[0], window[2]), window[3])
    anatomy = f"{_SIDE_NAME[side]} costophrenic angle" if height < 0.09 else f"{_SIDE_NAME[side]} lower lung zone"
    return FindingSpec("Pleural Effusion", "effusion", side, window, anatomy, strength,
                       dict(height=height, inner=inner, lateral=lateral))


def _spec_pneumothorax(anat: Anatomy, rng: np.random.Generator, strength: float, side: int) -> FindingSpec:
    gap = rng.uniform(0.03, 0.05) if strength == 1.0 else rng.uniform(0.02, 0.025)
    end = anat.apex + rng.uniform(0.22, 0.3)
    medial, _ = _lung_span(anat, anat.apex + 0.13)
    _, lateral = _lung_span(anat, end)
    window = (0.5 + side * (medial - 0.01), anat.apex - 0.01, 0.5 + side * (lateral + 0.01), end + 0.01)
    window = (min(window[0], window[2]), window[1], max(window[0], window[2]), window[3])
    return FindingSpec("Pneumothorax", "pneumothorax", side, window, f"{_SIDE_NAME[side]} apical zone", strength,
                       dict(gap=gap, end=end))


def _spec_nodule(anat: Anatomy, rng: np.random.Generator, strength: float, side: int, zone: str) -> FindingSpec | None:
    mass = rng.random() < 0.3
    radius = rng.uniform(0.032, 0.048) if mass else rng.uniform(0.015, 0.028)
    if strength < 1.0:
        radius *= 0.75
    phases = rng.uniform(0, 2 * np.pi, 2)
    point = _lung_point(anat, rng, side, zone, radius * 1.15 + 0.005)
    if point is None:
        return None
    u, v = point
    r = radius * 1.15
    zone = _zone_of(v)
    return FindingSpec("Lung Lesion", "nodule", side, (u - r, v - r, u + r, v + r), f"{_SIDE_NAME[side]} {zone} lung zone",
                       strength, dict(u=u, v=v, radius=radius, phase3=phases[0], phase5=phases[1], mass=mass,
                                      size_cm=round(2 * radius * 38, 1)))


def _spec_consolidation(anat: Anatomy, rng: np.random.Generator, strength: float, side: int, zone: str) -> FindingSpec | None:
    a, b = rng.uniform(0.055, 0.08), rng.uniform(0.045, 0.065)
    key = int(rng.integers(0, 2**62))
    point = _lung_point(anat, rng, side, zone, 0.02)
    if point is None:
        return None
    u, v = point
    zone = _zone_of(v)
    return FindingSpec("Consolidation", "consolidation", side, (u - a, v - b, u + a, v + b),
                       f"{_SIDE_NAME[side]} {zone} lung zone", strength, dict(u=u, v=v, a=a, b=b, key=key))


def _spec_opacity(anat: Anatomy, rng: np.random.Generator, strength: float, side: int, zone: str,
                  near: FindingSpec | None = None) -> FindingSpec | None:
    a, b = rng.uniform(0.065, 0.095), rng.uniform(0.055, 0.08)
    key = int(rng.integers(0, 2**62))
    if near is not None:
        angle = rng.uniform(0, 2 * np.pi)
        u = near.params["u"] + math.cos(angle) * near.params["a"] * 0.9
        v = near.params["v"] + math.sin(angle) * near.params["b"] * 0.9
        side = near.side
    else:
        point = _lung_point(anat, rng, side, zone, 0.02)
        if point is None:
            return None
        u, v = point
    zone = _zone_of(v)
    return FindingSpec("Lung Opacity", "opacity", side, (u - a, v - b, u + a, v + b), f"{_SIDE_NAME[side]} {zone} lung zone",
                       strength, dict(u=u, v=v, a=a, b=b, key=key, halo=near is not None))


def _spec_edema(anat: Anatomy, rng: np.random.Generator, strength: float, side: int, shared: Mapping[str, float]) -> FindingSpec:
    d = shared["d"] + rng.uniform(-0.008, 0.008)
    a, b = shared["a"], shared["b"]
    u, v = 0.5 + side * d, shared["v"]
    key = int(rng.integers(0, 2**62))
    return FindingSpec("Edema", "edema", side, (u - a, v - b, u + a, v + b), f"{_SIDE_NAME[side]} hilar structures", strength,
                       dict(u=u, v=v, a=a, b=b, key=key, period=shared["period"]))


def _spec_plate(anat: Anatomy, rng: np.random.Generator, strength: float, side: int) -> FindingSpec | None:
    length = rng.uniform(0.09, 0.14)
    thickness = rng.uniform(0.009, 0.013)
    angle = math.radians(rng.uniform(-14, 14))
    lift = rng.uniform(0.05, 0.1)
    shift = rng.uniform(-0.25, 0.25)
    second = rng.random() < 0.4
    dome_mid = float(anat.dome(np.float64(anat.lung_center), side))
    v = dome_mid - lift
    medial, lateral = _lung_span(anat, v)
    d = (medial + lateral) / 2 + shift * (lateral - medial)
    u = 0.5 + side * d
    du, dv = math.cos(angle) * length / 2, math.sin(angle) * length / 2
    p0, p1 = (u - du, v - dv), (u + du, v + dv)
    if not all(_inside_lung(anat, side, x, y, 0.004) for x, y in (p0, p1)):
        return None
    pad = thickness + 0.004 + (0.02 if second else 0.0)
    window = (min(p0[0], p1[0]) - pad, min(p0[1], p1[1]) - pad, max(p0[0], p1[0]) + pad, max(p0[1], p1[1]) + pad)
    return FindingSpec("Atelectasis", "plate", side, window, f"{_SIDE_NAME[side]} lower lung zone", strength,
                       dict(u0=p0[0], v0=p0[1], u1=p1[0], v1=p1[1], thickness=thickness, second=second))


def _spec_compressive(anat: Anatomy, rng: np.random.Generator, strength: float, effusion: FindingSpec) -> FindingSpec:
    thickness = rng.uniform(0.045, 0.065)
    p = effusion.params
    side = effusion.side
    dome_lateral = float(anat.dome(np.float64(0.4), side))
    inner = p["inner"] - rng.uniform(0.0, 0.03)
    top = _meniscus_top(anat, side, p["height"], p["inner"], p["lateral"], inner - 0.01) - thickness * 0.95 - 0.01
    window = (0.5 + side * (inner - 0.01), top, 0.5 + side * (p["lateral"] + 0.012), dome_lateral + 0.012)
    window = (min(window[0], window[2]), window[1], max(window[0], window[2]), window[3])
    return FindingSpec("Atelectasis", "compressive", side, window, f"{_SIDE_NAME[side]} lower lung zone", strength,
                       dict(height=p["height"], inner=inner, lateral=p["lateral"], effusion_inner=p["inner"],
                            thickness=thickness))


def _spec_pleural_thickening(anat: Anatomy, rng: np.random.Generator, strength: float, side: int) -> FindingSpec:
    length = rng.uniform(0.12, 0.2)
    top = rng.uniform(0.25, 0.66 - length)
    thickness = rng.uniform(0.013, 0.022) * (1.0 if strength == 1.0 else 0.6)
    phase = rng.uniform(0, 2 * np.pi)
    _, lateral_top = _lung_span(anat, top)
    _, lateral_bottom = _lung_span(anat, top + length)
    inner = min(lateral_top, lateral_bottom) - thickness * 1.4 - 0.006
    outer = max(lateral_top, lateral_bottom) + 0.008
    window = (0.5 + side * inner, top, 0.5 + side * outer, top + length)
    window = (min(window[0], window[2]), window[1], max(window[0], window[2]), window[3])
    return FindingSpec("Pleural Other", "thickening", side, window, f"{_SIDE_NAME[side]} lateral chest wall", strength,
                       dict(top=top, length=length, thickness=thickness, phase=phase))


def _rib_center(anat: Anatomy, k: int, d: float) -> float:
    growth = 0.045
    position = anat.rib_spacing * k * (1 + growth * k)
    return float(-0.12 * d + 0.9 * d * d + 0.105 + anat.rib_phase + position)


def _spec_fracture(anat: Anatomy, rng: np.random.Generator, strength: float, side: int) -> FindingSpec | None:
    k = int(rng.integers(2, 8))
    d = rng.uniform(0.2, 0.33)
    offset = anat.rib_thickness * rng.uniform(0.7, 0.95) * (1.0 if strength == 1.0 else 0.5)
    direction = 1.0 if rng.random() < 0.5 else -1.0
    taper = rng.uniform(0.06, 0.085)
    v_mid = _rib_center(anat, k, d)
    dome = float(anat.dome(np.float64(d), side))
    if v_mid > dome - 0.03 or v_mid < anat.apex + 0.06:
        return None
    medial, lateral = _lung_span(anat, v_mid)
    if not medial + 0.02 < d < lateral - taper - 0.01:
        return None
    v_a, v_b = _rib_center(anat, k, d - 0.01), _rib_center(anat, k, d + taper)
    half = anat.rib_thickness / 2 + offset + 0.008
    window = (0.5 + side * (d - 0.012), min(v_a, v_b) - half, 0.5 + side * (d + taper + 0.004), max(v_a, v_b) + half)
    window = (min(window[0], window[2]), window[1], max(window[0], window[2]), window[3])
    number = k + 2
    return FindingSpec("Fracture", "fracture", side, window, f"{_SIDE_NAME[side]} {_ordinal(number)} rib", strength,
                       dict(rib=k, number=number, d=d, offset=offset * direction, taper=taper))


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _spec_device(anat: Anatomy, rng: np.random.Generator) -> FindingSpec:
    choice = rng.random()
    side_draw = rng.random()
    a, b, c, e = rng.uniform(0, 1, 4)
    if choice < 0.4:
        side = 1 if side_draw < 0.8 else -1
        u = 0.5 + side * (0.22 + 0.06 * a)
        v = anat.clavicle_v + 0.06 + 0.03 * b
        hx, hy = 0.034 + 0.006 * c, 0.024 + 0.004 * e
        window = (u - 0.075, v - 0.065, u + 0.075, v + 0.065)
        return FindingSpec("Support Devices", "pacemaker", side, window, f"{_SIDE_NAME[side]} chest wall", 1.0,
                           dict(u=u, v=v, hx=hx, hy=hy, loop=float(rng.uniform(0, 2 * np.pi))))
    if choice < 0.7:
        side = -1 if side_draw < 0.7 else 1
        u = 0.5 + side * (0.17 + 0.05 * a)
        v = anat.clavicle_v + 0.05 + 0.03 * b
        end_u, end_v = 0.5 + side * (0.085 + 0.02 * c), anat.clavicle_v + 0.005 + 0.02 * e
        window = (min(u, end_u) - 0.03, min(v, end_v) - 0.03, max(u, end_u) + 0.03, max(v, end_v) + 0.03)
        return FindingSpec("Support Devices", "port", side, window, f"{_SIDE_NAME[side]} chest wall", 1.0,
                           dict(u=u, v=v, end_u=end_u, end_v=end_v))
    tip = 0.2 + 0.05 * a
    top = (0.0 - 0.5 - anat.shift_v) / anat.scale + 0.5 - 0.02
    window = (0.5 - 0.02, top, 0.5 + 0.02, tip + 0.006)
    return FindingSpec("Support Devices", "ett", 0, window, "trachea", 1.0, dict(tip=tip, top=top))


# -- renderers: attenuation change inside the window ----------------------------------------------


def _delta_heart(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    dome_left = anat.dome(np.abs(view.u - 0.5), +1)
    cut = _smoothstep(dome_left + 0.014, dome_left + 0.002, view.v)
    grown = _heart_mask(anat, view.u, view.v, p["grow"], p["grow_y"], p["du"], p["dv"]) * cut
    change = np.clip(grown - view.heart, 0.0, None)
    return change * (view.lung_free * (AIR * view.depth - MARKINGS * view.markings) + HEART)


def _delta_mediastinum(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    out = np.zeros(np.broadcast_shapes(view.u.shape, view.v.shape), dtype=np.float32)
    bump = _bump(view.v, p["top"], p["bottom"])
    edge = anat.medial_edge(view.v)
    for side, amount in ((-1, p["right"]), (1, p["left"])):
        d = view.d(side)
        border = edge + amount * bump
        widened = (_smoothstep(border + 0.004, border - 0.004, d) - _smoothstep(edge + 0.004, edge - 0.004, d)) * (d > 0)
        out += widened * (view.aeration + 0.05 * view.lung)
    return out


def _delta_effusion(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    d = view.d(spec.side)
    dome = anat.dome(np.abs(d), spec.side)
    reach = np.clip((d - p["inner"]) / (p["lateral"] - p["inner"]), 0.0, 1.0) ** 0.6
    meniscus = dome - p["height"] * reach
    fluid = _smoothstep(meniscus - 0.014, meniscus + 0.008, view.v) * _smoothstep(p["inner"] - 0.004, p["inner"] + 0.025, d)
    return fluid * (0.97 * view.aeration + 0.06 * view.lung)


def _delta_compressive(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    d = view.d(spec.side)
    dome = anat.dome(np.abs(d), spec.side)
    reach = np.clip((d - p["effusion_inner"]) / (p["lateral"] - p["effusion_inner"]), 0.0, 1.0) ** 0.6
    meniscus = dome - p["height"] * reach
    center = meniscus - p["thickness"] * 0.35
    band = _smoothstep(p["thickness"] * 0.6, p["thickness"] * 0.15, np.abs(view.v - center))
    band = band * _smoothstep(p["inner"] - 0.004, p["inner"] + 0.03, d)
    streaks = 0.8 + 0.2 * np.cos(2 * np.pi * (view.v - center) / 0.012) ** 2
    return 0.6 * spec.strength * band * streaks * (view.aeration + 0.08 * view.lung)


def _delta_pneumothorax(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    d = view.d(spec.side)
    shrink = p["gap"] * _smoothstep(p["end"], p["end"] - 0.09, view.v)
    original = _lung_mask(anat, d, view.v, spec.side) * (d > 0)
    collapsed = _lung_mask(anat, d, view.v, spec.side, apex_shift=p["gap"] * 0.9, lateral_shrink=shrink) * (d > 0)
    kept = np.where(original > 0, view.lung_free / np.maximum(original, 1e-6), 0.0).clip(0.0, 1.0)  # aortic knob
    rim = np.maximum(original - collapsed, 0.0) * kept
    # The visceral pleural line: the collapsed lung's edge, only where it has moved off the chest wall.
    moved = anat.lung_width(view.v) - anat.lung_width(view.v, p["gap"] * 0.9)
    displacement = np.where(d > anat.lung_axis(view.v), moved + shrink, moved)
    line = 4.0 * collapsed * (1.0 - collapsed) * _smoothstep(0.0, 0.006, displacement) * kept
    lucency = 0.16 * spec.strength
    return rim * (-MARKINGS * view.markings * (1.0 - view.heart) - lucency) + 0.22 * spec.strength * line


def _delta_nodule(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    x, y = view.u - p["u"], view.v - p["v"]
    theta = np.arctan2(y, x)
    lobulation = 0.12 if p["mass"] else 0.06
    outline = np.sin(3 * theta + p["phase3"]) + 0.5 * np.sin(5 * theta + p["phase5"])
    radius = p["radius"] * (1 + lobulation * outline)
    rho = np.sqrt(x * x + y * y) / radius
    solid = np.sqrt(np.clip(1.0 - rho * rho, 0.0, 1.0)) * _smoothstep(1.0, 0.9, rho)
    amplitude = 0.34 * spec.strength
    return amplitude * (0.35 + 0.65 * solid) * _smoothstep(1.0, 0.94, rho)


def _finding_rng(spec: FindingSpec) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(int(spec.params["key"])))


def _delta_consolidation(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    rng = _finding_rng(spec)
    x, y = (view.u - p["u"]) / p["a"], (view.v - p["v"]) / p["b"]
    rho = np.sqrt(x * x + y * y)
    noise = _smooth_field(rng, view.v[:, 0], view.u[0], 32.0)
    mottle = _smooth_field(rng, view.v[:, 0], view.u[0], 70.0)
    patch = _smoothstep(-0.1, 0.7, 1.3 * (1.0 - rho) + 0.5 * noise) * _smoothstep(1.0, 0.5, rho)
    patch = patch * np.clip(0.82 + 0.18 * mottle, 0.5, 1.0)
    # Air bronchograms: a small branching tree of air tubes from the hilar side of the patch.
    tubes = np.zeros_like(patch)
    root_angle = math.atan2(0.43 - p["v"], (0.5 + spec.side * 0.1) - p["u"])
    ru, rv = p["u"] + 0.6 * p["a"] * math.cos(root_angle), p["v"] + 0.6 * p["b"] * math.sin(root_angle)
    branches = [(ru, rv, root_angle + math.pi + rng.uniform(-0.3, 0.3), 0.55 * p["a"], 0)]
    while branches:
        bu, bv, angle, length, level = branches.pop()
        eu, ev = bu + math.cos(angle) * length, bv + math.sin(angle) * length
        width = 0.0045 * (0.75 ** level)
        dist = _segment_distance(view.u, view.v, (bu, bv), (eu, ev))
        tubes = np.maximum(tubes, _smoothstep(width, width * 0.3, dist))
        if level < 2:
            for sign in (-1, 1):
                branches.append((eu, ev, angle + sign * rng.uniform(0.35, 0.6), length * 0.6, level + 1))
    dense = 0.58 * view.aeration + 0.03 * view.lung
    return spec.strength * patch * (dense - 0.45 * tubes * view.lung * AIR * view.depth)


def _delta_opacity(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    rng = _finding_rng(spec)
    x, y = (view.u - p["u"]) / p["a"], (view.v - p["v"]) / p["b"]
    rho = np.sqrt(x * x + y * y)
    noise = _smooth_field(rng, view.v[:, 0], view.u[0], 22.0)
    haze = _smoothstep(1.0, 0.3, rho) * np.clip(0.75 + 0.3 * noise, 0.0, 1.3)
    return spec.strength * haze * view.lung * (0.1 + 0.28 * AIR * view.depth)


def _delta_edema(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    rng = _finding_rng(spec)
    x, y = (view.u - p["u"]) / p["a"], (view.v - p["v"]) / p["b"]
    rho = np.sqrt(x * x + y * y)
    haze = _smoothstep(1.0, 0.2, rho)
    # Septal (Kerley-type) lines: short horizontal lines in the lateral part of the window.
    lateral = _smoothstep(-0.1, 0.5, x * spec.side)
    lines = np.clip((np.cos(2 * np.pi * (view.v - p["v"]) / p["period"]) - 0.6) / 0.4, 0.0, 1.0)
    broken = _smoothstep(-0.2, 0.3, _smooth_field(rng, view.v[:, 0], view.u[0], 30.0))
    septal = lines * broken * lateral * _smoothstep(1.0, 0.6, rho)
    return spec.strength * view.lung * (0.26 * haze * (0.6 + 0.4 * view.depth) + 0.22 * septal)


def _delta_plate(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    th = p["thickness"]
    dist = _segment_distance(view.u, view.v, (p["u0"], p["v0"]), (p["u1"], p["v1"]))
    band = _smoothstep(th, 0.0, dist)
    if p["second"]:
        dist2 = _segment_distance(view.u, view.v, (p["u0"] + 0.01, p["v0"] + 0.018), (p["u1"] - 0.015, p["v1"] + 0.018))
        band = np.maximum(band, 0.7 * _smoothstep(th * 0.7, 0.0, dist2))
    return spec.strength * band * (0.45 * view.aeration + 0.05 * view.lung)


def _delta_thickening(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    d = view.d(spec.side)
    lateral = anat.lateral_edge(view.v)
    along = (view.v - p["top"]) / p["length"]
    thickness = p["thickness"] * _bump(view.v, p["top"], p["top"] + p["length"]) ** 0.5 * (
        1.0 + 0.3 * np.sin(2 * np.pi * 2.5 * along + p["phase"]))
    layer = _smoothstep(lateral - thickness - 0.003, lateral - thickness + 0.003, d) * (thickness > 1e-4)
    return layer * (0.9 * view.aeration + 0.08 * view.lung)


def _delta_fracture(view: _View, spec: FindingSpec) -> np.ndarray:
    anat, p = view.anatomy, spec.params
    d = view.d(spec.side)
    shift = p["offset"] * (d > p["d"]) * _smoothstep(p["d"] + p["taper"], p["d"] + p["taper"] * 0.5, d)
    original = _posterior_ribs(anat, np.abs(d), view.v, ribs=[p["rib"]])
    moved = _posterior_ribs(anat, np.abs(d), view.v - shift, ribs=[p["rib"]])
    gap = _smoothstep(0.006, 0.003, np.abs(d - p["d"]))
    broken = np.where(d > p["d"], moved, original) * (1.0 - gap)
    return RIB * _rib_visibility(anat, view.u, view.v) * (broken - original)


def _rounded_box(x: np.ndarray, y: np.ndarray, hx: float, hy: float, r: float) -> np.ndarray:
    qx, qy = np.abs(x) - hx + r, np.abs(y) - hy + r
    return np.sqrt(np.maximum(qx, 0) ** 2 + np.maximum(qy, 0) ** 2) + np.minimum(np.maximum(qx, qy), 0) - r


def _delta_pacemaker(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    x, y = view.u - p["u"], view.v - p["v"]
    can = _smoothstep(0.002, -0.002, _rounded_box(x, y, p["hx"], p["hy"], 0.012))
    battery = _smoothstep(0.002, -0.002, _rounded_box(x + p["hx"] * 0.3, y, p["hx"] * 0.55, p["hy"] * 0.7, 0.008))
    header = _smoothstep(0.002, -0.002, _rounded_box(x, y + p["hy"] + 0.008, p["hx"] * 0.6, 0.008, 0.004))
    # Lead loops around the generator, fading out toward the window edge.
    rx, ry = p["hx"] + 0.016, p["hy"] + 0.018
    theta = np.mod(np.arctan2(y / ry, x / rx) - p["loop"], 2 * np.pi)
    ring = np.abs(np.sqrt((x / rx) ** 2 + (y / ry) ** 2) - 1.0) * min(rx, ry)
    wire = _smoothstep(0.0032, 0.0012, ring) * _smoothstep(5.6, 4.4, theta)
    spiral = np.abs(np.sqrt((x / (rx + 0.01)) ** 2 + (y / (ry + 0.01)) ** 2) - 1.0) * min(rx, ry)
    wire = np.maximum(wire, _smoothstep(0.0032, 0.0012, spiral) * _smoothstep(0.0, 0.8, theta) * _smoothstep(3.6, 2.2, theta))
    return 1.3 * can + 0.35 * battery + 0.55 * header * (1 - can) + 0.75 * wire * (1 - can)


def _delta_port(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    x, y = view.u - p["u"], view.v - p["v"]
    r = np.sqrt(x * x + y * y)
    ring = _smoothstep(0.006, 0.003, np.abs(r - 0.016))
    base = _smoothstep(0.02, 0.017, r)
    dist = _segment_distance(view.u, view.v, (p["u"], p["v"]), (p["end_u"], p["end_v"]))
    length = math.hypot(p["end_u"] - p["u"], p["end_v"] - p["v"])
    along = np.sqrt(np.maximum((view.u - p["u"]) ** 2 + (view.v - p["v"]) ** 2 - dist**2, 0.0)) / max(length, 1e-6)
    tube = _smoothstep(0.0035, 0.0015, dist) * _smoothstep(1.0, 0.7, along)
    return 1.1 * ring + 0.35 * base + 0.6 * tube * (1 - base)


def _delta_ett(view: _View, spec: FindingSpec) -> np.ndarray:
    p = spec.params
    x = view.u - 0.5
    walls = np.maximum(_smoothstep(0.0028, 0.0008, np.abs(x - 0.0075)), _smoothstep(0.0028, 0.0008, np.abs(x + 0.0075)))
    stripe = _smoothstep(0.002, 0.0006, np.abs(x - 0.003))
    span = _smoothstep(p["tip"] + 0.003, p["tip"] - 0.002, view.v)
    return span * (0.7 * walls + 0.6 * stripe)


_RENDERERS = {
    "heart": _delta_heart,
    "mediastinum": _delta_mediastinum,
    "effusion": _delta_effusion,
    "compressive": _delta_compressive,
    "pneumothorax": _delta_pneumothorax,
    "nodule": _delta_nodule,
    "consolidation": _delta_consolidation,
    "opacity": _delta_opacity,
    "edema": _delta_edema,
    "plate": _delta_plate,
    "thickening": _delta_thickening,
    "fracture": _delta_fracture,
    "pacemaker": _delta_pacemaker,
    "port": _delta_port,
    "ett": _delta_ett,
}


# ----------------------------------------------------------------------------------------------
# Placement
# ----------------------------------------------------------------------------------------------

_MAX_OVERLAP = 0.04  # intersection over the smaller window tolerated between different findings


def _choose(make: Any, placed: Sequence[FindingSpec], ignore: Iterable[str] = (), attempts: int = 24) -> FindingSpec:
    """Draw candidates from ``make()`` until one barely overlaps the findings already placed."""
    skip = set(ignore)
    best, best_score = None, math.inf
    for _ in range(attempts):
        spec = make()
        if spec is None:
            continue
        score = max((_window_overlap(spec.window, other.window) for other in placed
                     if other.name != spec.name and other.name not in skip), default=0.0)
        if score <= _MAX_OVERLAP:
            return spec
        if score < best_score:
            best, best_score = spec, score
    if best is None:
        raise RuntimeError("could not place a finding inside the lungs; the anatomy parameters are out of range")
    return best


def _place_findings(present: np.ndarray, subtle: np.ndarray, anat: Anatomy, scenario: int,
                    rng: np.random.Generator) -> list[FindingSpec]:
    """Finding specifications for the present classes, fixed-site findings first."""
    has = {name: bool(present[L.class_index(name)]) for name in L.LOCALIZABLE}
    strength = {name: (SUBTLE_STRENGTH if subtle[L.class_index(name)] else 1.0) for name in L.LOCALIZABLE}
    specs: list[FindingSpec] = []
    sides = (-1, 1)

    def side() -> int:
        return sides[int(rng.integers(0, 2))]

    def zone() -> str:
        return ("upper", "mid", "lower")[int(rng.integers(0, 3))]

    if has["Support Devices"]:
        specs.append(_spec_device(anat, rng))
    if has["Cardiomegaly"]:
        specs.append(_spec_cardiomegaly(anat, rng, strength["Cardiomegaly"]))
    if has["Enlarged Cardiomediastinum"]:
        specs.append(_spec_ecm(anat, rng, strength["Enlarged Cardiomediastinum"]))
    if has["Edema"]:
        shared = dict(d=rng.uniform(0.16, 0.18), v=rng.uniform(0.43, 0.44), a=rng.uniform(0.1, 0.11),
                      b=rng.uniform(0.064, 0.07), period=rng.uniform(0.016, 0.02))
        specs += [_spec_edema(anat, rng, strength["Edema"], s, shared) for s in sides]
    effusions: list[FindingSpec] = []
    if has["Pleural Effusion"]:
        bilateral = rng.random() < (0.45 if SCENARIOS[scenario].name == "heart_failure" else 0.15)
        chosen = sides if bilateral else (side(),)
        effusions = [_spec_effusion(anat, rng, strength["Pleural Effusion"], s) for s in chosen]
        specs += effusions
    if has["Pneumothorax"]:
        first = side()
        specs.append(_choose(
            lambda: _spec_pneumothorax(anat, rng, strength["Pneumothorax"], first if rng.random() < 0.5 else -first),
            specs, attempts=6))
    if has["Atelectasis"]:
        if effusions and rng.random() < 0.5:
            target = effusions[int(rng.integers(0, len(effusions)))]
            specs.append(_spec_compressive(anat, rng, strength["Atelectasis"], target))
        else:
            specs.append(_choose(lambda: _spec_plate(anat, rng, strength["Atelectasis"], side()), specs))
    if has["Fracture"]:
        specs.append(_choose(lambda: _spec_fracture(anat, rng, strength["Fracture"], side()), specs))
    if has["Pleural Other"]:
        specs.append(_choose(lambda: _spec_pleural_thickening(anat, rng, strength["Pleural Other"], side()), specs))
    consolidation = None
    if has["Consolidation"]:
        consolidation = _choose(lambda: _spec_consolidation(anat, rng, strength["Consolidation"], side(), zone()), specs)
        specs.append(consolidation)
    if has["Lung Opacity"]:
        if consolidation is not None and rng.random() < 0.35:
            specs.append(_choose(lambda: _spec_opacity(anat, rng, strength["Lung Opacity"], 0, "", near=consolidation),
                                 specs, ignore=("Consolidation",)))
        else:
            specs.append(_choose(lambda: _spec_opacity(anat, rng, strength["Lung Opacity"], side(), zone()), specs))
    if has["Lung Lesion"]:
        specs.append(_choose(lambda: _spec_nodule(anat, rng, strength["Lung Lesion"], side(), zone()), specs))
    return specs


# ----------------------------------------------------------------------------------------------
# Rendering
# ----------------------------------------------------------------------------------------------


def _pixel_window(anat: Anatomy, window: Sequence[float], size: int) -> tuple[int, int, int, int]:
    x0, y0 = anat.to_pixels(window[0], window[1], size)
    x1, y1 = anat.to_pixels(window[2], window[3], size)
    return (max(0, int(math.floor(y0)) - 1), min(size, int(math.ceil(y1)) + 1),
            max(0, int(math.floor(x0)) - 1), min(size, int(math.ceil(x1)) + 1))


def _finding_delta(fields: _Fields, spec: FindingSpec) -> tuple[tuple[int, int, int, int], np.ndarray] | None:
    """Pixel box ``(y0, y1, x0, x1)`` and the attenuation change inside it, or None if invisible."""
    y0, y1, x0, x1 = _pixel_window(fields.anatomy, spec.window, fields.size)
    if y1 <= y0 or x1 <= x0:
        return None
    view = fields.crop((y0, y1, x0, x1))
    delta = np.broadcast_to(_RENDERERS[spec.kind](view, spec), (y1 - y0, x1 - x0)).astype(np.float32)
    visible = np.abs(delta) > _TOLERANCE
    if not visible.any():
        return None
    rows = np.flatnonzero(visible.any(axis=1))
    cols = np.flatnonzero(visible.any(axis=0))
    r0, r1, c0, c1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    return (y0 + r0, y0 + r1, x0 + c0, x0 + c1), delta[r0:r1, c0:c1]


def render(
    anatomy: Anatomy, specs: Sequence[FindingSpec], size: int, noise_rng: np.random.Generator
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Render anatomy plus findings to a (size, size) uint8 image and the findings' boxes.

    Each finding adds its attenuation change inside its own tight box (exactly zero outside), so
    leaving a spec out changes pixels inside that spec's box only. Boxes are integer pixel xyxy
    (``x_max``/``y_max`` exclusive) with ``classes`` ``[spec.name]`` and ``anatomy``.

    >>> from shovir.data.phantom import sample_anatomy, stable_rng
    >>> anat = sample_anatomy(stable_rng(0, "patient", 0), stable_rng(0, "study", 0))
    >>> image, boxes = render(anat, [], 64, stable_rng(0, "noise", 0))
    >>> image.shape, image.dtype.name, boxes
    ((64, 64), 'uint8', [])
    """
    fields = _render_anatomy(anatomy, int(size))
    attenuation = fields.attenuation.copy()
    boxes = []
    for spec in specs:
        result = _finding_delta(fields, spec)
        if result is None:
            raise RuntimeError(f"{spec.name} ({spec.kind}) left no visible change on a {size}x{size} image")
        (y0, y1, x0, x1), delta = result
        attenuation[y0:y1, x0:x1] += delta
        boxes.append({"x_min": int(x0), "y_min": int(y0), "x_max": int(x1), "y_max": int(y1),
                      "classes": [spec.name], "anatomy": spec.anatomy})
    return _to_image(fields, attenuation, noise_rng), boxes
