"""Typed records: what the runner writes, the store keeps and the scorer reads.

* :class:`GenerationRecord` — one model output, keyed by its generation key (what determines it:
  model config, image content, condition, strength, prompt, seed; see :mod:`shovir.runner.plan`).
  A failed generation is recorded with ``error`` set and no text: it is never scored and is
  generated again on the next run.
* :class:`Prediction` — one (sample, condition) of one model: a generation joined to the sample
  it answers, as written to ``predictions/<alias>/<dataset>/<condition>.jsonl``.

Both round-trip through one JSON line (:meth:`to_json` / :meth:`from_json`); a malformed line is a
``ValueError`` naming the file and line.

>>> record = GenerationRecord(key="ab12", text="No effusion.", seed=7)
>>> GenerationRecord.from_json(record.to_json()) == record
True
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, Mapping

__all__ = ["GenerationRecord", "Prediction"]


def _from_mapping(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
    names = {f.name for f in fields(cls)}
    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
    missing = sorted(n for n in required if n not in data)
    if missing:
        raise ValueError(f"{where}: record lacks {missing}")
    return cls(**{k: v for k, v in data.items() if k in names})


def _loads(line: str, where: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: corrupt record ({error}); delete the line to regenerate it") from None


@dataclass(frozen=True)
class GenerationRecord:
    """One model output under its generation key."""

    key: str
    text: str | None = None
    reasoning: str | None = None
    scores: dict[str, float] | None = None
    seed: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """A usable output (failures are regenerated, never scored)."""
        return self.error is None and self.text is not None

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, line: str, where: str = "record") -> "GenerationRecord":
        return _from_mapping(cls, _loads(line, where), where)


@dataclass(frozen=True)
class Prediction:
    """One sample under one condition, for one model alias."""

    sample_id: str
    image_id: str
    condition: str
    model: str
    text: str
    target_class: str = ""
    p: float = 1.0
    with_report: bool = False
    donor_image_id: str | None = None
    seed: int = 0
    adapter: str = ""
    prompt_hash: str = ""
    generation: str = ""
    config_hash: str = ""
    reasoning: str | None = None
    scores: dict[str, float] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, line: str, where: str = "prediction") -> "Prediction":
        return _from_mapping(cls, _loads(line, where), where)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
