"""The evaluate modules in metrics/: load offline, doctests, bad input, the module cache install.

Modelled on evaluate's own ``tests/test_metric_common.py``: every module's doctests run with
``evaluate.load`` pointed at the local folders (attempted > 1, failed = 0), and ``_compute``
takes explicit keyword arguments only.
"""

from __future__ import annotations

import doctest
import inspect
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

evaluate = pytest.importorskip("evaluate")

from shovir.evaluate_modules import install_modules, module_names, modules_root  # noqa: E402

ROOT = modules_root()
NAMES = module_names()
CODES = [0, 1] + [0] * 12


def _load(name: str):
    return evaluate.load(str(ROOT / name))


def test_the_issue_s_modules_are_all_there():
    for name in ("chexbert_f1", "delta_fn", "occlusion_delta", "flip_rate", "nlg", "visual_reliance", "hvrr", "swap_sensitivity"):
        assert name in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_module_doctests_and_signature(name):
    module = _load(name)
    assert not any(p.kind is p.VAR_KEYWORD for p in inspect.signature(module._compute).parameters.values())
    python_module = sys.modules[type(module).__module__]
    local = types.SimpleNamespace(load=lambda path, **kwargs: evaluate.load(str(ROOT / path.split("/")[-1]), **kwargs))
    result = doctest.testmod(python_module, extraglobs={"evaluate": local}, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 1 and result.failed == 0


@pytest.mark.parametrize("name", NAMES)
def test_space_folder_layout(name):
    folder = ROOT / name
    card = (folder / "README.md").read_text()
    header = re.match(r"^---\n(.*?)\n---\n", card, re.S)
    assert header, "the card needs a YAML header for the Space"
    for key in ("title:", "sdk: gradio", "app_file: app.py", "- evaluate", "- metric", "description:"):
        assert key in header.group(1)
    for section in ("## Metric Description", "## How to Use", "### Inputs", "### Output Values", "## Limitations and Bias", "## Citation"):
        assert section in card
    assert f'shovir.load_metric("{name}")' in (folder / "app.py").read_text()  # the shipped module, never the Hub
    assert "shovir" in (folder / "requirements.txt").read_text()
    source = (folder / f"{name}.py").read_text()
    assert not re.search(r"^import \w+\s*,", source, re.M), "evaluate's import scanner needs one import per line"


BAD_INPUTS = {
    "flip_rate": [
        (dict(references=[[0.5] + CODES[1:]], control_predictions=[CODES], predictions=[CODES]), "non-integer"),
        (dict(references=[CODES[:13]], control_predictions=[CODES], predictions=[CODES]), "width 14"),
        (dict(references=[CODES], control_predictions=[CODES], predictions=[[0, 7] + [0] * 12]), "code 7"),
        (dict(references=[CODES], control_predictions=[CODES], predictions=[CODES], target_classes=["Effusion"]), "unknown CheXpert class"),
        (dict(references=[CODES, CODES], control_predictions=[CODES], predictions=[CODES]), "Mismatch"),
        (dict(references=[[float("nan")] + CODES[1:]], control_predictions=[CODES], predictions=[CODES]), "NaN"),
    ],
    "chexbert_f1": [
        (dict(predictions=[[0.5] + CODES[1:]], references=[CODES]), "non-integer"),
        (dict(predictions=[CODES], references=[CODES], uncertain="maybe"), "uncertain must be"),
        (dict(predictions=[], references=[]), "empty"),
    ],
    "delta_fn": [
        (dict(references=[CODES], baseline_predictions=[[0, 4] + [0] * 12], predictions=[CODES]), "code 4"),
    ],
    "occlusion_delta": [
        (dict(references=[CODES], control_predictions=[CODES], predictions=[CODES], target_classes=["Heart"]), "unknown CheXpert class"),
    ],
    "nlg": [
        (dict(predictions=[], references=[]), "empty"),
    ],
    "visual_reliance": [
        (dict(predictions_real=["yes", "no"], predictions_shuffled=["yes"], references=["yes", "no"]), "Mismatch"),
        (dict(predictions_real=["yes", float("nan")], predictions_shuffled=["yes", "no"], references=["yes", "no"]),
         "predictions_real: expected a string answer at index 1, got NaN"),
        (dict(predictions_real=["yes", "no"], predictions_shuffled=["yes", "no"], references=["yes", "no"], predictions_blank=["yes"]),
         "predictions_blank: expected 2 answers"),
        (dict(predictions_real=["B"], predictions_shuffled=["A"], references=["Sagittal"], options=[["Axial", "Coronal"]]),
         "none of its options"),
        (dict(predictions_real=[], predictions_shuffled=[], references=[]), "empty"),
    ],
    "hvrr": [
        (dict(rationales=["Mild effusion."], questions=["Is there effusion?"], predictions_real=["yes"], predictions_shuffled=[3]),
         "predictions_shuffled: expected a string answer at index 0"),
        (dict(rationales=["Mild effusion."], questions=["Is there effusion?"], predictions_real=["yes"], predictions_shuffled=["yes"],
              references=["yes", "no"]), "references: expected 1 answers"),
        (dict(rationales=["Mild effusion."], questions=["Is there effusion?"], predictions_real=["yes"], predictions_shuffled=["yes"],
              max_ngram=1), "max_ngram must be >= 2"),
        (dict(rationales=[], questions=[], predictions_real=[], predictions_shuffled=[]), "empty"),
    ],
    "swap_sensitivity": [
        (dict(original_answers=["yes", "no"], swapped_answers=["yes"], arms=["with_report"] * 2, trial_ids=["t1", "t2"],
              patient_ids=["p1", "p2"]), "Mismatch"),
        (dict(original_answers=["yes", None], swapped_answers=["yes", "no"], arms=["with_report"] * 2, trial_ids=["t1", "t2"],
              patient_ids=["p1", "p2"]), "original_answers: expected a string answer at index 1"),
        (dict(original_answers=["yes", "no"], swapped_answers=["yes", "no"], arms=["with_report", "no_report"], trial_ids=["t1", "t2"],
              patient_ids=["p1", "p2"]), "unknown arm 'no_report'"),
        (dict(original_answers=["yes", "no"], swapped_answers=["yes", "no"], arms=["with_report"] * 2, trial_ids=["t1", "t1"],
              patient_ids=["p1", "p1"]), "appears more than once in arm 'with_report'"),
        (dict(original_answers=["yes", "no"], swapped_answers=["yes", "no"], arms=["with_report"] * 2, trial_ids=["t1", "t2"],
              patient_ids=["p1", float("nan")]), "patient_ids: id at row 1"),
        (dict(original_answers=["yes", "no"], swapped_answers=["yes", "no"], arms=["with_report"] * 2, trial_ids=["t1", "t2"],
              patient_ids=["p1", "p2"], margins_original=[0.5, float("nan")], margins_swapped=[0.0, 0.0]), "margins must be finite"),
        (dict(original_answers=["yes", "no"], swapped_answers=["yes", "no"], arms=["with_report"] * 2, trial_ids=["t1", "t2"],
              patient_ids=["p1", "p2"], margins_original=[0.5, 1.0]), "margins need both"),
        (dict(original_answers=[], swapped_answers=[], arms=[], trial_ids=[], patient_ids=[]), "empty"),
    ],
}


@pytest.mark.parametrize("name, kwargs, message", [(n, k, m) for n, cases in BAD_INPUTS.items() for k, m in cases])
def test_bad_input_raises_value_error_through_compute(name, kwargs, message):
    module = _load(name)
    with pytest.raises(ValueError, match=message):
        module.compute(**kwargs)


def test_installed_modules_load_by_hub_name_offline(tmp_path):
    installed = install_modules(modules_cache=tmp_path / "modules")
    assert {path.stem for path in installed} == set(NAMES)
    script = (
        "import evaluate\n"
        "m = evaluate.load('shovir/flip_rate')\n"
        f"print(m.compute(references=[{CODES}], control_predictions=[{CODES}], predictions=[[0] * 14])['flip_rate'])\n"
    )
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HOME": str(tmp_path / "home"),
           "HF_EVALUATE_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=tmp_path, check=True)
    assert out.stdout.strip() == "1.0"
    # reinstalling replaces the old copy rather than piling up versions
    install_modules(["flip_rate"], modules_cache=tmp_path / "modules")
    assert len(list((tmp_path / "modules" / "evaluate_modules" / "metrics" / "shovir--flip_rate").iterdir())) == 1


def test_cli_lists_and_installs(tmp_path, capsys):
    from shovir.cli import main

    assert main(["metrics", "list"]) == 0
    assert "flip_rate" in capsys.readouterr().out.split()
    assert main(["metrics", "install", "nlg", "--cache", str(tmp_path)]) == 0
    assert Path(capsys.readouterr().out.split(" -> ")[1].strip()).is_file()
    with pytest.raises(ValueError, match="unknown evaluate module"):
        install_modules(["nope"], modules_cache=tmp_path)
