"""Sweep configuration: which models, which dataset, which interventions — validated up front.

A sweep is models × dataset × conditions. It comes from a YAML file, from flags, or both (flags
override the file: see :meth:`SweepConfig.load`)::

    dataset: {name: synthetic, rows: pairs, n_images: 200}
    models:
      - reference-grounded
      - {name: hf-image-text-to-text, checkpoint: /models/qwen2.5-vl-3b, alias: qwen-3b}
    conditions: shovir            # a preset, or a list such as [baseline, full_noise, {name: oco, p: [0.2, 1.0]}]
    seed: 3
    batch_size: 16
    limit: 20                     # optional: the first 20 samples, for a trial

Presets come from the protocol declarations (:mod:`shovir.protocols`): ``shovir``,
``shovir_area``, ``beyond_accuracy``, ``modalens``. Everything a config names is checked when it
is loaded, before any dataset is built or weight loaded: unknown model, dataset or condition
names suggest the closest match; model and dataset options are checked against what the adapter
or builder accepts.

Models are identified by an **alias**: ``alias:`` when given, else the adapter name, followed by
``@<checkpoint folder name>`` when the entry has a checkpoint — so two checkpoints of one adapter
never share predictions. Two entries with the same alias are refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from shovir.conditions import STRENGTHS, ConditionSpec, closest, expand_conditions

__all__ = ["STRENGTHS", "ConditionSpec", "ModelSpec", "SweepConfig", "default_alias", "parse_value", "parse_options"]

_KEYS = ("dataset", "models", "conditions", "seed", "batch_size", "noise", "box_sizes", "blank", "swap_ssim_below",
         "prompt", "limit")
_ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,119}$")


def default_alias(name: str, options: Mapping[str, Any]) -> str:
    """The adapter name, plus ``@<last path part>`` of the checkpoint when there is one.

    >>> default_alias("medgemma", {}), default_alias("hf-image-text-to-text", {"checkpoint": "/m/Qwen2.5-VL-3B/"})
    ('medgemma', 'hf-image-text-to-text@Qwen2.5-VL-3B')
    >>> default_alias("hf-image-text-to-text", {"checkpoint": "google/medgemma-4b-it"})
    'hf-image-text-to-text@medgemma-4b-it'
    """
    checkpoint = options.get("checkpoint")
    if checkpoint is None:
        return name
    tail = os.fspath(checkpoint).rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
    return f"{name}@{re.sub(r'[^A-Za-z0-9._+-]', '-', tail) or 'checkpoint'}"


@dataclass(frozen=True)
class ModelSpec:
    """A model name from the registry, its options and its alias (what results are keyed by)."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    alias: str = ""

    def __post_init__(self) -> None:
        if not self.alias:
            object.__setattr__(self, "alias", default_alias(self.name, self.options))
        if not _ALIAS.match(self.alias):
            raise ValueError(f"model {self.name!r}: alias {self.alias!r} must be 1-120 letters, digits or . _ @ + - "
                             "(it names folders)")

    @property
    def slug(self) -> str:
        """The alias as a folder name."""
        return self.alias

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "alias": self.alias, **dict(self.options)}


def parse_value(text: str) -> Any:
    """A flag value as YAML reads it: ``3`` → 3, ``0.5`` → 0.5, ``true`` → True, ``[a, b]`` → list.

    >>> parse_value("3"), parse_value("bf16"), parse_value("[0.2, 1]"), parse_value("null")
    (3, 'bf16', [0.2, 1], None)
    """
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_options(pairs: Sequence[str], *, flag: str) -> dict[str, Any]:
    """``["k=v", ...]`` → ``{k: parse_value(v)}``; a pair without ``=`` names the flag.

    >>> parse_options(["rows=pairs", "n_images=8"], flag="--dataset-option")
    {'rows': 'pairs', 'n_images': 8}
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} expects KEY=VALUE, got {pair!r}")
        out[key.strip()] = parse_value(value)
    return out


def _check_dataset(dataset: Mapping[str, Any]) -> None:
    """Unknown dataset names and builder options fail at load time, with the closest match."""
    from shovir.data import BUILDERS, get_builder_class

    name = dataset["name"]
    if name not in BUILDERS:
        raise ValueError(f"dataset: unknown dataset {name!r}{closest(name, list(BUILDERS))}; available: {', '.join(BUILDERS)}")
    from shovir.registry import parameters

    builder = get_builder_class(name)
    accepted = {"data_dir", "cache_dir", "config_name", "split"}
    config_class = getattr(builder, "BUILDER_CONFIG_CLASS", None)
    if config_class is not None:
        names, _ = parameters(config_class)
        accepted |= names - {"name", "version", "description", "data_files", "source_sha256"}
    for key in dataset:
        if key != "name" and key not in accepted:
            raise ValueError(f"dataset {name}: unknown option {key!r}{closest(key, sorted(accepted))}; "
                             f"valid options: {', '.join(sorted(accepted))}")


def _models(entries: Any) -> list[ModelSpec]:
    from shovir.models import check_model_options

    if not isinstance(entries, (list, tuple)) or not entries:
        raise ValueError("sweep config: 'models' must be a non-empty list of model names or {name: ..., options}")
    models: list[ModelSpec] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ValueError(f"models[{index}]: expected a model name or {{name: ..., options}}, got {entry!r}")
        options = {k: v for k, v in entry.items() if k not in ("name", "alias")}
        check_model_options(entry["name"], options, field=f"models[{index}]")
        models.append(ModelSpec(entry["name"], options, str(entry.get("alias") or "")))
    aliases = [m.alias for m in models]
    for alias in sorted({a for a in aliases if aliases.count(a) > 1}):
        clashing = [i for i, a in enumerate(aliases) if a == alias]
        raise ValueError(f"models{clashing}: two entries share the alias {alias!r}; give each entry its own "
                         "'alias:' (results, predictions and tables are keyed by it)")
    return models


def _integer(data: Mapping[str, Any], key: str, default: int | None, minimum: int) -> int | None:
    value = data.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"sweep config: {key} must be an integer >= {minimum}, got {value!r}")
    return value


@dataclass
class SweepConfig:
    """Everything that determines a run's records (and the batch size, which does not)."""

    dataset: dict[str, Any]
    models: list[ModelSpec]
    conditions: list[ConditionSpec]
    seed: int = 3
    batch_size: int = 16
    noise: str = "paper"
    box_sizes: str = "dataset"
    prompt: str | None = None
    limit: int | None = None
    blank: str = "paper"
    swap_ssim_below: float | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SweepConfig":
        """Validate and normalise a mapping (parsed YAML or flags).

        >>> config = SweepConfig.from_dict({"dataset": "synthetic", "models": ["reference-prior"], "conditions": "shovir"})
        >>> len(config.conditions), config.conditions[2].label, config.models[0].alias
        (20, 'ro_p00', 'reference-prior')
        >>> SweepConfig.from_dict({"dataset": "synthetic", "models": ["reference-prior"], "condition": "shovir"})
        Traceback (most recent call last):
        ...
        ValueError: sweep config: unknown key 'condition' (did you mean 'conditions'?); allowed: dataset, ...
        """
        from shovir.protocols import presets

        if not isinstance(data, Mapping):
            raise ValueError(f"sweep config must be a mapping, got {type(data).__name__}")
        for key in data:
            if key not in _KEYS:
                raise ValueError(f"sweep config: unknown key {key!r}{closest(key, _KEYS)}; allowed: {', '.join(_KEYS)}")
        for key in ("dataset", "models", "conditions"):
            if key not in data:
                raise ValueError(f"sweep config: '{key}' is required")
        dataset = data["dataset"]
        dataset = {"name": dataset} if isinstance(dataset, str) else dict(dataset)
        if "name" not in dataset:
            raise ValueError("sweep config: dataset needs a 'name' (e.g. synthetic, mimic_cxr)")
        _check_dataset(dataset)
        noise = data.get("noise", "paper")
        if noise not in ("paper", "authors"):
            raise ValueError(f"sweep config: noise must be 'paper' or 'authors', got {noise!r}")
        box_sizes = data.get("box_sizes", "dataset")
        if box_sizes not in ("dataset", "authors"):
            raise ValueError(f"sweep config: box_sizes must be 'dataset' or 'authors', got {box_sizes!r}")
        prompt = data.get("prompt")
        if prompt is not None and not isinstance(prompt, str):
            raise ValueError(f"sweep config: prompt must be a string, got {prompt!r}")
        blank = data.get("blank", "paper")
        if blank not in ("paper", "input"):
            raise ValueError(f"sweep config: blank must be 'paper' (224x224 RGB gray, Beyond Accuracy §3.3) or 'input' "
                             f"(the input's size and mode), got {blank!r}")
        ssim = data.get("swap_ssim_below")
        if ssim is not None and (isinstance(ssim, bool) or not isinstance(ssim, (int, float)) or not 0 < ssim <= 1):
            raise ValueError(f"sweep config: swap_ssim_below must be a number in (0, 1] (ModaLens used 0.9) or absent, "
                             f"got {ssim!r}")
        return cls(dataset, _models(data["models"]), expand_conditions(data["conditions"], presets()),
                   _integer(data, "seed", 3, 0), _integer(data, "batch_size", 16, 1), noise, box_sizes, prompt,
                   _integer(data, "limit", None, 1), blank, None if ssim is None else float(ssim))

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> "SweepConfig":
        """A config from a YAML file and/or flags. Precedence: flags > file > defaults.

        ``overrides`` holds top-level keys (``seed``, ``batch_size``, ``conditions``, ``limit``,
        ``models`` — replaces the file's list), plus ``dataset_options`` (merged into the file's
        dataset) and ``model_options`` (applied to every model entry).

        >>> SweepConfig.load(overrides={"dataset": "synthetic", "models": ["reference-prior"], "conditions": "baseline",
        ...                             "seed": 5, "dataset_options": {"n_images": 8}}).dataset
        {'name': 'synthetic', 'n_images': 8}
        """
        data: dict[str, Any] = {}
        if path is not None:
            path = Path(path)
            if not path.is_file():
                raise FileNotFoundError(f"--config: no such file {str(path)!r}")
            import yaml

            try:
                loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
            except yaml.YAMLError as error:
                raise ValueError(f"{path}: not valid YAML ({error})") from None
            if not isinstance(loaded, Mapping):
                raise ValueError(f"{path}: the sweep config must be a YAML mapping (dataset:, models:, conditions:)")
            data.update(loaded)
        overrides = dict(overrides or {})
        dataset_options = overrides.pop("dataset_options", None) or {}
        model_options = overrides.pop("model_options", None) or {}
        for key, value in overrides.items():
            if value is not None:
                data[key] = value
        if dataset_options:
            dataset = data.get("dataset", "synthetic")
            data["dataset"] = {**({"name": dataset} if isinstance(dataset, str) else dict(dataset)), **dataset_options}
        if model_options:
            entries = [{"name": m} if isinstance(m, str) else dict(m) for m in data.get("models", [])]
            data["models"] = [{**entry, **model_options} for entry in entries]
        try:
            return cls.from_dict(data)
        except ValueError as error:
            raise ValueError(f"{path}: {error}" if path is not None else str(error)) from None

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "models": [m.as_dict() for m in self.models],
            "conditions": [c.as_dict() for c in self.conditions],
            "seed": self.seed,
            "batch_size": self.batch_size,
            "noise": self.noise,
            "box_sizes": self.box_sizes,
            "prompt": self.prompt,
            "limit": self.limit,
            "blank": self.blank,
            "swap_ssim_below": self.swap_ssim_below,
        }

    def hash(self) -> str:
        """Hash of everything but the batch size (which does not change outputs)."""
        data = {k: v for k, v in self.as_dict().items() if k != "batch_size"}
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]

    def model(self, alias: str) -> ModelSpec:
        for spec in self.models:
            if spec.alias == alias:
                return spec
        raise KeyError(alias)
