"""Speed of the rule-based CheXpert labeler on one core, against the 10,000 reports/second floor;
and, with ``--eval-set``, its per-class agreement with a hand-checked evaluation set.

The workload is a realistic mix: MIMIC-CXR-style reports of 3–8 sentences generated from
templates (technique and comparison lines, devices, heart and mediastinum, lungs, pleura, bones,
impression; positive, negated, uncertain and "stable" phrasings), plus the hand-written sentences
of ``tests/test_labeler_rule_based.py`` when that file is present. A naive labeler measured in the
same run — one compiled regular expression per phrase, searched in every sentence — shows what the
single-pass trie expression buys.

Usage: ``python benchmarks/labeler.py [--reports 5000] [--repeats 5] [--seed 0]``. Prints
reports/second (best of the repeats), the ratio to the 10,000 reports/s floor (issue 12) and the
speed-up over the naive baseline. Thread pools are limited to one thread and, where the OS allows,
the process is pinned to one CPU.

``python benchmarks/labeler.py --eval-set tests/data/labeler_eval_sentences.jsonl`` prints, instead,
a per-class table of the labeler against the expected codes of an evaluation set (one JSON object
per line with ``text`` and ``codes``, see ``tests/test_labeler_eval_set.py``): the number of
sentences where the class is expected non-blank, exact-code accuracy, and accuracy, precision,
recall and F1 with uncertain counted positive (F1 from :func:`shovir.metrics.clinical.chexbert_f1`).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from shovir.labelers.rule_based import RuleBasedLabeler  # noqa: E402
from shovir.labels import CLASSES, binarize, codes_from_mentions  # noqa: E402
from shovir.metrics.clinical import chexbert_f1  # noqa: E402

TARGET = 10000.0
SIDES = ("left", "right", "bilateral")
ZONES = ("upper", "middle", "lower")
SIZES = ("small", "moderate", "large", "trace", "tiny")

TEMPLATES: dict[str, tuple[str, ...]] = {
    "technique": (
        "PA and lateral views of the chest were obtained.",
        "Single portable AP view of the chest.",
        "Comparison is made to the prior study from {day}.",
        "As compared to the previous radiograph, there is no relevant change.",
    ),
    "devices": (
        "Endotracheal tube terminates {n} cm above the carina.",
        "Nasogastric tube courses below the diaphragm with the tip in the stomach.",
        "{Side} PICC line tip is in the mid SVC.",
        "{Side} internal jugular central venous catheter terminates in the cavoatrial junction.",
        "{Side} chest wall pacemaker with leads in the right atrium and right ventricle.",
        "Median sternotomy wires and mediastinal clips are noted.",
        "{Side} chest tube remains in place.",
        "The endotracheal tube has been removed.",
        "Lines and tubes are in unchanged position.",
    ),
    "heart": (
        "Heart size is normal.",
        "The heart is mildly enlarged.",
        "Moderate cardiomegaly is unchanged.",
        "The cardiomediastinal silhouette is within normal limits.",
        "Heart size and mediastinal contours are stable.",
        "Heart size is top normal.",
        "The cardiac silhouette is enlarged but unchanged.",
        "Borderline cardiomegaly.",
        "The mediastinal and hilar contours are unremarkable.",
        "Widened mediastinum, possibly due to patient positioning.",
    ),
    "lungs": (
        "The lungs are clear.",
        "There is no focal consolidation, pleural effusion or pneumothorax.",
        "Patchy opacity in the {side} {zone} lobe may reflect atelectasis, though infection cannot be excluded.",
        "{Side} basilar opacity, likely atelectasis.",
        "Mild pulmonary vascular congestion without frank edema.",
        "Moderate pulmonary edema has slightly improved.",
        "No new consolidation.",
        "{Side} {zone} lobe consolidation concerning for pneumonia.",
        "A {n} mm nodule in the {side} {zone} lobe is unchanged.",
        "No pulmonary nodules or masses.",
        "Low lung volumes with bibasilar atelectasis.",
        "No focal airspace consolidation is seen to suggest pneumonia.",
        "Hazy opacities at both bases could represent atelectasis or aspiration.",
        "The lungs are hyperinflated but clear.",
    ),
    "pleura": (
        "No pleural effusion or pneumothorax.",
        "{Size} {side} pleural effusion.",
        "{Size} {side} pleural effusion has decreased in size.",
        "There is a {size} {side} apical pneumothorax.",
        "The previously seen {side} pneumothorax is no longer visualized.",
        "Blunting of the {side} costophrenic angle may be due to a small effusion or pleural thickening.",
        "{Side} apical pleural thickening.",
        "No change in the {size} {side} pleural effusion.",
    ),
    "bones": (
        "No acute osseous abnormality.",
        "Old healed {side} rib fractures.",
        "Mild degenerative changes of the thoracic spine.",
        "No displaced rib fracture is identified.",
        "Possible nondisplaced fracture of the {side} {rib} rib.",
    ),
    "impression": (
        "IMPRESSION: No acute cardiopulmonary process.",
        "IMPRESSION: Mild pulmonary edema.",
        "IMPRESSION: {Side} lower lobe pneumonia.",
        "IMPRESSION: Stable cardiomegaly without pulmonary edema.",
        "IMPRESSION: Tubes and lines in appropriate position.",
        "IMPRESSION: Atelectasis versus pneumonia at the {side} base.",
    ),
}
ORDER = ("technique", "devices", "heart", "lungs", "pleura", "bones", "impression")


def make_reports(n: int, seed: int = 0) -> list[str]:
    """``n`` template reports of 3–8 sentences (deterministic for a seed)."""
    rng = random.Random(seed)
    reports = []
    for _ in range(n):
        wanted = rng.randint(3, 8)
        sections = list(ORDER)
        sentences: list[str] = []
        while len(sentences) < wanted:
            section = sections[len(sentences) % len(sections)] if rng.random() < 0.7 else rng.choice(sections)
            side = rng.choice(SIDES)
            fields = {
                "side": side, "Side": side.capitalize(), "zone": rng.choice(ZONES), "size": rng.choice(SIZES),
                "Size": rng.choice(SIZES).capitalize(), "n": str(rng.randint(2, 9)),
                "rib": rng.choice(("5th", "6th", "7th", "8th")), "day": rng.choice(("yesterday", "last week")),
            }
            sentences.append(rng.choice(TEMPLATES[section]).format(**fields))
        reports.append("FINDINGS: " + " ".join(sentences))
    return reports


def handwritten_sentences() -> list[str]:
    """The hand-written sentences of the test table, if the test file is present."""
    path = Path(__file__).resolve().parent.parent / "tests" / "test_labeler_rule_based.py"
    if not path.exists():
        return []
    try:
        spec = importlib.util.spec_from_file_location("_labeler_cases", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except ImportError:  # pytest missing
        return []
    return [report for report, _ in module.CASES]


def load_eval_set(path: str | Path) -> tuple[list[str], list[list[int]]]:
    """Texts and expected 14-code vectors of an evaluation set (JSON lines with ``text`` and
    ``codes``: a ``{class: code}`` dict of the non-blank codes, or the full 14-code list).

    >>> import tempfile
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = Path(folder.name) / "set.jsonl"
    >>> _ = path.write_text('{"text": "No effusion.", "codes": {"Pleural Effusion": 2, "No Finding": 1}}\\n')
    >>> texts, codes = load_eval_set(path)
    >>> texts, codes[0][9], codes[0][13]
    (['No effusion.'], 2, 1)
    >>> folder.cleanup()
    """
    texts, expected = [], []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if "text" not in row or "codes" not in row:
            raise ValueError(f"{path}: line {number}: expected an object with 'text' and 'codes'")
        codes = row["codes"]
        texts.append(row["text"])
        expected.append(list(codes) if isinstance(codes, list) else codes_from_mentions(codes))
    return texts, expected


def agreement_table(expected: list[list[int]], predicted: list[list[int]]) -> dict[str, dict[str, float]]:
    """Per-class agreement of ``predicted`` with ``expected`` codes (and a ``"micro"`` row over the
    14 classes): ``mentioned`` (expected non-blank), ``code_accuracy`` (exact 0-3 code), and, with
    uncertain counted positive, ``accuracy``, ``precision``, ``recall``, ``f1`` and ``support``.

    >>> table = agreement_table([[0] * 9 + [2] + [0] * 3 + [1], [0] * 9 + [3] + [0] * 4],
    ...                         [[0] * 9 + [2] + [0] * 3 + [1], [0] * 9 + [1] + [0] * 4])
    >>> row = table["Pleural Effusion"]
    >>> row["code_accuracy"], row["accuracy"], row["f1"], row["support"]
    (0.5, 1.0, 1.0, 1)
    """
    exp, got = np.asarray(expected), np.asarray(predicted)
    scores = chexbert_f1(exp, got, uncertain="positive")
    exact = (exp == got).mean(axis=0)
    binary = (binarize(exp, "positive") == binarize(got, "positive")).mean(axis=0)
    table = {}
    for c, name in enumerate(CLASSES):
        table[name] = {"mentioned": int((exp[:, c] != 0).sum()), "code_accuracy": float(exact[c]),
                       "accuracy": float(binary[c]), **scores["per_class"][name]}
    table["micro"] = {"mentioned": int((exp != 0).sum()), "code_accuracy": float(exact.mean()),
                      "accuracy": float(binary.mean()), "precision": float("nan"), "recall": float("nan"),
                      "f1": scores["f1_14"]["micro"], "support": int(binarize(exp, "positive").sum())}
    return table


def format_agreement(path: str | Path) -> str:
    """The per-class agreement table of the rule labeler on the evaluation set at ``path``, as text.

    >>> import tempfile
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = Path(folder.name) / "set.jsonl"
    >>> _ = path.write_text('{"text": "Possible effusion.", "codes": {"Pleural Effusion": 3}}\\n')
    >>> lines = format_agreement(path).splitlines()
    >>> lines[0].endswith("1 sentences, 1 with all 14 codes right"), lines[11].split()[-2:]
    (True, ['1.000', '1'])
    >>> folder.cleanup()
    """
    texts, expected = load_eval_set(path)
    predicted = RuleBasedLabeler()(texts).tolist()
    table = agreement_table(expected, predicted)
    wrong = sum(e != p for e, p in zip(expected, predicted))
    lines = [f"evaluation set {path}: {len(texts)} sentences, {len(texts) - wrong} with all 14 codes right",
             f"{'class':<28}{'mentioned':>10}{'code acc':>10}{'acc (u=1)':>11}{'P':>7}{'R':>7}{'F1':>7}{'support':>9}"]
    for name, row in table.items():
        precision = "" if name == "micro" else f"{row['precision']:.3f}"
        recall = "" if name == "micro" else f"{row['recall']:.3f}"
        lines.append(f"{name:<28}{row['mentioned']:>10}{row['code_accuracy']:>10.3f}{row['accuracy']:>11.3f}"
                     f"{precision:>7}{recall:>7}{row['f1']:>7.3f}{row['support']:>9}")
    return "\n".join(lines)


class NaiveLabeler:
    """Mention extraction only: one regular expression per phrase, searched sentence by sentence."""

    def __init__(self, labeler: RuleBasedLabeler) -> None:
        self.patterns = [re.compile(r"\b" + re.escape(phrase).replace(r"\ ", " +") + r"\b")
                         for phrase in labeler._table]

    def __call__(self, reports: list[str]) -> int:
        hits = 0
        for report in reports:
            for sentence in re.split(r"(?<=[.;:!?])\s+", report.lower().replace("-", " ")):
                for pattern in self.patterns:
                    if pattern.search(sentence):
                        hits += 1
        return hits


def best_rate(function, reports: list[str], repeats: int) -> tuple[float, float]:
    """(best, median) reports per second over ``repeats`` runs."""
    function(reports[: min(50, len(reports))])  # warm-up
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        function(reports)
        rates.append(len(reports) / (time.perf_counter() - start))
    return max(rates), statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-set", metavar="PATH", default=None,
                        help="print per-class agreement on this evaluation set (JSON lines) instead of the speed")
    args = parser.parse_args()
    if args.eval_set:
        print(format_agreement(args.eval_set))
        return
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        except OSError:
            pass

    generated = make_reports(args.reports, args.seed)
    handwritten = handwritten_sentences()
    reports = generated + handwritten
    sentences = [len(re.findall(r"[.!?](?:\s|$)", r)) for r in generated]
    print(f"workload: {len(generated)} template reports (mean {statistics.mean(sentences):.1f} sentences, "
          f"{statistics.mean(len(r) for r in generated):.0f} characters) + {len(handwritten)} hand-written reports")

    start = time.perf_counter()
    labeler = RuleBasedLabeler()
    print(f"build: {1000 * (time.perf_counter() - start):.1f} ms ({len(labeler._table)} phrases in one expression)")
    best, median = best_rate(labeler, reports, args.repeats)
    print(f"rule labeler: {best:,.0f} reports/s (best of {args.repeats}; median {median:,.0f}) "
          f"= {1e6 / best:.0f} µs/report")
    print(f"ratio to the floor ({TARGET:,.0f} reports/s): {best / TARGET:.2f}x "
          f"{'(meets it)' if best >= TARGET else '(BELOW THE FLOOR)'}")
    naive = NaiveLabeler(labeler)
    subset = reports[: max(50, len(reports) // 25)]
    naive_best, _ = best_rate(naive, subset, max(1, args.repeats // 2))
    print(f"naive baseline (one regex per phrase per sentence, mention search only): {naive_best:,.0f} reports/s; "
          f"speed-up {best / naive_best:.1f}x")


if __name__ == "__main__":
    main()
