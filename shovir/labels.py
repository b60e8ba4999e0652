"""The CheXpert vocabulary, in one place.

Every component of shovir (datasets, labelers, metrics, reports) indexes label vectors with
:data:`CLASSES`, the 14 CheXpert observations in the order of the CheXbert classification heads
(Smit et al. 2020; ShoViR §3.4), *No Finding* last. A label vector holds one code per class:

====  ===========  =============================================
code  name         meaning
====  ===========  =============================================
0     blank        the report does not mention the observation
1     positive     mentioned as present
2     negative     mentioned as absent
3     uncertain    mentioned with uncertainty ("possible", "may")
====  ===========  =============================================

Binarisation follows the CheXbert evaluation convention used by the ShoViR authors
(``rrg_eval.factuality_utils.map_to_binary``): only *positive* counts as 1 by default
(``uncertain="negative"``, their ``rrg-``/``14``/``5`` modes); ``uncertain="positive"`` maps
1 and 3 to 1 (their ``rrg+`` mode).
"""

from __future__ import annotations

import re
from typing import Iterable, Literal, Sequence

import numpy as np

__all__ = [
    "CLASSES",
    "TOP5",
    "LOCALIZABLE",
    "NUM_CLASSES",
    "BLANK",
    "POSITIVE",
    "NEGATIVE",
    "UNCERTAIN",
    "CODE_NAMES",
    "UncertainPolicy",
    "class_index",
    "canonical_class",
    "validate_codes",
    "binarize",
]

CLASSES: tuple[str, ...] = (
    "Enlarged Cardiomediastinum",
    "Cardiomegaly",
    "Lung Opacity",
    "Lung Lesion",
    "Edema",
    "Consolidation",
    "Pneumonia",
    "Atelectasis",
    "Pneumothorax",
    "Pleural Effusion",
    "Pleural Other",
    "Fracture",
    "Support Devices",
    "No Finding",
)
"""The 14 CheXpert classes in CheXbert head order (No Finding last)."""

NUM_CLASSES: int = len(CLASSES)

TOP5: tuple[str, ...] = ("Cardiomegaly", "Edema", "Consolidation", "Atelectasis", "Pleural Effusion")
"""The five classes of F1-5 (ShoViR §3.4, "the five most clinically prevalent findings")."""

LOCALIZABLE: tuple[str, ...] = CLASSES[:-1]
"""The 13 classes that can carry a bounding box (every class but No Finding; ShoViR §3.1)."""

BLANK, POSITIVE, NEGATIVE, UNCERTAIN = 0, 1, 2, 3
CODE_NAMES: dict[int, str] = {BLANK: "blank", POSITIVE: "positive", NEGATIVE: "negative", UNCERTAIN: "uncertain"}

UncertainPolicy = Literal["negative", "positive"]

_INDEX = {name: i for i, name in enumerate(CLASSES)}
_NORMALISED = {re.sub(r"[\s_\-]+", " ", name).strip().lower(): name for name in CLASSES}


def canonical_class(name: str) -> str:
    """Return the canonical CheXpert spelling of ``name``.

    Case, underscores and hyphens are ignored, so the ShoViR authors' file names
    (``"Lung_Opacity"``) and CheXbert's spelling (``"Lung Opacity"``) meet.

    >>> canonical_class("pleural_effusion")
    'Pleural Effusion'
    >>> canonical_class("Effusion")
    Traceback (most recent call last):
    ...
    ValueError: unknown CheXpert class 'Effusion'; expected one of: Enlarged Cardiomediastinum, ...
    """
    if not isinstance(name, str):
        raise ValueError(f"CheXpert class must be a string, got {type(name).__name__}: {name!r}")
    key = re.sub(r"[\s_\-]+", " ", name).strip().lower()
    try:
        return _NORMALISED[key]
    except KeyError:
        raise ValueError(
            f"unknown CheXpert class {name!r}; expected one of: {', '.join(CLASSES)}"
        ) from None


def class_index(name: str) -> int:
    """Column of ``name`` in a 14-code label vector.

    >>> class_index("No Finding"), class_index("Cardiomegaly")
    (13, 1)
    """
    return _INDEX[canonical_class(name)]


def validate_codes(codes: Sequence[Sequence[int]] | np.ndarray, field: str = "labels") -> np.ndarray:
    """Check a batch of 14-code label vectors and return it as an ``int8`` array of shape (n, 14).

    Raises ``ValueError`` naming ``field`` for a wrong width, a code outside {0, 1, 2, 3},
    non-integral floats, NaN, or booleans (a binarised vector passed where codes are expected).
    An ``int8`` array is returned itself, not copied: callers read codes, never write them.

    >>> validate_codes([[0] * 13 + [1]]).shape
    (1, 14)
    >>> validate_codes([[0] * 13 + [4]])
    Traceback (most recent call last):
    ...
    ValueError: labels: code 4 at row 0, column 13 (No Finding) is not one of 0 blank, 1 positive, 2 negative, 3 uncertain
    """
    array = np.asarray(codes)
    if array.ndim == 1 and array.size == NUM_CLASSES:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] != NUM_CLASSES:
        raise ValueError(
            f"{field}: expected label vectors of width {NUM_CLASSES} (CheXbert head order, see "
            f"shovir.labels.CLASSES), got an array of shape {array.shape}"
        )
    if array.dtype == bool:
        raise ValueError(f"{field}: got booleans; pass the 14 CheXbert codes (0-3), not binarised labels")
    if array.dtype.kind == "f":
        if np.isnan(array).any():
            row, col = np.argwhere(np.isnan(array))[0]
            raise ValueError(f"{field}: NaN at row {row}, column {col} ({CLASSES[col]})")
        if not np.array_equal(array, np.round(array)):
            row, col = np.argwhere(array != np.round(array))[0]
            raise ValueError(
                f"{field}: non-integer code {array[row, col]!r} at row {row}, column {col} ({CLASSES[col]}); "
                "codes are integers 0-3 and are never truncated"
            )
    elif array.dtype.kind not in "iu":
        raise ValueError(f"{field}: expected integer codes, got dtype {array.dtype}")
    bad = (array < 0) | (array > 3)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(
            f"{field}: code {array[row, col]:g} at row {row}, column {col} ({CLASSES[col]}) is not one of "
            + ", ".join(f"{k} {v}" for k, v in CODE_NAMES.items())
        )
    return array.astype(np.int8, copy=False)  # int8 input is returned as is: nothing downstream writes to it


def binarize(codes: Sequence[Sequence[int]] | np.ndarray, uncertain: UncertainPolicy = "negative") -> np.ndarray:
    """Map 14-code vectors to 0/1 presence, CheXbert-evaluation style.

    ``uncertain="negative"`` keeps only code 1 (the authors' default ``rrg-``);
    ``uncertain="positive"`` also counts code 3 (``rrg+``). Blank and negative are always 0.

    >>> binarize([[1, 3, 2, 0] + [0] * 10]).tolist()[0][:4]
    [1, 0, 0, 0]
    >>> binarize([[1, 3, 2, 0] + [0] * 10], uncertain="positive").tolist()[0][:4]
    [1, 1, 0, 0]
    """
    if uncertain not in ("negative", "positive"):
        raise ValueError(f"uncertain must be 'negative' or 'positive', got {uncertain!r}")
    array = validate_codes(codes)
    positive = array == POSITIVE
    if uncertain == "positive":
        positive |= array == UNCERTAIN
    return positive.astype(np.int8)


def codes_from_mentions(mentions: dict[str, int] | Iterable[tuple[str, int]]) -> list[int]:
    """Build a 14-code vector from ``{class name: code}``; unmentioned classes are blank.

    >>> codes_from_mentions({"Edema": 1, "pleural_effusion": 2})[4], codes_from_mentions({"Edema": 1})[9]
    (1, 0)
    """
    vector = [BLANK] * NUM_CLASSES
    items = mentions.items() if isinstance(mentions, dict) else mentions
    for name, code in items:
        if code not in CODE_NAMES:
            raise ValueError(f"code for {name!r} must be one of {sorted(CODE_NAMES)}, got {code!r}")
        vector[class_index(name)] = int(code)
    return vector


__all__.append("codes_from_mentions")
