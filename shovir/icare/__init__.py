"""ICARE and GREEN: LLM-judged report metrics on pluggable, cached, counted backends.

* :mod:`shovir.icare.pipeline` — ICARE (``icare_metric.txt`` §3): two agents write four-option
  questions from their reports, filter them, answer each other's, and agree or not;
  :func:`icare` / :class:`Icare`. The score formulas are :mod:`shovir.metrics.icare`.
* :mod:`shovir.icare.green` — GREEN (Ostmeier et al. 2024): the judge prompt, the response parser
  and the run; :func:`green` / :class:`Green`. The formulas are :mod:`shovir.metrics.green`.
* :mod:`shovir.icare.backends` — the judges: ``openai`` (any OpenAI-compatible server, through
  :class:`shovir.models.chat.ChatClient`), ``transformers`` (a local causal LM by path) and
  ``offline`` (a deterministic labeler-based approximation); :class:`Caller` caches and counts.
* :mod:`shovir.icare.cache` — the append-only JSONL call cache.
* :mod:`shovir.icare.parse` — tolerant MCQ parsing and answer-letter normalisation.
* :mod:`shovir.icare.prompts` — the prompts.

>>> out = icare({"s1": "Small left pleural effusion."}, {"s1": "No pleural effusion."}, n_resamples=0)
>>> out["icare_gt"], out["calls"]["made"] > 0
(0.0, True)
"""

from shovir.icare.backends import (
    BACKENDS,
    Backend,
    Call,
    Caller,
    OfflineBackend,
    OpenAIBackend,
    Reply,
    TransformersBackend,
    get_backend,
)
from shovir.icare.cache import CallCache, call_key
from shovir.icare.green import (
    GREEN_JUDGE,
    Green,
    GreenParse,
    clean_green_response,
    green,
    parse_green_response,
)
from shovir.icare.parse import MCQ, normalize_answer, parse_mcqs
from shovir.icare.pipeline import (
    DEFAULT_QUESTIONS,
    DEFAULT_SEED,
    VARIANTS,
    Icare,
    icare,
    icare_from_answers,
    pair_reports,
    read_reports,
    shuffle_options,
)

__all__ = [
    "BACKENDS",
    "DEFAULT_QUESTIONS",
    "DEFAULT_SEED",
    "GREEN_JUDGE",
    "MCQ",
    "VARIANTS",
    "Backend",
    "Call",
    "CallCache",
    "Caller",
    "Green",
    "GreenParse",
    "Icare",
    "OfflineBackend",
    "OpenAIBackend",
    "Reply",
    "TransformersBackend",
    "call_key",
    "clean_green_response",
    "get_backend",
    "green",
    "icare",
    "icare_from_answers",
    "normalize_answer",
    "pair_reports",
    "parse_green_response",
    "parse_mcqs",
    "read_reports",
    "shuffle_options",
]
