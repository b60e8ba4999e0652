# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""Image-swap sensitivity of ModaLens (§2, §4.1): answer flip rates with and without the report, their paired difference and margin changes."""

import evaluate

from shovir.metrics import swap_sensitivity
from shovir.metrics._checks import Column
from shovir.metrics._checks import StreamingModule

_CITATION = """\
@article{cajasordonez2026modalens,
  title = {ModaLens: Measuring Image Sensitivity in Report-Conditioned Medical VLMs},
  author = {Cajas Ord{\\'o}{\\~n}ez, Sebasti{\\'a}n Andr{\\'e}s and Lange, Maximin and Bui, Quang and Li, Anqi Peter and
            Ocampo Osorio, Felipe and Al Attrach, Rafi and Palakala, Kushul Reddy and Kapadia, Sahil and
            Laouabdia Sellami, Zakaria and Zhang, Xinyue and Zhang, Ashley and Celi, Leo Anthony},
  journal = {arXiv preprint arXiv:2609.15635},
  year = {2026}
}
"""

_DESCRIPTION = """\
ModaLens (§2) asks each question about a case twice, with the case's own image and with a substitute
image, the question (and the report, when shown) fixed. The audit runs in two arms, "with_report" and
"without_report", on the same trials. A trial flips when the two answers differ (compared on canonical
forms, so "Yes." and "yes" are the same answer). The flip rate of an arm is flipped trials / trials; the
paired difference is flip_rate_without_report − flip_rate_with_report. With continuous answer scores
(margins, e.g. logit(yes) − logit(no)) it also reports the mean |Δ margin| per arm, the share of
label-unchanged trials whose margin moves by more than a threshold, and the share of trials that move
more without the report. Intervals are patient-clustered percentile bootstraps.

Streaming: every per-sample input (answers, arms, trial and patient ids, margins, options) is a column of the module's one declared schema, so
`add()`, `add_batch()` and `evaluate.combine` store exactly what one `compute()` call does; optional
columns are nullable (a null row means "not given"; give an optional input in every batch or in
none). Inputs are checked before Arrow casts them: a `ValueError` names the argument, the row and the
fix. Settings (`margin_threshold`, `n_resamples`, `confidence`, `seed`) are `compute()` arguments. Through `evaluate.combine`, pass every input of
every combined module (`None` for an optional one).
"""

_KWARGS_DESCRIPTION = """
Args:
    original_answers (`list` of `str`): one answer per trial × arm row, with the case's own image.
    swapped_answers (`list` of `str`): the answer of the same row with the substitute image.
    arms (`list` of `str`): "with_report" or "without_report" per row.
    trial_ids (`list` of `str` or `int`): the trial of each row; a trial appears once per arm, and rows
        are joined across arms on it.
    patient_ids (`list` of `str` or `int`): the patient of each row (the same in both arms), the
        bootstrap cluster.
    margins_original, margins_swapped (`list` of `float`, optional): continuous answer scores of each
        row, both or neither, finite; stream them with their rows.
    margin_threshold (`float`, default 0.5): |Δ margin| above which a label-unchanged trial "moved".
    options (`list`, optional): answer options, one list shared by all rows or one per row.
    n_resamples (`int`, default 10000): patient-clustered bootstrap draws (0: no intervals).
    confidence (`float`, default 0.95): level of the percentile intervals.
    seed (`int`, default 0): bootstrap seed.
Returns:
    flip_rate_with_report, flip_rate_without_report (`float` in [0, 1]): share of trials whose answer
        changes with the substitute image; higher means more image sensitivity.
    paired_difference (`float` in [-1, 1]): without − with; positive when the report makes the model
        less sensitive to the image.
    mean_abs_margin_change_with_report, mean_abs_margin_change_without_report (`float` >= 0),
        margin_paired_difference (`float`), unchanged_margin_moved_with_report,
        unchanged_margin_moved_without_report, share_larger_without_report (`float` in [0, 1]):
        the margin metrics; `None` without margins.
    ci (`dict`): each key above -> {"low", "high"} (None without resamples or when undefined).
    n_trials, n_patients (`int`); n_flips_with_report, n_flips_without_report (`int`);
    margin_threshold (`float`).
    With a single arm present, the other arm's keys and the paired keys are `None`.
Examples:
    Four trials from three patients, each run with and without the report. With the report no answer
    changes ("Yes." is "yes"); without it three of four do:

    >>> swap_sensitivity = evaluate.load("shovir/swap_sensitivity")
    >>> results = swap_sensitivity.compute(
    ...     original_answers=["yes", "no", "yes", "no", "yes", "no", "yes", "no"],
    ...     swapped_answers=["yes", "no", "Yes.", "no", "no", "no", "no", "yes"],
    ...     arms=["with_report"] * 4 + ["without_report"] * 4,
    ...     trial_ids=["t1", "t2", "t3", "t4"] * 2, patient_ids=["p1", "p1", "p2", "p3"] * 2)
    >>> results["flip_rate_with_report"], results["flip_rate_without_report"], results["paired_difference"]
    (0.0, 0.75, 0.75)
    >>> results["n_trials"], results["n_patients"], results["mean_abs_margin_change_with_report"]
    (4, 3, None)

    With margins: trial t1 keeps "yes" with the report but its margin moves by 1.0; without the report
    it flips (|Δ| = 3.0). Trial t2 moves by 0.25 in both arms:

    >>> results = swap_sensitivity.compute(
    ...     original_answers=["yes", "no", "yes", "no"], swapped_answers=["yes", "no", "no", "no"],
    ...     arms=["with_report", "with_report", "without_report", "without_report"],
    ...     trial_ids=["t1", "t2", "t1", "t2"], patient_ids=["p1", "p2", "p1", "p2"],
    ...     margins_original=[2.0, -1.0, 1.0, -0.5], margins_swapped=[1.0, -1.25, -2.0, -0.25], n_resamples=0)
    >>> results["flip_rate_without_report"], results["mean_abs_margin_change_with_report"], results["mean_abs_margin_change_without_report"]
    (0.5, 0.625, 1.625)
    >>> results["margin_paired_difference"], results["unchanged_margin_moved_with_report"], results["share_larger_without_report"]
    (1.0, 0.5, 0.5)
"""

_COLUMNS = (
    Column("original_answers", "text"),
    Column("swapped_answers", "text"),
    Column("arms", "text"),
    Column("trial_ids", "id"),
    Column("patient_ids", "id"),
    Column("margins_original", "number", required=False),
    Column("margins_swapped", "number", required=False),
    Column("options", "options", required=False),
)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SwapSensitivity(StreamingModule, evaluate.Metric):
    _COLUMNS = _COLUMNS

    def _info(self):
        # columns reach _compute as Arrow arrays (format "arrow"): codes become numpy from the buffers
        return self._arrow_info(evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self._features(),
            reference_urls=["https://arxiv.org/abs/2609.15635", "https://github.com/criticaldata/MODALENS"],
        ))

    def _compute(self, original_answers, swapped_answers, arms, trial_ids, patient_ids, margins_original=None, margins_swapped=None,
                 options=None, margin_threshold=0.5, n_resamples=10000, confidence=0.95, seed=0):
        optional = self._optional
        strings = self._pylist
        return swap_sensitivity(strings(original_answers), strings(swapped_answers), strings(arms), strings(trial_ids),
                                strings(patient_ids), n_resamples=n_resamples, seed=seed,
                                margins_original=optional("margins_original", margins_original),
                                margins_swapped=optional("margins_swapped", margins_swapped),
                                margin_threshold=margin_threshold, options=self._options(options), confidence=confidence)
