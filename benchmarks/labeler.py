"""Speed of the rule-based CheXpert labeler on one core, against the 2,000 reports/second target.

The workload is a realistic mix: MIMIC-CXR-style reports of 3–8 sentences generated from
templates (technique and comparison lines, devices, heart and mediastinum, lungs, pleura, bones,
impression; positive, negated, uncertain and "stable" phrasings), plus the hand-written sentences
of ``tests/test_labeler_rule_based.py`` when that file is present. A naive labeler measured in the
same run — one compiled regular expression per phrase, searched in every sentence — shows what the
single-pass trie expression buys.

Usage: ``python benchmarks/labeler.py [--reports 5000] [--repeats 5] [--seed 0]``. Prints
reports/second (best of the repeats), the ratio to the 2,000 reports/s target and the speed-up
over the naive baseline. Thread pools are limited to one thread and, where the OS allows, the
process is pinned to one CPU.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from shovir.labelers.rule_based import RuleBasedLabeler  # noqa: E402

TARGET = 2000.0
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


def test_sentences() -> list[str]:
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
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        except OSError:
            pass

    generated = make_reports(args.reports, args.seed)
    handwritten = test_sentences()
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
    print(f"ratio to target ({TARGET:,.0f} reports/s): {best / TARGET:.2f}x "
          f"{'(meets target)' if best >= TARGET else '(BELOW TARGET)'}")
    naive = NaiveLabeler(labeler)
    subset = reports[: max(50, len(reports) // 25)]
    naive_best, _ = best_rate(naive, subset, max(1, args.repeats // 2))
    print(f"naive baseline (one regex per phrase per sentence, mention search only): {naive_best:,.0f} reports/s; "
          f"speed-up {best / naive_best:.1f}x")


if __name__ == "__main__":
    main()
