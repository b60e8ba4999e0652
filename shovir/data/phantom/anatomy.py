"""The finding-free chest radiograph: numerical helpers, patient anatomy and its rendering.

:class:`Anatomy` holds one study's anatomy and acquisition parameters and
:func:`sample_anatomy` draws them (patient-level values plus study jitter). The private renderer
``_render_anatomy`` builds the attenuation image (body, lungs, heart, mediastinum, hila, vessel
markings, ribs, clavicles, spine, gastric bubble) together with the layers the findings modify
(``_Fields`` / ``_View``), and ``_to_image`` maps an attenuation image through the exposure curve
and acquisition noise to 8 bits. The geometry helpers (lung spans, heart mask, rib coordinates)
and the attenuation constants are shared with :mod:`shovir.data.phantom.findings`.

The base layer of the rendering: it imports no other module of the package.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Anatomy", "sample_anatomy"]


# ----------------------------------------------------------------------------------------------
# Small numerical helpers
# ----------------------------------------------------------------------------------------------


def _smoothstep(edge0: float | np.ndarray, edge1: float | np.ndarray, x: np.ndarray) -> np.ndarray:
    """Cubic Hermite step, 0 at ``edge0`` and 1 at ``edge1`` (either order); exactly 0/1 outside.

    >>> _smoothstep(0.0, 2.0, np.array([-1.0, 1.0, 3.0], np.float32)).tolist()
    [0.0, 0.5, 1.0]
    """
    t = np.asarray(x - edge0, dtype=np.float32)
    if np.ndim(edge0) == 0 and np.ndim(edge1) == 0:
        t *= np.float32(1.0 / (float(edge1) - float(edge0)))
    else:
        t /= np.asarray(edge1 - edge0, dtype=np.float32)
    np.maximum(t, 0.0, out=t)
    np.minimum(t, 1.0, out=t)
    out = t * np.float32(-2.0)
    out += np.float32(3.0)
    out *= t
    out *= t
    return out


def _span(coords: np.ndarray, lo: float, hi: float) -> slice:
    """Slice of the increasing 1-D ``coords`` that lie in ``[lo, hi]``."""
    return slice(int(np.searchsorted(coords, lo, "left")), int(np.searchsorted(coords, hi, "right")))


def _bump(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Smooth compact bump: 0 outside ``[lo, hi]``, 1 at the centre."""
    t = np.clip((x - lo) / (hi - lo), 0.0, 1.0)
    return (np.sin(np.pi * t) ** 2).astype(x.dtype if isinstance(x, np.ndarray) else np.float32)


def _interp_matrix(coords: np.ndarray, cells: int) -> np.ndarray:
    """(len(coords), cells + 3) cubic B-spline weights for coordinates in grid units [0, cells]."""
    i = np.floor(coords).astype(np.int64)
    f = coords - i
    w = np.stack(
        [(1 - f) ** 3 / 6, (3 * f**3 - 6 * f**2 + 4) / 6, (-3 * f**3 + 3 * f**2 + 3 * f + 1) / 6, f**3 / 6], axis=1
    )
    m = np.zeros((len(coords), cells + 3), dtype=np.float64)
    rows = np.arange(len(coords))
    for k in range(4):
        np.add.at(m, (rows, np.clip(i + k, 0, cells + 2)), w[:, k])
    return m


def _smooth_field(rng: np.random.Generator, ys: np.ndarray, xs: np.ndarray, cells: float) -> np.ndarray:
    """Smooth Gaussian-like random field (unit-ish variance) at normalised coordinates.

    ``ys``/``xs`` are 1-D coordinates in image units; ``cells`` is the number of lattice cells per
    unit length. The lattice covers the coordinate range, drawn from ``rng`` with a fixed count.
    """
    y0, x0 = float(ys.min()), float(xs.min())
    ny = int(math.ceil((float(ys.max()) - y0) * cells)) + 1
    nx = int(math.ceil((float(xs.max()) - x0) * cells)) + 1
    lattice = rng.standard_normal((ny + 3, nx + 3))
    wy = _interp_matrix((ys - y0) * cells, ny)
    wx = _interp_matrix((xs - x0) * cells, nx)
    return (wy @ lattice @ wx.T * 1.9).astype(np.float32)


def _segment_distance(x: np.ndarray, y: np.ndarray, p: tuple[float, float], q: tuple[float, float]) -> np.ndarray:
    """Distance from points ``(x, y)`` to the segment ``p``-``q``."""
    px, py = p
    dx, dy = q[0] - px, q[1] - py
    length2 = dx * dx + dy * dy
    t = np.clip(((x - px) * dx + (y - py) * dy) / max(length2, 1e-12), 0.0, 1.0)
    return np.sqrt((x - px - t * dx) ** 2 + (y - py - t * dy) ** 2)


# ----------------------------------------------------------------------------------------------
# Anatomy
# ----------------------------------------------------------------------------------------------

AIR = 0.66  # attenuation removed by a full-depth lung
MARKINGS = 0.2  # attenuation of the densest vessel markings
HEART = 0.07  # extra attenuation of the heart over the mediastinum
RIB = 0.17  # attenuation of a posterior rib


@dataclass(frozen=True)
class Anatomy:
    """Anatomy and acquisition parameters of one study (normalised image units, 0..1).

    Patient-level values come from ``(seed, "patient", patient)``; ``sample_anatomy`` adds the
    study's jitter. ``u`` runs left→right on the image (patient's right on the left), ``v``
    top→bottom.

    Fields, by group: pose (``shift_u``, ``shift_v``, ``scale``; study jitter); body and lungs
    (``body_half_width``, ``soft_density``, ``lung_center``, ``lung_half_width``, ``apex``);
    hemidiaphragms (``dome_right``, ``dome_left``: lateral levels, ``dome_height``); heart
    (``heart_cx``, ``heart_cy``, ``heart_rx``, ``heart_ry``, ``heart_angle``) and aortic knob
    (``knob_radius``); bones (``rib_phase``, ``rib_spacing``, ``rib_thickness``, ``clavicle_v``);
    ``gastric_bubble`` (visibility); exposure (``gain``, ``gamma``, ``offset``,
    ``gradient_angle``, ``gradient_amplitude``, ``noise_sigma``); ``texture_key`` seeds the
    patient's vessel tree.
    """

    shift_u: float
    shift_v: float
    scale: float
    body_half_width: float
    soft_density: float
    lung_center: float
    lung_half_width: float
    apex: float
    dome_right: float
    dome_left: float
    dome_height: float
    heart_cx: float
    heart_cy: float
    heart_rx: float
    heart_ry: float
    heart_angle: float
    knob_radius: float
    rib_phase: float
    rib_spacing: float
    rib_thickness: float
    clavicle_v: float
    gastric_bubble: float
    gain: float
    gamma: float
    offset: float
    gradient_angle: float
    gradient_amplitude: float
    noise_sigma: float
    texture_key: int

    # -- geometry in anatomical coordinates ------------------------------------------------
    def lung_axis(self, v: np.ndarray) -> np.ndarray:
        """Distance from the midline of a lung's vertical axis at height ``v``."""
        return self.lung_center + 0.03 * (v - 0.45)

    def lung_width(self, v: np.ndarray, apex_shift: float = 0.0) -> np.ndarray:
        """Half-width of a lung at height ``v`` (0 above the apex, rounded apex)."""
        rise = np.sqrt(np.clip((v - self.apex - apex_shift) / 0.13, 0.0, 1.0))
        widen = 1.0 + 0.22 * np.clip((v - 0.28) / 0.45, 0.0, 1.0)
        return self.lung_half_width * rise * widen

    def lateral_edge(self, v: np.ndarray, apex_shift: float = 0.0) -> np.ndarray:
        """Distance from the midline of a lung's (convex) lateral border at height ``v``."""
        bulge = 0.014 * np.sin(np.pi * np.clip((v - self.apex) / (0.8 - self.apex), 0.0, 1.0))
        return self.lung_axis(v) + self.lung_width(v, apex_shift) + bulge * (self.lung_width(v, apex_shift) > 0)

    def medial_edge(self, v: np.ndarray) -> np.ndarray:
        """Distance from the midline of the mediastinal border of the lungs at height ``v``."""
        return 0.078 - 0.05 * _smoothstep(0.36, 0.6, v)

    def dome(self, d: np.ndarray, side: int) -> np.ndarray:
        """Height of the hemidiaphragm at distance ``d`` from the midline (side -1 right, +1 left)."""
        base = self.dome_right if side < 0 else self.dome_left
        return base - self.dome_height * np.clip(1.0 - ((d - 0.19) / 0.21) ** 2, 0.0, 1.0)

    def to_pixels(self, u: float, v: float, size: int) -> tuple[float, float]:
        """Anatomical ``(u, v)`` → pixel ``(x, y)`` (continuous, pixel centres at +0.5)."""
        x = ((u - 0.5) * self.scale + 0.5 + self.shift_u) * size
        y = ((v - 0.5) * self.scale + 0.5 + self.shift_v) * size
        return x, y


def sample_anatomy(patient_rng: np.random.Generator, study_rng: np.random.Generator) -> Anatomy:
    """Patient anatomy from ``patient_rng`` plus study jitter from ``study_rng``.

    Both generators are consumed in a fixed order, so the anatomy of a patient is the same in all
    its studies up to the jitter.

    >>> from shovir.data.phantom import stable_rng
    >>> a = sample_anatomy(stable_rng(0, "patient", 1), stable_rng(0, "study", 4))
    >>> b = sample_anatomy(stable_rng(0, "patient", 1), stable_rng(0, "study", 5))
    >>> a.rib_spacing == b.rib_spacing and a.texture_key == b.texture_key, a.shift_u == b.shift_u
    (True, False)
    """
    p = patient_rng
    patient = dict(
        scale=p.uniform(0.95, 1.03),
        body_half_width=p.uniform(0.44, 0.48),
        soft_density=p.uniform(0.9, 1.05),
        lung_center=p.uniform(0.205, 0.222),
        lung_half_width=p.uniform(0.122, 0.138),
        apex=p.uniform(0.11, 0.145),
        dome_right=p.uniform(0.745, 0.79),
        dome_left_offset=p.uniform(0.01, 0.03),
        dome_height=p.uniform(0.06, 0.085),
        heart_cx=0.5 + p.uniform(0.03, 0.05),
        heart_cy=p.uniform(0.62, 0.655),
        heart_rx=p.uniform(0.14, 0.158),
        heart_ry=p.uniform(0.098, 0.112),
        heart_angle=p.uniform(0.25, 0.45),
        knob_radius=p.uniform(0.026, 0.038),
        rib_phase=p.uniform(0.0, 0.03),
        rib_spacing=p.uniform(0.052, 0.06),
        rib_thickness=p.uniform(0.018, 0.023),
        clavicle_v=p.uniform(0.13, 0.165),
        gastric_bubble=p.uniform(0.0, 1.0),
        gain=p.uniform(1.3, 1.6),
        gamma=p.uniform(0.85, 1.15),
        texture_key=int(p.integers(0, 2**62)),
    )
    s = study_rng
    jitter = dict(
        shift_u=s.normal(0.0, 0.005),
        shift_v=s.normal(0.0, 0.005),
        scale=s.normal(0.0, 0.006),
        inspiration=s.normal(0.0, 0.006),
        heart=s.normal(0.0, 0.004),
        gain=s.normal(0.0, 0.03),
        gamma=s.normal(0.0, 0.03),
        offset=s.uniform(0.0, 0.04),
        gradient_angle=s.uniform(0.0, 2 * math.pi),
        gradient_amplitude=s.uniform(0.0, 0.07),
        noise_sigma=s.uniform(0.009, 0.013),
    )
    return Anatomy(
        shift_u=float(jitter["shift_u"]),
        shift_v=float(jitter["shift_v"]),
        scale=float(patient["scale"] * (1 + jitter["scale"])),
        body_half_width=float(patient["body_half_width"]),
        soft_density=float(patient["soft_density"]),
        lung_center=float(patient["lung_center"]),
        lung_half_width=float(patient["lung_half_width"]),
        apex=float(patient["apex"]),
        dome_right=float(patient["dome_right"] + jitter["inspiration"]),
        dome_left=float(patient["dome_right"] + patient["dome_left_offset"] + jitter["inspiration"]),
        dome_height=float(patient["dome_height"]),
        heart_cx=float(patient["heart_cx"]),
        heart_cy=float(patient["heart_cy"] + jitter["inspiration"] * 0.6 + jitter["heart"]),
        heart_rx=float(patient["heart_rx"]),
        heart_ry=float(patient["heart_ry"]),
        heart_angle=float(patient["heart_angle"]),
        knob_radius=float(patient["knob_radius"]),
        rib_phase=float(patient["rib_phase"]),
        rib_spacing=float(patient["rib_spacing"]),
        rib_thickness=float(patient["rib_thickness"]),
        clavicle_v=float(patient["clavicle_v"]),
        gastric_bubble=float(patient["gastric_bubble"]),
        gain=float(patient["gain"] * (1 + jitter["gain"])),
        gamma=float(patient["gamma"] * (1 + jitter["gamma"])),
        offset=float(jitter["offset"]),
        gradient_angle=float(jitter["gradient_angle"]),
        gradient_amplitude=float(jitter["gradient_amplitude"]),
        noise_sigma=float(jitter["noise_sigma"]),
        texture_key=int(patient["texture_key"]),
    )


@dataclass
class _Fields:
    """Rendered anatomy: coordinates and the layers findings modify (all float32)."""

    anatomy: Anatomy
    size: int
    u: np.ndarray  # (1, S) anatomical u of each column
    v: np.ndarray  # (S, 1) anatomical v of each row
    lung_free: np.ndarray  # (S, S) soft lung mask before the heart is cut out
    heart: np.ndarray  # (S, S) soft heart mask
    depth: np.ndarray  # (S, S) relative air depth of the lungs
    markings: np.ndarray  # (S, S) vessel markings in [0, 1]
    attenuation: np.ndarray  # (S, S) finding-free attenuation

    @property
    def lung(self) -> np.ndarray:
        return self.lung_free * (1.0 - self.heart)

    def crop(self, window: tuple[int, int, int, int]) -> "_View":
        y0, y1, x0, x1 = window
        return _View(
            anatomy=self.anatomy,
            u=self.u[:, x0:x1],
            v=self.v[y0:y1, :],
            lung_free=self.lung_free[y0:y1, x0:x1],
            heart=self.heart[y0:y1, x0:x1],
            depth=self.depth[y0:y1, x0:x1],
            markings=self.markings[y0:y1, x0:x1],
        )


@dataclass
class _View:
    """A window of :class:`_Fields` handed to a finding renderer."""

    anatomy: Anatomy
    u: np.ndarray
    v: np.ndarray
    lung_free: np.ndarray
    heart: np.ndarray
    depth: np.ndarray
    markings: np.ndarray

    @property
    def lung(self) -> np.ndarray:
        return self.lung_free * (1.0 - self.heart)

    @property
    def aeration(self) -> np.ndarray:
        """Attenuation the lung currently removes (air minus markings); filling it adds this back."""
        return self.lung * (AIR * self.depth - MARKINGS * self.markings)

    def d(self, side: int) -> np.ndarray:
        """Signed distance from the midline toward ``side`` (positive on that side)."""
        return (self.u - 0.5) * side


@functools.lru_cache(maxsize=8)
def _pixel_grid(size: int) -> np.ndarray:
    """Pixel-centre coordinates ``(i + 0.5) / size`` (read-only, cached)."""
    grid = (np.arange(size, dtype=np.float64) + 0.5) / size
    grid.setflags(write=False)
    return grid


def _lung_mask(anat: Anatomy, d: np.ndarray, v: np.ndarray, side: int, apex_shift: float = 0.0,
               lateral_shrink: np.ndarray | float = 0.0, soft: float = 0.004) -> np.ndarray:
    """Soft mask of one lung (above the dome); ``d`` is the signed distance toward ``side``."""
    axis = anat.lung_axis(v)
    width = anat.lung_width(v, apex_shift)
    lateral = anat.lateral_edge(v, apex_shift) - lateral_shrink
    medial = np.maximum(axis - width, anat.medial_edge(v))
    horizontal = _smoothstep(lateral + soft, lateral - soft, d) * _smoothstep(medial - soft, medial + soft, d)
    vertical = _smoothstep(anat.dome(np.abs(d), side) + soft, anat.dome(np.abs(d), side) - soft, v)
    alive = (width > 1e-4) & (lateral > medial)
    return (horizontal * vertical * alive).astype(np.float32)


def _heart_mask(anat: Anatomy, u: np.ndarray, v: np.ndarray, grow: float = 1.0, grow_y: float = 1.0,
                du: float = 0.0, dv: float = 0.0) -> np.ndarray:
    """Soft heart silhouette: a tilted ellipse sitting on the left dome (``grow`` enlarges it)."""
    cx, cy = anat.heart_cx + du, anat.heart_cy + dv
    rx, ry = anat.heart_rx * grow, anat.heart_ry * grow_y
    c, s = math.cos(anat.heart_angle), math.sin(anat.heart_angle)
    x, y = u - cx, v - cy
    xr, yr = x * c + y * s, -x * s + y * c
    rho = np.sqrt((xr / rx) ** 2 + (yr / ry) ** 2)
    return _smoothstep(1.0, 0.94, rho).astype(np.float32)


def _heart_extent(anat: Anatomy, grow: float, grow_y: float, du: float, dv: float) -> tuple[float, float, float, float]:
    rx, ry = anat.heart_rx * grow, anat.heart_ry * grow_y
    c, s = math.cos(anat.heart_angle), math.sin(anat.heart_angle)
    hx = math.sqrt((rx * c) ** 2 + (ry * s) ** 2)
    hy = math.sqrt((rx * s) ** 2 + (ry * c) ** 2)
    cx, cy = anat.heart_cx + du, anat.heart_cy + dv
    return cx - hx, cy - hy, cx + hx, cy + hy


def _rib_coordinate(anat: Anatomy, d: np.ndarray, v: np.ndarray, anterior: bool) -> tuple[np.ndarray, np.ndarray]:
    """(rib number k as float, distance to the nearest rib centreline) for posterior/anterior ribs."""
    if anterior:
        curve = 0.16 + 0.42 * np.clip(0.40 - d, 0.0, None) - 0.25 * np.clip(d - 0.36, 0.0, None)
    else:
        curve = -0.12 * d + 0.9 * d * d
    y = v - curve - (0.105 + anat.rib_phase)
    growth = 0.045
    disc = np.maximum(1.0 + 4.0 * growth * y / anat.rib_spacing, 1e-6)
    k = (-1.0 + np.sqrt(disc)) / (2.0 * growth)
    nearest = np.round(k)
    local = anat.rib_spacing * (1.0 + 2.0 * growth * nearest)
    return nearest, (k - nearest) * local


def _rib_profile(dist: np.ndarray, thickness: float) -> np.ndarray:
    """Bone cross-section: a band with brighter cortical margins."""
    t = np.abs(dist) / (thickness / 2.0)
    return (_smoothstep(1.0, 0.8, t) * (0.55 + 0.45 * np.clip(t, 0, 1) ** 4)).astype(np.float32)


def _posterior_ribs(anat: Anatomy, d: np.ndarray, v: np.ndarray, ribs: Sequence[int] | None = None) -> np.ndarray:
    k, dist = _rib_coordinate(anat, d, v, anterior=False)
    valid = (k >= 0) & (k <= 9) if ribs is None else np.isin(k, list(ribs))
    lateral_end = anat.body_half_width - 0.03
    span = _smoothstep(0.035, 0.06, d) * _smoothstep(lateral_end, lateral_end - 0.04, d)
    return _rib_profile(dist, anat.rib_thickness) * valid * span


@functools.lru_cache(maxsize=16)
def _vessel_tree(texture_key: int) -> np.ndarray:
    """Branching pulmonary vessels of a patient, as segments ``(u0, v0, u1, v1, w0, w1)``.

    Four trunks per lung leave the hilum (upper, lateral, lower, basal) and split into two
    children four times, each shorter (x0.66-0.84) and thinner (x0.72); angles and lengths come
    from the patient's texture key, so every study of a patient shows the same vessels. The
    returned array is read-only (it is cached).
    """
    rng = np.random.Generator(np.random.PCG64(texture_key))
    segments: list[tuple[float, ...]] = []
    for side in (-1, 1):
        hx, hy = 0.5 + side * 0.095, 0.43
        for base_angle in (-100.0, -30.0, 35.0, 80.0):
            stack = [(hx, hy, math.radians(base_angle + rng.uniform(-12, 12)), rng.uniform(0.065, 0.09), 0.0115, 0)]
            while stack:
                x, y, angle, length, width, level = stack.pop()
                x1 = x + side * math.cos(angle) * length
                y1 = y + math.sin(angle) * length
                segments.append((x, y, x1, y1, width, width * 0.8))
                if level < 4:
                    spread = rng.uniform(18, 34)
                    for sign in (-1.0, 1.0):
                        stack.append((x1, y1, angle + math.radians(sign * spread + rng.uniform(-8, 8)),
                                      length * rng.uniform(0.66, 0.84), width * 0.72, level + 1))
    tree = np.array(segments, dtype=np.float64)
    tree.setflags(write=False)
    return tree


def _draw_segments(u: np.ndarray, v: np.ndarray, segments: np.ndarray, chunk: int = 48) -> np.ndarray:
    """Rasterise tapered tubes (max-composited, peak 1) in small windows around each segment.

    Segments are processed in chunks of similar window size: each chunk is one vectorised
    distance computation on a (n, H, W) stack, scattered into the image with ``np.maximum.at``.
    """
    uu, vv = u[0], v[:, 0]
    out = np.zeros((vv.size, uu.size), dtype=np.float32)
    pad = segments[:, 4:6].max(axis=1)
    x0s = np.searchsorted(uu, np.minimum(segments[:, 0], segments[:, 2]) - pad)
    x1s = np.searchsorted(uu, np.maximum(segments[:, 0], segments[:, 2]) + pad)
    y0s = np.searchsorted(vv, np.minimum(segments[:, 1], segments[:, 3]) - pad)
    y1s = np.searchsorted(vv, np.maximum(segments[:, 1], segments[:, 3]) + pad)
    hs, ws = y1s - y0s, x1s - x0s
    keep = np.flatnonzero((hs > 0) & (ws > 0))
    keep = keep[np.argsort(hs[keep] * ws[keep], kind="stable")]
    for start in range(0, keep.size, chunk):
        idx = keep[start:start + chunk]
        height, width = int(hs[idx].max()), int(ws[idx].max())
        rows = y0s[idx, None] + np.arange(height)[None, :]
        cols = x0s[idx, None] + np.arange(width)[None, :]
        row_ok = rows < y1s[idx, None]
        col_ok = cols < x1s[idx, None]
        rows = np.minimum(rows, vv.size - 1)
        cols = np.minimum(cols, uu.size - 1)
        y = vv[rows][:, :, None]
        x = uu[cols][:, None, :]
        p0u, p0v, p1u, p1v, w0, w1 = (segments[idx, k][:, None, None].astype(np.float32) for k in range(6))
        du, dv = p1u - p0u, p1v - p0v
        t = ((x - p0u) * du + (y - p0v) * dv) / np.maximum(du * du + dv * dv, np.float32(1e-12))
        np.clip(t, 0.0, 1.0, out=t)
        dist = np.sqrt((x - p0u - t * du) ** 2 + (y - p0v - t * dv) ** 2)
        w = w0 + (w1 - w0) * t
        tube = np.clip(1.0 - dist / w, 0.0, 1.0) ** 0.7 * np.sqrt(w / np.float32(0.0105))
        tube *= row_ok[:, :, None] & col_ok[:, None, :]
        where = (np.broadcast_to(rows[:, :, None], tube.shape), np.broadcast_to(cols[:, None, :], tube.shape))
        np.maximum.at(out, where, tube)
    return out


def _markings(anat: Anatomy, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Vessel markings in [0, 1] (the patient's vessel tree, drawn in this study's position)."""
    return _draw_segments(u, v, _vessel_tree(anat.texture_key))


def _body_half_width(anat: Anatomy, v: np.ndarray) -> np.ndarray:
    """Half-width of the body outline (neck, sloping shoulders, chest wall) at height ``v``."""
    return 0.1 + (anat.body_half_width - 0.1) * _smoothstep(-0.02, 0.2, v) ** 0.6 - 0.02 * _smoothstep(0.8, 1.0, v)


def _render_anatomy(anat: Anatomy, size: int) -> _Fields:
    """Finding-free attenuation and the layers findings need; local structures use windows."""
    grid = _pixel_grid(size)
    u = (((grid - 0.5 - anat.shift_u) / anat.scale) + 0.5)[None, :].astype(np.float32)
    v = (((grid - 0.5 - anat.shift_v) / anat.scale) + 0.5)[:, None].astype(np.float32)
    uu, vv = u[0], v[:, 0]
    d = np.abs(u - 0.5)
    shape = (size, size)

    # Body outline and soft-tissue thickness.
    half_width = _body_half_width(anat, v)
    thickness = np.sqrt(np.clip(1.0 - (d / half_width) ** 2, 0.0, 1.0))
    body = _smoothstep(half_width + 0.006, half_width - 0.006, d)
    attenuation = (np.float32(0.95 * anat.soft_density) * thickness ** np.float32(0.75)) * body

    # Lungs, each on its half of the image and between the apex and its dome.
    lung_free = np.zeros(shape, dtype=np.float32)
    depth = np.zeros(shape, dtype=np.float32)
    lung_rows = _span(vv, anat.apex - 0.01, max(anat.dome_right, anat.dome_left) + 0.01)
    for side, cols in ((-1, _span(uu, -1.0, 0.5)), (1, _span(uu, 0.5, 2.0))):
        ds = (u[:, cols] - 0.5) * side
        vs = v[lung_rows]
        lung_free[lung_rows, cols] = _lung_mask(anat, ds, vs, side)
        e = np.abs(ds - anat.lung_axis(vs)) / np.maximum(anat.lung_width(vs), 1e-4)
        radial = 0.5 + 0.5 * np.sqrt(np.clip(1.0 - 0.8 * e * e, 0.0, 1.0))
        vertical = (0.75 + 0.25 * _smoothstep(0.1, 0.32, vs)) * (1.0 - 0.12 * _smoothstep(0.5, 0.75, vs))
        depth[lung_rows, cols] = radial * vertical
    r = anat.knob_radius
    kr, kc = _span(vv, 0.29 - r, 0.29 + r), _span(uu, 0.562 - r, 0.562 + r)
    knob = _smoothstep(1.0, 0.85, np.sqrt((u[:, kc] - 0.562) ** 2 + (v[kr] - 0.29) ** 2) / r)
    lung_free[kr, kc] *= 1.0 - knob
    attenuation[kr, kc] += 0.06 * knob

    heart = np.zeros(shape, dtype=np.float32)
    hu0, hv0, hu1, hv1 = _heart_extent(anat, 1.0, 1.0, 0.0, 0.0)
    hr, hc = _span(vv, hv0 - 0.01, hv1 + 0.01), _span(uu, hu0 - 0.01, hu1 + 0.01)
    dome_left_h = anat.dome(np.abs(u[:, hc] - 0.5), +1)
    heart[hr, hc] = _heart_mask(anat, u[:, hc], v[hr]) * _smoothstep(dome_left_h + 0.014, dome_left_h + 0.002, v[hr])

    markings = _markings(anat, u, v)
    lung = lung_free[lung_rows] * (1.0 - heart[lung_rows])
    attenuation[lung_rows] += lung * (MARKINGS * markings[lung_rows] - AIR * depth[lung_rows])
    attenuation[hr, hc] += HEART * heart[hr, hc]

    # Hila.
    for side in (-1, 1):
        cu = 0.5 + side * 0.1
        rr, cc = _span(vv, 0.43 - 0.06, 0.43 + 0.06), _span(uu, cu - 0.04, cu + 0.04)
        blob = _smoothstep(1.0, 0.1, np.sqrt(((u[:, cc] - cu) / 0.04) ** 2 + ((v[rr] - 0.43) / 0.06) ** 2))
        attenuation[rr, cc] += 0.16 * blob * lung_free[rr, cc]

    # Trachea and main bronchi (air in the mediastinum).
    carina = 0.33
    tr, tc = _span(vv, -1.0, carina + 0.1), _span(uu, 0.5 - 0.1, 0.5 + 0.11)
    ut, vt = u[:, tc], v[tr]
    trachea = _smoothstep(0.019, 0.012, np.abs(ut - 0.5 + 0.006 * _bump(vt, 0.2, 0.34)))
    trachea = trachea * _smoothstep(carina + 0.01, carina - 0.01, vt)
    bronchi = np.maximum(
        _smoothstep(0.012, 0.006, _segment_distance(ut, vt, (0.5, carina), (0.5 - 0.075, carina + 0.06))),
        _smoothstep(0.011, 0.005, _segment_distance(ut, vt, (0.5, carina), (0.5 + 0.085, carina + 0.08))),
    )
    attenuation[tr, tc] -= 0.18 * np.maximum(trachea * _smoothstep(0.0, 0.04, vt), bronchi * (1.0 - lung_free[tr, tc]))

    # Spine: vertebral bodies and pedicles.
    sc = _span(uu, 0.5 - 0.045, 0.5 + 0.045)
    ds_ = d[:, sc]
    vertebra = 0.75 + 0.25 * np.cos(2 * np.pi * (v - 0.01) / 0.047)
    pedicles = _smoothstep(0.5, 0.1, np.sqrt(((ds_ - 0.028) / 0.008) ** 2 + ((np.mod(v, 0.047) - 0.02) / 0.012) ** 2))
    spine = 0.16 * _smoothstep(0.042, 0.03, ds_) * vertebra + 0.07 * pedicles * _smoothstep(0.08, 0.15, v)
    attenuation[:, sc] += spine * body[:, sc]

    # Ribs (fading below the domes) and clavicles.
    dome = np.where(u < 0.5, anat.dome(d, -1), anat.dome(d, +1))
    inside = body * _smoothstep(0.0, 0.08, v) * (0.35 + 0.65 * _smoothstep(dome + 0.07, dome, v))
    attenuation += RIB * _posterior_ribs(anat, d, v) * inside
    ar = _span(vv, 0.1, 0.85)
    k_a, dist_a = _rib_coordinate(anat, d, v[ar], anterior=True)
    anterior = _rib_profile(dist_a, anat.rib_thickness * 1.2) * ((k_a >= 0) & (k_a <= 5))
    anterior *= _smoothstep(0.15, 0.24, d) * _smoothstep(anat.body_half_width - 0.02, anat.body_half_width - 0.06, d)
    attenuation[ar] += 0.06 * anterior * inside[ar]
    cr = _span(vv, anat.clavicle_v - 0.09, anat.clavicle_v + 0.03)
    t = np.clip(d - 0.025, 0.0, None)
    clavicle_line = anat.clavicle_v - 0.2 * t + 0.35 * t * t
    clavicle = _rib_profile(v[cr] - clavicle_line, 0.03) * _smoothstep(0.015, 0.035, d) * _smoothstep(0.34, 0.3, d)
    attenuation[cr] += 0.28 * clavicle * body[cr]

    # Below the domes: liver / spleen, and the gastric bubble.
    br = _span(vv, min(anat.dome_right, anat.dome_left) - anat.dome_height - 0.01, 2.0)
    attenuation[br] += 0.08 * _smoothstep(dome, dome + 0.06, v[br]) * body[br]
    if anat.gastric_bubble > 0.3:
        bubble_v = float(anat.dome(np.float32(0.17), +1)) + 0.045
        gr, gc = _span(vv, bubble_v - 0.03, bubble_v + 0.03), _span(uu, 0.66 - 0.05, 0.66 + 0.05)
        ug, vg = u[:, gc], v[gr]
        bubble = _smoothstep(1.0, 0.7, np.sqrt(((ug - 0.66) / 0.045) ** 2 + ((vg - bubble_v) / 0.024) ** 2))
        attenuation[gr, gc] -= 0.2 * anat.gastric_bubble * bubble * _smoothstep(bubble_v - 0.024, bubble_v - 0.01, vg)

    return _Fields(anatomy=anat, size=size, u=u, v=v, lung_free=lung_free, heart=heart, depth=depth,
                   markings=markings, attenuation=attenuation.astype(np.float32))


def _to_image(fields: _Fields, attenuation: np.ndarray, noise_rng: np.random.Generator) -> np.ndarray:
    """Exposure curve, gradient and acquisition noise → uint8."""
    anat = fields.anatomy
    exposed = 1.0 - np.exp(-anat.gain * np.maximum(attenuation, 0.0))
    intensity = anat.offset + 0.93 * exposed ** anat.gamma
    grid = _pixel_grid(fields.size).astype(np.float32)
    ramp = (grid[None, :] - 0.5) * math.cos(anat.gradient_angle) + (grid[:, None] - 0.5) * math.sin(anat.gradient_angle)
    intensity = intensity + anat.gradient_amplitude * ramp
    noise = noise_rng.standard_normal((fields.size, fields.size), dtype=np.float32)
    intensity = intensity + anat.noise_sigma * (0.6 + 0.6 * intensity) * noise
    return np.clip(np.rint(intensity * 255.0), 0, 255).astype(np.uint8)


def _rib_visibility(anat: Anatomy, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Where posterior ribs show (inside the body, fading below the domes); same in base and findings."""
    d = np.abs(u - 0.5)
    half_width = _body_half_width(anat, v)
    body = _smoothstep(half_width + 0.006, half_width - 0.006, d)
    dome = np.where(u < 0.5, anat.dome(d, -1), anat.dome(d, +1))
    return body * _smoothstep(0.0, 0.08, v) * (0.35 + 0.65 * _smoothstep(dome + 0.07, dome, v))

