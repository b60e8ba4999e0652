"""Input validation shared by the metric functions and the evaluate modules: every failure is a
``ValueError`` that names the argument, the offending row and the fix, raised before numpy, Arrow
or the bootstrap ever see the value (issue 8, "every bad input is named").

Three groups:

* per-sample inputs: :func:`codes`, :func:`codes_or_texts` (14-code vectors or report texts run
  through a labeler), :func:`class_names` / :func:`target_classes`, :func:`id_list`,
  :func:`cluster_ids`, :func:`aligned_ids`, :func:`finite_floats`, :func:`sequence`;
* settings: :func:`n_resamples`, :func:`seed`, :func:`confidence`, :func:`n_permutations`,
  :func:`uncertain`, :func:`positive_int`, :func:`nonnegative_number`;
* :class:`StreamingModule`, the mixin behind every ``metrics/<name>/<name>.py`` evaluate module
  of the clinical and VQA metrics: one declared schema whose optional columns are nullable, so that
  ``compute``, ``add``, ``add_batch`` and ``evaluate.combine`` store and score the same rows.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from shovir import labels as L

__all__ = [
    "codes",
    "codes_or_texts",
    "same_length",
    "class_names",
    "target_classes",
    "aligned_ids",
    "finite_floats",
    "nonempty",
    "id_list",
    "cluster_ids",
    "sequence",
    "n_resamples",
    "seed",
    "confidence",
    "n_permutations",
    "uncertain",
    "positive_int",
    "nonnegative_number",
    "max_ngram",
    "resolve_labeler",
    "Column",
    "StreamingModule",
]


# -- sequences and lengths --------------------------------------------------------------------


def sequence(field: str, values: Any, what: str = "one entry per sample") -> list:
    """``values`` as a list, refusing what is not a per-sample sequence: ``None``, a bare string
    (which would be split into characters), bytes, a mapping, a scalar.

    >>> sequence("sample_ids", ("a", "b"))
    ['a', 'b']
    >>> sequence("predictions", "Small left effusion.")
    Traceback (most recent call last):
    ...
    ValueError: predictions: got a single str; pass a list with one entry per sample, e.g. ['Small left effusion.']
    """
    if values is None:
        raise ValueError(f"{field}: got None; pass a list with {what}")
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{field}: got a single {type(values).__name__}; pass a list with {what}, e.g. [{values!r:.60}]")
    if isinstance(values, Mapping):
        raise ValueError(f"{field}: got a {type(values).__name__}; pass a list with {what}")
    if isinstance(values, np.ndarray):
        if values.ndim == 0:
            raise ValueError(f"{field}: got a 0-d array; pass a list with {what}")
        return list(values)
    try:
        return list(values)
    except TypeError:
        raise ValueError(f"{field}: got {type(values).__name__} {values!r:.60}; pass a list with {what}") from None


def nonempty(field: str, values: Sequence[Any] | np.ndarray) -> None:
    if len(values) == 0:
        raise ValueError(f"{field}: empty input; pass at least one sample")


def same_length(**fields: Sequence[Any] | np.ndarray | None) -> int:
    """Check that every given field has the same length; return it. A bare string is refused
    (its length is its number of characters, not of samples).

    >>> same_length(references=[1, 2], predictions=[3, 4], target_classes=None)
    2
    >>> same_length(references=[1, 2], predictions=[3])
    Traceback (most recent call last):
    ...
    ValueError: length mismatch (references: 2, predictions: 1): row 1 is missing from predictions; every field needs one entry per sample
    """
    lengths = {}
    for name, values in fields.items():
        if values is None:
            continue
        if isinstance(values, (str, bytes)):
            raise ValueError(f"{name}: got a single {type(values).__name__}; pass a list with one entry per sample")
        try:
            lengths[name] = len(values)
        except TypeError:
            raise ValueError(f"{name}: got {type(values).__name__}; pass a list with one entry per sample") from None
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{name}: {length}" for name, length in lengths.items())
        longest = max(lengths.values())
        shortest = min(lengths, key=lengths.__getitem__)
        raise ValueError(f"length mismatch ({described}): row {lengths[shortest]} is missing from {shortest}"
                         f"{'' if longest == lengths[shortest] + 1 else ' (and later rows)'}; "
                         "every field needs one entry per sample")
    return next(iter(lengths.values()), 0)


# -- 14-code vectors and report texts ---------------------------------------------------------

_NUMBER_TYPES = (int, float, np.integer, np.floating)


def _row_problem(field: str, index: int, row: Any) -> str | None:
    """What is wrong with one row of codes, or ``None``."""
    if row is None:
        return f"{field}: row {index} is None; every row needs 14 codes (0 blank, 1 positive, 2 negative, 3 uncertain)"
    if isinstance(row, (str, bytes)):
        return (f"{field}: row {index} is a report text but row 0 is a 14-code vector; pass every row in one form: "
                "report texts (a list of str, labelled by labeler=) or 14-code vectors")
    if not isinstance(row, (list, tuple, np.ndarray)):
        return (f"{field}: row {index} is {type(row).__name__} {row!r:.40}; each row must be a list of 14 codes "
                "(wrap a single sample's vector in a list: [vector])")
    if len(row) != L.NUM_CLASSES:
        return (f"{field}: row {index} has {len(row)} codes; every row needs {L.NUM_CLASSES} (width 14, CheXbert head "
                "order, see shovir.labels.CLASSES)")
    for column, value in enumerate(row):
        name = L.CLASSES[column]
        if value is None:
            return f"{field}: row {index}, column {column} ({name}) is None; codes are integers 0-3"
        if isinstance(value, (bool, np.bool_)):
            return (f"{field}: row {index}, column {column} ({name}) is a bool; pass the 14 CheXbert codes (0-3), "
                    "not binarised labels")
        if not isinstance(value, _NUMBER_TYPES):
            return (f"{field}: row {index}, column {column} ({name}) is {type(value).__name__} {value!r:.40}; "
                    "codes are integers 0-3")
    return None


def codes(field: str, values: Sequence[Sequence[int]] | np.ndarray) -> np.ndarray:
    """14-code label vectors as ``int8`` (n, 14), or ``ValueError`` naming ``field``, the row and
    the fix: empty input, a bare string, a flat vector, ragged rows, None, bools, strings, NaN,
    non-integral floats, codes outside 0-3.

    >>> codes("references", [[0] * 13 + [1]]).shape
    (1, 14)
    >>> codes("references", [[0] * 14, [0] * 13])
    Traceback (most recent call last):
    ...
    ValueError: references: row 1 has 13 codes; every row needs 14 (width 14, CheXbert head order, see shovir.labels.CLASSES)
    """
    if isinstance(values, np.ndarray) and values.dtype != object:
        array = values
        if array.size == 0:
            raise ValueError(f"{field}: empty input; pass at least one 14-code label vector")
        if array.ndim == 1 and array.dtype.kind in "US":
            raise ValueError(f"{field}: got an array of strings; pass report texts as a list (with labeler=) or 14-code vectors")
        if array.ndim != 2:
            raise ValueError(f"{field}: expected an array of shape (n, 14), one 14-code vector per sample, got shape "
                             f"{array.shape} (wrap a single vector: [vector])")
        return L.validate_codes(array, field=field)
    rows = sequence(field, values, "one 14-code vector per sample")
    if not rows:
        raise ValueError(f"{field}: empty input; pass at least one 14-code label vector")
    if isinstance(rows[0], str):
        raise ValueError(f"{field}: got report texts; this argument takes 14-code vectors (label the texts first, e.g. "
                         "shovir.labelers.get_labeler('rule')(texts))")
    if isinstance(rows[0], _NUMBER_TYPES + (bool, np.bool_)):
        raise ValueError(f"{field}: got a flat list of {len(rows)} numbers; pass one 14-code vector per sample "
                         "(wrap a single vector in a list: [vector])")
    allowed = {int, float}
    for index, row in enumerate(rows):
        if type(row) is not list or len(row) != L.NUM_CLASSES or not set(map(type, row)) <= allowed:
            problem = _row_problem(field, index, row)
            if problem:
                raise ValueError(problem)
    try:
        array = np.asarray(rows)
    except (ValueError, TypeError):  # pragma: no cover - rows were checked one by one
        raise ValueError(f"{field}: rows are not all 14-code vectors") from None
    if array.dtype == object:  # pragma: no cover - rows were checked one by one
        raise ValueError(f"{field}: rows are not all 14-code vectors")
    return L.validate_codes(array, field=field)


_LABELER_CACHE: dict[str, Any] = {}


def resolve_labeler(labeler: Any = None) -> tuple[str, Callable[[Sequence[str]], np.ndarray]]:
    """``(name, callable)`` for a labeler given by name (a :data:`shovir.labelers.LABELERS` entry,
    built once per process) or as an object with the labeler interface (``__call__(reports) ->
    (n, 14)`` codes, optionally a ``name``). ``None`` is the rule-based labeler.

    >>> resolve_labeler()[0], resolve_labeler("rule")[0]
    ('rule', 'rule')
    >>> resolve_labeler(3)
    Traceback (most recent call last):
    ...
    ValueError: labeler: expected a labeler name (e.g. 'rule', 'chexbert') or an object with the labeler interface (callable on a list of reports), got int 3
    """
    if labeler is None:
        labeler = "rule"
    if isinstance(labeler, str):
        if labeler not in _LABELER_CACHE:
            from shovir.labelers import get_labeler

            try:
                _LABELER_CACHE[labeler] = get_labeler(labeler)
            except (KeyError, LookupError) as error:
                raise ValueError(f"labeler: {error}") from None
        return labeler, _LABELER_CACHE[labeler]
    if callable(labeler) and not isinstance(labeler, type):
        return str(getattr(labeler, "name", type(labeler).__name__)), labeler
    raise ValueError("labeler: expected a labeler name (e.g. 'rule', 'chexbert') or an object with the labeler interface "
                     f"(callable on a list of reports), got {type(labeler).__name__} {labeler!r:.40}")


def is_text_column(values: Any) -> bool:
    """Whether ``values`` holds report texts (its first row is a string)."""
    if isinstance(values, np.ndarray):
        return values.dtype.kind in "US" or (values.dtype == object and values.size > 0 and isinstance(values.flat[0], str))
    if isinstance(values, (str, bytes)) or values is None:
        return False
    try:
        return len(values) > 0 and isinstance(values[0], str)
    except (TypeError, KeyError, IndexError):
        return False


def codes_or_texts(field: str, values: Any, labeler: Any = None) -> tuple[np.ndarray, bool]:
    """``(codes, from_text)``: ``values`` as (n, 14) ``int8`` codes. A list of report texts is run
    through ``labeler`` (:func:`resolve_labeler`; default the rule-based labeler); a list of
    14-code vectors is checked by :func:`codes`. A list mixing the two forms, or a bare string,
    is a ``ValueError`` that says which form to use.

    >>> array, from_text = codes_or_texts("predictions", ["Small left effusion."])
    >>> from_text, int(array[0, L.class_index("Pleural Effusion")])
    (True, 1)
    >>> codes_or_texts("predictions", ["No effusion.", [0] * 14])
    Traceback (most recent call last):
    ...
    ValueError: predictions: row 1 is a list but row 0 is a report text; pass every row in one form: report texts (a list of str, labelled by labeler=) or 14-code vectors
    """
    if not is_text_column(values):
        return codes(field, values), False
    rows = sequence(field, values, "one report text per sample")
    for index, row in enumerate(rows):
        if not isinstance(row, str):
            what = "None" if row is None else ("NaN" if isinstance(row, float) and row != row else type(row).__name__)
            raise ValueError(f"{field}: row {index} is a {what} but row 0 is a report text; pass every row in one form: "
                             "report texts (a list of str, labelled by labeler=) or 14-code vectors")
    name, call = resolve_labeler(labeler)
    labelled = np.asarray(call([str(row) for row in rows]))
    if labelled.ndim != 2 or labelled.shape[0] != len(rows):
        raise ValueError(f"labeler: {name!r} returned an array of shape {labelled.shape} for {len(rows)} reports of "
                         f"{field}; a labeler returns (n, 14) codes")
    return L.validate_codes(labelled, field=f"{field} (labelled by {name!r})"), True


def no_text_with_labeler(labeler: Any, any_text: bool) -> None:
    """A ``labeler=`` given while every code input is already codes: say which form to use."""
    if labeler is not None and not any_text:
        raise ValueError("labeler: given, but every code input is 14-code label vectors; pass report texts (lists of str) "
                         "to have them labelled, or drop labeler=")


# -- classes and ids --------------------------------------------------------------------------


def distinct_values(items: list) -> list:
    """The distinct values of ``items`` in order of first appearance, for checking each once; with
    an unhashable item (a list where a name is expected), ``items`` itself, so that checking in
    order still names the first bad row.

    >>> distinct_values(["Edema", "Edema", "Cardiomegaly"]), distinct_values([["x"], "Edema"])
    (['Edema', 'Cardiomegaly'], [['x'], 'Edema'])
    """
    try:
        return list(dict.fromkeys(items))
    except TypeError:
        return items


def class_names(field: str, values: Sequence[str]) -> list[str]:
    """Canonical CheXpert names, or ``ValueError`` naming ``field`` and the index."""
    items = sequence(field, values, "one CheXpert class per sample")
    resolved = {}
    for value in distinct_values(items):  # 10^6 targets name 13 classes: each spelling resolved once
        try:
            resolved[value] = L.canonical_class(value)
        except ValueError as error:
            raise ValueError(f"{field}[{items.index(value)}]: {error}") from None
    return [resolved[value] for value in items]


def target_classes(field: str, values: Sequence[str], n: int | None = None) -> list[str]:
    """Occluded (target) classes: canonical names of *localisable* classes, one per sample.
    ``No Finding`` has no box and cannot be a target (ShoViR §3.1).

    >>> target_classes("target_classes", ["pleural_effusion"])
    ['Pleural Effusion']
    >>> target_classes("target_classes", ["Edema", "No Finding"])
    Traceback (most recent call last):
    ...
    ValueError: target_classes[1]: 'No Finding' has no bounding box and cannot be a target class (ShoViR §3.1); pass one of the 13 localisable classes (shovir.labels.LOCALIZABLE)
    """
    items = sequence(field, values, "one target class per sample")
    if not items:
        raise ValueError(f"{field}: empty; pass one target class per sample")
    if n is not None and len(items) != n:
        raise ValueError(f"{field}: expected {n} target classes, one per sample, got {len(items)}")
    names = class_names(field, items)
    for name in set(names) - set(L.LOCALIZABLE):
        index = names.index(name)
        raise ValueError(f"{field}[{index}]: {name!r} has no bounding box and cannot be a target class (ShoViR §3.1); "
                         "pass one of the 13 localisable classes (shovir.labels.LOCALIZABLE)")
    return names


def _bad_id(value: Any) -> str | None:
    if isinstance(value, (bool, np.bool_)):
        return repr(value)
    if isinstance(value, (str, int, np.integer)):
        return None
    if isinstance(value, float) and value != value:
        return "NaN"
    return repr(value) if value is None else f"{type(value).__name__} {value!r:.40}"


def id_list(values: Sequence[object], field: str, n: int | None = None, unique: bool = False) -> list[str]:
    """Ids (strings or integers) as strings, one per row; ``ValueError`` naming ``field`` for a
    wrong count, a bad id (None, NaN, float, bool), a list mixing strings and integers (``1`` and
    ``"1"`` would become one id) or, with ``unique``, a repeated id.

    >>> id_list([1, 2], "sample_ids", n=2, unique=True)
    ['1', '2']
    >>> id_list(["a", "a"], "sample_ids", unique=True)
    Traceback (most recent call last):
    ...
    ValueError: sample_ids: id 'a' appears twice (rows 0 and 1); ids must be unique
    """
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{field}: expected one id per row, got a single {type(values).__name__}")
    items = sequence(field, values, "one id per row")
    if not items:
        raise ValueError(f"{field}: empty; at least one id is needed")
    if n is not None and len(items) != n:
        raise ValueError(f"{field}: expected {n} ids, one per row, got {len(items)}")
    kinds = set(map(type, items))  # the common cases, checked in one pass at C speed
    if kinds == {str}:
        out = items
    elif kinds == {int}:
        out = list(map(str, items))
    else:
        out = _mixed_ids(items, field)
    if unique and len(set(out)) < len(out):
        seen: dict[str, int] = {}
        for index, value in enumerate(out):
            if value in seen:
                raise ValueError(f"{field}: id {value!r} appears twice (rows {seen[value]} and {index}); ids must be unique")
            seen[value] = index
    return out


def _mixed_ids(items: list, field: str) -> list[str]:
    """:func:`id_list` row by row: names the first bad id or the first change of type."""
    kinds = set()
    out = []
    for index, value in enumerate(items):
        bad = _bad_id(value)
        if bad is not None:
            raise ValueError(f"{field}: id at row {index} must be a string or an integer, got {bad}")
        kinds.add(str if isinstance(value, str) else int)
        if len(kinds) > 1:
            raise ValueError(f"{field}: row {index} is {value!r} but earlier rows are "
                             f"{'integers' if isinstance(value, str) else 'strings'}; use one type for every id "
                             "(1 and '1' would be read as the same id)")
        out.append(str(value))
    return out


def cluster_ids(values: Sequence[object] | None, n: int, field: str = "clusters") -> list[str] | None:
    """Cluster ids (e.g. patients) for a clustered bootstrap, one per sample, as strings; ``None``
    stays ``None`` (every sample its own cluster). Refuses a bare string, None/NaN/float/bool ids,
    mixed types and a wrong count, naming the row.

    >>> cluster_ids(["p1", "p1", "p2"], 3)
    ['p1', 'p1', 'p2']
    >>> cluster_ids([1, None], 2)
    Traceback (most recent call last):
    ...
    ValueError: clusters: id at row 1 must be a string or an integer, got None
    """
    if values is None:
        return None
    return id_list(values, field, n)


def aligned_ids(**fields: Sequence[str] | None) -> None:
    """Check that sample-id lists of several conditions hold the same ids in the same order
    (each id valid and unique: :func:`id_list`).

    >>> aligned_ids(control_ids=["a", "b"], ids=["a", "b"])
    >>> aligned_ids(control_ids=["a", "b"], ids=["b", "a"])
    Traceback (most recent call last):
    ...
    ValueError: ids: sample 0 is 'b' but control_ids has 'a'; conditions must cover the same samples in the same order (join records on sample_id first)
    """
    given = {}
    for name, values in fields.items():
        if values is None:
            continue
        try:
            given[name] = id_list(values, name, unique=True)
        except ValueError as error:
            if "appears twice" in str(error):
                raise ValueError(f"{error} (duplicate sample ids; each sample must appear once per condition)") from None
            raise
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


def finite_floats(field: str, values: Sequence[float] | np.ndarray) -> np.ndarray:
    """A float64 array without NaN/inf, None, bools or strings, or ``ValueError`` naming ``field``.

    >>> finite_floats("p_values", [0, 0.5]).tolist()
    [0.0, 0.5]
    >>> finite_floats("p_values", [0, "0.5"])
    Traceback (most recent call last):
    ...
    ValueError: p_values: row 1 is str '0.5'; pass numbers
    """
    if not (isinstance(values, np.ndarray) and values.dtype.kind in "iuf"):
        items = sequence(field, values, "one number per entry")
        for index, value in enumerate(items):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real):
                raise ValueError(f"{field}: row {index} is {type(value).__name__} {value!r:.40}; pass numbers")
        values = items
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        raise ValueError(f"{field}: empty input")
    if not np.isfinite(array).all():
        index = int(np.argwhere(~np.isfinite(array))[0][0])
        raise ValueError(f"{field}: non-finite value {float(array.ravel()[index])!r} at index {index}")
    return array


# -- settings ---------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, (bool, np.bool_))


def n_resamples(value: Any, field: str = "n_resamples") -> int:
    """Bootstrap resamples: an integer >= 0 (0: no interval). Floats, bools, strings and
    negative numbers are refused (a negative count would silently give no interval).

    >>> n_resamples(1000)
    1000
    >>> n_resamples(-5)
    Traceback (most recent call last):
    ...
    ValueError: n_resamples: expected an integer >= 0 (0 for no interval), got -5
    """
    if not _is_int(value) or value < 0:
        raise ValueError(f"{field}: expected an integer >= 0 (0 for no interval), got {value!r}")
    return int(value)


def n_permutations(value: Any, field: str = "n_permutations") -> int:
    """Permutations of a permutation test: an integer >= 0; 0 means no test (the p-values are
    ``None``, never the p = 1 that zero permutations would give).

    >>> n_permutations(0), n_permutations(999)
    (0, 999)
    >>> n_permutations(10.0)
    Traceback (most recent call last):
    ...
    ValueError: n_permutations: expected an integer >= 0 (0 for no test), got 10.0
    """
    if not _is_int(value) or value < 0:
        raise ValueError(f"{field}: expected an integer >= 0 (0 for no test), got {value!r}")
    return int(value)


def seed(value: Any, field: str = "seed") -> int:
    """A random seed: an integer >= 0 (numpy's ``default_rng`` refuses negative seeds).

    >>> seed(0)
    0
    >>> seed("3")
    Traceback (most recent call last):
    ...
    ValueError: seed: expected an integer >= 0, got '3'
    """
    if not _is_int(value) or value < 0:
        raise ValueError(f"{field}: expected an integer >= 0, got {value!r}")
    return int(value)


def confidence(value: Any, field: str = "confidence") -> float:
    """The level of a percentile interval: a number strictly between 0 and 1.

    >>> confidence(0.95)
    0.95
    >>> confidence(95)
    Traceback (most recent call last):
    ...
    ValueError: confidence: expected a number in (0, 1), e.g. 0.95, got 95
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real) or not 0 < float(value) < 1:
        raise ValueError(f"{field}: expected a number in (0, 1), e.g. 0.95, got {value!r}")
    return float(value)


def uncertain(value: Any, field: str = "uncertain") -> str:
    """The uncertainty policy: ``"negative"`` or ``"positive"`` (:func:`shovir.labels.binarize`).

    >>> uncertain("positive")
    'positive'
    """
    if value not in ("negative", "positive") or not isinstance(value, str):
        raise ValueError(f"uncertain must be 'negative' or 'positive', got {value!r}")
    return value


def positive_int(value: Any, field: str, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (bools and floats refused).

    >>> positive_int(5, "max_ngram", 2)
    5
    """
    if not _is_int(value) or value < minimum:
        raise ValueError(f"{field}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def nonnegative_number(value: Any, field: str) -> float:
    """A finite number >= 0 (bools and strings refused).

    >>> nonnegative_number(0.5, "margin_threshold")
    0.5
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real) or not math.isfinite(float(value)) or value < 0:
        raise ValueError(f"{field}: expected a finite number >= 0, got {value!r}")
    return float(value)


def max_ngram(value: Any) -> int:
    """The longest question phrase the visual-claim detector filters out: an integer >= 2.

    >>> max_ngram(5)
    5
    """
    if not _is_int(value) or value < 2:
        raise ValueError(f"max_ngram must be >= 2 (phrases of 2 or more words), got {value!r}")
    return int(value)


def resampling(n_resamples_: Any, seed_: Any, confidence_: Any = 0.95) -> tuple[int, int, float]:
    """Check the three bootstrap settings together (before any work is done)."""
    return n_resamples(n_resamples_), seed(seed_), confidence(confidence_)


# -- evaluate modules -------------------------------------------------------------------------

_SETTING_CHECKS: dict[str, Callable[[Any], Any]] = {
    "n_resamples": n_resamples,
    "seed": seed,
    "confidence": confidence,
    "n_permutations": n_permutations,
    "uncertain": uncertain,
    "max_ngram": lambda value: max_ngram(value),
    "margin_threshold": lambda value: nonnegative_number(value, "margin_threshold"),
}


_WRITE_ROWS = 1 << 16  # rows per Arrow batch written to evaluate's cache


@dataclass(frozen=True)
class Column:
    """One per-sample input of an evaluate module.

    ``kind``: ``"codes"`` (14-code vectors or report texts, stored as codes), ``"class"`` (a
    target class), ``"text"`` (an answer, question, rationale or arm name), ``"id"`` (a string or
    integer id, stored as a string), ``"number"`` (a finite float) or ``"options"`` (a list of
    option strings, or ``None``). ``required=False`` columns are nullable: a row stores null when
    the input is not given, and the module reads an all-null column as "not given".
    """

    name: str
    kind: str
    required: bool = True

    def feature(self) -> Any:
        import datasets

        if self.kind == "codes":
            return datasets.Sequence(datasets.Value("int8"))
        if self.kind == "number":
            return datasets.Value("float64")
        if self.kind == "options":
            return datasets.Sequence(datasets.Value("string"))
        return datasets.Value("string")


def _text_items(field: str, values: Any) -> list:
    from shovir.metrics.answers import check_answers

    items = sequence(field, values, "one string per sample")
    return check_answers(items, field) if items else []


def _option_rows(field: str, values: Any, n: int, single: bool) -> list:
    """Per-row option lists (``None`` for an open question). In a batch, a list of strings is one
    option list shared by every row of the batch (as the metric functions read it)."""
    if values is None:
        return [None] * n
    if single:
        values = [values]
    items = sequence(field, values, "one option list (or None) per row, or one list shared by all rows")
    if items and all(isinstance(item, str) for item in items):
        return [list(items)] * n
    out = []
    for index, item in enumerate(items):
        if item is None:
            out.append(None)
            continue
        if isinstance(item, (str, bytes)) or not isinstance(item, (list, tuple)) or not all(isinstance(o, str) for o in item):
            raise ValueError(f"{field}: row {index} must be a list of option strings or None, got {item!r:.60}")
        out.append(list(item) if item else None)
    return out


def _numbers(field: str, values: Any) -> list[float]:
    items = sequence(field, values, "one number per row")
    out = []
    for index, value in enumerate(items):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real):
            raise ValueError(f"{field}: row {index} must be a number, got {value!r:.40}")
        if not math.isfinite(float(value)):
            raise ValueError(f"{field}: row {index} is {float(value)!r}; margins must be finite")
        out.append(float(value))
    return out


class StreamingModule:
    """Mixin for ``evaluate.Metric`` subclasses (put it first in the bases) that makes every
    per-sample input streamable and checked.

    **Feature design.** evaluate reads only the first schema of a ``features`` list, and
    ``evaluate.combine`` routes to each module exactly the inputs its first schema names. So a
    module declares *one* schema holding every per-sample input (:class:`Column`); optional
    inputs are nullable columns, a null row meaning "not given". ``compute``, ``add`` and
    ``add_batch`` all pass through :meth:`_rows`, which validates every column with the same
    checks as the metric function (naming the argument and the row) *before* Arrow casts
    anything, turns report texts into codes with the labeler, and fills absent optional columns
    with nulls; ``compute``'s inputs are simply the last batch. When scoring, an all-null column
    is "not given", a partly null one (given in some batches only) an error naming the first
    missing row. Settings (``uncertain``, ``n_resamples``, ``seed``, ``labeler``...) are never
    stored: they are checked at ``compute``, or, for ``labeler``, where texts are added.

    ``evaluate.combine`` indexes every declared input of each module, so through a combination
    pass every input of every module (``None`` for an optional one you do not have).

    Subclasses set ``_COLUMNS`` and implement ``_compute`` (its keyword parameters other than
    the columns are the settings).
    """

    _COLUMNS: tuple[Column, ...] = ()

    def __init__(self, *args: Any, labeler: Any = None, **kwargs: Any) -> None:
        self._labeler = labeler
        self._reset_stream()
        super().__init__(*args, **kwargs)

    # -- helpers -------------------------------------------------------------------------------

    def _reset_stream(self) -> None:
        self._labelled_by: str | None = None
        self._id_kinds: dict[str, type] = {}

    @classmethod
    def _features(cls) -> Any:
        import datasets

        return datasets.Features({column.name: column.feature() for column in cls._COLUMNS})

    def _column_names(self) -> list[str]:
        return [column.name for column in self._COLUMNS]

    def _settings(self) -> list[str]:
        names = set(self._column_names())
        return [p for p in inspect.signature(self._compute).parameters if p not in names]

    def _enforce_nested_string_type(self, schema: Any, obj: Any) -> None:
        """Rows were validated by :meth:`_rows`; nulls of optional columns are allowed."""
        return None

    def _gather(self, given: dict[str, Any], where: str) -> dict[str, Any]:
        names = self._column_names()
        unknown = [key for key in given if key not in names]
        if unknown:
            settings = [s for s in self._settings()]
            hint = (f"; {', '.join(unknown)} {'is a setting' if len(unknown) == 1 else 'are settings'}: give "
                    f"{'it' if len(unknown) == 1 else 'them'} to compute()") if set(unknown) <= set(settings) else ""
            raise ValueError(f"{unknown[0]}: not an input of {where}{hint}; inputs: {', '.join(names)}"
                             f"{'; settings (compute only): ' + ', '.join(settings) if settings else ''}")
        return given

    def _rows(self, columns: dict[str, Any], labeler: Any = None, single: bool = False) -> dict[str, Any]:
        """Validate and convert one batch (``single``: one row, each value that row's value). An
        optional input not given is ``None``: :meth:`_write` makes its nulls slice by slice, so a
        large batch never holds a list of ``None`` per row and absent column."""
        if single:
            columns = {name: (None if value is None else [value]) if name != "options" else value
                       for name, value in columns.items()}
        out: dict[str, Any] = {}
        lengths: dict[str, int] = {}
        any_text = False
        for column in self._COLUMNS:
            if column.kind == "options":
                continue
            values = columns.get(column.name)
            if values is None:
                if column.required:
                    required = [c.name for c in self._COLUMNS if c.required]
                    raise ValueError(f"{column.name}: missing; pass {', '.join(required)} together "
                                     "(compute() or each add()/add_batch() call)")
                continue
            field = column.name
            if column.kind == "codes":
                array, from_text = codes_or_texts(field, values, labeler if labeler is not None else self._labeler)
                if from_text:
                    any_text = True
                    name = resolve_labeler(labeler if labeler is not None else self._labeler)[0]
                    if self._labelled_by is not None and self._labelled_by != name:
                        raise ValueError(f"labeler: earlier rows were labelled by {self._labelled_by!r}, these by {name!r}; "
                                         "use one labeler per computation")
                    self._labelled_by = name
                out[field] = array  # (n, 14) int8, written to Arrow as is (:meth:`_write`)
            elif column.kind == "class":
                out[field] = target_classes(field, values)
            elif column.kind == "id":
                items = sequence(field, values, "one id per row")
                out[field] = id_list(items, field) if items else []
                kinds = {str if isinstance(v, str) else int for v in items}
                seen = self._id_kinds.get(field)
                if seen is not None and kinds and kinds != {seen}:
                    raise ValueError(f"{field}: these ids are {'strings' if str in kinds else 'integers'} but earlier rows "
                                     f"had {'strings' if seen is str else 'integers'}; use one type for every id")
                if kinds:
                    self._id_kinds[field] = kinds.pop()
            elif column.kind == "number":
                out[field] = _numbers(field, values)
            else:
                out[field] = _text_items(field, values)
            lengths[field] = len(out[field])
        if len(set(lengths.values())) > 1:
            first = next(iter(lengths))
            bad = next(name for name in lengths if lengths[name] != lengths[first])
            unit = "answers" if next(c for c in self._COLUMNS if c.name == bad).kind == "text" else "rows"
            raise ValueError(f"{bad}: expected {lengths[first]} {unit}, one per sample (as {first}), got {lengths[bad]}; "
                             f"Mismatch in the number of rows: row {min(lengths[first], lengths[bad])} is missing from "
                             f"{bad if lengths[bad] < lengths[first] else first}; every input needs one entry per sample")
        n = next(iter(lengths.values()), 0)
        if n == 0:
            raise ValueError(f"{next(iter(lengths), self._COLUMNS[0].name)}: empty; pass at least one sample")
        no_text_with_labeler(labeler, any_text)
        for column in self._COLUMNS:
            if column.kind == "options" and columns.get(column.name) is not None:
                out[column.name] = _option_rows(column.name, columns.get(column.name), n, single)
                if len(out[column.name]) != n:
                    raise ValueError(f"Mismatch in the number of rows: options has {len(out[column.name])} option lists "
                                     f"but there are {n} rows; pass one list per row, or one list of strings for all")
            elif column.name not in out:
                out[column.name] = None
        return out

    @staticmethod
    def _arrow_type(column: Column) -> Any:
        """The Arrow type of :meth:`Column.feature` (the type of a slice of nulls)."""
        import pyarrow as pa

        if column.kind == "codes":
            return pa.list_(pa.int8())
        if column.kind == "number":
            return pa.float64()
        if column.kind == "options":
            return pa.list_(pa.string())
        return pa.string()

    def _arrow_column(self, column: Column, values: Any, n: int) -> Any:
        """One slice of ``n`` rows of a column as an Arrow array (``values`` ``None``: not given)."""
        import pyarrow as pa

        if values is None:
            return pa.nulls(n, type=self._arrow_type(column))
        if column.kind == "codes":
            array = np.ascontiguousarray(values, dtype=np.int8)
            offsets = np.arange(0, array.size + 1, L.NUM_CLASSES, dtype=np.int32)
            return pa.ListArray.from_arrays(pa.array(offsets), pa.array(array.ravel()))
        if column.kind == "number":
            return pa.array(values, type=pa.float64())
        if column.kind == "options":
            return pa.array(values, type=pa.list_(pa.string()))
        return pa.array(values, type=pa.string())

    def _write(self, rows: dict[str, Any]) -> None:
        """Write one validated batch to evaluate's Arrow cache, in slices of at most
        :data:`_WRITE_ROWS` rows (a large ``compute``/``add_batch`` input never becomes one whole
        Arrow table next to its Python form; an absent optional input, ``None``, is one slice of
        nulls at a time). This is what ``EvaluationModule.add_batch`` does after its checks, minus
        ``Features.encode_batch``, which walks every element in Python (the rows are already
        validated and of the declared types)."""
        import pyarrow as pa

        if self.writer is None:
            self.selected_feature_format = self.features
            self._init_writer()
        names = [column.name for column in self._COLUMNS]
        n = len(next(values for values in rows.values() if values is not None))
        for start in range(0, n, _WRITE_ROWS):
            stop = min(start + _WRITE_ROWS, n)
            table = pa.Table.from_arrays([self._arrow_column(column, None if rows[column.name] is None else
                                                             rows[column.name][start:stop], stop - start)
                                          for column in self._COLUMNS], names=names)
            self.writer.write_table(table)
            del table
        _release_arrow_memory()

    # -- reading columns back (``format="arrow"``: no Python list per value unless needed) ------

    @staticmethod
    def _arrow_info(info: Any) -> Any:
        """``info`` reading its columns back as Arrow arrays (``format="arrow"``), so that ``_compute``
        gets no Python list per value: codes become numpy from the Arrow buffers (:meth:`_codes`),
        strings and ids one ``str`` per distinct value (:meth:`_pylist`).
        Set after construction: ``MetricInfo`` refuses any format for list features, a check meant
        for the numpy format (Arrow arrays hold lists as they are)."""
        info.format = "arrow"
        return info

    @staticmethod
    def _chunks(values: Any) -> list:
        """The Arrow chunks of a column read back (one array for a plain Arrow array)."""
        return list(values.chunks) if hasattr(values, "chunks") else [values]

    @classmethod
    def _codes(cls, values: Any) -> np.ndarray:
        """A code column read back from Arrow (validated when added) as an (n, 14) int8 array,
        copied chunk by chunk from the Arrow buffers into one numpy array (no intermediate Arrow
        array, no Python list); a Python list of rows is accepted too."""
        if hasattr(values, "chunks") or hasattr(values, "offsets"):
            chunks = cls._chunks(values)
            out = np.empty((sum(len(chunk) for chunk in chunks), L.NUM_CLASSES), dtype=np.int8)
            start = 0
            for chunk in chunks:
                flat = chunk.flatten().to_numpy(zero_copy_only=False)
                out[start : start + len(chunk)] = np.asarray(flat, dtype=np.int8).reshape(-1, L.NUM_CLASSES)
                start += len(chunk)
            return out
        return np.asarray(values, dtype=np.int8).reshape(-1, L.NUM_CLASSES)

    @classmethod
    def _pylist(cls, values: Any) -> Sequence | None:
        """A column read back from Arrow as a Python sequence (``None`` stays ``None``; a list is
        returned as is). A string column is dictionary-encoded as a whole and comes back as a
        :class:`_Decoded`: each distinct value one ``str`` (a trial id of both arms, a patient id,
        an answer), each row a small integer. The metric functions copy every input into a list
        of their own, so a list per column here would only double that list; a column whose rows
        are all distinct is the encoding's dictionary, a plain list. Other columns (margins) are
        lists."""
        if values is None or isinstance(values, list):
            return values
        import pyarrow as pa
        import pyarrow.compute as pc

        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
            out: list = []
            for chunk in cls._chunks(values):
                out.extend(chunk.to_pylist())
            return out
        n = len(values)
        chunks = [chunk for chunk in cls._chunks(pc.dictionary_encode(values)) if len(chunk)]
        if not chunks:
            return []
        words = chunks[0].dictionary.to_pylist()  # one dictionary for every chunk, in order of first appearance
        out = words
        if len(words) < n:
            indices = np.empty(n, dtype=np.min_scalar_type(len(words)))  # len(words): a null row's index
            start = 0
            for chunk in chunks:
                part = chunk.indices.fill_null(len(words)) if chunk.null_count else chunk.indices
                indices[start : start + len(part)] = part.to_numpy(zero_copy_only=False)
                start += len(part)
            if values.null_count:
                words.append(None)
            out = _Decoded(words, indices)
        del chunks
        _release_arrow_memory()
        return out

    @classmethod
    def _options(cls, values: Any) -> list | None:
        """The options column: ``None`` when no row has an option list; the one list itself when
        every row has the same (what the metric functions read as one list shared by all rows,
        with the same result, instead of a tuple per row); else one list per row, rows with
        equal options sharing one list object."""
        if values is None:
            return None
        if not hasattr(values, "null_count"):
            return None if all(item is None for item in values) else values
        if values.null_count == len(values):
            return None
        rows: list = []
        shared: dict = {}
        for chunk in cls._chunks(values):
            rows.extend(None if row is None else shared.setdefault(tuple(row), row) for row in chunk.to_pylist())
        if len(shared) == 1 and not values.null_count:
            only = next(iter(shared.values()))
            return only if only else None  # every row an empty list: every question open
        return rows

    # -- evaluate's entry points ---------------------------------------------------------------

    def _has_codes(self) -> bool:
        return any(column.kind == "codes" for column in self._COLUMNS)

    def add_batch(self, *, predictions: Any = None, references: Any = None, **kwargs: Any) -> None:
        """Add a batch of samples: every per-sample input of the module, one entry per sample
        (optional inputs may be left out or ``None``; ``labeler=`` labels report texts)."""
        labeler = kwargs.pop("labeler", None) if self._has_codes() else None
        given = {k: v for k, v in {"predictions": predictions, "references": references, **kwargs}.items()
                 if v is not None or k in self._column_names()}
        rows = self._rows(self._gather(given, "add_batch()"), labeler)
        self._write(rows)

    def add(self, *, prediction: Any = None, reference: Any = None, **kwargs: Any) -> None:
        """Add one sample: each per-sample input's value for it (``prediction=`` / ``reference=``
        or the plural names; optional inputs may be left out)."""
        labeler = kwargs.pop("labeler", None) if self._has_codes() else None
        for singular, plural in (("prediction", "predictions"), ("reference", "references")):
            value = locals()[singular]
            if value is not None:
                if kwargs.get(plural) is not None:
                    raise ValueError(f"{singular}: given twice (as {singular}= and {plural}=); pass one")
                kwargs[plural] = value
        given = {k: v for k, v in kwargs.items() if v is not None or k in self._column_names()}
        rows = self._rows(self._gather(given, "add()"), labeler, single=True)
        self._write(rows)

    def compute(self, *, predictions: Any = None, references: Any = None, **kwargs: Any) -> dict | None:
        """Compute the metric on the rows added so far plus the inputs given here (added as a
        last batch). Settings are checked before anything is stored."""
        names = self._column_names()
        settings = {k: v for k, v in kwargs.items() if k not in names}
        labeler = settings.pop("labeler", None) if self._has_codes() else None
        allowed = self._settings()
        for key in settings:
            if key not in allowed:
                extra = ["labeler"] if self._has_codes() else []
                raise ValueError(f"{key}: not an input or a setting of this metric; inputs: {', '.join(names)}; "
                                 f"settings: {', '.join(allowed + extra)}")
        for key, value in settings.items():
            if key in _SETTING_CHECKS:
                _SETTING_CHECKS[key](value)
        inputs = {k: v for k, v in {"predictions": predictions, "references": references, **kwargs}.items()
                  if k in names and v is not None}
        if inputs:
            self.add_batch(**inputs, **({"labeler": labeler} if labeler is not None else {}))
        elif self.writer is None:
            raise ValueError(f"{next(c.name for c in self._COLUMNS if c.required)}: no samples; pass the inputs to compute() "
                             "or add them with add()/add_batch() first")
        elif labeler is not None and self._labelled_by is not None and resolve_labeler(labeler)[0] != self._labelled_by:
            raise ValueError(f"labeler: the rows were labelled by {self._labelled_by!r} when they were added; pass "
                             "labeler= to add()/add_batch() (or evaluate.load(..., labeler=...)), not compute()")
        try:
            return super().compute(**settings)
        finally:
            self._reset_stream()

    @classmethod
    def _optional(cls, name: str, values: Any) -> list | None:
        """An optional column read back from Arrow (an Arrow array with ``format="arrow"``, or a
        list): ``None`` when absent from every row; an error naming the first missing row when
        only some rows have it; else the values as a Python list."""
        if values is None:
            return None
        if hasattr(values, "null_count"):
            nulls = values.null_count
            if nulls == len(values):
                return None
            missing = None
            if nulls:
                import pyarrow.compute as pc

                missing = pc.index(values.is_null(), True).as_py()
        else:
            if all(value is None for value in values):
                return None
            missing = next((index for index, value in enumerate(values) if value is None), None)
        if missing is not None:
            raise ValueError(f"{name}: row {missing} has no value but other rows do (it was given in some "
                             "add()/add_batch() calls only); give it for every sample or for none")
        return cls._pylist(values)


def _release_arrow_memory() -> None:
    """Hand Arrow's freed memory back to the system. Arrow's allocator (mimalloc or jemalloc)
    keeps freed pages resident for reuse by Arrow, but what the metric functions allocate next
    is numpy and Python memory, which cannot reuse them: left alone, the pages of the slices
    written and of the columns decoded stay resident through the metric function's run, in the
    peak memory of ``compute``."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


class _Decoded(Sequence):
    """A string column read back from Arrow: its distinct values (``words``) and, per row, the
    index of the row's value (``indices``, the smallest unsigned integer type that holds them):
    one to four bytes per row where a list takes eight. Read-only; iterated slice by slice, so
    that no Python int is made per row at once."""

    __slots__ = ("_indices", "_words")

    def __init__(self, words: list, indices: np.ndarray) -> None:
        self._words = words
        self._indices = indices

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(map(self._words.__getitem__, self._indices[index].tolist()))
        return self._words[int(self._indices[index])]

    def __iter__(self) -> Any:
        words = self._words
        for start in range(0, len(self._indices), _WRITE_ROWS):
            yield from map(words.__getitem__, self._indices[start : start + _WRITE_ROWS].tolist())

    def __repr__(self) -> str:
        return f"<{len(self)} strings, {len(self._words)} distinct>"
