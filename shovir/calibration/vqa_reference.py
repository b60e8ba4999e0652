"""Reference VQA models: three answerers with *known* visual reliance on the synthetic VQA rows.

The Beyond Accuracy and ModaLens protocols say whether a VQA model uses the image (accuracy
under real / blank / shuffled images, VRS, image sensitivity) and whether a report in the prompt
replaces the image (flip rates under a same-patient image swap, with and without the report).
To show that those numbers detect what they should, shovir ships three VQA models whose
behaviour is fixed by construction and runs them on ``SyntheticCXR(rows="vqa")``
(:mod:`shovir.data.phantom.questions`: presence, absence, side and which-finding template
questions). They need only numpy and pillow, read the question with
:func:`~shovir.data.phantom.parse_question` (a non-template question is a ``ValueError``),
return one :class:`~shovir.models.base.Generation` per message in order — ``text`` the chosen
option and ``scores`` a log-probability per option, the text always being their argmax — and
are deterministic: an answer depends on the question, the options and the image pixels or the
report, never on the batch, the process or the call order.

``reference-vqa-grounded`` — :class:`GroundedVQAReference`
    Answers from the image alone (the report is ignored), with the patch detector of the report
    reference models (:class:`~shovir.calibration.reference.PatchDetector`). For every class it
    takes the *evidence* ``z = best cell logit − bar`` (the bar is the class's uncertain
    threshold, the positive one for Support Devices, so ``z ≥ 0`` exactly when the report models
    would state the finding) over the whole image and over each half (the image's left half is
    the patient's right). With ``p = sigmoid(z)``: presence P(yes) = p, absence P(yes) = 1 − p;
    side: the two halves independent, P(right) = p_R (1 − p_L), P(both) = p_R p_L, ...;
    which-finding: the options conditioned on at most one present finding, so the log-odds of a
    finding option is its ``z`` against 0 for "none of these". Detections are cached per image
    bytes, so the five questions about an image (and every blank image) run the detector once.
    Known behaviour: a blank gray image shows nothing, so its answers are
    :data:`~shovir.data.phantom.ABSENT_ANSWERS` and blank accuracy is the documented "absent"
    prior (0.494); a shuffled image answers about another patient, so VRS is large; the
    detector never reports a fracture (its threshold is ``null``), so fracture questions are
    always answered "absent".

``reference-vqa-prior`` — :class:`PriorVQAReference`
    Answers from the question (and its options) alone: for each question type and finding, the
    answer frequencies fitted on questions of seeds 101-103
    (``resources/reference_vqa_prior.json``, never the demo's seed 0), Laplace-smoothed;
    for a which-finding question each finding option scores P(it is the answer | offered) and
    "none of these" its own rate. It never looks at the image or the report, so accuracy is the
    same under every image, VRS = 0 and image sensitivity = 0 exactly, and no swap flips anything.
    As fitted, it answers every presence question "no", every absence question "yes" and every
    which-finding question "none of these" (in the fitted counts every finding is absent from
    most of the closed questions about it, and "none of these" is the answer more often than any
    offered finding), and side questions with the finding's majority (``both`` for a
    pleural effusion, ``neither`` for a pneumothorax or pleural thickening, otherwise a side).
    ``python -m shovir.calibration.vqa_reference --fit`` rewrites the table byte for byte
    (:func:`fit_prior_table`).

``reference-vqa-report`` — :class:`ReportReliantVQAReference`
    With a report in the message, answers from the report only and ignores the image: the codes
    of the rule-based labeler (:func:`shovir.labelers.get_labeler` ``("rule")``) decide presence
    (1 positive → P(present) 0.95, 3 uncertain → 0.8 — the phantom's subtle findings are present
    and reported as "possible" —, 2 negative → 0.05, 0 unmentioned → 0.15), and the side words
    ("right", "left", "bilateral") of the report sentences naming the finding
    (:data:`~shovir.data.phantom.CLASS_KEYWORDS`) decide its side. Without a report it is
    :class:`GroundedVQAReference`. Known behaviour: with the report, swapping the image changes
    nothing (ModaLens flip rate 0); without it, the flip rate is the grounded model's; so the
    paired difference is the grounded flip rate.

As measured through :func:`shovir.runner.run.run_sweep` and :func:`shovir.scoring.score_run` on
the demo data (``rows="vqa"``, 200 images of seed 0, 1000 questions of 76 patients; conditions
baseline, blank, shuffle, swap, each swap and baseline also with the report; run seed 3, so 159
images swap with a discordant study of their own patient and 41 with another patient's; 200
bootstrap resamples; about 25 s on 2 CPU cores for the three models):

==================  ========  ========  =======  =====================  ===========  ============  ============  =====================
model               Acc real  Acc shuf  Acc      VRS [95 % CI]          image        flip rate     flip rate     paired difference
                                        blank                           sensitivity  no report     with report   [95 % CI]
==================  ========  ========  =======  =====================  ===========  ============  ============  =====================
grounded            0.907     0.500     0.516    0.407 [0.376, 0.438]   0.425        0.372         0.372         0.000 [0.000, 0.000]
text prior          0.532     0.532     0.532    0.000 [0.000, 0.000]   0.000        0.000         0.000         0.000 [0.000, 0.000]
report-reliant      0.907     0.500     0.516    0.407 [0.376, 0.438]   0.425        0.372         0.000         0.372 [0.337, 0.419]
==================  ========  ========  =======  =====================  ===========  ============  ============  =====================

(Beyond Accuracy's arm is the one without the report; with the report the report-reliant model
answers 99.6 % of the questions right, its misses being subtle bilateral effusions the report
names with one side.) The grounded blank accuracy is exactly the accuracy of answering "absent"
on these 1000 questions, 0.516 (0.494 in the population, :mod:`shovir.data.phantom.questions`);
the ground truth differs between a study and its donor in 40.3 % of the swap trials, of which the
grounded model follows 37.2 points.

>>> from PIL import Image
>>> from shovir.models.base import Message
>>> blank = Image.new("L", (320, 320), 128)
>>> ask = Message(images=[blank], prompt="Is there a pleural effusion on this chest X-ray?", options=["yes", "no"])
>>> GroundedVQAReference().generate([ask])[0].text
'no'
>>> PriorVQAReference().generate([ask])[0].text == PriorVQAReference().generate([Message(images=[], prompt=ask.prompt)])[0].text
True
>>> told = Message(images=[blank], prompt=ask.prompt, report="FINDINGS: Small left pleural effusion. IMPRESSION: Left pleural effusion.")
>>> ReportReliantVQAReference().generate([told])[0].text
'yes'
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import re
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from PIL import Image

from shovir import labels as L
from shovir.calibration.reference import (
    _NEVER_HEDGED,
    REFERENCE_VERSION,
    PatchDetector,
    to_pixels,
)
from shovir.data import phantom
from shovir.models.base import Generation, Message, ModelAdapter

__all__ = [
    "VQA_REFERENCE_VERSION",
    "PRIOR_TABLE",
    "PRIOR_SEEDS",
    "PRIOR_IMAGES_PER_SEED",
    "Evidence",
    "fit_prior_table",
    "prior_table_json",
    "GroundedVQAReference",
    "PriorVQAReference",
    "ReportReliantVQAReference",
    "main",
]

VQA_REFERENCE_VERSION = "1.0.0"
"""Version of the reference VQA models' behaviour (part of every :meth:`config`)."""

PRIOR_TABLE = Path(__file__).with_name("resources") / "reference_vqa_prior.json"
"""The fitted answer frequencies of :class:`PriorVQAReference`."""

PRIOR_SEEDS: tuple[int, ...] = (101, 102, 103)
"""Phantom seeds the prior table is fitted on (the demo evaluates seed 0)."""

PRIOR_IMAGES_PER_SEED = 1000
"""Images per fitting seed (5 questions each: 15,000 questions)."""

_CLIP = 30.0  # |log-odds| cap: keeps every score finite (a never-reported class has bar = inf)
_CACHE_SIZE = 4096
_REPORT_PRESENT = {L.POSITIVE: 0.95, L.UNCERTAIN: 0.8, L.NEGATIVE: 0.05, L.BLANK: 0.15}
_SIDE_WORDS = re.compile(r"\b(right|left|bilateral)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|:\s+")


def _log_sigmoid(z: float) -> float:
    return -float(np.logaddexp(0.0, -z))


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def _normalised(logits: Sequence[float]) -> list[float]:
    top = max(logits)
    total = top + math.log(sum(math.exp(v - top) for v in logits))
    return [v - total for v in logits]


def _question(message: Message, index: int, model: str) -> tuple[phantom.ParsedQuestion, tuple[str, ...]]:
    """The parsed template question of a message and its options (the template's when the
    message gives none; given options must be the template's, in order)."""
    if message.prompt is None:
        raise ValueError(f"{model}: message {index} has no prompt; the reference VQA models answer the template "
                         "questions of SyntheticCXR(rows='vqa') given as Message.prompt")
    try:
        parsed = phantom.parse_question(message.prompt)
    except ValueError as error:
        raise ValueError(f"{model}: message {index}: {error}") from None
    options = phantom.question_options(parsed.question_type, parsed.candidates)
    if message.options is not None:
        given = tuple(" ".join(str(o).split()).casefold() for o in message.options)
        if given != options:
            raise ValueError(f"{model}: message {index}: options {list(message.options)!r} are not the template's "
                             f"{list(options)!r}; pass the row's options unchanged (or none)")
    return parsed, options


def _answer(options: Sequence[str], logps: Sequence[float], choice: int) -> Generation:
    scores = {option: float(v) for option, v in zip(options, logps)}
    if scores[options[choice]] < max(scores.values()) - 1e-9:  # the text must be the argmax
        raise AssertionError(f"answer {options[choice]!r} is not the argmax of {scores}")
    return Generation(text=options[choice], scores=scores)


def _closed(kind: str, z: float) -> tuple[list[float], int]:
    """Log-probabilities of (yes, no) and the chosen index for presence (``z`` = log-odds of the
    finding) or absence (the same question inverted)."""
    present, absent = _log_sigmoid(z), _log_sigmoid(-z)
    if kind == "presence":
        return [present, absent], 0 if z >= 0 else 1
    return [absent, present], 1 if z >= 0 else 0


def _side(z_right: float, z_left: float) -> tuple[list[float], int]:
    """Log-probabilities of (right, left, both, neither) for independent sides, and the choice."""
    r, nr, lf, nl = _log_sigmoid(z_right), _log_sigmoid(-z_right), _log_sigmoid(z_left), _log_sigmoid(-z_left)
    choice = {(True, False): 0, (False, True): 1, (True, True): 2, (False, False): 3}[(z_right >= 0, z_left >= 0)]
    return [r + nl, nr + lf, r + lf, nr + nl], choice


def _which(z: Sequence[float]) -> tuple[list[float], int]:
    """Log-probabilities of (finding 1..3, none of these) given at most one finding is present,
    and the choice: the finding with the highest log-odds when it is >= 0, else none."""
    logps = _normalised([*z, 0.0])
    best = int(np.argmax(z))
    return logps, best if z[best] >= 0 else len(z)


# ----------------------------------------------------------------------------------------------
# The grounded model
# ----------------------------------------------------------------------------------------------


class Evidence:
    """The detector's evidence on one image: per class, ``z = best logit − bar`` over the image,
    the patient's right half and left half (clipped to ±30)."""

    __slots__ = ("best", "right", "left")

    def __init__(self, best: Mapping[str, float], right: Mapping[str, float], left: Mapping[str, float]) -> None:
        self.best, self.right, self.left = dict(best), dict(right), dict(left)

    @classmethod
    def of(cls, detector: PatchDetector, image: Image.Image | np.ndarray) -> "Evidence":
        """Run the detector on one image.

        >>> ev = Evidence.of(PatchDetector.default(), np.full((320, 320), 128, np.uint8))
        >>> max(ev.best.values()) < 0                                                     # nothing seen
        True
        """
        maps = detector.logits(to_pixels(image))
        half = maps.shape[1] // 2
        k = maps.shape[2]
        bar = np.where([name in _NEVER_HEDGED for name in detector.classes], detector.positive_threshold,
                       detector.uncertain_threshold).astype(np.float64)

        def z(values: np.ndarray) -> dict[str, float]:
            out = np.clip(values.astype(np.float64) - bar, -_CLIP, _CLIP)  # inf bar -> -30
            return {name: float(v) for name, v in zip(detector.classes, out)}

        return cls(z(maps.reshape(-1, k).max(axis=0)), z(maps[:, :half].reshape(-1, k).max(axis=0)),
                   z(maps[:, half:].reshape(-1, k).max(axis=0)))


def _image_key(image: Any) -> bytes:
    """Digest of an image's pixels (mode and size included): the evidence cache key."""
    digest = hashlib.blake2b(digest_size=16)
    if isinstance(image, Image.Image):
        digest.update(f"{image.mode}|{image.size}".encode())
        digest.update(image.tobytes())
    else:
        array = np.ascontiguousarray(image)
        digest.update(f"{array.dtype}|{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.digest()


class GroundedVQAReference(ModelAdapter):
    """Answers template questions from the image's detections only (see the module docstring).

    Args:
        detector: a :class:`~shovir.calibration.reference.PatchDetector`; default: the shipped one.
    """

    name = "reference-vqa-grounded"
    batch_size = 64

    def __init__(self, detector: PatchDetector | None = None) -> None:
        self.detector = detector or PatchDetector.default()
        self._cache: OrderedDict[bytes, Evidence] = OrderedDict()

    def evidence(self, image: Image.Image | np.ndarray) -> Evidence:
        """The image's :class:`Evidence`, computed once per distinct pixels (LRU of 4096 images)."""
        key = _image_key(image)
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
            return found
        found = Evidence.of(self.detector, image)
        self._cache[key] = found
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return found

    def answer(self, parsed: phantom.ParsedQuestion, options: Sequence[str], evidence: Evidence) -> Generation:
        """The answer to one parsed question given the image's evidence."""
        kind, finding, candidates = parsed
        if kind in ("presence", "absence"):
            logps, choice = _closed(kind, evidence.best[str(finding)])
        elif kind == "side":
            logps, choice = _side(evidence.right[str(finding)], evidence.left[str(finding)])
        else:
            logps, choice = _which([evidence.best[name] for name in candidates])
        return _answer(options, logps, choice)

    def generate(self, messages: Sequence[Message]) -> list[Generation]:
        """One answer per message, from ``images[0]`` and the question; the report is ignored."""
        out = []
        for i, message in enumerate(messages):
            parsed, options = _question(message, i, self.name)
            if not message.images:
                raise ValueError(f"{self.name}: message {i} has no image; the grounded model reads images[0]")
            out.append(self.answer(parsed, options, self.evidence(message.images[0])))
        return self._check_batch(messages, out)

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "version": VQA_REFERENCE_VERSION, "reference_version": REFERENCE_VERSION,
                "default_prompt": None, "detector": self.detector.config()}


# ----------------------------------------------------------------------------------------------
# The text-prior model and its fit
# ----------------------------------------------------------------------------------------------


def fit_prior_table(seeds: Sequence[int] = PRIOR_SEEDS, n_images: int = PRIOR_IMAGES_PER_SEED) -> dict[str, Any]:
    """Answer counts per question type and finding over the questions of the first ``n_images``
    images of each seed: the questions, options and answers ``SyntheticCXR(rows="vqa", seed=s)``
    builds (they depend on the sampled case alone, so no image is rendered).

    >>> table = fit_prior_table(seeds=[5], n_images=4)
    >>> table["provenance"]["n_questions"], sorted(table["counts"])
    (20, ['absence', 'presence', 'side', 'which'])
    """
    if 0 in seeds:
        raise ValueError("seeds: 0 is the demo's evaluation seed; fit the prior on other seeds (default 101-103)")
    counts: dict[str, dict[str, Counter]] = {kind: {} for kind in ("presence", "absence", "side")}
    offered: Counter = Counter()
    answered: Counter = Counter()
    which = Counter()
    for seed in seeds:
        for index in range(int(n_images)):
            for q in phantom.sample_questions(phantom.sample_case(index, seed=int(seed))):
                if q.question_type == "which":
                    which["questions"] += 1
                    offered.update(q.candidates)
                    if q.finding:
                        answered[q.finding] += 1
                    else:
                        which["none"] += 1
                else:
                    counts[q.question_type].setdefault(q.finding, Counter())[q.answer] += 1
    table = {
        kind: {finding: {option: int(c[option]) for option in phantom.question_options(kind)}
               for finding, c in sorted(by_finding.items(), key=lambda item: L.class_index(item[0]))}
        for kind, by_finding in counts.items()
    }
    table["which"] = {
        "questions": int(which["questions"]),
        "none": int(which["none"]),
        "offered": {name: int(offered[name]) for name in phantom.LOCALIZED_FINDINGS},
        "answer": {name: int(answered[name]) for name in phantom.LOCALIZED_FINDINGS},
    }
    return {
        "model": "reference-vqa-prior",
        "version": VQA_REFERENCE_VERSION,
        "provenance": {
            "seeds": [int(s) for s in seeds],
            "n_images_per_seed": int(n_images),
            "n_questions": int(sum(sum(c.values()) for by in counts.values() for c in by.values()) + which["questions"]),
            "phantom_version": phantom.PHANTOM_VERSION,
            "questions_per_image": phantom.QUESTIONS_PER_IMAGE,
            "command": "python -m shovir.calibration.vqa_reference --fit",
            "rows": "shovir.data.phantom.sample_questions(sample_case(index, seed)) for index < n_images_per_seed",
        },
        "counts": table,
    }


def prior_table_json(table: Mapping[str, Any]) -> str:
    """The table as the shipped file stores it (sorted keys, 2-space indent, final newline)."""
    return json.dumps(table, indent=2, sort_keys=True) + "\n"


@functools.lru_cache(maxsize=4)
def _load_table(path: str) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"prior table {file} is missing; run python -m shovir.calibration.vqa_reference --fit")
    table = json.loads(file.read_text(encoding="utf-8"))
    for key in ("presence", "absence", "side", "which"):
        if key not in table.get("counts", {}):
            raise ValueError(f"{file}: counts.{key} is missing; rebuild it with python -m shovir.calibration.vqa_reference --fit")
    return table


class PriorVQAReference(ModelAdapter):
    """Answers from the question alone, with answer frequencies fitted on other seeds (see the
    module docstring).

    Args:
        table: the fitted table (default :data:`PRIOR_TABLE`).
    """

    name = "reference-vqa-prior"
    batch_size = 256

    def __init__(self, table: str | Path = PRIOR_TABLE) -> None:
        self.table_path = Path(table)
        self.table = _load_table(str(self.table_path))
        self.sha256 = hashlib.sha256(self.table_path.read_bytes()).hexdigest()
        self._answers: dict[tuple[str, str | None, tuple[str, ...]], Generation] = {}

    def _logps(self, parsed: phantom.ParsedQuestion, options: Sequence[str]) -> list[float]:
        counts = self.table["counts"]
        kind, finding, candidates = parsed
        if kind == "which":
            which = counts["which"]

            def rate(hits: int, trials: int) -> float:
                return (hits + 1) / (trials + 2)

            logits = [_logit(rate(which["answer"].get(n, 0), which["offered"].get(n, 0))) for n in candidates]
            return _normalised([*logits, _logit(rate(which["none"], which["questions"]))])
        found = counts[kind].get(str(finding), {})
        total = sum(found.get(option, 0) for option in options)
        return [math.log((found.get(option, 0) + 1) / (total + len(options))) for option in options]

    def answer(self, parsed: phantom.ParsedQuestion, options: Sequence[str]) -> Generation:
        """The prior answer to one parsed question (the first option among equal scores)."""
        key = (parsed.question_type, parsed.finding, parsed.candidates)
        if key not in self._answers:
            logps = self._logps(parsed, options)
            self._answers[key] = _answer(options, logps, int(np.argmax(logps)))
        found = self._answers[key]
        return Generation(text=found.text, scores=dict(found.scores or {}))

    def generate(self, messages: Sequence[Message]) -> list[Generation]:
        """One answer per message from the question; images and report are not looked at."""
        return self._check_batch(messages, [self.answer(*_question(m, i, self.name)) for i, m in enumerate(messages)])

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "version": VQA_REFERENCE_VERSION, "default_prompt": None,
                "table_sha256": self.sha256, "provenance": self.table.get("provenance", {})}


# ----------------------------------------------------------------------------------------------
# The report-reliant model
# ----------------------------------------------------------------------------------------------


class ReportReliantVQAReference(ModelAdapter):
    """Answers from the report when the message has one, else from the image (see the module
    docstring).

    Args:
        detector: the detector of its image-only fallback; default: the shipped one.
    """

    name = "reference-vqa-report"
    batch_size = 64

    def __init__(self, detector: PatchDetector | None = None) -> None:
        from shovir.labelers import get_labeler

        self.grounded = GroundedVQAReference(detector)
        self.labeler = get_labeler("rule")
        self._reports: dict[str, tuple[np.ndarray, dict[str, frozenset[str]]]] = {}

    def read(self, report: str) -> tuple[np.ndarray, dict[str, frozenset[str]]]:
        """The report's 14 codes (rule-based labeler) and, per localisable finding, the side words
        of the sentences that name it ("bilateral" counts as both sides).

        >>> codes, sides = ReportReliantVQAReference().read("FINDINGS: Small right pleural effusion. No pneumothorax.")
        >>> int(codes[L.class_index("Pleural Effusion")]), sorted(sides["Pleural Effusion"]), sorted(sides["Pneumothorax"])
        (1, ['right'], [])
        """
        found = self._reports.get(report)
        if found is None:
            codes = np.asarray(self.labeler([report])[0], dtype=np.int64)
            sentences = [s for s in _SENTENCE.split(report) if s.strip()]
            sides: dict[str, frozenset[str]] = {}
            for name in phantom.LOCALIZED_FINDINGS:
                pattern = re.compile(phantom.CLASS_KEYWORDS[name], re.IGNORECASE)
                words: set[str] = set()
                for sentence in sentences:
                    if pattern.search(sentence):
                        for word in _SIDE_WORDS.findall(sentence):
                            words |= {"right", "left"} if word.lower() == "bilateral" else {word.lower()}
                sides[name] = frozenset(words)
            found = self._reports[report] = (codes, sides)
        return found

    def answer_from_report(self, parsed: phantom.ParsedQuestion, options: Sequence[str], report: str) -> Generation:
        """The answer to one parsed question read from ``report`` alone."""
        codes, sides = self.read(report)

        def z(name: str) -> float:
            return _logit(_REPORT_PRESENT[int(codes[L.class_index(name)])])

        kind, finding, candidates = parsed
        if kind in ("presence", "absence"):
            logps, choice = _closed(kind, z(str(finding)))
        elif kind == "side":
            present = z(str(finding))
            words = sides[str(finding)]
            if present >= 0 and not words:
                words = frozenset({"right"})  # a present finding with no side word: the templates always name one
            absent_side = _logit(_REPORT_PRESENT[L.NEGATIVE])
            logps, choice = _side(present if "right" in words else min(present, absent_side),
                                  present if "left" in words else min(present, absent_side))
        else:
            logps, choice = _which([z(name) for name in candidates])
        return _answer(options, logps, choice)

    def generate(self, messages: Sequence[Message]) -> list[Generation]:
        """One answer per message: from ``report`` when it is given (non-blank), else from the image."""
        out: list[Generation | None] = [None] * len(messages)
        without = []
        for i, message in enumerate(messages):
            parsed, options = _question(message, i, self.name)
            if message.report is not None and message.report.strip():
                out[i] = self.answer_from_report(parsed, options, message.report)
            else:
                without.append(i)
        if without:
            for i, generation in zip(without, self.grounded.generate([messages[i] for i in without])):
                out[i] = generation
        return self._check_batch(messages, [g for g in out if g is not None])

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "version": VQA_REFERENCE_VERSION, "default_prompt": None, "labeler": "rule",
                "report_present": {L.CODE_NAMES[c]: p for c, p in sorted(_REPORT_PRESENT.items())},
                "grounded": self.grounded.config()}


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m shovir.calibration.vqa_reference --fit [--out PATH]``: rewrite the prior table."""
    parser = argparse.ArgumentParser(prog="python -m shovir.calibration.vqa_reference", description=main.__doc__)
    parser.add_argument("--fit", action="store_true", help="fit the text-prior table on seeds 101-103 and write it")
    parser.add_argument("--out", default=str(PRIOR_TABLE), help="where to write the table (default: the shipped file)")
    args = parser.parse_args(argv)
    if not args.fit:
        parser.error("nothing to do: pass --fit")
    text = prior_table_json(fit_prior_table())
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(text)} bytes, sha256 {hashlib.sha256(text.encode()).hexdigest()[:12]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
