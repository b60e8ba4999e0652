# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""Hallucinated visual reasoning of Beyond Accuracy (§3.5): NVCR, HVRR and P(invariant | visual claim) of real-image rationales."""

import datasets
import evaluate

from shovir.metrics import hallucination_metrics
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
Beyond Accuracy (§3.5) asks whether a model's visual reasoning is used. A rationale makes a novel
visual claim (NVC = 1) when it uses visual observation language (presence, location, appearance,
severity: "shows", "left", "spiculated", "mild", ...) that is not part of a phrase shared with the
question (shared runs of 2 to 5 words are filtered out). With a_real and a_shuffle the answers to the
same question with its own image and with a shuffled one:
NVCR = P[NVC = 1], HVRR = P[NVC = 1 ∧ a_real = a_shuffle] (Eq. 1), and the conditional
P[a_real = a_shuffle | NVC = 1]: how often an answer backed by a visual claim ignores the image.
"""

_KWARGS_DESCRIPTION = """
Args:
    rationales (`list` of `str`): the real-image rationales (the `<think>` part; see
        `shovir.metrics.answers.extract_rationale`).
    questions (`list` of `str`): the question text of each sample.
    predictions_real (`list` of `str`): extracted answers with the real image.
    predictions_shuffled (`list` of `str`): answers to the same questions with a shuffled image.
    references (`list` of `str`, optional): reference answers; they only decide whether an item is read
        as yes/no when the two answers are compared. Give them to `compute()`, not `add_batch()`.
    options (`list`, optional): answer options, one list shared by all questions or one (or `None`) per
        question; option letters then resolve to the option text.
    sample_ids, sample_ids_shuffled (`list`, optional): join the shuffled answers on ids instead of by
        position.
    clusters (`list`, optional): cluster id (e.g. image or patient) per sample for a cluster bootstrap.
    max_ngram (`int`, default 5): longest shared question phrase filtered out of the rationale.
    n_resamples (`int`, default 1000): bootstrap resamples (0: no intervals).
    confidence (`float`, default 0.95): level of the percentile intervals.
    seed (`int`, default 0): bootstrap seed.
Returns:
    nvcr (`float` in [0, 1]): share of rationales with a novel visual claim.
    hvrr (`float` in [0, 1]): share of samples with a claim AND an answer unchanged by the shuffled
        image; lower is better.
    p_invariant_given_claim (`float` in [0, 1] or `None`): hvrr / nvcr; above 0.5, claims are more
        often ungrounded than grounded. `None` when no rationale makes a claim.
    ci (`dict`): each key above -> {"low", "high"} (None without resamples).
    n (`int`), n_claims (`int`): samples, and samples with NVC = 1.
Examples:
    Three of four rationales make visual claims; two of those answers survive the image shuffle
    ("Ground-glass opacity" is the same answer as "ground glass opacity"):

    >>> hvrr = evaluate.load("shovir/hvrr")
    >>> results = hvrr.compute(
    ...     rationales=["The image shows a spiculated mass in the left upper lobe.", "The question asks about effusion; I cannot tell.",
    ...                 "Mild cardiomegaly is visible.", "Diffuse ground glass opacities in both lungs."],
    ...     questions=["Is there a mass?", "Is there a pleural effusion?", "Is the heart enlarged?", "What is the main finding?"],
    ...     predictions_real=["yes", "no", "yes", "ground glass opacity"],
    ...     predictions_shuffled=["Yes.", "yes", "no", "Ground-glass opacity"])
    >>> results["nvcr"], results["hvrr"], round(results["p_invariant_given_claim"], 4), results["n_claims"]
    (0.75, 0.5, 0.6667, 3)

    Quoting the question is no claim (its shared phrases are filtered out), so the conditional is undefined:

    >>> results = hvrr.compute(rationales=["I check for an irregular mass in the upper lobe.", "The answer is no."],
    ...                        questions=["Is there an irregular mass in the upper lobe?", "Is the study normal?"],
    ...                        predictions_real=["no", "no"], predictions_shuffled=["no", "yes"], references=["no", "yes"], n_resamples=0)
    >>> results["nvcr"], results["hvrr"], results["p_invariant_given_claim"], results["ci"]["hvrr"]
    (0.0, 0.0, None, {'low': None, 'high': None})
"""

_TEXT = datasets.Value("string")
_COLUMNS = ("rationales", "questions", "predictions_real", "predictions_shuffled")


def _check_columns(columns):
    """Reject a missing column or a non-string item before Arrow stores it: datasets writes 1 or NaN
    into a string column as "1" / "nan" (evaluate only checks the first row), which would then count
    as text. The check is shovir's own (`check_answers`), so messages match the function's."""
    for field in _COLUMNS:
        if columns.get(field) is None:
            raise ValueError(f"{field}: missing; pass {', '.join(_COLUMNS)} together")
        check_answers(columns[field], field)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class HVRR(evaluate.Metric):
    def _info(self):
        base = {"rationales": _TEXT, "questions": _TEXT, "predictions_real": _TEXT, "predictions_shuffled": _TEXT}
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features(base),
                datasets.Features({**base, "references": _TEXT}),
            ],
            reference_urls=["https://arxiv.org/abs/2603.03437"],
        )

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Compute NVCR, HVRR and P(invariant | claim).

        evaluate binds `references` to its own parameter and drops it unless it is a column of the
        first schema; it is optional here, so it is handed to `_compute` as `reference_answers`.
        """
        if references is not None:
            kwargs["reference_answers"] = references
        return super().compute(predictions=predictions, **kwargs)

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of samples (rationales, questions, predictions_real, predictions_shuffled)."""
        if references is not None:
            raise ValueError("references: give the optional references to compute(), not add_batch()")
        _check_columns(kwargs)
        super().add_batch(predictions=predictions, **kwargs)

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one sample: rationales=..., questions=..., predictions_real=..., predictions_shuffled=...."""
        if reference is not None:
            raise ValueError("references: give the optional references to compute(), not add()")
        _check_columns({field: None if value is None else [value] for field, value in kwargs.items()})
        super().add(prediction=prediction, **kwargs)

    def _compute(self, rationales, questions, predictions_real, predictions_shuffled, reference_answers=None, options=None,
                 sample_ids=None, sample_ids_shuffled=None, clusters=None, max_ngram=5, n_resamples=1000, confidence=0.95, seed=0):
        return hallucination_metrics(rationales, questions, predictions_real, predictions_shuffled, reference_answers, options,
                                     sample_ids=sample_ids, sample_ids_shuffled=sample_ids_shuffled, clusters=clusters,
                                     max_ngram=max_ngram, n_resamples=n_resamples, confidence=confidence, seed=seed)
