"""Reference models: three tiny report generators with *known* behaviour on the synthetic data.

shovir measures shortcuts with flip rates and F1 deltas. To show that those metrics detect what
they should, the suite ships three models whose visual reliance is known by construction and runs
them on :mod:`shovir.data.synthetic` phantoms (a known-answer calibration). All three write their
reports with the phantom's own report templates (:func:`shovir.data.phantom.write_report`), so the
rule-based labeler of :mod:`shovir.labelers` reads back exactly the findings a model meant to
report. They need only numpy and pillow, ignore the prompt, return one :class:`Generation` per
message in order, and are deterministic: a report depends on the image's pixels and nothing else
(not on the batch, the process or the call order).

``reference-grounded`` — :class:`GroundedReference`
    A patch detector (:class:`PatchDetector`) scores every 8×8-pixel cell of the image for each of
    the 12 localisable findings and reports a finding when its best cell passes a threshold.

    * *Where its evidence comes from.* A cell's score is computed from a 32×32-pixel window
      around the cell (the network's receptive field: an 8×8-pixel stem with stride 4, then two
      3×3 convolutions on the 80×80 and 40×40 grids) plus the cell's position in the image. It was
      trained with *box supervision*: a cell is a positive example of class c exactly where
      rendering the phantom with and without c's findings changes the cell (mean |Δ| ≥ 3 grey
      levels), and a negative example where it does not change it (< 0.75). It therefore learns
      the appearance of each finding *in its own region* — never a co-finding, which changes other
      cells.
    * *Why matched noise erases it.* Training images were occluded with the same matched noise
      the interventions use (:func:`shovir.perturb.occlude`; the paper's model and, for 20 %, the
      authors' blurred variant), in random boxes and in the findings' own boxes, at p in
      {0.2, …, 1}; the evidence of every occluded block was scaled by max(0, 1 − 2·p·covered
      fraction) before labelling, so a finding under noise of half strength or more is a
      negative example. Besides the learned stem, the detector gets the block energy of pixel
      differences (:func:`difference_energy`), which separates white noise from anatomy by more
      than two orders of magnitude, so a noise patch does not look like a finding. Thresholds
      were fitted with occluded findings counted as false positives (see the fit script).

    Known behaviour: OCO (noise in the target's boxes) removes the target's only evidence, so the
    target is lost (high FR_OCO); DOCO and RO leave every cell of the target untouched and move
    its score only through the few cells whose receptive field reaches across a box edge, so the
    target stays (FR_DOCO ≈ FR_RO ≈ 0); a full-noise image yields a normal report. The loss grows
    with p: noise of strength p scales a finding's contrast by 1 − p while adding p-scaled noise.
    Pneumonia has no box: the model only hedges it ("Findings may represent pneumonia",
    uncertain) when it sees a consolidation, as the phantom's reports often do; it never states
    it as positive. A best score between the class's *uncertain* and *positive* thresholds is
    reported with "possible"/"questionable" (code 3), like the subtle renderings of the phantom.
    Fractures (a rib displaced by about 5 pixels) are beyond this detector: the fit found no
    threshold with precision ≥ 0.5, so the shipped model never reports a fracture (its threshold
    is ``null``) and Fracture has no flip rate.

    As shipped, on the demo data (seed 0, p = 1, 402 (image, class) rows of 151 images): FR_OCO
    0.959 (305/318), FR_DOCO 0.013 (4/318), micro F1-14 0.863 and F1-5 0.936 on clean images
    (0.879 / 0.936 on all 200 images), ΔFN +0.84; FR_OCO is 0.07, 0.37, 0.87, 0.95 at p = 0.2, 0.4,
    0.6, 0.8 while FR_DOCO stays ≤ 0.013. About 2 ms per 320×320 image on one core.

``reference-prior`` — :class:`PriorReference`
    Ignores the image. Every message gets the same report, stating the findings chosen by
    :func:`prior_findings`: the k most prevalent classes of the phantom's exact scenario mixture
    (:func:`shovir.data.phantom.marginal_probabilities`), with k maximising the *expected micro
    F1-14* of a constant report. No class is present in more than 27 % of studies, so the
    per-class Bayes decision would be a normal report, whose only positive class is No Finding
    (expected F1-14 ≈ 0.12, and no flip rate is even defined: nothing is ever detected). The
    F1-optimal constant report (nine findings, expected F1-14 ≈ 0.29) is the stronger image-blind
    competitor, the report a model tuned on F1 without looking would converge to, and it gives
    the flip rates non-empty denominators. Known behaviour: ΔFN = 0 and every
    flip rate is exactly 0, because the output never changes (as shipped, on the demo data:
    0/299 flips under OCO and DOCO, micro F1-14 0.340 on the 151 images with boxes, 0.266 on all
    200).

``reference-context`` — :class:`ContextReference`
    Sees every class *except* the context-derivable ones (:data:`shovir.data.phantom.CONTEXT_DERIVABLE`:
    Edema, Pneumonia, Atelectasis) with the same detector and thresholds as the grounded model,
    and reports each context-derivable class from its co-findings instead of from its own box:
    Edema when Cardiomegaly *and* Pleural Effusion are seen, Pneumonia when Consolidation is seen,
    Atelectasis when Support Devices are seen (P(class | predictors) = 0.78, 0.70 and 0.63 under the
    phantom's mixture: all more likely than not). The class is positive when every predictor is
    positive, uncertain when every predictor is seen but some only as "possible". Known
    behaviour: DOCO occludes the predictors (boxes of other classes) while the class's own box
    stays visible, so Edema and Atelectasis are lost under DOCO (high FR_DOCO on the
    context-derived classes) and kept under OCO of their own boxes. As shipped, on the demo
    data: FR_DOCO 1.000 (41/41) and FR_OCO 0.000 (0/41) on Edema + Atelectasis; the directly
    seen classes behave as in the grounded model.

Resources
    ``resources/reference_detector.npz`` holds the detector's weights (float32 arrays, loaded with
    ``allow_pickle=False``) and ``resources/reference_detector.json`` its thresholds, training
    provenance and the SHA-256 of the weights; ``python -m shovir.calibration.fit`` reproduces
    both from phantom seeds 1000 (training) and 1001 (thresholds), never the evaluation seed 0.

>>> from shovir.labelers import get_labeler
>>> noise = Image.fromarray(np.random.default_rng(0).integers(0, 256, (320, 320), dtype=np.uint8))
>>> text = GroundedReference().generate([Message(images=[noise])])[0].text   # nothing to see
>>> int(get_labeler("rule")([text])[0][L.class_index("No Finding")])
1
>>> prior = PriorReference()
>>> prior.generate([Message(images=[noise])])[0].text == prior.text       # never looks
True
"""

from __future__ import annotations

import functools
import hashlib
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from PIL import Image

from shovir import labels as L
from shovir.data import phantom
from shovir.models.base import Generation, Message, ModelAdapter

__all__ = [
    "REFERENCE_VERSION",
    "INPUT_SIZE",
    "CELL",
    "DETECTOR_WEIGHTS",
    "DETECTOR_CARD",
    "Detection",
    "PatchDetector",
    "to_pixels",
    "difference_energy",
    "compose_report",
    "prior_findings",
    "context_rules",
    "GroundedReference",
    "PriorReference",
    "ContextReference",
]

REFERENCE_VERSION = "1.0.0"
"""Version of the reference models' behaviour (part of every :meth:`config`)."""

INPUT_SIZE = 320
"""Side the detector works at; other images are resized (bilinear) to it."""

BLOCK = 4
"""Side in pixels of the blocks of the stem and of :func:`difference_energy`."""

CELL = 8
"""Side in pixels of an output cell (the detector scores a 40×40 grid of cells)."""

_RESOURCES = Path(__file__).with_name("resources")
DETECTOR_WEIGHTS = _RESOURCES / "reference_detector.npz"
"""Weights of :class:`PatchDetector` (written by ``python -m shovir.calibration.fit``)."""
DETECTOR_CARD = _RESOURCES / "reference_detector.json"
"""Thresholds and provenance of :class:`PatchDetector`."""

_DETECTED_CLASSES: tuple[str, ...] = phantom.LOCALIZED_FINDINGS
_NEVER_HEDGED = ("Support Devices",)  # the phantom's templates have no uncertain device sentence
_ENERGY_EPS = 1e-4
_MAX_GEMM = 1 << 19  # multiply-adds per BLAS call: small enough that OpenBLAS stays on one thread


# ----------------------------------------------------------------------------------------------
# Pixels and features
# ----------------------------------------------------------------------------------------------


def to_pixels(image: Image.Image | np.ndarray, size: int = INPUT_SIZE) -> np.ndarray:
    """A ``(size, size)`` uint8 grayscale array from a PIL image or a 2-D array.

    Colour images are converted to luminance, 16-bit and float images are scaled by their
    maximum (the synthetic data are 8-bit), and other sizes are resized bilinearly.

    >>> to_pixels(Image.new("L", (64, 32), 7)).shape
    (320, 320)
    >>> int(to_pixels(np.full((320, 320), 1000, np.uint16))[0, 0])
    255
    """
    if isinstance(image, np.ndarray):
        array = image
    else:
        if image.mode in ("L", "I;16", "I;16B", "I;16L", "I", "F"):
            array = np.asarray(image)
        else:
            array = np.asarray(image.convert("L"))
    if array.ndim == 3:
        array = array[..., :3].mean(axis=2) if array.shape[2] >= 3 else array[..., 0]
    if array.ndim != 2:
        raise ValueError(f"image must be 2-D grayscale (or colour), got shape {array.shape}")
    if array.dtype != np.uint8:
        values = array.astype(np.float64)
        top = float(values.max()) if values.size else 0.0
        array = np.rint(np.clip(values * (255.0 / top), 0, 255) if top > 0 else np.zeros_like(values)).astype(np.uint8)
    if array.shape != (size, size):
        array = np.asarray(Image.fromarray(array).resize((size, size), Image.BILINEAR))
    return np.ascontiguousarray(array)


def _block_sum(plane: np.ndarray) -> np.ndarray:
    """Sums over the 4×4 blocks of a 2-D float32 array (strided adds: much faster than reshape-sum)."""
    columns = plane[:, 0::BLOCK] + plane[:, 1::BLOCK]
    columns += plane[:, 2::BLOCK]
    columns += plane[:, 3::BLOCK]
    blocks = columns[0::BLOCK] + columns[1::BLOCK]
    blocks += columns[2::BLOCK]
    blocks += columns[3::BLOCK]
    return blocks


def difference_energy(x: np.ndarray) -> np.ndarray:
    """Log block energy of neighbour differences, scaled to about [-1.5, 2]: the noise detector.

    ``x`` is a float32 image in [0, 1] whose sides are multiples of 4; the result has one value
    per 4×4 block: ``(log(mean(dx² + dy²) + 1e-4) + 6) / 2``, with ``dx``/``dy`` the differences
    to the right and lower neighbours (0 past the last column/row). Smooth anatomy with its
    acquisition noise stays below about -0.4; matched white noise (tens of grey levels) is near 1.

    >>> flat = np.full((8, 8), 0.5, np.float32)
    >>> noisy = np.random.default_rng(0).random((8, 8)).astype(np.float32)
    >>> float(difference_energy(flat).max()) < -0.6 < 0.5 < float(difference_energy(noisy).min())
    True
    """
    energy = np.empty_like(x)
    np.subtract(x[:, 1:], x[:, :-1], out=energy[:, :-1])
    energy[:, -1] = 0.0
    np.square(energy, out=energy)
    vertical = np.subtract(x[1:], x[:-1])
    np.square(vertical, out=vertical)
    energy[:-1] += vertical
    mean = _block_sum(energy)
    mean *= np.float32(1.0 / (BLOCK * BLOCK))
    mean += np.float32(_ENERGY_EPS)
    out = np.log(mean)
    out += np.float32(6.0)
    out *= np.float32(0.5)
    return out


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in row chunks small enough for single-threaded BLAS (multi-threaded OpenBLAS on
    busy cores is ten times slower at these sizes). Each row's result does not depend on the
    chunking, nor on the other rows."""
    rows = max(1, _MAX_GEMM // max(1, a.shape[1] * b.shape[1]))
    if a.shape[0] <= rows:
        return a @ b
    out = np.empty((a.shape[0], b.shape[1]), dtype=np.result_type(a, b))
    for start in range(0, a.shape[0], rows):
        np.matmul(a[start:start + rows], b, out=out[start:start + rows])
    return out


def _conv3x3(x: np.ndarray, weight: np.ndarray, stride: int = 1) -> np.ndarray:
    """3×3 convolution with zero padding 1 (PyTorch semantics) of an (H, W, C) map; ``weight``
    is laid out as (3·3·C, out) in (row, column, channel) order. Returns (H', W', out)."""
    h, w, c = x.shape
    padded = np.zeros((h + 2, w + 2, c), np.float32)
    padded[1:-1, 1:-1] = x
    ho, wo = (h - 1) // stride + 1, (w - 1) // stride + 1
    columns = np.empty((ho, wo, 9, c), np.float32)
    for dy in range(3):
        for dx in range(3):
            columns[:, :, dy * 3 + dx] = padded[dy:dy + stride * ho:stride, dx:dx + stride * wo:stride]
    return _matmul(columns.reshape(ho * wo, 9 * c), weight).reshape(ho, wo, -1)


def _kernel_matrix(weight: np.ndarray) -> np.ndarray:
    """PyTorch (out, C, 3, 3) → (3·3·C, out) for :func:`_conv3x3`."""
    return np.ascontiguousarray(weight.transpose(2, 3, 1, 0).reshape(-1, weight.shape[0]))


# ----------------------------------------------------------------------------------------------
# The patch detector
# ----------------------------------------------------------------------------------------------


def _threshold(value: float | None) -> float:
    return np.inf if value is None else float(value)


@dataclass(frozen=True)
class Detection:
    """The detector's verdict on one class for one image.

    Attributes:
        name: CheXpert class.
        score: best cell logit.
        code: :data:`shovir.labels.POSITIVE`, :data:`~shovir.labels.UNCERTAIN` or
            :data:`~shovir.labels.BLANK` (not seen).
        row, col: the best cell (0..39, top-left origin; column < 20 is the patient's right).
        sides: the sides (-1 patient right, +1 patient left) whose best cell reaches the class's
            code, best side first.
    """

    name: str
    score: float
    code: int
    row: int
    col: int
    sides: tuple[int, ...] = ()

    @property
    def seen(self) -> bool:
        """Reported as positive or uncertain."""
        return self.code in (L.POSITIVE, L.UNCERTAIN)


class PatchDetector:
    """Per-cell scores of the 12 localisable findings (see the module docstring).

    Architecture (inputs 320×320): stem convolution 8×8 stride 4 on ``pixels/255 − 0.5`` (80×80
    grid) and ReLU; concatenated with :func:`difference_energy` and two coordinate channels
    (row and column in [-1, 1]); convolution 3×3 stride 2 (40×40) and ReLU; convolution 3×3 and
    ReLU; a 1×1 convolution to one logit per class. The image score of a class is its best cell.

    Args:
        weights: ``.npz`` with ``<layer>.weight`` / ``<layer>.bias`` in PyTorch layout.
        card: ``.json`` with ``classes``, ``positive_threshold`` and ``uncertain_threshold``.
    """

    def __init__(self, weights: str | Path = DETECTOR_WEIGHTS, card: str | Path = DETECTOR_CARD) -> None:
        weights, card = Path(weights), Path(card)
        if not weights.is_file() or not card.is_file():
            raise FileNotFoundError(
                f"reference detector resources missing ({weights}, {card}); run python -m shovir.calibration.fit")
        raw = weights.read_bytes()
        self.sha256 = hashlib.sha256(raw).hexdigest()
        self.card: dict[str, Any] = json.loads(card.read_text())
        if self.card.get("weights_sha256") not in (None, self.sha256):
            raise ValueError(f"{weights} does not match {card}: SHA-256 {self.sha256} != {self.card['weights_sha256']}")
        self.classes: tuple[str, ...] = tuple(self.card["classes"])
        if self.classes != _DETECTED_CLASSES:
            raise ValueError(f"{card}: classes must be {list(_DETECTED_CLASSES)}, got {list(self.classes)}")
        # a null threshold means "never reported" (the fit found no threshold with precision >= 0.5)
        self.positive_threshold = np.array([_threshold(self.card["positive_threshold"][c]) for c in self.classes], np.float32)
        self.uncertain_threshold = np.array([_threshold(self.card["uncertain_threshold"][c]) for c in self.classes], np.float32)
        with np.load(weights, allow_pickle=False) as data:
            arrays = {key: np.asarray(data[key], dtype=np.float32) for key in data.files}
        self._layers = self._prepare(arrays)

    @staticmethod
    @functools.lru_cache(maxsize=4)
    def _cached(weights: str, card: str) -> "PatchDetector":
        return PatchDetector(weights, card)

    @classmethod
    def default(cls) -> "PatchDetector":
        """The shipped detector, loaded once per process."""
        return cls._cached(str(DETECTOR_WEIGHTS), str(DETECTOR_CARD))

    @staticmethod
    def _prepare(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
        stem = arrays["stem.weight"]
        if stem.ndim != 4 or stem.shape[1:] != (1, 8, 8):
            raise ValueError(f"stem.weight must have shape (n, 1, 8, 8), got {stem.shape}")
        n_stem = stem.shape[0]
        w2 = arrays["conv2.weight"]
        if w2.shape[1:] != (n_stem + 3, 3, 3):
            raise ValueError(f"conv2.weight must have shape (n, {n_stem + 3}, 3, 3), got {w2.shape}")
        grid = np.linspace(-1.0, 1.0, INPUT_SIZE // BLOCK, dtype=np.float32)
        coords = np.stack(np.meshgrid(grid, grid, indexing="ij"), axis=-1)  # (80, 80, 2): row, column
        # the coordinate channels never change: their share of conv2 is a constant map
        coord_bias = _conv3x3(coords, _kernel_matrix(w2[:, n_stem + 1:]), stride=2) + arrays["conv2.bias"]
        body = []
        for name in ("conv3", "conv4"):
            if f"{name}.weight" in arrays:
                body.append((_kernel_matrix(arrays[f"{name}.weight"]), arrays[f"{name}.bias"]))
        head = arrays["head.weight"]
        if head.shape[0] != len(_DETECTED_CLASSES):
            raise ValueError(f"head.weight must have {len(_DETECTED_CLASSES)} outputs, got {head.shape[0]}")
        return {
            "stem": (np.ascontiguousarray(stem.reshape(n_stem, 64).T), arrays["stem.bias"]),
            "conv2": (_kernel_matrix(w2[:, : n_stem + 1]), np.ascontiguousarray(coord_bias, np.float32)),
            "body": body,
            "head": (np.ascontiguousarray(head.reshape(head.shape[0], -1).T), arrays["head.bias"]),
        }

    def logits(self, pixels: np.ndarray) -> np.ndarray:
        """Cell logits, shape (40, 40, 12) in phantom class order, of a (320, 320) uint8 image.

        >>> detector = PatchDetector.default()
        >>> detector.logits(np.zeros((320, 320), np.uint8)).shape
        (40, 40, 12)
        """
        if pixels.shape != (INPUT_SIZE, INPUT_SIZE):
            raise ValueError(f"pixels must have shape ({INPUT_SIZE}, {INPUT_SIZE}), got {pixels.shape}; use to_pixels()")
        x = pixels.astype(np.float32)
        x *= np.float32(1.0 / 255.0)
        side = INPUT_SIZE // BLOCK
        padded = np.zeros((INPUT_SIZE + 4, INPUT_SIZE + 4), np.float32)
        np.subtract(x, np.float32(0.5), out=padded[2:-2, 2:-2])
        windows = sliding_window_view(padded, (8, 8))[::BLOCK, ::BLOCK].reshape(side * side, 64)
        weight, bias = self._layers["stem"]
        stem = _matmul(windows, weight)
        stem += bias
        np.maximum(stem, 0, out=stem)
        features = np.empty((side, side, stem.shape[1] + 1), np.float32)
        features[:, :, :-1] = stem.reshape(side, side, -1)
        features[:, :, -1] = difference_energy(x)
        weight, coord_bias = self._layers["conv2"]
        hidden = _conv3x3(features, weight, stride=2)
        hidden += coord_bias
        np.maximum(hidden, 0, out=hidden)
        for weight, bias in self._layers["body"]:
            hidden = _conv3x3(hidden, weight)
            hidden += bias
            np.maximum(hidden, 0, out=hidden)
        weight, bias = self._layers["head"]
        out = _matmul(hidden.reshape(-1, hidden.shape[2]), weight)
        out += bias
        return out.reshape(hidden.shape[0], hidden.shape[1], -1)

    def detect(self, image: Image.Image | np.ndarray) -> dict[str, Detection]:
        """One :class:`Detection` per localisable class (phantom order)."""
        maps = self.logits(to_pixels(image))
        rows, cols, k = maps.shape
        flat = maps.reshape(rows * cols, k)
        best = flat.argmax(axis=0)
        half = cols // 2
        right = maps[:, :half].reshape(-1, k).max(axis=0)  # image left = patient right
        left = maps[:, half:].reshape(-1, k).max(axis=0)
        out: dict[str, Detection] = {}
        for j, name in enumerate(self.classes):
            score = float(flat[best[j], j])
            code = L.BLANK
            if score >= self.positive_threshold[j]:
                code = L.POSITIVE
            elif score >= self.uncertain_threshold[j] and name not in _NEVER_HEDGED:
                code = L.UNCERTAIN
            row, col = divmod(int(best[j]), cols)
            bar = self.positive_threshold[j] if code == L.POSITIVE else self.uncertain_threshold[j]
            by_side = sorted(((float(right[j]), -1), (float(left[j]), 1)), reverse=True)
            sides = tuple(s for value, s in by_side if code != L.BLANK and value >= bar)
            out[name] = Detection(name, score, code, row, col, sides)
        return out

    def config(self) -> dict[str, Any]:
        """What determines the detector's outputs (``None``: never reported)."""
        def plain(values: np.ndarray) -> dict[str, float | None]:
            return {c: (float(v) if np.isfinite(v) else None) for c, v in zip(self.classes, values)}

        return {"weights_sha256": self.sha256, "positive_threshold": plain(self.positive_threshold),
                "uncertain_threshold": plain(self.uncertain_threshold)}


# ----------------------------------------------------------------------------------------------
# Reports
# ----------------------------------------------------------------------------------------------


def _ordinal_rib(v: float) -> int:
    """Rib number (3..11) whose posterior arc crosses height ``v`` in the lateral lung (inverse of
    the phantom's rib layout with its mean spacing)."""
    k = (v - 0.15) / 0.06
    return int(min(11, max(3, round(k) + 2)))


def _specs(detection: Detection) -> list[phantom.FindingSpec]:
    """Finding specifications carrying what the report templates need (side, zone, rib, kind)."""
    u = (detection.col + 0.5) * CELL / INPUT_SIZE
    v = (detection.row + 0.5) * CELL / INPUT_SIZE
    side = -1 if u < 0.5 else 1
    strength = phantom.SUBTLE_STRENGTH if detection.code == L.UNCERTAIN else 1.0
    name = detection.name

    def spec(kind: str, spec_side: int = side, **params: Any) -> phantom.FindingSpec:
        return phantom.FindingSpec(name, kind, spec_side, (u, v, u, v), "", strength, {"v": v, **params})

    if name == "Support Devices":
        kind = "ett" if abs(u - 0.5) < 0.06 else ("pacemaker" if side == 1 else "port")
        return [spec(kind)]
    if name == "Pleural Effusion":
        return [spec("effusion", s, height=0.07) for s in (detection.sides or (side,))]
    if name == "Pneumothorax":
        return [spec("pneumothorax", gap=0.03)]
    if name == "Lung Lesion":
        return [spec("nodule", mass=False, size_cm=1.5)]
    if name == "Fracture":
        return [spec("fracture", number=_ordinal_rib(v))]
    kinds = {"Cardiomegaly": "heart", "Enlarged Cardiomediastinum": "mediastinum", "Lung Opacity": "opacity",
             "Edema": "edema", "Consolidation": "consolidation", "Atelectasis": "plate", "Pleural Other": "thickening"}
    return [spec(kinds[name], 0 if name in ("Cardiomegaly", "Enlarged Cardiomediastinum") else side)]


def compose_report(codes: Mapping[str, int], detections: Mapping[str, Detection] | None = None) -> str:
    """A report stating ``codes`` (class → 1 positive or 3 uncertain, Support Devices positive
    only; other classes unstated or negated) with the phantom's templates, sides and zones taken
    from ``detections``.

    Wording is drawn from a generator seeded by the CRC-32 of the codes, so the same findings give
    the same text. The rule-based labeler reads the codes back:

    >>> from shovir.labelers import get_labeler
    >>> text = compose_report({"Cardiomegaly": 1, "Pleural Effusion": 3})
    >>> labels = get_labeler("rule")([text])[0]
    >>> int(labels[L.class_index("Cardiomegaly")]), int(labels[L.class_index("Pleural Effusion")])
    (1, 3)
    >>> compose_report({}) == compose_report({})
    True
    """
    present = [False] * L.NUM_CLASSES
    uncertain = [False] * L.NUM_CLASSES
    for name, code in codes.items():
        c = L.class_index(name)
        if c == L.class_index("No Finding"):
            raise ValueError("No Finding follows from the other classes; do not pass it")
        if code not in (L.POSITIVE, L.UNCERTAIN):
            continue
        if code == L.UNCERTAIN and name in _NEVER_HEDGED:
            raise ValueError(f"{name} cannot be reported as uncertain: the report templates state devices plainly")
        present[c] = True
        uncertain[c] = code == L.UNCERTAIN
    specs: list[phantom.FindingSpec] = []
    for name, detection in (detections or {}).items():
        if present[L.class_index(name)]:
            specs.extend(_specs(detection))
    key = json.dumps(sorted((name, int(code)) for name, code in codes.items() if code in (L.POSITIVE, L.UNCERTAIN)))
    rng = np.random.default_rng(zlib.crc32(key.encode("utf-8")))
    text, _ = phantom.write_report(present, uncertain, specs, rng)
    return text


def _images_of(messages: Sequence[Message], name: str) -> list[Any]:
    images = []
    for i, message in enumerate(messages):
        if not message.images:
            raise ValueError(f"{name}: message {i} has no image; the reference models read images[0]")
        images.append(message.images[0])
    return images


# ----------------------------------------------------------------------------------------------
# The models
# ----------------------------------------------------------------------------------------------


class GroundedReference(ModelAdapter):
    """Reports each localisable finding from its own region only (see the module docstring).

    Args:
        detector: a :class:`PatchDetector`; default: the shipped one.
    """

    name = "reference-grounded"
    batch_size = 64

    def __init__(self, detector: PatchDetector | None = None) -> None:
        self.detector = detector or PatchDetector.default()

    def codes(self, detections: Mapping[str, Detection]) -> dict[str, int]:
        """Report codes from the detections: every class as seen, Pneumonia hedged (uncertain) when
        a consolidation is seen."""
        codes = {name: d.code for name, d in detections.items() if d.seen}
        if "Consolidation" in codes:
            codes["Pneumonia"] = L.UNCERTAIN
        return codes

    def report(self, image: Image.Image | np.ndarray) -> str:
        """The report of one image."""
        detections = self.detector.detect(image)
        return compose_report(self.codes(detections), detections)

    def generate(self, messages: Sequence[Message]) -> list[Generation]:
        """One report per message, from ``images[0]``; the prompt is ignored."""
        return self._check_batch(messages, [Generation(self.report(image)) for image in _images_of(messages, self.name)])

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "version": REFERENCE_VERSION, "default_prompt": None, "detector": self.detector.config()}


@functools.lru_cache(maxsize=1)
def prior_findings() -> tuple[str, ...]:
    """The findings of the constant report with the highest expected micro F1-14.

    Classes are ranked by their exact prevalence π under the phantom's scenario mixture; the
    report of the top k states those k classes (and No Finding when none of them is a pathology).
    Its expected micro F1-14, as a ratio of expectations, is ``2·TP / (#stated + Σ π)`` with
    ``TP = Σ π`` over the stated classes (π of all 14 classes in the denominator); the smallest k
    with the highest value wins. Equivalently, a class is stated while its prevalence exceeds half
    the F1 reached so far: k = 9, every class with π > 0.146 (F1-14 ≈ 0.292, against 0.124 for a
    normal report).

    >>> prior_findings()[:3]
    ('Pleural Effusion', 'Cardiomegaly', 'Consolidation')
    >>> len(prior_findings()), "Pneumothorax" in prior_findings()
    (9, False)
    """
    prevalence = phantom.marginal_probabilities()
    ranked = sorted(L.LOCALIZABLE, key=lambda c: (-prevalence[c], L.class_index(c)))
    total = sum(prevalence.values())
    best_k, best_f1 = 0, -1.0
    for k in range(len(ranked) + 1):
        stated = ranked[:k]
        normal = all(c == "Support Devices" for c in stated)
        tp = sum(prevalence[c] for c in stated) + (prevalence["No Finding"] if normal else 0.0)
        f1 = 2 * tp / (k + int(normal) + total)
        if f1 > best_f1 + 1e-12:
            best_k, best_f1 = k, f1
    return tuple(ranked[:best_k])


class PriorReference(ModelAdapter):
    """Ignores the image: the same report, of :func:`prior_findings`, for every message."""

    name = "reference-prior"
    batch_size = 256

    def __init__(self) -> None:
        self.findings = prior_findings()
        self.text = compose_report({name: L.POSITIVE for name in self.findings})

    def generate(self, messages: Sequence[Message]) -> list[Generation]:
        """The fixed report, once per message (images are not even looked at)."""
        return self._check_batch(messages, [Generation(self.text) for _ in messages])

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "version": REFERENCE_VERSION, "default_prompt": None, "findings": list(self.findings)}


def context_rules() -> dict[str, tuple[str, ...]]:
    """Context-derived class → the co-findings it is inferred from (all must be seen), with the
    phantom's conditional probability of the class given them.

    >>> {c: round(phantom.conditional_probability(c, p), 2) for c, p in context_rules().items()}
    {'Edema': 0.78, 'Pneumonia': 0.7, 'Atelectasis': 0.63}
    """
    return {name: tuple(predictors) for name, predictors in phantom.CONTEXT_DERIVABLE.items()}


class ContextReference(ModelAdapter):
    """Sees the anchor classes directly and infers the context-derivable ones from them (see the
    module docstring).

    Args:
        detector: a :class:`PatchDetector`; default: the shipped one.
    """

    name = "reference-context"
    batch_size = 64

    def __init__(self, detector: PatchDetector | None = None) -> None:
        self.detector = detector or PatchDetector.default()
        self.rules = context_rules()
        self.seen_classes = tuple(c for c in _DETECTED_CLASSES if c not in self.rules)

    def codes(self, detections: Mapping[str, Detection]) -> dict[str, int]:
        """Seen classes as detected; each context-derived class positive when all its predictors are
        positive, uncertain when all are seen but some only as uncertain."""
        codes = {name: detections[name].code for name in self.seen_classes if detections[name].seen}
        for name, predictors in self.rules.items():
            found = [codes.get(p, L.BLANK) for p in predictors]
            if all(code == L.POSITIVE for code in found):
                codes[name] = L.POSITIVE
            elif all(code in (L.POSITIVE, L.UNCERTAIN) for code in found):
                codes[name] = L.UNCERTAIN
        return codes

    def report(self, image: Image.Image | np.ndarray) -> str:
        """The report of one image."""
        detections = self.detector.detect(image)
        return compose_report(self.codes(detections), {n: d for n, d in detections.items() if n in self.seen_classes})

    def generate(self, messages: Sequence[Message]) -> list[Generation]:
        """One report per message, from ``images[0]``; the prompt is ignored."""
        return self._check_batch(messages, [Generation(self.report(image)) for image in _images_of(messages, self.name)])

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "version": REFERENCE_VERSION, "default_prompt": None,
                "detector": self.detector.config(), "seen": list(self.seen_classes),
                "rules": {k: list(v) for k, v in self.rules.items()}}
