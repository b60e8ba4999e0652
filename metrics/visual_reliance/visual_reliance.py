# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""Visual reliance of Beyond Accuracy (§3.4): accuracy under real, shuffled and blank images, VRS, Blank Drop, Image Sensitivity, VBR and VHR."""

import evaluate

from shovir.metrics import visual_reliance
from shovir.metrics._checks import Column
from shovir.metrics._checks import StreamingModule

_CITATION = """\
@article{zafar2026beyond,
  title = {Beyond Accuracy: Evaluating Visual Grounding in Multimodal Medical Reasoning},
  author = {Zafar, Anas and Murali, Leema Krishna and Vashist, Ashish},
  journal = {arXiv preprint arXiv:2603.03437},
  year = {2026}
}
"""

_DESCRIPTION = """\
Beyond Accuracy (§3.3-3.4) asks every question three times: with its own image (real), with another
image of the same benchmark (shuffled) and with a uniform gray image (blank). From the paired answers:
VRS = Acc_real − Acc_shuffle (does the right image help?), Blank Drop = Acc_real − Acc_blank (does any
image help?), Image Sensitivity IS = P[a_real ≠ a_shuffle] (does the answer move at all?), and the
benefit/harm rates VBR = P[correct_real ∧ ¬correct_shuffle], VHR = P[¬correct_real ∧ correct_shuffle]
(VRS = VBR − VHR). Answers are compared on canonical forms: case, punctuation, articles, yes/no variants
and option letters are folded, so "Yes." matches "yes" and "B" matches the second option.

Streaming: every per-sample input (the answers of each condition, options, ids, clusters) is a column of the module's one declared schema, so
`add()`, `add_batch()` and `evaluate.combine` store exactly what one `compute()` call does; optional
columns are nullable (a null row means "not given"; give an optional input in every batch or in
none). Inputs are checked before Arrow casts them: a `ValueError` names the argument, the row and the
fix. Settings (`n_resamples`, `confidence`, `n_permutations`, `seed`) are `compute()` arguments. Through `evaluate.combine`, pass every input of
every combined module (`None` for an optional one).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions_real (`list` of `str`): extracted answers with the real image (see
        `shovir.metrics.answers.extract_answer`), one per question.
    predictions_shuffled (`list` of `str`): answers with a shuffled image, same questions.
    references (`list` of `str`): the reference answers.
    predictions_blank (`list` of `str`, optional): answers with the blank image; without it the blank
        metrics are `None`. Stream it with the other answers of its rows.
    options (`list`, optional): the answer options of multiple-choice questions: one list shared by all
        questions, or one list (or `None` for an open question) per question.
    sample_ids (`list`, optional): ids of the real-condition samples; with `sample_ids_shuffled` /
        `sample_ids_blank` the other conditions are joined on ids instead of by position.
    sample_ids_shuffled, sample_ids_blank (`list`, optional): ids of the shuffled / blank answers.
    clusters (`list`, optional): cluster id (e.g. image or patient) per sample, for a cluster bootstrap
        and cluster-level permutations.
    n_resamples (`int`, default 1000): bootstrap resamples (0: no intervals).
    confidence (`float`, default 0.95): level of the percentile intervals.
    n_permutations (`int`, default 10000): sign-flip permutations for the VRS and Blank Drop p-values
        (0: no test, p-values `None`).
    seed (`int`, default 0): seed of the bootstrap and the permutations.
Returns:
    accuracy_real, accuracy_shuffled, accuracy_blank (`float` in [0, 1]): accuracy per condition.
    vrs (`float` in [-1, 1]): Acc_real − Acc_shuffle; higher means more reliance on the right image,
        negative means the model does better with a wrong one.
    blank_drop (`float` in [-1, 1]): Acc_real − Acc_blank; near 0 means the text alone answers.
    image_sensitivity (`float` in [0, 1]): share of answers that change with a shuffled image; low
        (< 0.5) means the answers mostly ignore the image.
    vbr, vhr (`float` in [0, 1]): visual benefit and harm rates; a grounded model has vbr >> vhr.
    ci (`dict`): each key above -> {"low", "high"} (None without resamples or without blank answers).
    p_values (`dict`): {"vrs", "blank_drop"}, two-sided paired permutation tests of H0: metric = 0.
    n (`int`): number of samples.
    The blank keys are `None` when `predictions_blank` is not given.
Examples:
    Four yes/no questions under the three conditions; the blank image loses one correct answer, a
    shuffled image two:

    >>> visual_reliance = evaluate.load("shovir/visual_reliance")
    >>> results = visual_reliance.compute(predictions_real=["Yes.", "no", "yes", "Yes"], predictions_shuffled=["yes", "Yes", "No", "yes"],
    ...                                   predictions_blank=["yes", "yes", "yes", "yes"], references=["yes", "no", "yes", "no"])
    >>> results["accuracy_real"], results["accuracy_shuffled"], results["accuracy_blank"]
    (0.75, 0.25, 0.5)
    >>> results["vrs"], results["blank_drop"], results["image_sensitivity"], results["vbr"], results["vhr"]
    (0.5, 0.25, 0.5, 0.5, 0.0)

    Multiple-choice options per question (letters resolve to options), no blank condition, no resampling.
    The model does better with the wrong images, so VRS is negative and all of it is visual harm:

    >>> results = visual_reliance.compute(predictions_real=["B", "B", "right lung", "No"], predictions_shuffled=["(B)", "Axial", "Left lung.", "no"],
    ...                                   references=["Coronal", "Axial", "left lung", "no"],
    ...                                   options=[["Axial", "Coronal"], ["Axial", "Coronal"], None, None], n_resamples=0)
    >>> results["accuracy_real"], results["accuracy_shuffled"], results["vrs"], results["vbr"], results["vhr"]
    (0.5, 1.0, -0.5, 0.0, 0.5)
    >>> results["accuracy_blank"], results["blank_drop"], results["ci"]["vrs"]
    (None, None, {'low': None, 'high': None})

    Streaming the answers with `add_batch`, blank answers included; the settings go to `compute`:

    >>> for real, shuffled, blank, refs in [(["yes", "no"], ["yes", "yes"], ["no", "no"], ["yes", "no"]), (["no"], ["no"], ["no"], ["yes"])]:
    ...     visual_reliance.add_batch(predictions_real=real, predictions_shuffled=shuffled, predictions_blank=blank, references=refs)
    >>> results = visual_reliance.compute(n_resamples=0, n_permutations=0)
    >>> round(results["accuracy_real"], 4), round(results["blank_drop"], 4), round(results["image_sensitivity"], 4), results["n"]
    (0.6667, 0.3333, 0.3333, 3)
    >>> results["p_values"]
    {'vrs': None, 'blank_drop': None}
"""

_COLUMNS = (
    Column("predictions_real", "text"),
    Column("predictions_shuffled", "text"),
    Column("references", "text"),
    Column("predictions_blank", "text", required=False),
    Column("options", "options", required=False),
    Column("sample_ids", "id", required=False),
    Column("sample_ids_shuffled", "id", required=False),
    Column("sample_ids_blank", "id", required=False),
    Column("clusters", "id", required=False),
)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class VisualReliance(StreamingModule, evaluate.Metric):
    _COLUMNS = _COLUMNS

    def _info(self):
        # columns reach _compute as Arrow arrays (format "arrow"): codes become numpy from the buffers
        return self._arrow_info(evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self._features(),
            reference_urls=["https://arxiv.org/abs/2603.03437"],
        ))

    def _compute(self, predictions_real, predictions_shuffled, references, predictions_blank=None, options=None, sample_ids=None,
                 sample_ids_shuffled=None, sample_ids_blank=None, clusters=None, n_resamples=1000, confidence=0.95,
                 n_permutations=10000, seed=0):
        optional = self._optional
        strings = self._pylist
        return visual_reliance(strings(predictions_real), strings(predictions_shuffled), strings(references), optional("predictions_blank", predictions_blank),
                               self._options(options), sample_ids=optional("sample_ids", sample_ids),
                               sample_ids_shuffled=optional("sample_ids_shuffled", sample_ids_shuffled),
                               sample_ids_blank=optional("sample_ids_blank", sample_ids_blank),
                               clusters=optional("clusters", clusters), n_resamples=n_resamples, confidence=confidence,
                               n_permutations=n_permutations, seed=seed)
