"""Input validation shared by the metric functions: every failure names the field and the fix."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from shovir import labels as L

__all__ = ["codes", "same_length", "class_names", "aligned_ids", "finite_floats", "nonempty", "id_list"]


def nonempty(field: str, values: Sequence[Any] | np.ndarray) -> None:
    if len(values) == 0:
        raise ValueError(f"{field}: empty input; pass at least one sample")


def same_length(**fields: Sequence[Any] | np.ndarray | None) -> int:
    """Check that every given field has the same length; return it.

    >>> same_length(references=[1, 2], predictions=[3, 4], target_classes=None)
    2
    >>> same_length(references=[1, 2], predictions=[3])
    Traceback (most recent call last):
    ...
    ValueError: length mismatch (references: 2, predictions: 1); every field needs one entry per sample
    """
    lengths = {name: len(values) for name, values in fields.items() if values is not None}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{name}: {length}" for name, length in lengths.items())
        raise ValueError(f"length mismatch ({described}); every field needs one entry per sample")
    return next(iter(lengths.values()), 0)


def codes(field: str, values: Sequence[Sequence[int]] | np.ndarray) -> np.ndarray:
    """14-code label vectors as int8 (n, 14), or ``ValueError`` naming ``field``."""
    array = np.asarray(values)
    if array.size == 0:
        raise ValueError(f"{field}: empty input; pass at least one 14-code label vector")
    return L.validate_codes(array if array.ndim == 2 else array.reshape(len(values), -1), field=field)


def class_names(field: str, values: Sequence[str]) -> list[str]:
    """Canonical CheXpert names, or ``ValueError`` naming ``field`` and the index."""
    names = []
    for index, value in enumerate(values):
        try:
            names.append(L.canonical_class(value))
        except ValueError as error:
            raise ValueError(f"{field}[{index}]: {error}") from None
    return names


def aligned_ids(**fields: Sequence[str] | None) -> None:
    """Check that sample-id lists of several conditions hold the same ids in the same order.

    >>> aligned_ids(control_ids=["a", "b"], ids=["a", "b"])
    >>> aligned_ids(control_ids=["a", "b"], ids=["b", "a"])
    Traceback (most recent call last):
    ...
    ValueError: ids: sample 0 is 'b' but control_ids has 'a'; conditions must cover the same samples in the same order (join records on sample_id first)
    """
    given = {name: list(map(str, values)) for name, values in fields.items() if values is not None}
    if len(given) < 2:
        return
    (first_name, first), *rest = given.items()
    for name, ids in rest:
        if len(ids) != len(first):
            raise ValueError(f"{name}: {len(ids)} sample ids but {first_name} has {len(first)}; conditions must cover the same samples")
        for index, (a, b) in enumerate(zip(first, ids)):
            if a != b:
                raise ValueError(
                    f"{name}: sample {index} is {b!r} but {first_name} has {a!r}; conditions must cover the same "
                    "samples in the same order (join records on sample_id first)"
                )
    for name, ids in given.items():
        if len(set(ids)) != len(ids):
            raise ValueError(f"{name}: duplicate sample ids; each sample must appear once per condition")


def finite_floats(field: str, values: Sequence[float] | np.ndarray) -> np.ndarray:
    """A float64 array without NaN/inf, or ``ValueError`` naming ``field``."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        raise ValueError(f"{field}: empty input")
    if not np.isfinite(array).all():
        index = int(np.argwhere(~np.isfinite(array))[0][0])
        raise ValueError(f"{field}: non-finite value {array.ravel()[index]!r} at index {index}")
    return array


def id_list(values: Sequence[object], field: str, n: int | None = None, unique: bool = False) -> list[str]:
    """Ids (strings or integers) as strings, one per row; ``ValueError`` naming ``field`` for a
    wrong count, a bad id (None, NaN, float, bool) or, with ``unique``, a repeated id.

    >>> id_list([1, "b"], "sample_ids", n=2, unique=True)
    ['1', 'b']
    >>> id_list(["a", "a"], "sample_ids", unique=True)
    Traceback (most recent call last):
    ...
    ValueError: sample_ids: id 'a' appears twice (rows 0 and 1); ids must be unique
    """
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{field}: expected one id per row, got a single {type(values).__name__}")
    items = list(values)
    if not items:
        raise ValueError(f"{field}: empty; at least one id is needed")
    if n is not None and len(items) != n:
        raise ValueError(f"{field}: expected {n} ids, one per row, got {len(items)}")
    out = []
    for index, value in enumerate(items):
        if isinstance(value, bool) or not isinstance(value, (str, int, np.integer)):
            what = "NaN" if isinstance(value, float) and value != value else repr(value)
            raise ValueError(f"{field}: id at row {index} must be a string or an integer, got {what}")
        out.append(str(value))
    if unique:
        seen: dict[str, int] = {}
        for index, value in enumerate(out):
            if value in seen:
                raise ValueError(f"{field}: id {value!r} appears twice (rows {seen[value]} and {index}); ids must be unique")
            seen[value] = index
    return out
