"""The results document (``results.json``): its schema version, checks and accessors.

Layout (schema 2)::

    schema_version, created, complete, run {config, config_hash, seed, plan, skipped},
    scoring {labeler, n_resamples, seed, allow_partial}, versions,
    coverage {alias: {condition: {expected, present}}},
    models {alias: {adapter, protocols {protocol: {binding key: {condition: raw metric result}}}}}

Each binding of a protocol (:mod:`shovir.protocols`) stores the metric function's own result
(one raw schema: what :mod:`shovir.metrics` returns) under the condition it scores — the treated
condition of a contrast (``oco_p100``), the arm of a VQA protocol (``baseline+report``), the
family of a curve (``oco``). Code that reads results goes through :class:`Results`, never through
string paths of its own.

>>> doc = {"schema_version": SCHEMA_VERSION, "models": {"m": {"adapter": "a", "protocols": {"shovir": {
...     "flip_rate": {"oco_p100": {"flip_rate": 0.9, "ci": {"flip_rate": {"low": 0.8, "high": 1.0}}}}}}}}}
>>> results = Results(doc)
>>> results.value("m", "shovir", "flip_rate", "oco", 1.0, "flip_rate"), results.interval("m", "shovir", "flip_rate", "oco_p100", "flip_rate")
(0.9, (0.8, 1.0))
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Mapping

from shovir.conditions import ConditionSpec

__all__ = ["SCHEMA_VERSION", "MIN_UNITS", "Results", "condition_label", "check_results", "units"]

SCHEMA_VERSION = "2.0"
MIN_UNITS = 10
"""A value computed from fewer units (samples, or a rate's denominator) is flagged, not shown as confident."""


def units(result: Any) -> int | None:
    """How many units a raw result rests on: a rate's denominators when it has them, the patients
    a patient-clustered result resamples, else ``n``.

    >>> units({"flip_rate": 0.5, "denominators": {"Edema": 3, "Cardiomegaly": 1}, "n": 40}), units({"n": 7}), units(None)
    (4, 7, None)
    >>> units({"n_trials": 56, "n_patients": 2})
    2
    """
    if not isinstance(result, Mapping):
        return None
    denominators = result.get("denominators")
    if isinstance(denominators, Mapping):
        return int(sum(v for v in denominators.values() if isinstance(v, (int, float))))
    for key in ("n_patients", "n", "n_trials"):
        if isinstance(result.get(key), (int, float)):
            return int(result[key])
    return None


def condition_label(condition: str, p: float | None = None, with_report: bool = False) -> str:
    """The label results are keyed by: a label as is, or a kind at a strength.

    >>> condition_label("oco", 0.6), condition_label("oco_p60"), condition_label("baseline", with_report=True)
    ('oco_p60', 'oco_p60', 'baseline+report')
    """
    if p is None and not with_report:
        return condition
    return ConditionSpec(condition, 1.0 if p is None else p, with_report).label


def check_results(doc: Any, where: str = "results") -> dict[str, Any]:
    """Refuse a document that is not a shovir results file of this schema, naming the problem.

    >>> check_results({"schema_version": "1.0", "models": {}})
    Traceback (most recent call last):
    ...
    ValueError: results: schema_version '1.0' is not supported (expected 2.0); rescore the run with this shovir
    """
    if not isinstance(doc, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"{where}: schema_version {version!r} is not supported (expected {SCHEMA_VERSION}); "
                         "rescore the run with this shovir")
    models = doc.get("models")
    if not isinstance(models, Mapping):
        raise ValueError(f"{where}: 'models' must be an object of alias -> results")
    for alias, entry in models.items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("protocols"), Mapping):
            raise ValueError(f"{where}: models[{alias!r}] needs 'protocols' (an object of protocol -> metrics)")
    return dict(doc)


class Results:
    """Read access to a results document."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.doc = check_results(doc)

    @classmethod
    def load(cls, path: str | Path) -> "Results":
        path = Path(path)
        if path.is_dir():
            path = path / "results.json"
        try:
            return cls(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no results file; run `shovir score RUN_DIR` first") from None
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from None

    @property
    def aliases(self) -> list[str]:
        return list(self.doc["models"])

    def protocols(self, alias: str | None = None) -> list[str]:
        """Protocols scored for ``alias`` (or for any model)."""
        aliases = [alias] if alias else self.aliases
        seen: dict[str, None] = {}
        for name in aliases:
            seen.update(dict.fromkeys(self.doc["models"].get(name, {}).get("protocols", {})))
        return list(seen)

    def section(self, alias: str, protocol: str) -> dict[str, Any]:
        return self.doc["models"].get(alias, {}).get("protocols", {}).get(protocol, {})

    def entries(self, alias: str, protocol: str, key: str) -> dict[str, Any]:
        """``{condition: raw result}`` of one binding."""
        return self.section(alias, protocol).get(key, {})

    def result(self, alias: str, protocol: str, key: str, condition: str = "", p: float | None = None) -> Any:
        """The raw result of one binding for one condition, or ``None``."""
        return self.entries(alias, protocol, key).get(condition_label(condition, p) if condition else condition)

    def value(self, alias: str, protocol: str, key: str, condition: str, p: float | None = None, *field: str) -> Any:
        """A field inside a raw result (``None`` where absent)."""
        data = self.result(alias, protocol, key, condition, p)
        for part in field:
            if not isinstance(data, Mapping) or part not in data:
                return None
            data = data[part]
        return data

    def interval(self, alias: str, protocol: str, key: str, condition: str, *field: str) -> tuple[Any, Any] | None:
        """``(low, high)`` of a statistic's 95% interval (results keep them under ``ci``)."""
        data = self.result(alias, protocol, key, condition)
        if not isinstance(data, Mapping):
            return None
        ci: Any = data.get("ci", {})
        for part in field:
            if not isinstance(ci, Mapping) or part not in ci:
                return None
            ci = ci[part]
        return (ci.get("low"), ci.get("high")) if isinstance(ci, Mapping) else None

    def curve(self, alias: str, protocol: str, key: str, kind: str, *field: str) -> list[tuple[float, Any]]:
        """``[(p, value), ...]`` of one condition kind across strengths, sorted by p."""
        points = []
        for label, data in self.entries(alias, protocol, key).items():
            spec = ConditionSpec.parse(label)
            if spec.name == kind and not spec.with_report:
                value: Any = data
                for part in field:
                    value = value.get(part) if isinstance(value, Mapping) else None
                points.append((spec.p, value))
        return sorted(points)

    def coverage(self) -> dict[str, dict[str, dict[str, int]]]:
        return self.doc.get("coverage", {})

    def __iter__(self) -> Iterator[str]:
        return iter(self.aliases)
