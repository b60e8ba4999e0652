"""Dataset builders: synthetic phantoms, MIMIC-CXR, PadChest-GR and medical VQA sets.

Each builder is a ``datasets.GeneratorBasedBuilder`` subclass, instantiated directly (datasets 4
no longer loads scripts). :func:`build` is the short way to get a ``datasets.Dataset``:

>>> from shovir.data import BUILDERS
>>> sorted(BUILDERS)
['mimic_cxr', 'mimic_vqa', 'padchest_gr', 'synthetic', 'vqa']
"""

from __future__ import annotations

from typing import Any

import datasets

from shovir.data._base import (
    IMAGE_FEATURES,
    PAIR_FEATURES,
    BuildError,
    BuildReport,
    GroundedBuilder,
    ValidatingBuilder,
    resolve_inside,
)
from shovir.registry import Registry

__all__ = [
    "BUILDERS",
    "IMAGE_FEATURES",
    "PAIR_FEATURES",
    "BuildError",
    "BuildReport",
    "GroundedBuilder",
    "ValidatingBuilder",
    "build",
    "get_builder_class",
    "resolve_inside",
]

BUILDERS = Registry("dataset", "shovir.datasets", {
    "synthetic": "shovir.data.synthetic:SyntheticCXR",
    "mimic_cxr": "shovir.data.mimic_cxr:MimicCXR",
    "padchest_gr": "shovir.data.padchest_gr:PadChestGR",
    "vqa": "shovir.data.vqa:MedicalVQA",
    "mimic_vqa": "shovir.data.mimic_vqa:MimicVQA",
})
"""Builder name → ``module:Class``, imported on first use (entry-point group ``shovir.datasets``)."""


def get_builder_class(name: str) -> type[ValidatingBuilder]:
    """The builder class registered as ``name``.

    >>> get_builder_class("synthetic").__name__
    'SyntheticCXR'
    """
    builder = BUILDERS.load(name)
    if not (isinstance(builder, type) and issubclass(builder, datasets.DatasetBuilder)):
        raise TypeError(f"dataset {name!r} ({BUILDERS[name]}) is not a datasets builder class")
    return builder


def build(
    name: str,
    *,
    config_name: str | None = None,
    data_dir: str | None = None,
    cache_dir: str | None = None,
    split: str = "test",
    **config: Any,
) -> tuple[datasets.Dataset, BuildReport]:
    """Build (or reuse from the cache) dataset ``name`` and return it with its build report.

    ``config`` holds the builder's options (``rows="pairs"``, ``on_error="skip"``, …).
    """
    builder_class = get_builder_class(name)
    if config_name is None and "rows" in config:
        config_name = config["rows"]
    builder = builder_class(config_name=config_name, data_dir=data_dir, cache_dir=cache_dir, **config)
    builder.download_and_prepare()
    return builder.as_dataset(split=split), builder.build_report
