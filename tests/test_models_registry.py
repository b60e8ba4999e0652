"""The model registry: built-in names, third-party entry points, helpful errors."""

from __future__ import annotations

import types

import pytest

import shovir.models as registry
import shovir.registry as registry_module
from shovir.models import Generation, ModelAdapter, available_models, get_model


class Echo(ModelAdapter):
    name = "echo"

    def __init__(self, suffix: str = "") -> None:
        self.suffix = suffix

    def generate(self, messages):
        return [Generation((m.prompt or "") + self.suffix) for m in messages]


class NotAnAdapter:
    def __init__(self) -> None:
        pass


def _entry_points(**targets):
    def entry_points(group: str):
        assert group == "shovir.models"
        return [types.SimpleNamespace(name=name, value=f"acme:{name}", load=lambda target=target: target)
                for name, target in targets.items()]

    return entry_points


def test_entry_point_adapters_are_listed_and_built(monkeypatch):
    monkeypatch.setattr(registry_module, "entry_points", _entry_points(**{"acme-echo": Echo}))
    assert "acme-echo" in available_models() and "reference-grounded" in available_models()
    model = get_model("acme-echo", suffix="!")
    assert model.generate([registry.Message(images=[], prompt="hi")])[0].text == "hi!"


def test_unknown_names_and_foreign_classes_are_refused(monkeypatch):
    monkeypatch.setattr(registry_module, "entry_points", _entry_points(bogus=NotAnAdapter))
    with pytest.raises(ValueError, match="unknown model 'nope'.*reference-grounded"):
        get_model("nope")
    with pytest.raises(TypeError, match="not a shovir ModelAdapter"):
        get_model("bogus")


def test_built_in_names_import_lazily():
    assert get_model("reference-prior").name == "reference-prior"
    assert set(registry.MODELS) >= {"medgemma", "nv-reason-cxr", "maira-2", "chexagent-2", "cxrmate", "libra-v1", "llava-rad",
                                    "radialog", "hf-image-text-to-text"}
