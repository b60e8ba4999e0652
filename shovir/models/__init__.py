"""Model adapters and their registry.

``get_model(name, **options)`` builds an adapter by name. Built-in names map to ``module:Class``
strings imported on first use; third-party packages add adapters through the ``shovir.models``
entry-point group (``name = "package.module:Class"``).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from shovir.models.base import Generation, Message, ModelAdapter

__all__ = ["MODELS", "Generation", "Message", "ModelAdapter", "available_models", "get_model", "register_model"]

MODELS: dict[str, str] = {
    "reference-grounded": "shovir.models.reference:GroundedReference",
    "reference-prior": "shovir.models.reference:PriorReference",
    "reference-context": "shovir.models.reference:ContextReference",
    "hf-image-text-to-text": "shovir.models.hf:ImageTextToTextAdapter",
    "chexagent-2": "shovir.models.chexagent:CheXagent2",
    "cxrmate": "shovir.models.cxrmate:CXRMate",
    "libra-v1": "shovir.models.libra:LibraV1",
    "llava-rad": "shovir.models.libra:LlavaRad",
    "maira-2": "shovir.models.maira:Maira2",
    "medgemma": "shovir.models.hf:MedGemma",
    "radialog": "shovir.models.radialog:RaDialog",
    "nv-reason-cxr": "shovir.models.hf:NVReasonCXR",
}
"""Built-in adapter name → ``module:Class``."""

ENTRY_POINT_GROUP = "shovir.models"


def register_model(name: str, target: str) -> None:
    """Register ``"package.module:Class"`` under ``name`` (for code that cannot use entry points)."""
    if ":" not in target:
        raise ValueError(f"target must look like 'package.module:Class', got {target!r}")
    MODELS[name] = target


def available_models() -> list[str]:
    """Built-in and entry-point adapter names.

    >>> "reference-grounded" in available_models()
    True
    """
    names = set(MODELS)
    names.update(point.name for point in entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def get_model(name: str, **options: Any) -> ModelAdapter:
    """Build the adapter registered as ``name`` with its options."""
    target = MODELS.get(name)
    if target is None:
        points = [point for point in entry_points(group=ENTRY_POINT_GROUP) if point.name == name]
        if not points:
            raise ValueError(f"unknown model {name!r}; available: {', '.join(available_models())}")
        adapter_class = points[0].load()
    else:
        module_name, class_name = target.split(":")
        adapter_class = getattr(importlib.import_module(module_name), class_name)
    adapter = adapter_class(**options)
    if not isinstance(adapter, ModelAdapter):
        raise TypeError(f"{target or name} is not a shovir ModelAdapter")
    return adapter
