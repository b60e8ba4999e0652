# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""Visual reliance of Beyond Accuracy (§3.4): accuracy under real, shuffled and blank images, VRS, Blank Drop, Image Sensitivity, VBR and VHR."""

import datasets
import evaluate

from shovir.metrics import visual_reliance
from shovir.metrics.answers import check_answers

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
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions_real (`list` of `str`): extracted answers with the real image (see
        `shovir.metrics.answers.extract_answer`), one per question.
    predictions_shuffled (`list` of `str`): answers with a shuffled image, same questions.
    references (`list` of `str`): the reference answers.
    predictions_blank (`list` of `str`, optional): answers with the blank image; without it the blank
        metrics are `None`. Give it to `compute()` (it cannot go through `add_batch()`).
    options (`list`, optional): the answer options of multiple-choice questions: one list shared by all
        questions, or one list (or `None` for an open question) per question.
    sample_ids (`list`, optional): ids of the real-condition samples; with `sample_ids_shuffled` /
        `sample_ids_blank` the other conditions are joined on ids instead of by position.
    sample_ids_shuffled, sample_ids_blank (`list`, optional): ids of the shuffled / blank answers.
    clusters (`list`, optional): cluster id (e.g. image or patient) per sample, for a cluster bootstrap
        and cluster-level permutations.
    n_resamples (`int`, default 1000): bootstrap resamples (0: no intervals).
    confidence (`float`, default 0.95): level of the percentile intervals.
    n_permutations (`int`, default 10000): sign-flip permutations for the VRS and Blank Drop p-values.
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

    Streaming the paired answers with `add_batch`; the optional blank answers go to `compute`:

    >>> for real, shuffled, refs in [(["yes", "no"], ["yes", "yes"], ["yes", "no"]), (["no"], ["no"], ["yes"])]:
    ...     visual_reliance.add_batch(predictions_real=real, predictions_shuffled=shuffled, references=refs)
    >>> results = visual_reliance.compute(predictions_blank=["no", "no", "no"], n_resamples=0, n_permutations=0)
    >>> round(results["accuracy_real"], 4), round(results["blank_drop"], 4), round(results["image_sensitivity"], 4), results["n"]
    (0.6667, 0.3333, 0.3333, 3)
"""

_ANSWER = datasets.Value("string")
_COLUMNS = ("predictions_real", "predictions_shuffled", "references")


def _check_columns(columns):
    """Reject a missing column or a non-string answer before Arrow stores it: datasets writes 1 or NaN
    into a string column as "1" / "nan" (evaluate only checks the first row), which would then count
    as answers. The check is shovir's own (`check_answers`), so messages match the function's."""
    for field in _COLUMNS:
        if columns.get(field) is None:
            raise ValueError(f"{field}: missing; pass {', '.join(_COLUMNS)} together")
        check_answers(columns[field], field)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class VisualReliance(evaluate.Metric):
    def _info(self):
        base = {"predictions_real": _ANSWER, "predictions_shuffled": _ANSWER, "references": _ANSWER}
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features(base),
                datasets.Features({**base, "predictions_blank": _ANSWER}),
            ],
            reference_urls=["https://arxiv.org/abs/2603.03437"],
        )

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of paired answers (predictions_real, predictions_shuffled, references)."""
        _check_columns({"references": references, **kwargs})
        super().add_batch(predictions=predictions, references=references, **kwargs)

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one sample: reference=..., predictions_real=..., predictions_shuffled=...."""
        _check_columns({field: None if value is None else [value] for field, value in {"references": reference, **kwargs}.items()})
        super().add(prediction=prediction, reference=reference, **kwargs)

    def _compute(self, predictions_real, predictions_shuffled, references, predictions_blank=None, options=None, sample_ids=None,
                 sample_ids_shuffled=None, sample_ids_blank=None, clusters=None, n_resamples=1000, confidence=0.95,
                 n_permutations=10000, seed=0):
        return visual_reliance(predictions_real, predictions_shuffled, references, predictions_blank, options, sample_ids=sample_ids,
                               sample_ids_shuffled=sample_ids_shuffled, sample_ids_blank=sample_ids_blank, clusters=clusters,
                               n_resamples=n_resamples, confidence=confidence, n_permutations=n_permutations, seed=seed)
