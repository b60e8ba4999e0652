"""Model adapters and their registry.

``get_model(name, **options)`` builds an adapter by name. Built-in names map to ``module:Class``
strings imported on first use (:class:`shovir.registry.Registry`); third-party packages add
adapters through the ``shovir.models`` entry-point group (``name = "package.module:Class"``), or
at run time with :func:`register_model`.
"""

from __future__ import annotations

from typing import Any

from shovir.models.base import Generation, Message, ModelAdapter
from shovir.registry import Registry, check_options

__all__ = ["MODELS", "Generation", "Message", "ModelAdapter", "available_models", "adapter_class", "get_model",
           "register_model", "check_model_options"]

ENTRY_POINT_GROUP = "shovir.models"

MODELS = Registry("model", ENTRY_POINT_GROUP, {
    "reference-grounded": "shovir.calibration.reference:GroundedReference",
    "reference-prior": "shovir.calibration.reference:PriorReference",
    "reference-context": "shovir.calibration.reference:ContextReference",
    "reference-vqa-grounded": "shovir.calibration.vqa_reference:GroundedVQAReference",
    "reference-vqa-prior": "shovir.calibration.vqa_reference:PriorVQAReference",
    "reference-vqa-report": "shovir.calibration.vqa_reference:ReportReliantVQAReference",
    "hf-image-text-to-text": "shovir.models.hf:ImageTextToTextAdapter",
    "chexagent-2": "shovir.models.chexagent:CheXagent2",
    "cxrmate": "shovir.models.cxrmate:CXRMate",
    "libra-v1": "shovir.models.libra:LibraV1",
    "llava-rad": "shovir.models.libra:LlavaRad",
    "maira-2": "shovir.models.maira:Maira2",
    "medgemma": "shovir.models.medgemma:MedGemma",
    "radialog": "shovir.models.radialog:RaDialog",
    "nv-reason-cxr": "shovir.models.nv_reason:NVReasonCXR",
    "openai-compatible": "shovir.models.openai_compat:OpenAICompatible",
    "vllm": "shovir.models.vllm_engine:VLLMEngine",
})
"""Adapter name → ``module:Class`` (built-in and entry points)."""


def register_model(name: str, target: str | type) -> None:
    """Register ``"package.module:Class"`` (or the class) under ``name``, for code that cannot
    use entry points; a name already taken by another adapter is refused."""
    MODELS.register(name, target, source="register_model")


def available_models() -> list[str]:
    """Built-in and entry-point adapter names.

    >>> "reference-grounded" in available_models()
    True
    """
    return MODELS.names()


def adapter_class(name: str, *, field: str = "model") -> type[ModelAdapter]:
    """The adapter class registered as ``name`` (imported, not instantiated)."""
    target = MODELS.load(name, field=field)
    if not (isinstance(target, type) and issubclass(target, ModelAdapter)):
        raise TypeError(f"{MODELS.entry(name).target or name} is not a shovir ModelAdapter")
    return target


def check_model_options(name: str, options: dict[str, Any], *, field: str = "model") -> type[ModelAdapter]:
    """Refuse an unknown adapter or an option its constructor does not take, before any loading.

    >>> check_model_options("reference-prior", {"temperature": 0.5})
    Traceback (most recent call last):
    ...
    ValueError: model reference-prior: unknown option 'temperature'; valid options: (none)
    """
    cls = adapter_class(name, field=field)
    check_options(cls, options, field=f"{field} {name}")
    return cls


def get_model(name: str, **options: Any) -> ModelAdapter:
    """Build the adapter registered as ``name`` with its options."""
    adapter = adapter_class(name)(**options)
    if not isinstance(adapter, ModelAdapter):
        raise TypeError(f"{MODELS.entry(name).target or name} is not a shovir ModelAdapter")
    return adapter
