"""Score a run folder: one generic loop over the protocols the run's conditions allow.

:func:`score_run` reads what the runner wrote (``run.json``, ``samples.jsonl``, ``plan.jsonl``
and the generation cache), checks that every (model, condition, sample) the plan expects has a
generation — refusing an incomplete run unless ``allow_partial`` — labels every distinct report
once (rule-based labeler by default), saves the codes beside the predictions
(``labels/<alias>/<condition>.jsonl``), and computes each protocol's bindings
(:mod:`shovir.protocols`) through the feeds below. The result is the ``results.json`` document
of :mod:`shovir.results`.

Feeds (how a binding's conditions become a metric's arguments):

================= ===================================================================================
``image_codes``   per image (one record per image): reference codes vs codes under each condition
``image_texts``   per image: generated vs reference report text
``image_contrast`` per image: codes under the control (first kind) and under each treated condition
``pair_codes``    per (image, class) pair: codes and target classes, each condition of the kinds
``pair_contrast`` per pair: control kind at the same p vs each treated condition (``reference``:
                  report codes, or the dataset's labels)
``curve``         a kind's values across p from another binding (S_AUC of μ-F1)
``vqa_reliance``  per question: answers under real, shuffled (and blank) images, per report arm
``vqa_rationales`` per question: the real-image rationale and answers under real and shuffled images
``vqa_swap``      per question: answers under the real and the swapped image, both arms together
``judged_texts``  per image: generated vs reference report text, through the LLM judge named by the
                  binding's ``judge`` option (ICARE, GREEN); skipped unless ``score_run`` is given one
================= ===================================================================================

Intervals are percentile bootstraps resampling patients when the samples carry patient ids. A
metric that cannot run here (F1-RadGraph without its weights, HVRR without rationales) is recorded
as ``{"unavailable": reason}`` and the report says why.
With ``allow_partial``, each metric uses the samples all of its inputs cover, and ``coverage``
says how many were expected and present per model × condition.

LLM judges (``judges={"icare": {"backend": "openai", "options": {...}}, "green": ...}``) are built
once per scoring and shared by every model, so ICARE writes and filters the reference reports'
questions once; their calls are cached in ``<run>/judges/calls.jsonl`` (a rescore makes none) and
their per-question / per-report logs go to ``<run>/judges/<judge>/<alias>/<condition>.jsonl``.
``results.json`` keeps the scores and counts; the logs keep what each score rests on.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from shovir import labels as L
from shovir.conditions import ConditionSpec
from shovir.labelers import get_labeler
from shovir.metrics import METRICS, MetricUnavailable
from shovir.metrics.answers import extract_answer, extract_rationale
from shovir.protocols import Binding, Protocol, protocols_for
from shovir.results import SCHEMA_VERSION
from shovir.runner.plan import Request, generation_key
from shovir.runner.records import Prediction
from shovir.runner.store import GenerationStore, read_lines

__all__ = ["IncompleteRun", "JUDGES", "RunFolder", "build_judges", "score_run", "FEEDS", "answer_margin"]


class IncompleteRun(ValueError):
    """The run lacks generations the plan expects (or cannot be read as one run)."""


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for where, line in read_lines([path]):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise ValueError(f"{where}: not valid JSON ({error})") from None
    return out


@dataclass
class RunFolder:
    """What the runner wrote into a run folder, read and cross-checked."""

    root: Path
    info: dict[str, Any]
    samples: dict[str, dict[str, Any]]
    requests: list[Request]

    @classmethod
    def open(cls, run_dir: str | Path) -> "RunFolder":
        root = Path(run_dir)
        if not root.is_dir():
            raise FileNotFoundError(f"{root}: no such run folder; create it with `shovir run --out {root} ...`")
        info_path = root / "run.json"
        try:
            info = json.loads(info_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"{info_path}: missing; {root} is not a shovir run folder") from None
        except json.JSONDecodeError as error:
            raise ValueError(f"{info_path}: not valid JSON ({error})") from None
        if str(info.get("schema")) != "2" or not (root / "plan.jsonl").is_file():
            raise IncompleteRun(f"{root} was written by an older shovir (no plan.jsonl); run the sweep again into it — "
                                "finished generations are not reused across this format change")
        samples: dict[str, dict[str, Any]] = {}
        for row in _read_jsonl(root / "samples.jsonl"):
            samples[str(row.get("sample_id", row["image_id"]))] = row
        requests = [Request(**row) for row in _read_jsonl(root / "plan.jsonl")]
        if len(requests) != info["plan"]["requests"]:
            raise IncompleteRun(f"{root}: plan.jsonl has {len(requests)} requests but run.json expects "
                                f"{info['plan']['requests']}: the folder mixes two runs; run the sweep again")
        folder = cls(root, info, samples, requests)
        folder._check_exports()
        return folder

    def _check_exports(self) -> None:
        """Prediction files must come from this run's config (a folder never mixes two configs)."""
        expected = self.info["config_hash"]
        for path in sorted((self.root / "predictions").rglob("*.jsonl")):
            for where, line in read_lines([path]):
                found = Prediction.from_json(line, where).config_hash
                if found != expected:
                    raise IncompleteRun(f"{where}: predictions of config {found}, but run.json is config {expected}: "
                                        "this folder mixes two sweeps; run the sweep again to rebuild predictions/")
                break

    @property
    def aliases(self) -> list[str]:
        return [entry["alias"] for entry in self.info["config"]["models"]]

    def predictions(self, alias: str) -> tuple[dict[str, dict[str, Prediction]], dict[str, dict[str, int]]]:
        """``{condition: {sample_id: Prediction}}`` from the generation cache, and coverage."""
        model = self.info.get("models", {}).get(alias)
        entry = next(m for m in self.info["config"]["models"] if m["alias"] == alias)
        records = GenerationStore(self.root / "generations" / model["model_hash"]).records() if model else {}
        out: dict[str, dict[str, Prediction]] = {}
        coverage: dict[str, dict[str, int]] = {}
        seed = self.info["config"]["seed"]
        for request in self.requests:
            count = coverage.setdefault(request.condition, {"expected": 0, "present": 0})
            count["expected"] += 1
            record = records.get(generation_key(model["model_hash"], request.call)) if model else None
            if record is None:
                continue
            count["present"] += 1
            out.setdefault(request.condition, {})[request.sample_id] = Prediction(
                sample_id=request.sample_id, image_id=request.image_id, condition=request.condition, model=alias,
                text=record.text or "", target_class=request.target_class, p=request.p, with_report=request.with_report,
                donor_image_id=request.donor_image_id, seed=seed, adapter=entry["name"], generation=record.key,
                config_hash=self.info["config_hash"], reasoning=record.reasoning, scores=record.scores)
        return out, coverage


class _Labels:
    """Label each distinct text once."""

    def __init__(self, labeler: Callable[[Sequence[str]], np.ndarray]) -> None:
        self.labeler = labeler
        self.cache: dict[str, np.ndarray] = {}

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        new = sorted({t for t in texts if t not in self.cache})
        if new:
            for text, codes in zip(new, self.labeler(new)):
                self.cache[text] = np.asarray(codes, dtype=np.int8)
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, L.NUM_CLASSES), np.int8)


@dataclass
class _Context:
    """One model's predictions and everything a feed needs."""

    alias: str
    predictions: dict[str, dict[str, Prediction]]
    samples: dict[str, dict[str, Any]]
    label: _Labels
    n_resamples: int
    seed: int
    allow_partial: bool
    section: dict[str, Any] = field(default_factory=dict)
    judges: dict[str, Any] = field(default_factory=dict)
    judge_dir: Path | None = None

    def labels_of(self, kinds: Sequence[str], with_report: bool | None = False) -> list[ConditionSpec]:
        """The run's conditions of these kinds (in the order of ``kinds``, then by p)."""
        specs = [ConditionSpec.parse(label) for label in self.predictions]
        chosen = [s for s in specs if s.name in kinds and (with_report is None or s.with_report == with_report)]
        return sorted(chosen, key=lambda s: (list(kinds).index(s.name), s.p))

    def covered(self, ids: Sequence[str], *labels: str) -> list[str]:
        """``ids`` that every condition covers; missing ones are an error unless partial."""
        out = []
        for sample_id in ids:
            lacking = [label for label in labels if sample_id not in self.predictions.get(label, {})]
            if not lacking:
                out.append(sample_id)
            elif not self.allow_partial:
                raise IncompleteRun(f"{self.alias}: {lacking[0]} lacks sample {sample_id!r} that "
                                    f"{labels[0]} has; conditions must cover the same samples")
        return out

    def texts(self, label: str, ids: Sequence[str]) -> list[str]:
        return [self.predictions[label][i].text for i in ids]

    def codes(self, label: str, ids: Sequence[str]) -> np.ndarray:
        return self.label(self.texts(label, ids))

    def references(self, ids: Sequence[str]) -> np.ndarray:
        return self.label([self.samples[i].get("report", "") for i in ids])

    def clusters(self, ids: Sequence[str]) -> list[str]:
        return [str(self.samples[i].get("patient_id") or self.samples[i]["image_id"]) for i in ids]

    def per_image(self, label: str) -> list[str]:
        """One sample id per image (the pair samples of an image share image-level generations)."""
        first: dict[str, str] = {}
        for sample_id in sorted(self.predictions.get(label, {})):
            first.setdefault(self.samples[sample_id]["image_id"], sample_id)
        return [first[image] for image in sorted(first)]

    def interval_args(self, ids: Sequence[str]) -> dict[str, Any]:
        return {"n_resamples": self.n_resamples, "clusters": self.clusters(ids), "seed": self.seed}


Feed = Callable[[Binding, Callable[..., Any], _Context], dict[str, Any]]


def _image_codes(binding: Binding, metric: Callable[..., Any], ctx: _Context) -> dict[str, Any]:
    out = {}
    for spec in ctx.labels_of(binding.conditions):
        ids = ctx.per_image(spec.label)
        out[spec.label] = metric(ctx.references(ids), ctx.codes(spec.label, ids), **ctx.interval_args(ids))
    return out


def _image_texts(binding: Binding, metric: Callable[..., Any], ctx: _Context) -> dict[str, Any]:
    out = {}
    for spec in ctx.labels_of(binding.conditions):
        ids = ctx.per_image(spec.label)
        try:
            out[spec.label] = metric(ctx.texts(spec.label, ids), [ctx.samples[i].get("report", "") for i in ids],
                                     **ctx.interval_args(ids))
        except (ImportError, MetricUnavailable) as error:
            out[spec.label] = {"unavailable": str(error)}
    return out


def _image_contrast(binding: Binding, metric: Callable[..., Any], ctx: _Context) -> dict[str, Any]:
    out = {}
    control = binding.conditions[0]
    if control not in ctx.predictions:
        return out
    for spec in ctx.labels_of(binding.conditions[1:]):
        ids = ctx.covered(ctx.per_image(control), control, spec.label)
        out[spec.label] = metric(ctx.references(ids), ctx.codes(control, ids), ctx.codes(spec.label, ids),
                                 **ctx.interval_args(ids))
    return out


def _pair_codes(binding: Binding, metric: Callable[..., Any], ctx: _Context) -> dict[str, Any]:
    out = {}
    for spec in ctx.labels_of(binding.conditions):
        ids = sorted(ctx.predictions[spec.label])
        targets = [ctx.samples[i]["target_class"] for i in ids]
        out[spec.label] = metric(ctx.references(ids), ctx.codes(spec.label, ids), targets, **ctx.interval_args(ids))
    return out


def _pair_contrast(binding: Binding, metric: Callable[..., Any], ctx: _Context) -> dict[str, Any]:
    out = {}
    control_kind = binding.conditions[0]
    for spec in ctx.labels_of(binding.conditions[1:]):
        control = ConditionSpec(control_kind, spec.p).label
        if control not in ctx.predictions:
            continue
        ids = ctx.covered(sorted(ctx.predictions[spec.label]), spec.label, control)
        if binding.options.get("reference") == "dataset_labels":
            reference = np.array([ctx.samples[i]["labels"] for i in ids])
        else:
            reference = ctx.references(ids)
        targets = [ctx.samples[i]["target_class"] for i in ids]
        out[spec.label] = metric(reference, ctx.codes(control, ids), ctx.codes(spec.label, ids), targets,
                                 **ctx.interval_args(ids), sample_ids=ids, control_sample_ids=ids)
    return out


def _curve(binding: Binding, metric: Callable[..., Any], ctx: _Context) -> dict[str, Any]:
    source = ctx.section.get(binding.options["source"], {})
    out = {}
    field_name = binding.options["field"]
    for kind in binding.conditions:
        points = sorted(((ConditionSpec.parse(label).p, result) for label, result in source.items()
                         if ConditionSpec.parse(label).name == kind and not ConditionSpec.parse(label).with_report),
                        key=lambda point: point[0])
        # S_AUC normalises by f(0): it needs the p = 0 point and a non-zero baseline
        if len(points) > 1 and points[0][0] == 0 and points[0][1].get(field_name):
            strengths = [p for p, _ in points]
            if all("per_class" in r and "counts" in r for _, r in points):  # both named forms: μ-F1 and class mean
                out[kind] = metric(strengths, per_class_f1=[r["per_class"] for _, r in points],
                                   class_counts=[r["counts"] for _, r in points])
            else:
                out[kind] = metric(strengths, [r[field_name] for _, r in points])
    return out


def _vqa_reliance(binding: Binding, metric: Callable[..., Any], ctx: _Context) -> dict[str, Any]:
    real_kind, shuffled_kind, blank_kind = binding.conditions
    out = {}
    for suffix in ("", "+report"):
        real, shuffled, blank = real_kind + suffix, shuffled_kind + suffix, blank_kind + suffix
        if real not in ctx.predictions or shuffled not in ctx.predictions:
            continue
        needed = [real, shuffled] + ([blank] if blank in ctx.predictions else [])
        ids = ctx.covered(sorted(ctx.predictions[real]), *needed)
        out[real] = metric(ctx.texts(real, ids), ctx.texts(shuffled, ids), [ctx.samples[i]["answer"] for i in ids],
                           predictions_blank=ctx.texts(blank, ids) if blank in ctx.predictions else None,
                           options=[ctx.samples[i].get("options") or None for i in ids], clusters=ctx.clusters(ids),
                           n_resamples=ctx.n_resamples, seed=ctx.seed)
    return out


def _has_rationale(text: str) -> bool:
    rationale = extract_rationale(text)
    return bool(rationale) and rationale != extract_answer(text)


def _vqa_rationales(binding: Binding, metric: Callable[..., Any], ctx: _Context) -> dict[str, Any]:
    real_kind, shuffled_kind = binding.conditions
    out: dict[str, Any] = {}
    for suffix in ("", "+report"):
        real, shuffled = real_kind + suffix, shuffled_kind + suffix
        if real not in ctx.predictions or shuffled not in ctx.predictions:
            continue
        ids = ctx.covered(sorted(ctx.predictions[real]), real, shuffled)
        texts = ctx.texts(real, ids)
        if not any(_has_rationale(text) for text in texts):
            out[real] = {"unavailable": "the answers carry no rationale (NVCR/HVRR need <think>…</think> or text "
                                        "beside the answer)"}
            continue
        out[real] = metric([extract_rationale(t) for t in texts], [ctx.samples[i]["question"] for i in ids],
                           [extract_answer(t) for t in texts], [extract_answer(t) for t in ctx.texts(shuffled, ids)],
                           [ctx.samples[i]["answer"] for i in ids], [ctx.samples[i].get("options") or None for i in ids],
                           clusters=ctx.clusters(ids), n_resamples=ctx.n_resamples, seed=ctx.seed,
                           benchmarks=_benchmarks(ctx, ids))
    return out


def _benchmarks(ctx: _Context, ids: Sequence[str]) -> list[str] | None:
    """Each sample's source benchmark (the VQA rows' ``dataset``), for Beyond Accuracy Table 4's
    mean over benchmarks; ``None`` where the rows do not say."""
    names = [ctx.samples[i].get("dataset") for i in ids]
    return [str(name) for name in names] if names and all(names) else None


def answer_margin(scores: dict[str, float] | None, options: Sequence[str] | None, reference: str | None) -> float | None:
    """The continuous answer score of ModaLens §4.1: for two options the score of the first minus
    the second (the logit of "yes" minus "no"); for more, the score of ``reference`` (the answer
    on the original image) minus the best other option, so a trial's two margins share one
    reference. ``None`` without scores for every option.

    >>> answer_margin({"yes": -0.1, "no": -2.4}, ["yes", "no"], "no")
    2.3
    >>> answer_margin({"a": -0.5, "b": -1.0, "c": -3.0}, ["a", "b", "c"], "b")
    -0.5
    """
    if not scores or not options or any(option not in scores for option in options):
        return None
    if len(options) == 2:
        return round(float(scores[options[0]]) - float(scores[options[1]]), 12)
    if reference not in scores:
        return None
    return round(float(scores[reference]) - max(float(v) for k, v in scores.items() if k != reference and k in options), 12)


def _vqa_swap(binding: Binding, metric: Callable[..., Any], ctx: _Context) -> dict[str, Any]:
    real_kind, swap_kind = binding.conditions
    rows: dict[str, list[Any]] = {k: [] for k in ("original", "swapped", "arms", "trials", "patients", "m0", "m1")}
    for arm, suffix in (("without_report", ""), ("with_report", "+report")):
        real, swapped = real_kind + suffix, swap_kind + suffix
        if real not in ctx.predictions or swapped not in ctx.predictions:
            continue
        ids = ctx.covered(sorted(ctx.predictions[swapped]), swapped, real)  # the plan's swappable samples
        rows["original"] += ctx.texts(real, ids)
        rows["swapped"] += ctx.texts(swapped, ids)
        rows["arms"] += [arm] * len(ids)
        rows["trials"] += ids
        rows["patients"] += ctx.clusters(ids)
        for sample_id in ids:
            options = ctx.samples[sample_id].get("options")
            reference = extract_answer(ctx.predictions[real][sample_id].text)
            rows["m0"].append(answer_margin(ctx.predictions[real][sample_id].scores, options, reference))
            rows["m1"].append(answer_margin(ctx.predictions[swapped][sample_id].scores, options, reference))
    if not rows["original"]:
        return {}
    margins = all(m is not None for m in rows["m0"] + rows["m1"])  # margin metrics only when every trial has scores
    return {swap_kind: metric(rows["original"], rows["swapped"], rows["arms"], rows["trials"], rows["patients"],
                              n_resamples=ctx.n_resamples, seed=ctx.seed, margins_original=rows["m0"] if margins else None,
                              margins_swapped=rows["m1"] if margins else None)}


def _judged_texts(binding: Binding, metric: Callable[..., Any], ctx: _Context) -> dict[str, Any]:
    name = binding.options["judge"]
    judge = ctx.judges.get(name)
    if judge is None:  # no judge given for this metric: nothing to record
        return {}
    out: dict[str, Any] = {}
    for spec in ctx.labels_of(binding.conditions):
        ids = ctx.per_image(spec.label)
        log = ctx.judge_dir / name / ctx.alias / f"{spec.label}.jsonl" if ctx.judge_dir is not None else None
        try:
            result = metric([ctx.samples[i].get("report") or "" for i in ids], ctx.texts(spec.label, ids), ids=ids,
                            evaluator=judge, log_path=log, n_resamples=ctx.n_resamples, bootstrap_seed=ctx.seed)
        except (ImportError, OSError, MetricUnavailable) as error:
            out[spec.label] = {"unavailable": str(error)}
            continue
        for bulky in ("per_report", "reports"):  # the log holds them, per question and per report
            result.pop(bulky, None)
        out[spec.label] = result
    return out


FEEDS: dict[str, Feed] = {
    "image_codes": _image_codes,
    "image_texts": _image_texts,
    "image_contrast": _image_contrast,
    "pair_codes": _pair_codes,
    "pair_contrast": _pair_contrast,
    "curve": _curve,
    "vqa_reliance": _vqa_reliance,
    "vqa_rationales": _vqa_rationales,
    "vqa_swap": _vqa_swap,
    "judged_texts": _judged_texts,
}
"""Feed name → function ``(binding, metric, context) -> {condition: result}``."""


def score_protocol(protocol: Protocol, ctx: _Context) -> dict[str, Any]:
    """Every binding of ``protocol`` whose conditions the run has, in declaration order."""
    ctx.section = {}
    for binding in protocol.metrics:
        if binding.feed not in FEEDS:
            raise ValueError(f"protocol {protocol.name}: binding {binding.key!r} uses unknown feed {binding.feed!r}; "
                             f"feeds: {', '.join(FEEDS)}")
        result = FEEDS[binding.feed](binding, METRICS.load(binding.metric), ctx)
        if result:
            ctx.section[binding.key] = result
    return ctx.section


def _missing_message(run: RunFolder, coverage: dict[str, dict[str, dict[str, int]]]) -> str:
    lines = []
    total = 0
    for alias, conditions in coverage.items():
        for condition, count in conditions.items():
            lacking = count["expected"] - count["present"]
            if lacking:
                total += lacking
                lines.append(f"  {alias} / {condition}: {lacking} of {count['expected']} missing")
    shown = lines[:12] + ([f"  ... and {len(lines) - 12} more model × condition cells"] if len(lines) > 12 else [])
    return (f"{run.root}: {total} generations the plan expects are missing (status: {run.info.get('status')}):\n"
            + "\n".join(shown) + "\nrun the same `shovir run` again to complete it, or pass --allow-partial to score "
            "what exists (coverage is recorded in results.json)")


def _write_labels(root: Path, alias: str, predictions: dict[str, dict[str, Prediction]], label: _Labels) -> None:
    folder = root / "labels" / alias
    folder.mkdir(parents=True, exist_ok=True)
    for condition, records in predictions.items():
        ids = sorted(records)
        codes = label([records[i].text for i in ids])
        (folder / f"{condition}.jsonl").write_text(
            "".join(json.dumps({"sample_id": i, "generation": records[i].generation, "codes": c.tolist()}) + "\n"
                    for i, c in zip(ids, codes)), encoding="utf-8")


JUDGES = ("icare", "green")
"""The LLM-judged metrics ``score_run`` can be given a backend for."""


def build_judges(judges: dict[str, Any] | None, cache: str | Path | None = None, progress: bool = False) -> dict[str, Any]:
    """``{"icare": Icare, "green": Green}`` from ``{name: {"backend": NAME, "options": {...}}}`` (or
    from a backend name alone, or an already built evaluator), sharing one call cache.

    >>> sorted(build_judges({"icare": "offline"}))
    ['icare']
    """
    from shovir.icare import CallCache, Green, Icare

    out: dict[str, Any] = {}
    shared = CallCache(cache)
    for name, spec in (judges or {}).items():
        if name not in JUDGES:
            raise ValueError(f"judges: unknown LLM-judged metric {name!r}; expected one of {', '.join(JUDGES)}")
        if isinstance(spec, (Icare, Green)):
            out[name] = spec
            continue
        if isinstance(spec, str):
            spec = {"backend": spec}
        if not isinstance(spec, dict) or not isinstance(spec.get("backend"), str):
            raise ValueError(f"judges[{name!r}]: expected a backend name or {{'backend': NAME, 'options': {{...}}}}, "
                             f"got {spec!r}")
        unknown = sorted(set(spec) - {"backend", "options", "settings"})
        if unknown:
            raise ValueError(f"judges[{name!r}]: unknown key(s) {unknown}; use backend, options and settings")
        evaluator = Icare if name == "icare" else Green
        out[name] = evaluator(spec["backend"], spec.get("options") or {}, cache=shared, progress=progress,
                              **(spec.get("settings") or {}))
    return out


def score_run(
    run_dir: str | Path,
    labeler: str = "rule",
    labeler_options: dict[str, Any] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    allow_partial: bool = False,
    judges: dict[str, Any] | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Compute the results document of a run folder (see the module docstring).

    ``judges`` gives the LLM-judged metrics of the protocols (ICARE, GREEN) their backends
    (:func:`build_judges`); without it their bindings are skipped.

    Raises :class:`IncompleteRun` naming what is missing when the run is incomplete and
    ``allow_partial`` is false.
    """
    from shovir.runner.run import package_versions

    run = RunFolder.open(run_dir)
    predictions: dict[str, dict[str, dict[str, Prediction]]] = {}
    coverage: dict[str, dict[str, dict[str, int]]] = {}
    for alias in run.aliases:
        predictions[alias], coverage[alias] = run.predictions(alias)
    complete = all(c["expected"] == c["present"] for conditions in coverage.values() for c in conditions.values())
    if not complete and not allow_partial:
        raise IncompleteRun(_missing_message(run, coverage))
    label = _Labels(get_labeler(labeler, **(labeler_options or {})))
    built = build_judges(judges, run.root / "judges" / "calls.jsonl", progress=progress) if judges else {}
    task = "vqa" if any("question" in s for s in run.samples.values()) else "report"
    kinds = {ConditionSpec.parse(c["name"]).name for c in run.info["config"]["conditions"]}
    protocols = protocols_for(task, kinds)
    models: dict[str, Any] = {}
    try:
        for alias in run.aliases:
            _write_labels(run.root, alias, predictions[alias], label)
            ctx = _Context(alias, predictions[alias], run.samples, label, n_resamples, seed, allow_partial,
                           judges=built, judge_dir=run.root / "judges")
            entry = next(m for m in run.info["config"]["models"] if m["alias"] == alias)
            models[alias] = {"adapter": entry["name"],
                             "protocols": {protocol.name: score_protocol(protocol, ctx) for protocol in protocols}}
    finally:
        for name, evaluator in built.items():
            if evaluator is not (judges or {}).get(name):  # close what was built here, not the caller's
                evaluator.close()
    judged = {name: {**evaluator.config(), "calls": dict(evaluator.caller.stats)} for name, evaluator in built.items()}
    config = run.info["config"]
    return {
        "schema_version": SCHEMA_VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "complete": complete,
        "run": {"config": config, "config_hash": run.info["config_hash"], "seed": config["seed"], "plan": run.info["plan"],
                "skipped": run.info.get("skipped", {}), "models": run.info.get("models", {}), "status": run.info.get("status")},
        "scoring": {"labeler": labeler, "n_resamples": n_resamples, "seed": seed, "allow_partial": allow_partial,
                    "task": task, "protocols": [p.name for p in protocols], "judges": judged},
        "coverage": coverage,
        "versions": package_versions(),
        "models": models,
    }
