# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""GREEN (Ostmeier et al., 2024): matched findings over matched findings plus clinically significant errors, by an LLM judge."""

import evaluate

from shovir.icare import green
from shovir.metrics._checks import Column
from shovir.metrics._checks import StreamingModule

_CITATION = """\
@inproceedings{ostmeier2024green,
  title = {{GREEN}: Generative Radiology Report Evaluation and Error Notation},
  author = {Ostmeier, Sophie and Xu, Justin and Chen, Zhihong and Varma, Maya and Blankemeier, Louis and
            Bluethgen, Christian and Michalson, Arne Edward and Moseley, Michael and Langlotz, Curtis and
            Chaudhari, Akshay S and Delbrouck, Jean-Benoit},
  booktitle = {Findings of the Association for Computational Linguistics: EMNLP 2024},
  year = {2024}
}
"""

_DESCRIPTION = """\
GREEN asks a judge LLM (by default StanfordAIMI/GREEN-RadLlama2-7b, from a local folder) to compare a
candidate report with a reference report (each cut to its first 300 words) and to list clinically
significant errors in six categories (a) false report of a finding, (b) missing a finding, (c) wrong
location, (d) wrong severity, (e) a comparison not in the reference, (f) an omitted comparison, the
clinically insignificant errors, and the matched findings. GREEN = matched / (matched + significant
errors); a report with no matched finding scores 0. The summary is the mean, the population standard
deviation and, per category, the share of reports without that error; each report keeps its
explanation, errors and matched findings.

Streaming: the per-pair inputs (predictions, references, judge_responses, ids) are the columns of
the module's one schema, so `add()`, `add_batch()` and `evaluate.combine` store what one `compute()`
call does (give judge_responses for every pair or for none); the judge runs once, at `compute()`.
Settings (backend, backend_options, cache, log_path, n_resamples, confidence, bootstrap_seed) are
`compute()` arguments.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): the candidate (generated) reports.
    references (`list` of `str`): the reference reports; row i of both lists is one report pair.
    judge_responses (`list` of `str`, optional): the judge's responses, one per pair: recompute the
        scores without any model.
    ids (`list`, optional): an id per pair (default "0", "1", ...).
    backend (`str`, default "offline"): the judge when no responses are given: "transformers" (the
        GREEN judge by local path; the authors' chat template, 2048 tokens, batch 8), "openai" (a
        served judge) or "offline" (a deterministic approximation from the rule-based labeler).
    backend_options (`dict`, optional): e.g. {"model": "/models/GREEN-RadLlama2-7b"}.
    cache (`str`, optional), log_path (`str`, optional): call cache and per-report JSONL log.
    n_resamples (`int`, default 1000), confidence (`float`, default 0.95), bootstrap_seed (`int`,
        default 0): the bootstrap interval of the mean.
Returns:
    green (`float` in [0, 1] or `None`): the mean GREEN over the scored reports.
    std (`float`): population standard deviation. ci (`dict`): {"green": {"low", "high"}}.
    error_free (`dict`): category letter -> share of reports without that significant error.
    n (`int`): scored reports; n_pairs, failed (calls that failed, not scored), unparsed (responses
        without any section, scored 0 by the authors' rule).
    reports (`list` of `dict`): per pair: green, matched, significant and insignificant counts,
        matched findings, significant errors per category, explanation, response.
Examples:
    The authors' three golden cases, as hand-written judge responses:

    >>> green_metric = evaluate.load("shovir/green")
    >>> def response(counts, matched):
    ...     lines = [f"({letter}) Error: {count}." for letter, count in zip("abcdef", counts)]
    ...     return "[Clinically Significant Errors]:\\n" + "\\n".join(lines) + f"\\n\\n[Matched Findings]:\\n{matched}. x"
    >>> results = green_metric.compute(references=["r1", "r2", "r3"], predictions=["p1", "p2", "p3"], judge_responses=[
    ...     response([2, 3, 0, 1, 0, 0], 0), response([2, 1, 2, 0, 0, 0], 1), response([1, 0, 0, 0, 0, 0], 1)], n_resamples=0)
    >>> [round(r["green"], 4) for r in results["reports"]], round(results["green"], 4), round(results["std"], 4)
    ([0.0, 0.1667, 0.5], 0.2222, 0.2079)

    Streamed pair by pair, with the saved responses as a column:

    >>> for reference, prediction, judged in [("r1", "p1", "[Matched Findings]:\\n2. a; b"),
    ...                                       ("r2", "p2", "[Clinically Significant Errors]:\\n(b) Missing: 1.\\n\\n[Matched Findings]:\\n1. c")]:
    ...     green_metric.add(reference=reference, prediction=prediction, judge_responses=judged)
    >>> green_metric.compute(n_resamples=0)["green"]
    0.75

    With the offline approximation (labels compared finding by finding):

    >>> results = green_metric.compute(references=["Cardiomegaly. Small left pleural effusion."],
    ...                                predictions=["Cardiomegaly. No effusion."], n_resamples=0)
    >>> results["green"], results["reports"][0]["significant"]
    (0.5, [0, 1, 0, 0, 0, 0])
"""


_COLUMNS = (
    Column("predictions", "text"),
    Column("references", "text"),
    Column("judge_responses", "text", required=False),
    Column("ids", "id", required=False),
)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class GREEN(StreamingModule, evaluate.Metric):
    _COLUMNS = _COLUMNS

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self._features(),
            reference_urls=["https://arxiv.org/abs/2405.03595", "https://github.com/Stanford-AIMI/GREEN"],
        )

    def _compute(self, predictions, references, judge_responses=None, ids=None, backend="offline", backend_options=None,
                 cache=None, log_path=None, n_resamples=1000, confidence=0.95, bootstrap_seed=0):
        return green(references, predictions, ids=self._optional("ids", ids),
                     judge_responses=self._optional("judge_responses", judge_responses), backend=backend,
                     backend_options=backend_options, cache=cache, log_path=log_path, n_resamples=n_resamples,
                     confidence=confidence, bootstrap_seed=bootstrap_seed)
