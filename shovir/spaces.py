"""Gradio widgets for the evaluate modules: what each ``metrics/<name>/app.py`` (a Hub Space) runs.

evaluate's own ``evaluate.utils.launch_gradio_widget`` is written for Gradio 3 (``gr.inputs``,
``gr.outputs``), which current Gradio no longer has, and only shows the first of a module's
feature schemas. :func:`build_widget` builds the same kind of page with current Gradio:

- one JSON text box per input column, named after the feature, covering every schema the module
  declares (a column missing from some schema is optional: leave its box empty);
- one JSON box of keyword arguments (``n_resamples``, ``seed``, ...), pre-filled with the defaults
  of the module's ``_compute``;
- a JSON output holding what ``module.compute`` returns, and the metric card below.

A Space's ``app.py`` is then::

    import shovir
    from shovir.spaces import build_widget

    demo = build_widget(shovir.load_metric("flip_rate"))

    if __name__ == "__main__":
        demo.launch()

Gradio is imported only when a widget is built (``pip install "shovir[spaces]"``); parsing the
inputs (:func:`widget_fields`, :func:`parse_widget_inputs`) needs no Gradio.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["GRADIO_SDK_VERSION", "WidgetField", "widget_fields", "widget_options", "parse_widget_inputs", "build_widget",
           "card_body"]

#: the Gradio version the metric cards declare as their Space's ``sdk_version`` (and ``[spaces]`` pins)
GRADIO_SDK_VERSION = "6.31.0"

_YAML_HEADER = re.compile(r"\A---\r?\n.*?\r?\n---\r?\n", re.S)


@dataclass(frozen=True)
class WidgetField:
    """One input column of a module, as the widget shows it.

    ``name`` is the feature name, ``required`` is False for a column that only some of the
    module's feature schemas declare, and ``example`` is a JSON placeholder of the expected shape.
    """

    name: str
    required: bool
    example: str
    kind: str


def _kind(feature: Any) -> tuple[str, str]:
    """The widget's description of a ``datasets`` feature type, and a JSON placeholder."""
    import datasets

    if isinstance(feature, datasets.Value):
        dtype = feature.dtype
        if dtype == "string":
            return "text", '["first row", "second row"]'
        if dtype == "bool":
            return "bool", "[true, false]"
        if dtype.startswith(("int", "uint")):
            return "integer", "[1, 2]"
        if dtype.startswith("float"):
            return "number", "[0.5, 1.5]"
        return dtype, "[...]"
    inner = getattr(feature, "feature", None)
    if inner is not None:  # datasets.Sequence / datasets.List: one list per row
        length = getattr(feature, "length", -1)
        sub, _ = _kind(inner)
        size = f" of {length}" if length and length > 0 else ""
        example = _CODE_ROWS if sub in ("number", "integer") else '[["a", "b"], ["c"]]'
        return f"list{size} of {sub} values", example
    return type(feature).__name__, "[...]"


_CODE_ROWS = "[[0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]]"
# descriptions of the column kinds of shovir.metrics._checks.Column
_COLUMN_KINDS = {
    "codes": ("14-code CheXpert vector (0 blank, 1 positive, 2 negative, 3 uncertain) or report text", _CODE_ROWS),
    "class": ("CheXpert class name", '["Cardiomegaly", "Edema"]'),
    "text": ("text", '["first row", "second row"]'),
    "id": ("id (string or integer)", '["p1", "p2"]'),
    "number": ("number", "[0.5, 1.5]"),
    "options": ("list of option strings (or null)", '[["yes", "no"], null]'),
}


def _schemas(module: Any) -> list[dict[str, Any]]:
    features = module.features
    if features is None:
        raise ValueError(f"module {getattr(module, 'name', module)!r} declares no features: build_widget needs "
                         f"the input columns (evaluate.MetricInfo(features=...))")
    return [dict(f) for f in features] if isinstance(features, list) else [dict(features)]


def widget_fields(module: Any) -> list[WidgetField]:
    """The input columns of an evaluate module, over all its feature schemas, in declaration order.

    >>> from shovir.evaluate_modules import load_metric
    >>> required = {field.name: field.required for field in widget_fields(load_metric("flip_rate"))}
    >>> list(required)[:3], required["references"], required["target_classes"]
    (['references', 'control_predictions', 'predictions'], True, False)
    """
    schemas = _schemas(module)
    names: list[str] = []
    for schema in schemas:
        names += [name for name in schema if name not in names]
    # modules built on shovir.metrics._checks.StreamingModule declare one schema and mark their
    # optional (nullable) columns in ``_COLUMNS``
    declared = {column.name: column for column in getattr(module, "_COLUMNS", ())}
    fields = []
    for name in names:
        feature = next(schema[name] for schema in schemas if name in schema)
        kind, example = _COLUMN_KINDS.get(getattr(declared.get(name), "kind", None)) or _kind(feature)
        required = all(name in schema for schema in schemas) and getattr(declared.get(name), "required", True)
        fields.append(WidgetField(name=name, required=bool(required), example=example, kind=kind))
    return fields


def widget_options(module: Any) -> dict[str, Any]:
    """The keyword options of ``module._compute`` that are not input columns, with their defaults
    (JSON-ready: a default that JSON cannot hold is shown as ``null``).

    >>> from shovir.evaluate_modules import load_metric
    >>> options = widget_options(load_metric("flip_rate"))
    >>> options["uncertain"], "references" in options
    ('negative', False)
    """
    columns = {field.name for field in widget_fields(module)}
    options = {}
    for name, parameter in inspect.signature(module._compute).parameters.items():
        if name in columns or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        default = None if parameter.default is parameter.empty else parameter.default
        try:
            json.dumps(default)
        except (TypeError, ValueError):
            default = None
        options[name] = default
    return options


def parse_widget_inputs(module: Any, columns: dict[str, str], keyword_arguments: str = "") -> dict[str, Any]:
    """Turn the widget's text boxes into ``module.compute`` keyword arguments.

    ``columns`` maps each input column to the JSON text of its box (a list, one entry per row); an
    empty box leaves an optional column out and is an error for a required one.
    ``keyword_arguments`` is a JSON object of the other arguments of ``compute`` (``""`` for the
    defaults). Errors are ``ValueError`` naming the box and the fix.

    >>> from shovir.evaluate_modules import load_metric
    >>> module = load_metric("nlg")
    >>> parse_widget_inputs(module, {"predictions": '["no effusion"]', "references": '["no effusion"]'},
    ...                     '{"n_resamples": 0}')
    {'predictions': ['no effusion'], 'references': ['no effusion'], 'n_resamples': 0}
    >>> parse_widget_inputs(module, {"predictions": "", "references": '["x"]'})
    Traceback (most recent call last):
    ...
    ValueError: predictions: this column is required; give a JSON list with one entry per row, e.g. ["first row", "second row"]
    """
    fields = widget_fields(module)
    unknown = sorted(set(columns) - {field.name for field in fields})
    if unknown:
        raise ValueError(f"unknown input column(s) {unknown}; the module takes {[field.name for field in fields]}")
    kwargs: dict[str, Any] = {}
    for field in fields:
        text = (columns.get(field.name) or "").strip()
        if not text:
            if field.required:
                raise ValueError(f"{field.name}: this column is required; give a JSON list with one entry per row, "
                                 f"e.g. {field.example}")
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{field.name}: not valid JSON ({error.msg} at line {error.lineno}, column {error.colno}); "
                             f"give a JSON list with one entry per row, e.g. {field.example}") from None
        if not isinstance(value, list):
            raise ValueError(f"{field.name}: expected a JSON list with one entry per row ({field.kind}), got "
                             f"{type(value).__name__}; e.g. {field.example}")
        kwargs[field.name] = value
    text = (keyword_arguments or "").strip()
    if text:
        allowed = widget_options(module)
        try:
            extra = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"keyword_arguments: not valid JSON ({error.msg}); give a JSON object such as "
                             f"{json.dumps(allowed)}") from None
        if not isinstance(extra, dict):
            raise ValueError(f"keyword_arguments: expected a JSON object, got {type(extra).__name__}; "
                             f"e.g. {json.dumps(allowed)}")
        unknown = sorted(set(extra) - set(allowed))
        if unknown:
            raise ValueError(f"keyword_arguments: unknown argument(s) {unknown}; the module takes {sorted(allowed)}")
        kwargs.update(extra)
    return kwargs


def card_body(path: str | Path) -> str:
    """A metric card without its YAML header (the Space's configuration), or ``""`` when absent.

    >>> from shovir.evaluate_modules import module_script
    >>> card_body(module_script("nlg").with_name("README.md")).lstrip().startswith("# Metric Card")
    True
    """
    path = Path(path)
    if not path.is_file():
        return ""
    return _YAML_HEADER.sub("", path.read_text(encoding="utf-8"), count=1)


def _import_gradio() -> Any:
    try:
        import gradio
    except ImportError as error:
        raise ImportError('the metric widgets need Gradio: pip install "shovir[spaces]" (or pip install gradio)') \
            from error
    return gradio


def build_widget(module: Any, card: str | Path | None = None) -> Any:
    """A ``gradio.Interface`` for an evaluate module, built but not launched (call ``.launch()``).

    One JSON text box per input column (:func:`widget_fields`), one box of keyword arguments
    (:func:`widget_options`) in an accordion, the result of ``module.compute`` as JSON, and the
    metric card (``card``, default the ``README.md`` beside the module's shipped script) as the
    article. Input errors are shown in the page as the module's own ``ValueError`` message.
    """
    gr = _import_gradio()
    fields = widget_fields(module)
    options = widget_options(module)
    if card is None:
        from shovir.evaluate_modules import module_names, module_script

        name = getattr(module, "name", "")
        card = module_script(name).with_name("README.md") if name in module_names() else ""
    inputs = [gr.Textbox(label=field.name + ("" if field.required else " (optional)"), lines=3,
                         value=None if field.required else "", placeholder=field.example,
                         info=f"JSON list, one {field.kind} per row")
              for field in fields]
    options_box = gr.Code(value=json.dumps(options, indent=2), language="json", label="keyword_arguments", lines=6)

    def compute(*texts: str) -> dict[str, Any]:
        *column_texts, options_text = texts
        try:
            kwargs = parse_widget_inputs(module, dict(zip([f.name for f in fields], column_texts)), options_text)
            return module.compute(**kwargs)
        except ValueError as error:
            raise gr.Error(str(error)) from error

    # named parameters, so the Space's API (gradio_client) takes the module's column names, and
    # optional columns after the last required one, and the keyword arguments, may be left out
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    last_required = max((i for i, f in enumerate(fields) if f.required), default=-1)
    compute.__signature__ = inspect.Signature(
        [inspect.Parameter(f.name, positional, annotation=str, **({"default": ""} if i > last_required else {}))
         for i, f in enumerate(fields)]
        + [inspect.Parameter("keyword_arguments", positional, annotation=str, default="")])

    info = getattr(module, "info", None)
    description = getattr(info, "description", "") or ""
    return gr.Interface(
        fn=compute,
        inputs=inputs,
        outputs=gr.JSON(label=f"{module.name}.compute(...)"),
        additional_inputs=[options_box],
        additional_inputs_accordion="Keyword arguments of compute",
        title=f"Metric: {module.name}",
        description=description + "\nEach box takes a JSON list with one entry per row (sample).",
        article=card_body(card) if card else None,
        flagging_mode="never",
        api_name="compute",
    )
