# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""BLEU-1, BLEU-4 and ROUGE-L of generated against reference radiology reports, all on a 0–1 scale."""

import evaluate

from shovir.metrics import nlg as _nlg
from shovir.metrics._checks import Column
from shovir.metrics._checks import StreamingModule
from shovir.metrics._checks import id_list
from shovir.metrics._checks import sequence

_CITATION = """\
@inproceedings{papineni2002bleu,
  title = {{BLEU}: a Method for Automatic Evaluation of Machine Translation},
  author = {Papineni, Kishore and Roukos, Salim and Ward, Todd and Zhu, Wei-Jing},
  booktitle = {Proceedings of the 40th Annual Meeting of the Association for Computational Linguistics},
  pages = {311--318},
  year = {2002}
}
@inproceedings{post2018sacrebleu,
  title = {A Call for Clarity in Reporting {BLEU} Scores},
  author = {Post, Matt},
  booktitle = {Proceedings of the Third Conference on Machine Translation: Research Papers},
  pages = {186--191},
  year = {2018}
}
@inproceedings{lin2004rouge,
  title = {{ROUGE}: A Package for Automatic Evaluation of Summaries},
  author = {Lin, Chin-Yew},
  booktitle = {Text Summarization Branches Out},
  pages = {74--81},
  year = {2004}
}
"""

_DESCRIPTION = """\
The text-overlap metrics of ShoViR Table 1: corpus BLEU-1 and BLEU-4 and the mean ROUGE-L F-measure
(rouge-score, no stemming), all on 0–1. BLEU comes as papers print it: `bleu_implementation`
"sacrebleu" (default: 13a tokens, exp smoothing), "hf" (evaluate's `bleu`, the Google NMT BLEU the
ShoViR authors used without bootstrap) or "pycocoevalcap" (RadEval / R2Gen: whitespace tokens, closest
reference length, no smoothing); `bleu_signature` names the settings. These metrics reward lexical
similarity and can be satisfied by generic report templates: read them next to the clinical metrics.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): generated reports.
    references (`list` of `str`): reference reports, one per prediction.
    clusters (`list` of `str` or `int`, optional): a cluster id per report (e.g. the patient) for a
        cluster bootstrap.
    bleu_implementation (`str`, default "sacrebleu"): "sacrebleu", "hf" or "pycocoevalcap".
    n_resamples (`int`, default 0), seed (`int`, default 0), confidence (`float`, default 0.95):
        percentile bootstrap; BLEU is recomputed from resampled corpus statistics.
Returns:
    bleu_1, bleu_4, rouge_l (`float` in [0, 1]): higher is better.
    n (`int`): reports scored.
    ci (`dict`): metric -> {"low", "high"} (None without resamples).
    bleu_signature, rouge_signature (`str`): the implementation and settings behind the numbers.
Examples:
    Identical reports score 1:

    >>> nlg = evaluate.load("shovir/nlg")
    >>> nlg.compute(predictions=["no acute cardiopulmonary process ."], references=["no acute cardiopulmonary process ."])["bleu_4"]
    1.0

    A paraphrase keeps part of the overlap (BLEU-1: every unigram matches, brevity penalty exp(1 - 6/5)):

    >>> results = nlg.compute(predictions=["the heart is enlarged ."], references=["the heart size is enlarged ."])
    >>> round(results["bleu_1"], 4), round(results["rouge_l"], 4), results["bleu_signature"].split("|")[0]
    (0.8187, 0.8889, 'bleu:sacrebleu')

    The same reports scored as the ShoViR authors' evaluate path and as RadEval do (no smoothing:
    no 4-gram in common gives BLEU-4 = 0, or pycocoevalcap's tiny value):

    >>> results = nlg.compute(predictions=["the heart is enlarged ."], references=["the heart size is enlarged ."],
    ...                       bleu_implementation="hf")
    >>> results["bleu_4"], round(results["bleu_1"], 4)
    (0.0, 0.8187)

    Streaming gives the numbers of one compute call:

    >>> nlg.add(prediction="the heart is enlarged .", reference="the heart size is enlarged .")
    >>> nlg.add_batch(predictions=["no effusion"], references=["no pleural effusion"])
    >>> round(nlg.compute()["rouge_l"], 4)
    0.8444

    Anything but a report string is refused before Arrow could turn it into text:

    >>> nlg.compute(predictions=["no acute findings", 7], references=["no acute findings", "7"])
    Traceback (most recent call last):
    ...
    ValueError: predictions[1]: expected a report string, got int 7; pass every report as a str (decode bytes, join token lists with spaces, drop or fill missing reports)
"""

_COLUMNS = (Column("predictions", "text"), Column("references", "text"), Column("clusters", "id", required=False))
_WRITE_ROWS = 1 << 16  # rows per Arrow batch when compute() is given all inputs at once


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class NLG(StreamingModule, evaluate.Metric):
    _COLUMNS = _COLUMNS

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self._features(),
            # the report columns reach _compute as Arrow arrays: no Python string per row is made
            format="arrow",
            reference_urls=[
                "https://github.com/mjpost/sacrebleu",
                "https://github.com/tensorflow/nmt/blob/master/nmt/scripts/bleu.py",
                "https://github.com/salaniz/pycocoevalcap",
                "https://github.com/google-research/google-research/tree/master/rouge",
            ],
        )

    def _reset_stream(self):
        super()._reset_stream()
        self._added = 0

    def _rows(self, columns, labeler=None, single=False):
        """Check one batch with the checks of :func:`shovir.metrics.nlg.nlg_scores` (rows are
        numbered across the whole stream), before anything reaches Arrow."""
        offset = getattr(self, "_added", 0)
        names = {"predictions": "prediction", "references": "reference"} if single else {}
        out = {}
        for field in ("predictions", "references"):
            values = columns.get(field)
            if values is None:
                raise ValueError(f"{field}: missing; pass predictions and references together (compute() or each "
                                 "add()/add_batch() call)")
            if single:
                if not isinstance(values, str):
                    raise ValueError(f"{names[field]} (row {offset}): expected a report string, got "
                                     f"{_nlg._describe(values)}; pass the report as a str")
                values = [values]
            out[field] = _nlg.check_texts(field, values, offset=offset)
        n = len(out["predictions"])
        if len(out["references"]) != n:
            raise ValueError(f"references: expected {n} reports, one per prediction, got {len(out['references'])}; "
                             "pair each generated report with its reference")
        clusters = columns.get("clusters")
        if clusters is None:
            out["clusters"] = [None] * n
        else:
            items = sequence("clusters", [clusters] if single else clusters, "one cluster id per report")
            out["clusters"] = id_list(items, "clusters", n)
            kinds = {str if isinstance(value, str) else int for value in items}
            seen = self._id_kinds.get("clusters")
            if seen is not None and kinds != {seen}:
                raise ValueError("clusters: these ids and earlier rows' ids mix strings and integers; use one type for every id")
            self._id_kinds["clusters"] = next(iter(kinds))
        self._added = offset + n
        return out

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one report pair (``cluster=`` or ``clusters=`` its optional cluster id)."""
        if "cluster" in kwargs:
            kwargs["clusters"] = kwargs.pop("cluster")
        return super().add(prediction=prediction, reference=reference, **kwargs)

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Score the reports added so far plus the ones given here. Settings are checked first;
        reports given here are checked as a whole and written to Arrow in bounded batches."""
        settings = {key: value for key, value in kwargs.items() if key != "clusters"}
        allowed = self._settings()
        for key in settings:
            if key not in allowed:
                raise ValueError(f"{key}: not an input or a setting of this metric; inputs: predictions, references, "
                                 f"clusters; settings: {', '.join(allowed)}")
        _nlg._check_options(settings.get("n_resamples", 0), settings.get("seed", 0), settings.get("confidence", 0.95),
                            settings.get("bleu_implementation", "sacrebleu"))
        given = {"predictions": predictions, "references": references, "clusters": kwargs.get("clusters")}
        if any(value is not None for value in given.values()):
            rows = self._rows(given)
            n = len(rows["predictions"])
            for start in range(0, n, _WRITE_ROWS):
                self._write({name: values[start : start + _WRITE_ROWS] for name, values in rows.items()})
        return super().compute(**settings)

    def _compute(self, predictions, references, clusters=None, bleu_implementation="sacrebleu", n_resamples=0, seed=0,
                 confidence=0.95):
        groups = None
        if clusters is not None and clusters.null_count < len(clusters):
            if clusters.null_count:
                missing = clusters.is_null().to_pylist().index(True)
                raise ValueError(f"clusters: row {missing} has no value but other rows do (it was given in some "
                                 "add()/add_batch() calls only); give it for every report or for none")
            groups = clusters.to_pylist()
        return _nlg.nlg_scores(predictions, references, n_resamples=n_resamples, clusters=groups, seed=seed,
                               bleu_implementation=bleu_implementation, confidence=confidence)
