"""The Hub Space of every evaluate module: its card and its current-Gradio app (issue 8, item 7).

Each ``metrics/<name>/app.py`` is run as a module (not as ``__main__``), so it builds its
``gradio.Interface`` through ``shovir.load_metric`` and ``shovir.spaces.build_widget`` without
launching a server; the interface's inputs must be the module's feature columns, and submitting
the boxes must give what ``module.compute`` gives. The cards are checked against what the Hub
reads (the YAML header of an evaluate metric Space) and their examples run as doctests.
"""

from __future__ import annotations

import configparser
import doctest
import json
import re
import runpy
import sys
from pathlib import Path

import pytest
import yaml

evaluate = pytest.importorskip("evaluate")

import shovir  # noqa: E402
from shovir.evaluate_modules import load_metric, module_names, modules_root  # noqa: E402
from shovir.spaces import GRADIO_SDK_VERSION, card_body, parse_widget_inputs, widget_fields, widget_options  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
ROOT = modules_root()
NAMES = module_names()
HEADER_KEYS = ["title", "emoji", "colorFrom", "colorTo", "sdk", "sdk_version", "app_file", "pinned", "license", "tags",
               "description"]
SECTIONS = ["# Metric Card for", "## Metric Description", "## How to Use", "### Inputs", "### Output Values",
            "### Examples", "## Limitations and Bias", "## Citation", "## Further References"]
CARDIOMEGALY = [0, 1] + [0] * 12
NEGATED = [0, 2] + [0] * 12


def _gradio():
    return pytest.importorskip("gradio", reason='the Space apps need Gradio: pip install "shovir[spaces]" '
                                                 '(the dev extra includes it)')


def _header(name: str) -> dict:
    path = ROOT / name / "README.md"
    assert path.is_file(), f"{name}: no metric card (README.md) beside the module"
    card = path.read_text(encoding="utf-8")
    match = re.match(r"\A---\n(.*?)\n---\n", card, re.S)
    assert match, f"{name}: the card needs the YAML header a Space reads"
    return yaml.safe_load(match.group(1))


def _run_app(name: str, monkeypatch: pytest.MonkeyPatch):
    gr = _gradio()
    source = (ROOT / name / "app.py").read_text()
    # checked before running it: an old-style app would load from the Hub and launch a server
    assert f'shovir.load_metric("{name}")' in source and "build_widget" in source, \
        f"{name}/app.py must load its module with shovir.load_metric and build it with shovir.spaces.build_widget"
    assert "evaluate.load(" not in source and "launch_gradio_widget" not in source
    launched = []
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, *a, **k: launched.append(self))
    namespace = runpy.run_path(str(ROOT / name / "app.py"), run_name="app")
    assert not launched, "the app must launch only when run as __main__"
    return gr, namespace["demo"]


def _submit(demo, name: str, keyword_arguments: str = "", **boxes: str):
    """Call the interface's function as Gradio does: one text per box, in order, then the options."""
    fields = [field.name for field in widget_fields(load_metric(name))]
    assert set(boxes) <= set(fields), f"test error: {sorted(set(boxes) - set(fields))} are not boxes of {name}"
    return demo.fn(*(boxes.get(field, "") for field in fields), keyword_arguments)


# -- apps ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_app_builds_an_interface_of_the_module_s_features(name, monkeypatch):
    gr, demo = _run_app(name, monkeypatch)
    module = load_metric(name)
    assert isinstance(demo, gr.Interface)
    schemas = module.features if isinstance(module.features, list) else [module.features]
    columns = list(dict.fromkeys(column for schema in schemas for column in schema))
    *boxes, options = demo.input_components
    assert [box.label.removesuffix(" (optional)") for box in boxes] == columns
    # a column is optional when some schema lacks it or the module declares it nullable
    # (shovir.metrics._checks.Column(required=False)); the others are required
    nullable = {column.name for column in getattr(module, "_COLUMNS", ()) if not column.required}
    for box, column in zip(boxes, columns):
        optional = column in nullable or not all(column in schema for schema in schemas)
        assert box.label.endswith("(optional)") == optional
    assert options.label == "keyword_arguments"
    assert json.loads(options.value) == widget_options(module)
    assert set(widget_options(module)).isdisjoint(columns)
    [output] = demo.output_components
    assert isinstance(output, gr.JSON)
    assert demo.article and demo.article.lstrip().startswith("# Metric Card for")


def test_submitting_the_boxes_gives_what_compute_gives(monkeypatch):
    _, demo = _run_app("flip_rate", monkeypatch)
    rows = json.dumps([CARDIOMEGALY, CARDIOMEGALY])
    result = _submit(demo, "flip_rate", references=rows, control_predictions=rows,
                     predictions=json.dumps([NEGATED, CARDIOMEGALY]), target_classes=json.dumps(["Cardiomegaly"] * 2))
    expected = load_metric("flip_rate").compute(references=[CARDIOMEGALY] * 2, control_predictions=[CARDIOMEGALY] * 2,
                                                predictions=[NEGATED, CARDIOMEGALY], target_classes=["Cardiomegaly"] * 2)
    assert result == expected and result["flip_rate"] == 0.5


def test_optional_columns_and_keyword_arguments_reach_compute(monkeypatch):
    _, demo = _run_app("visual_reliance", monkeypatch)
    real, shuffled, blank = ["Yes.", "no", "yes", "Yes"], ["yes", "Yes", "No", "yes"], ["yes"] * 4
    references = ["yes", "no", "yes", "no"]
    boxes = dict(predictions_real=json.dumps(real), predictions_shuffled=json.dumps(shuffled),
                 references=json.dumps(references))
    with_blank = _submit(demo, "visual_reliance", '{"n_resamples": 0, "seed": 1}', predictions_blank=json.dumps(blank),
                         **boxes)
    assert (with_blank["vrs"], with_blank["blank_drop"], with_blank["image_sensitivity"]) == (0.5, 0.25, 0.5)
    without_blank = _submit(demo, "visual_reliance", '{"n_resamples": 0}', predictions_blank="  ", **boxes)
    assert without_blank["vrs"] == 0.5 and without_blank["blank_drop"] is None


_ROW = json.dumps([CARDIOMEGALY])


@pytest.mark.parametrize("references, keyword_arguments, message", [
    ("", "", "references: this column is required"),
    ("[[0, 1", "", "references: not valid JSON"),
    ('{"a": 1}', "", "references: expected a JSON list"),
    (_ROW, '{"n_resample": 10}', r"unknown argument\(s\) \['n_resample'\]"),
    (_ROW, "[1]", "keyword_arguments: expected a JSON object"),
])
def test_bad_boxes_are_shown_as_errors_naming_the_box(references, keyword_arguments, message, monkeypatch):
    gr, demo = _run_app("flip_rate", monkeypatch)
    with pytest.raises(gr.Error, match=message):
        _submit(demo, "flip_rate", keyword_arguments, references=references, control_predictions=_ROW, predictions=_ROW)


def test_the_module_s_own_errors_reach_the_page(monkeypatch):
    gr, demo = _run_app("flip_rate", monkeypatch)
    with pytest.raises(gr.Error, match="unknown CheXpert class"):
        _submit(demo, "flip_rate", references=_ROW, control_predictions=_ROW, predictions=_ROW,
                target_classes=json.dumps(["Effusion"]))


def test_parse_widget_inputs_needs_no_gradio(monkeypatch):
    monkeypatch.setitem(sys.modules, "gradio", None)
    module = load_metric("nlg")
    assert parse_widget_inputs(module, {"predictions": '["a b"]', "references": '["a b"]'}) == \
        {"predictions": ["a b"], "references": ["a b"]}
    assert [field.name for field in widget_fields(module)] == ["predictions", "references", "clusters"]
    with pytest.raises(ValueError, match=r"unknown input column\(s\) \['prediction'\]"):
        parse_widget_inputs(module, {"prediction": "[]"})


def test_building_a_widget_without_gradio_names_the_extra(monkeypatch):
    from shovir.spaces import build_widget

    monkeypatch.setitem(sys.modules, "gradio", None)
    with pytest.raises(ImportError, match=r'pip install "shovir\[spaces\]"'):
        build_widget(load_metric("nlg"))


def test_the_installed_gradio_is_the_cards_major_version():
    gr = _gradio()
    assert gr.__version__.split(".")[0] == GRADIO_SDK_VERSION.split(".")[0], \
        f"the cards declare Gradio {GRADIO_SDK_VERSION} but {gr.__version__} is installed"


# -- cards and Space files ----------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_card_header_is_a_current_evaluate_space(name):
    header = _header(name)
    assert list(header) == HEADER_KEYS
    assert header["sdk"] == "gradio" and header["app_file"] == "app.py" and header["pinned"] is False
    assert str(header["sdk_version"]) == GRADIO_SDK_VERSION
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    assert header["license"] == setup["metadata"]["license"].lower()
    assert {"evaluate", "metric"} <= set(header["tags"])
    assert header["description"].strip()


@pytest.mark.parametrize("name", NAMES)
def test_card_sections_homepage_and_loader(name):
    card = (ROOT / name / "README.md").read_text(encoding="utf-8")
    positions = [card.find(section) for section in SECTIONS]
    assert -1 not in positions and positions == sorted(positions), "sections missing or out of evaluate's order"
    references = card[card.index("## Further References"):]
    assert re.search(r"^- Homepage: https://\S+", references, re.M)
    assert "Licence: Apache-2.0" in references
    how_to_use = card[card.index("## How to Use"):card.index("### Inputs")]
    assert f'shovir.load_metric("{name}")' in how_to_use
    assert how_to_use.index(f'shovir.load_metric("{name}")') < how_to_use.find(f'evaluate.load("shovir/{name}")')


_AUTHORS = {"ShoViR": "Ruffini, Filippo", "Beyond Accuracy": "Zafar, Anas", "ModaLens": "Cajas Ord"}


@pytest.mark.parametrize("name", NAMES)
def test_card_citations_are_complete(name):
    card = (ROOT / name / "README.md").read_text(encoding="utf-8")
    bibtex = card[card.index("## Citation"):card.index("## Further References")]
    entries = re.findall(r"@\w+\{[^@]*", bibtex)
    assert entries
    for entry in entries:
        for field in ("title", "author", "year"):
            assert re.search(rf"^\s*{field}\s*=", entry, re.M), f"{name}: {entry.split(',')[0]} has no {field}"
        assert re.search(r"^\s*(journal|booktitle)\s*=", entry, re.M)
    description = card[card.index("## Metric Description"):card.index("## How to Use")]
    for paper, first_author in _AUTHORS.items():
        if paper in description:
            assert first_author in bibtex, f"{name}: the card describes {paper} but does not cite it with its authors"


@pytest.mark.parametrize("name", NAMES)
def test_card_examples_run(name):
    card = card_body(ROOT / name / "README.md")
    examples = card[card.index("### Examples"):card.index("## Limitations and Bias")]
    assert f'shovir.load_metric("{name}")' in examples
    code = "\n".join(re.findall(r"```python\n(.*?)```", examples, re.S))
    test = doctest.DocTestParser().get_doctest(code, {}, f"{name}/README.md", str(ROOT / name / "README.md"), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.summarize(verbose=False).attempted > 2
    assert runner.failures == 0


@pytest.mark.parametrize("name", NAMES)
def test_requirements_pin_this_release(name):
    lines = [line.strip() for line in (ROOT / name / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert any(re.fullmatch(r"evaluate==[\d.]+", line) for line in lines)
    assert any(re.fullmatch(rf"shovir(\[[\w,]+\])?=={re.escape(shovir.__version__)}", line) for line in lines), \
        f"{name}/requirements.txt must pin shovir=={shovir.__version__}: the Space runs the module of that release"
