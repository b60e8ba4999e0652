# Copyright 2026 The shovir authors. Licensed under the Apache License, Version 2.0.
"""ICARE (Dua et al., 2025): agreement of two LLM agents on questions written from the reference and the generated report."""

import evaluate

from shovir.icare import icare
from shovir.icare import icare_from_answers
from shovir.icare import pair_reports
from shovir.metrics._checks import Column
from shovir.metrics._checks import StreamingModule

_CITATION = """\
@article{dua2025icare,
  title = {Clinically Grounded Agent-based Report Evaluation: An Interpretable Metric for Radiology Report Generation},
  author = {Dua, Radhika and Kwon, Young Joon and Dogra, Siddhant and Freedman, Daniel and Ruan, Diana and
            Nashawaty, Motaz and Rigau, Danielle and Alber, Daniel Alexander and Zhang, Kang and Cho, Kyunghyun and
            Oermann, Eric Karl},
  journal = {arXiv preprint arXiv:2508.02808},
  year = {2025}
}
"""

_DESCRIPTION = """\
ICARE (§3) gives each report of a pair to an LLM agent. Each agent writes n four-option questions
from its own report; a question is kept only if the judge answers it correctly with its report and
wrongly without any report (options shuffled, seeded, before and after this filter). Both agents
then answer every kept question from their own report. ICARE-GT is the share of questions written
from the reference reports on which the two agents agree (a proxy for precision), ICARE-GEN the
same for questions written from the generated reports (a proxy for recall), ICARE-AVG their mean;
at dataset level (agreements / kept questions, with a report-clustered bootstrap interval) and per
report. A failed or unreadable answer is a failure, never an agreement or a disagreement.

Streaming: the per-pair inputs (predictions, references, ids) are the columns of the module's one
schema, so `add()`, `add_batch()` and `evaluate.combine` store what one `compute()` call does; the
judge runs once, at `compute()`. Settings (backend, backend_options, agent_answers, cache,
log_path, n_questions, seed, variant, max_attempts, n_resamples, confidence, bootstrap_seed) are
`compute()` arguments.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): the generated reports.
    references (`list` of `str`): the reference reports; row i of both lists is one report pair.
    ids (`list`, optional): an id per pair (default "0", "1", ...); the question log and
        `agent_answers` refer to pairs by these ids.
    backend (`str`, default "offline"): the LLM judge: "openai" (any OpenAI-compatible server),
        "transformers" (a local causal LM by path) or "offline" (a deterministic approximation built
        on the rule-based CheXpert labeler: one question per finding, answered by labelling).
    backend_options (`dict`, optional): the backend's options, e.g. {"base_url": ..., "model": ...,
        "api_key_env": ...} for "openai" or {"model": "/models/llama"} for "transformers".
    agent_answers (`list` of `dict`, optional): saved answers instead of a judge: the "question"
        records of an ICARE log (report_id, source, kept, answer_gt, answer_gen); nothing is called.
    cache (`str`, optional): a JSONL file caching every call (a rerun makes none).
    log_path (`str`, optional): where to write the per-question JSONL log.
    n_questions (`int`, default 40), seed (`int`, default 123), variant (`str`, default "shuffled";
        or "unshuffled"), max_attempts (`int`, default 3): the authors' settings.
    n_resamples (`int`, default 1000), confidence (`float`, default 0.95), bootstrap_seed (`int`,
        default 0): the report-clustered bootstrap.
Returns:
    icare_gt, icare_gen, icare_avg (`float` in [0, 1] or `None`): dataset-level agreement.
    ci (`dict`): each score -> {"low", "high"}.
    agreements, questions, answer_failures (`dict`): per side ("gt", "gen"), counts behind the scores.
    report_level (`dict`): each score -> {"mean", "std", "n"} over the reports.
    per_report (`dict`): pair id -> its three scores (and, with a judge, its question counts).
    counts, calls, config: with a judge, questions written / kept / filtered / lost per side, the
        calls made and saved, and the settings.
    n (`int`): report pairs.
Examples:
    With the offline approximation, deleting the effusion sentence loses one of the two findings the
    reference report states:

    >>> icare_metric = evaluate.load("shovir/icare")
    >>> results = icare_metric.compute(
    ...     references=["Mild cardiomegaly. Small left pleural effusion.", "No acute cardiopulmonary process."],
    ...     predictions=["Mild cardiomegaly.", "No acute cardiopulmonary process."], n_resamples=0)
    >>> results["icare_gt"], results["icare_gen"], results["icare_avg"], results["questions"]
    (0.5, 1.0, 0.75, {'gt': 2, 'gen': 1})

    Streamed in batches with ids (the judge runs once, at compute):

    >>> icare_metric.add_batch(references=["Cardiomegaly."], predictions=["No cardiomegaly."], ids=["x1"])
    >>> icare_metric.add_batch(references=["Small left pleural effusion."], predictions=["Small left pleural effusion."],
    ...                        ids=["x2"])
    >>> results = icare_metric.compute(n_resamples=0)
    >>> results["per_report"]["x1"]["icare_gt"], results["per_report"]["x2"]["icare_gt"], results["icare_gt"]
    (0.0, 1.0, 0.5)

    Recomputed from saved agent answers (no judge): one agreement and one failure on pair "0":

    >>> results = icare_metric.compute(references=["a"], predictions=["b"], agent_answers=[
    ...     {"report_id": "0", "source": "gt", "kept": True, "answer_gt": "A", "answer_gen": "A"},
    ...     {"report_id": "0", "source": "gen", "kept": True, "answer_gt": "B", "answer_gen": None}], n_resamples=0)
    >>> results["icare_gt"], results["icare_gen"], results["answer_failures"]
    (1.0, None, {'gt': 0, 'gen': 1})
"""


_COLUMNS = (
    Column("predictions", "text"),
    Column("references", "text"),
    Column("ids", "id", required=False),
)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ICARE(StreamingModule, evaluate.Metric):
    _COLUMNS = _COLUMNS

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=self._features(),
            reference_urls=["https://arxiv.org/abs/2508.02808"],
        )

    def _compute(self, predictions, references, ids=None, backend="offline", backend_options=None, agent_answers=None,
                 cache=None, log_path=None, n_questions=40, seed=123, variant="shuffled", max_attempts=3,
                 n_resamples=1000, confidence=0.95, bootstrap_seed=0):
        ids = self._optional("ids", ids)
        if agent_answers is not None:
            pairs = pair_reports(references, predictions, ids)
            return icare_from_answers(agent_answers, [pair[0] for pair in pairs], n_resamples=n_resamples,
                                      confidence=confidence, bootstrap_seed=bootstrap_seed)
        return icare(references, predictions, ids=ids, backend=backend, backend_options=backend_options, cache=cache,
                     log_path=log_path, n_questions=n_questions, seed=seed, variant=variant, max_attempts=max_attempts,
                     n_resamples=n_resamples, confidence=confidence, bootstrap_seed=bootstrap_seed)
