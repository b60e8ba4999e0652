# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""Hallucinated visual reasoning of Beyond Accuracy (§3.5): NVCR, HVRR and P(invariant | visual claim) of real-image rationales."""

import evaluate

from shovir.metrics import hallucination_metrics
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
Beyond Accuracy (§3.5) asks whether a model's visual reasoning is used. A rationale makes a novel
visual claim (NVC = 1) when it uses visual observation language (presence, location, appearance,
severity: "shows", "left", "spiculated", "mild", ...) that is not part of a phrase shared with the
question (shared runs of 2 to 5 words are filtered out). With a_real and a_shuffle the answers to the
same question with its own image and with a shuffled one:
NVCR = P[NVC = 1], HVRR = P[NVC = 1 ∧ a_real = a_shuffle] (Eq. 1), and the conditional
P[a_real = a_shuffle | NVC = 1]: how often an answer backed by a visual claim ignores the image.

Streaming: every per-sample input (rationales, questions, answers, references, options, ids, clusters, benchmarks) is a column of the module's one declared schema, so
`add()`, `add_batch()` and `evaluate.combine` store exactly what one `compute()` call does; optional
columns are nullable (a null row means "not given"; give an optional input in every batch or in
none). Inputs are checked before Arrow casts them: a `ValueError` names the argument, the row and the
fix. Settings (`max_ngram`, `n_resamples`, `confidence`, `seed`) are `compute()` arguments. Through `evaluate.combine`, pass every input of
every combined module (`None` for an optional one).
"""

_KWARGS_DESCRIPTION = """
Args:
    rationales (`list` of `str`): the real-image rationales (the `<think>` part; see
        `shovir.metrics.answers.extract_rationale`).
    questions (`list` of `str`): the question text of each sample.
    predictions_real (`list` of `str`): extracted answers with the real image.
    predictions_shuffled (`list` of `str`): answers to the same questions with a shuffled image.
    references (`list` of `str`, optional): reference answers; they only decide whether an item is read
        as yes/no when the two answers are compared.
    options (`list`, optional): answer options, one list shared by all questions or one (or `None`) per
        question; option letters then resolve to the option text.
    sample_ids, sample_ids_shuffled (`list`, optional): join the shuffled answers on ids instead of by
        position.
    clusters (`list`, optional): cluster id (e.g. image or patient) per sample for a cluster bootstrap.
    benchmarks (`list` of `str`, optional): the benchmark of each sample (e.g. "VQA-RAD"); the conditional
        is then also averaged over benchmarks, as Beyond Accuracy's Table 4 does.
    max_ngram (`int`, default 5): longest shared question phrase filtered out of the rationale.
    n_resamples (`int`, default 1000): bootstrap resamples (0: no intervals).
    confidence (`float`, default 0.95): level of the percentile intervals.
    seed (`int`, default 0): bootstrap seed.
Returns:
    nvcr (`float` in [0, 1]): share of rationales with a novel visual claim.
    hvrr (`float` in [0, 1]): share of samples with a claim AND an answer unchanged by the shuffled
        image; lower is better.
    p_invariant_given_claim (`float` in [0, 1] or `None`): hvrr / nvcr, pooled over all samples; above
        0.5, claims are more often ungrounded than grounded. `None` when no rationale makes a claim.
    p_invariant_given_claim_mean_over_benchmarks (`float` or `None`): the mean over `benchmarks` of each
        benchmark's conditional (Table 4); equal to the pooled value without `benchmarks`.
    per_benchmark (`dict`): benchmark -> {"nvcr", "hvrr", "p_invariant_given_claim", "n", "n_claims"};
        n_benchmarks (`int`).
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

    Streaming two benchmarks, one sample at a time: the pooled conditional is 2/3, the mean of the
    per-benchmark conditionals (1 + 1/2) / 2:

    >>> for rationale, real, shuffled, benchmark in [("Mild effusion.", "yes", "yes", "A"), ("Small mass.", "yes", "yes", "B"),
    ...                                              ("Large opacity.", "no", "yes", "B")]:
    ...     hvrr.add(rationales=rationale, questions="Q?", predictions_real=real, predictions_shuffled=shuffled, benchmarks=benchmark)
    >>> results = hvrr.compute(n_resamples=0)
    >>> round(results["p_invariant_given_claim"], 4), results["p_invariant_given_claim_mean_over_benchmarks"]
    (0.6667, 0.75)
"""

_COLUMNS = (
    Column("rationales", "text"),
    Column("questions", "text"),
    Column("predictions_real", "text"),
    Column("predictions_shuffled", "text"),
    Column("references", "text", required=False),
    Column("options", "options", required=False),
    Column("sample_ids", "id", required=False),
    Column("sample_ids_shuffled", "id", required=False),
    Column("clusters", "id", required=False),
    Column("benchmarks", "id", required=False),
)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class HVRR(StreamingModule, evaluate.Metric):
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

    def _compute(self, rationales, questions, predictions_real, predictions_shuffled, references=None, options=None,
                 sample_ids=None, sample_ids_shuffled=None, clusters=None, benchmarks=None, max_ngram=5, n_resamples=1000,
                 confidence=0.95, seed=0):
        optional = self._optional
        strings = self._pylist
        return hallucination_metrics(strings(rationales), strings(questions), strings(predictions_real),
                                     strings(predictions_shuffled), optional("references", references),
                                     self._options(options),
                                     sample_ids=optional("sample_ids", sample_ids),
                                     sample_ids_shuffled=optional("sample_ids_shuffled", sample_ids_shuffled),
                                     clusters=optional("clusters", clusters), benchmarks=optional("benchmarks", benchmarks),
                                     max_ngram=max_ngram, n_resamples=n_resamples, confidence=confidence, seed=seed)
