# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""BLEU-1, BLEU-4 and ROUGE-L of generated against reference radiology reports, all on a 0–1 scale."""

import datasets
import evaluate

from shovir.metrics.nlg import nlg_scores

_CITATION = """\
@inproceedings{post2018sacrebleu,
  title = {A Call for Clarity in Reporting {BLEU} Scores},
  author = {Post, Matt},
  booktitle = {WMT},
  year = {2018}
}
"""

_DESCRIPTION = """\
The text-overlap metrics of ShoViR Table 1: corpus BLEU-1 and BLEU-4 (sacrebleu, 13a tokenisation,
exp smoothing) and the mean ROUGE-L F-measure (rouge-score, no stemming), all on 0–1. They reward
lexical similarity and can be satisfied by generic report templates: read them next to the clinical
metrics.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): generated reports.
    references (`list` of `str`): reference reports, one per prediction.
    n_resamples (`int`, default 0), clusters (`list`, optional), seed (`int`, default 0): percentile bootstrap;
        BLEU is recomputed from resampled corpus statistics.
Returns:
    bleu_1, bleu_4, rouge_l (`float` in [0, 1]): higher is better.
    ci (`dict`): metric -> {"low", "high"} (None without resamples).
Examples:
    Identical reports score 1:

    >>> nlg = evaluate.load("shovir/nlg")
    >>> nlg.compute(predictions=["no acute cardiopulmonary process ."], references=["no acute cardiopulmonary process ."])["bleu_4"]
    1.0

    A paraphrase keeps part of the overlap (BLEU-1: every unigram matches, brevity penalty exp(1 - 6/5)):

    >>> results = nlg.compute(predictions=["the heart is enlarged ."], references=["the heart size is enlarged ."])
    >>> round(results["bleu_1"], 4), round(results["rouge_l"], 4)
    (0.8187, 0.8889)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class NLG(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string")}),
            reference_urls=["https://github.com/mjpost/sacrebleu", "https://github.com/google-research/google-research/tree/master/rouge"],
        )

    def _compute(self, predictions, references, n_resamples=0, clusters=None, seed=0):
        return nlg_scores(predictions, references, n_resamples=n_resamples, clusters=clusters, seed=seed)
