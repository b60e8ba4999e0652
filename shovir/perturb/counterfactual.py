"""Whole-image counterfactuals of the VQA protocols.

* :func:`blank` — a uniform gray image: 224×224 RGB [128, 128, 128] as Beyond Accuracy §3.3
  specifies, or of the input's size and mode on request.
* :func:`shuffle_pairs` — each image replaced by another sample's image through a deterministic
  derangement, so no sample ever keeps its own image (Beyond Accuracy §3.3, "shuffled").
* :func:`swap_pairs` — each study replaced by a *different study of the same patient* whose
  positive-finding set differs (ModaLens §2), falling back to another patient when the patient
  has no such study, with an optional SSIM guard that rejects near-identical images.
* :class:`ImageSubstitution` — the ``datasets`` transform that applies a shuffle or swap pairing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np
from PIL import Image

from shovir import labels as L
from shovir.perturb._image import ImageLike, to_canvas
from shovir.perturb._rng import sample_rng

__all__ = ["PAPER_BLANK_SIZE", "blank", "shuffle_pairs", "SwapChoice", "swap_pairs", "structural_similarity", "ImageSubstitution"]

BLANK_GRAY_8BIT = 128
PAPER_BLANK_SIZE = (224, 224)
"""Width and height of the blank image of Beyond Accuracy §3.3 (Algorithm 1: GrayImage(224×224))."""


def blank(image: ImageLike, size: tuple[int, int] | None = PAPER_BLANK_SIZE) -> ImageLike:
    """The *blank* counterfactual of Beyond Accuracy §3.3: a uniform gray image, 128 on the 8-bit
    scale.

    By default it is the paper's image, 224×224 RGB [128, 128, 128], whatever the input: a
    dynamic-resolution model would otherwise see as many visual tokens as the real image gives
    it, which is not the condition the paper measured. ``size=None`` keeps the input's size, dtype
    and mode instead (32896 = 128·257 for 16-bit data, 128/255 for float images in [0, 1]). A
    numpy input gives a 2-D gray plane (numpy images here are single-channel planes).

    >>> blank(Image.new("L", (1000, 800))).size, blank(Image.new("L", (1000, 800))).getpixel((0, 0))
    ((224, 224), (128, 128, 128))
    >>> blank(np.zeros((2, 3), np.uint16), size=None).tolist()
    [[32896, 32896, 32896], [32896, 32896, 32896]]
    >>> blank(Image.new("RGB", (2, 2)), size=None).getpixel((0, 0))
    (128, 128, 128)
    """
    canvas = to_canvas(image)
    if size is not None:
        width, height = _check_size(size)
        if canvas.pil_mode is not None:
            return Image.new("RGB", (width, height), (BLANK_GRAY_8BIT,) * 3)
        return np.full((height, width), _gray_value(canvas.plane), dtype=canvas.plane.dtype)
    if canvas.pil_mode is not None and canvas.pil_mode not in ("L", "I;16", "I", "F"):
        source = canvas.source
        return Image.new(source.mode, source.size, (BLANK_GRAY_8BIT,) * len(source.getbands()))
    plane = canvas.plane
    return canvas.restore(np.full(plane.shape, _gray_value(plane), dtype=plane.dtype))


def _gray_value(plane: np.ndarray) -> float:
    if plane.dtype == np.uint8:
        return BLANK_GRAY_8BIT
    if plane.dtype.kind in "iu":
        return BLANK_GRAY_8BIT * 257
    return BLANK_GRAY_8BIT / 255 if plane.min() >= 0 and plane.max() <= 1 else BLANK_GRAY_8BIT


def _check_size(size: Any) -> tuple[int, int]:
    if (not isinstance(size, (tuple, list)) or len(size) != 2
            or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0 for v in size)):
        raise ValueError(f"size must be (width, height), two positive integers, or None for the input's size; got {size!r}")
    return int(size[0]), int(size[1])


def shuffle_pairs(image_ids: Sequence[str], seed: int = 0) -> dict[str, str]:
    """A deterministic derangement of the distinct ``image_ids``: ``{image_id: donor_image_id}``,
    never an image's own id.

    Sattolo's algorithm on the sorted distinct ids draws a uniformly random single cycle, so the
    pairing depends only on the set of ids and the seed, not on the dataset order, and several
    rows that share an image (several questions about it) all receive the same other image.

    >>> pairs = shuffle_pairs(["c", "a", "b", "a"], seed=1)
    >>> sorted(pairs), all(k != v for k, v in pairs.items()), sorted(pairs.values())
    (['a', 'b', 'c'], True, ['a', 'b', 'c'])
    """
    ids = sorted({str(i) for i in image_ids})
    if len(ids) < 2:
        raise ValueError(f"image_ids: shuffling needs at least 2 distinct images, got {len(ids)}")
    rng = sample_rng(seed, "", "shuffle")
    order = list(ids)
    for i in range(len(order) - 1, 0, -1):
        j = int(rng.integers(0, i))  # j < i: Sattolo, one cycle, no fixed point
        order[i], order[j] = order[j], order[i]
    return dict(zip(ids, order))


@dataclass(frozen=True)
class SwapChoice:
    """The donor of a swapped image and how it was found."""

    donor_id: str
    tier: Literal["same_patient", "other_patient"]
    ssim: float | None = None


def _positive_set(codes: Sequence[int]) -> frozenset[str]:
    vector = L.binarize([codes])[0]
    return frozenset(name for name, flag in zip(L.CLASSES, vector) if flag)


def structural_similarity(a: np.ndarray, b: np.ndarray, size: int = 256) -> float:
    """SSIM of two grayscale images after resizing both to ``size``×``size`` (scikit-image).

    Needs the ``swap`` extra: ``pip install 'shovir[swap]'``.
    """
    try:
        from skimage.metrics import structural_similarity as ssim
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("the SSIM guard needs scikit-image: pip install 'shovir[swap]'") from error

    def prepare(image: np.ndarray) -> np.ndarray:
        plane = to_canvas(image).plane.astype(np.float64)
        low, high = float(plane.min()), float(plane.max())
        plane = (plane - low) / (high - low) if high > low else np.zeros_like(plane)
        return np.asarray(Image.fromarray(plane.astype(np.float32), mode="F").resize((size, size), Image.BILINEAR))

    return float(ssim(prepare(a), prepare(b), data_range=1.0))


def swap_pairs(
    records: Sequence[Mapping[str, Any]],
    seed: int = 0,
    ssim_below: float | None = None,
    load_image: Callable[[str], np.ndarray] | None = None,
) -> tuple[dict[str, SwapChoice], list[str]]:
    """Pair each study with a discordant donor image (ModaLens §2).

    ``records`` carry ``image_id``, ``patient_id``, ``study_id`` and ``labels`` (14 codes). A
    donor must come from another study and have a different set of positive findings; a study
    of the same patient is preferred, another patient's study is the fallback. With
    ``ssim_below`` (e.g. 0.9), donors whose SSIM with the image is not below it are rejected;
    ``load_image(image_id)`` supplies the pixels. Choices are deterministic in ``seed``.

    Returns ``(choices, unpaired)``: images without any admissible donor are listed, not dropped.

    >>> rows = [{"image_id": "a", "patient_id": "1", "study_id": "s1", "labels": [0] * 13 + [1]},
    ...         {"image_id": "b", "patient_id": "1", "study_id": "s2", "labels": [0, 1] + [0] * 12},
    ...         {"image_id": "c", "patient_id": "2", "study_id": "s3", "labels": [0] * 13 + [1]}]
    >>> choices, unpaired = swap_pairs(rows)
    >>> choices["a"].donor_id, choices["a"].tier, choices["c"].donor_id, choices["c"].tier, unpaired
    ('b', 'same_patient', 'b', 'other_patient', [])
    """
    if ssim_below is not None and load_image is None:
        raise ValueError("ssim_below needs load_image(image_id) -> array to compute SSIM")
    entries = []
    for index, row in enumerate(records):
        for key in ("image_id", "patient_id", "study_id", "labels"):
            if key not in row:
                raise ValueError(f"records[{index}] has no {key!r}; swap pairing needs image_id, patient_id, study_id, labels")
        entries.append((str(row["image_id"]), str(row["patient_id"]), str(row["study_id"]), _positive_set(row["labels"])))
    entries.sort()
    by_patient: dict[str, list[tuple[str, str, frozenset[str]]]] = {}
    for image_id, patient, study, findings in entries:
        by_patient.setdefault(patient, []).append((image_id, study, findings))
    cache: dict[str, np.ndarray] = {}

    def pixels(image_id: str) -> np.ndarray:
        if image_id not in cache:
            cache[image_id] = np.asarray(load_image(image_id))  # type: ignore[misc]
        return cache[image_id]

    choices: dict[str, SwapChoice] = {}
    unpaired: list[str] = []
    for image_id, patient, study, findings in entries:
        rng = sample_rng(seed, image_id, "swap")
        same = [c for c, s, f in by_patient[patient] if s != study and f != findings]
        other = [c for c, p, s, f in entries if p != patient and f != findings]
        chosen = None
        for tier, candidates in (("same_patient", same), ("other_patient", other)):
            order = [candidates[i] for i in rng.permutation(len(candidates))]
            for donor in order:
                score = None
                if ssim_below is not None:
                    score = structural_similarity(pixels(image_id), pixels(donor))
                    if score >= ssim_below:
                        continue
                chosen = SwapChoice(donor, tier, score)  # type: ignore[arg-type]
                break
            if chosen is not None:
                break
        if chosen is None:
            unpaired.append(image_id)
        else:
            choices[image_id] = chosen
    return choices, unpaired


class ImageSubstitution:
    """A ``datasets`` transform that replaces each row's image with its donor's image.

    ``donors`` maps image ids to donor image ids (from :func:`shuffle_pairs` or the
    ``donor_id`` of :func:`swap_pairs`); ``source`` is the untransformed dataset holding the donor
    images. The output adds ``donor_image_id``. Picklable, so it works in DataLoader workers.

    >>> import datasets
    >>> ds = datasets.Dataset.from_dict({"image_id": ["a", "b"], "image": [[[0]], [[1]]]})
    >>> swapped = ds.with_transform(ImageSubstitution({"a": "b", "b": "a"}, ds))
    >>> swapped[0]["image"], swapped[0]["donor_image_id"]
    ([[1]], 'b')
    """

    def __init__(self, donors: Mapping[str, str], source: Any, image_column: str = "image", condition: str = "substituted") -> None:
        self.donors = dict(donors)
        self.source = source
        self.image_column = image_column
        self.condition = condition
        ids = list(source["image_id"]) if hasattr(source, "column_names") else [row["image_id"] for row in source]
        self._row_of: dict[str, int] = {}
        for index, image_id in enumerate(ids):
            self._row_of.setdefault(str(image_id), index)
        missing = sorted(set(self.donors.values()) - set(self._row_of))
        if missing:
            raise ValueError(f"donors: {len(missing)} donor image ids are not in the source dataset, e.g. {missing[:3]}")

    def __call__(self, batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        donors = []
        for image_id in batch["image_id"]:
            try:
                donors.append(self.donors[str(image_id)])
            except KeyError:
                raise ValueError(
                    f"image_id {image_id!r} has no donor in this pairing; rebuild the pairing on the same dataset"
                ) from None
        batch[self.image_column] = [self.source[self._row_of[d]][self.image_column] for d in donors]
        batch["donor_image_id"] = donors
        batch["condition"] = [self.condition] * len(donors)
        return batch
