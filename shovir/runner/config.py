"""Sweep configuration: which models, which dataset, which interventions.

A sweep is models × dataset × conditions. It comes from a YAML file or from flags::

    dataset: {name: synthetic, rows: pairs, n_images: 200}
    models:
      - reference-grounded
      - {name: medgemma, dtype: bfloat16}
    conditions: shovir            # a preset, or a list such as [baseline, full_noise, {name: oco, p: [0.2, 1.0]}]
    seed: 3
    batch_size: 16

Condition presets: ``shovir`` (baseline, full noise, RO/OCO/DOCO at p ∈ {0, .2, .4, .6, .8, 1}),
``shovir_area`` (the same plus area-matched RO), ``beyond_accuracy`` (real, blank, shuffled),
``modalens`` (real and same-patient swap, each with and without the report).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = ["STRENGTHS", "PRESETS", "ConditionSpec", "ModelSpec", "SweepConfig"]

STRENGTHS: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
"""The blending strengths of ShoViR §3.2."""

_IMAGE_CONDITIONS = ("baseline", "full_noise", "blank", "shuffle", "swap")
_BOX_CONDITIONS = ("oco", "doco", "ro", "ro_area")

PRESETS: dict[str, list[dict[str, Any]]] = {
    "shovir": [{"name": "baseline"}, {"name": "full_noise"}]
    + [{"name": name, "p": list(STRENGTHS)} for name in ("ro", "oco", "doco")],
    "shovir_area": [{"name": "baseline"}, {"name": "full_noise"}]
    + [{"name": name, "p": list(STRENGTHS)} for name in ("ro", "ro_area", "oco", "doco")],
    "beyond_accuracy": [{"name": "baseline"}, {"name": "blank"}, {"name": "shuffle"}],
    "modalens": [{"name": "baseline", "with_report": flag} for flag in (False, True)]
    + [{"name": "swap", "with_report": flag} for flag in (False, True)],
}


@dataclass(frozen=True)
class ConditionSpec:
    """One condition of the sweep at one strength (``p``) and report setting."""

    name: str
    p: float = 1.0
    with_report: bool = False

    @property
    def label(self) -> str:
        """File-name-safe label: ``oco_p60``, ``full_noise``, ``swap+report``.

        >>> ConditionSpec("oco", 0.6).label, ConditionSpec("swap", with_report=True).label
        ('oco_p60', 'swap+report')
        """
        base = f"{self.name}_p{int(round(self.p * 100)):02d}" if self.name in _BOX_CONDITIONS else self.name
        return base + ("+report" if self.with_report else "")

    @property
    def image_condition(self) -> str:
        """The intervention actually applied to the image: p = 0 of a box condition (and of
        full noise) is the unperturbed baseline image."""
        if self.name in _BOX_CONDITIONS + ("full_noise",) and self.p == 0:
            return "baseline"
        return self.name


@dataclass(frozen=True)
class ModelSpec:
    """A model name from the registry and its options."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def slug(self) -> str:
        return self.name.replace("/", "__")


def _expand_conditions(entries: str | Sequence[Any]) -> list[ConditionSpec]:
    if isinstance(entries, str):
        if entries not in PRESETS:
            raise ValueError(f"conditions: unknown preset {entries!r}; presets: {', '.join(PRESETS)}")
        entries = PRESETS[entries]
    specs: list[ConditionSpec] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, str):
            if entry in PRESETS:
                specs.extend(_expand_conditions(entry))
                continue
            entry = {"name": entry}
        if not isinstance(entry, Mapping) or "name" not in entry:
            raise ValueError(f"conditions[{index}]: expected a name or {{name: ..., p: [...]}}, got {entry!r}")
        name = entry["name"]
        if name not in _IMAGE_CONDITIONS + _BOX_CONDITIONS:
            raise ValueError(f"conditions[{index}]: unknown condition {name!r}; expected one of {_IMAGE_CONDITIONS + _BOX_CONDITIONS}")
        strengths = entry.get("p", [1.0] if name in _BOX_CONDITIONS + ("full_noise",) else [1.0])
        strengths = strengths if isinstance(strengths, (list, tuple)) else [strengths]
        for p in strengths:
            if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0 <= p <= 1:
                raise ValueError(f"conditions[{index}].p: strengths must be numbers in [0, 1], got {p!r}")
            specs.append(ConditionSpec(name, float(p), bool(entry.get("with_report", False))))
    labels = [spec.label for spec in specs]
    duplicated = sorted({label for label in labels if labels.count(label) > 1})
    if duplicated:
        raise ValueError(f"conditions: {duplicated} listed more than once")
    return specs


@dataclass
class SweepConfig:
    """Everything that determines a run's records."""

    dataset: dict[str, Any]
    models: list[ModelSpec]
    conditions: list[ConditionSpec]
    seed: int = 3
    batch_size: int = 16
    noise: str = "paper"
    box_sizes: str = "dataset"
    prompt: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SweepConfig":
        """Validate and normalise a mapping (parsed YAML or flags).

        >>> config = SweepConfig.from_dict({"dataset": "synthetic", "models": ["reference-prior"], "conditions": "shovir"})
        >>> len(config.conditions), config.conditions[2].label
        (20, 'ro_p00')
        """
        unknown = set(data) - {"dataset", "models", "conditions", "seed", "batch_size", "noise", "box_sizes", "prompt"}
        if unknown:
            raise ValueError(f"sweep config: unknown keys {sorted(unknown)}")
        for key in ("dataset", "models", "conditions"):
            if key not in data:
                raise ValueError(f"sweep config: '{key}' is required")
        dataset = data["dataset"]
        dataset = {"name": dataset} if isinstance(dataset, str) else dict(dataset)
        if "name" not in dataset:
            raise ValueError("sweep config: dataset needs a 'name' (e.g. synthetic, mimic_cxr)")
        models = []
        for index, entry in enumerate(data["models"]):
            if isinstance(entry, str):
                models.append(ModelSpec(entry))
            elif isinstance(entry, Mapping) and "name" in entry:
                models.append(ModelSpec(entry["name"], {k: v for k, v in entry.items() if k != "name"}))
            else:
                raise ValueError(f"models[{index}]: expected a model name or {{name: ..., options}}, got {entry!r}")
        if not models:
            raise ValueError("sweep config: at least one model is needed")
        noise = data.get("noise", "paper")
        if noise not in ("paper", "authors"):
            raise ValueError(f"noise must be 'paper' or 'authors', got {noise!r}")
        box_sizes = data.get("box_sizes", "dataset")
        if box_sizes not in ("dataset", "authors"):
            raise ValueError(f"box_sizes must be 'dataset' or 'authors', got {box_sizes!r}")
        batch_size = int(data.get("batch_size", 16))
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        return cls(dataset, models, _expand_conditions(data["conditions"]), int(data.get("seed", 3)), batch_size,
                   noise, box_sizes, data.get("prompt"))

    @classmethod
    def from_yaml(cls, path: str | Path) -> "SweepConfig":
        import yaml

        with open(path) as handle:
            return cls.from_dict(yaml.safe_load(handle))

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "models": [{"name": m.name, **dict(m.options)} for m in self.models],
            "conditions": [asdict(c) for c in self.conditions],
            "seed": self.seed,
            "batch_size": self.batch_size,
            "noise": self.noise,
            "box_sizes": self.box_sizes,
            "prompt": self.prompt,
        }

    def hash(self) -> str:
        """Hash of everything but the batch size (which does not change outputs)."""
        data = {k: v for k, v in self.as_dict().items() if k != "batch_size"}
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]
