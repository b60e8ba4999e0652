"""Speed and memory of the metrics: the patient-clustered bootstrap against a per-resample loop,
and every metric at 10^6 rows through the function and through its evaluate module.

**Bootstrap.** The ModaLens workload (§2): 10,000 bootstrap draws of patients over 50,000
paired trials in 300 clusters; the statistic is the paired difference of two flip rates
(without report − with report). shovir sums each patient's trials once and obtains every
resample from one product of a multiplicity matrix with the cluster sums
(:func:`shovir.metrics.bootstrap.resampled_sums`); the baseline redraws patients, gathers their
trials and recomputes the rates in a Python loop, the straightforward implementation. Both use
the same random draws, so their intervals agree. The vectorised time is the best of three warm
calls; the loop runs once (it takes seconds, so its noise is small). Target: >= 100x.

**Modules at scale.** Each metric (chexbert_f1, delta_fn, flip_rate, occlusion_delta, nlg,
visual_reliance, hvrr, swap_sensitivity) runs on ``--rows`` synthetic rows of realistic shape
(14-code label vectors with ~10 % positives; ~50-token radiology reports assembled from
templated sentences; yes/no and option answers; short rationales; paired swap trials of
~10 trials per patient) with its *default* resamples and permutations, once as the
``shovir.metrics`` function and once as ``evaluate.load(<local module>).compute(...)``. Each run
is a fresh subprocess that builds its inputs, warms the metric up on 5,000 other rows (imports and
first-call set-up are not what scales), resets the kernel's peak-RSS counter
(``/proc/self/clear_refs``), calls the metric once and reports its wall time and its peak RSS
above the RSS it had before the call (inputs excluded; Arrow buffers and memory-mapped cache
pages included, which tracemalloc would miss), and the peak of its *anonymous* RSS (sampled
every 5 ms), which leaves out the reclaimable file-backed pages of evaluate's Arrow cache file.

Targets, measured in the same run on the same rows:

* every module within 3x the time of the fastest module **that reads the same kind of row**:
  label codes (chexbert_f1, delta_fn, flip_rate, occlusion_delta: 14 small integers a row),
  answers (visual_reliance, swap_sensitivity, hvrr: a few short strings a row, plus a rationale
  for hvrr). A report-text row (nlg) carries two ~50-token reports, two orders of magnitude more
  input than 14 codes, so "3x of chexbert_f1" would ask nlg to tokenise 10^8 words in two
  seconds; nlg is held instead to **>= 10x the throughput of the reference implementations
  it equals** (sacrebleu BLEU-1 and BLEU-4, rouge-score ROUGE-L), timed on ``--reference-rows``
  rows (default 20,000; the references take about 2 ms a row, half an hour at 10^6). Both
  ratios, and the ratio to the fastest module overall, are printed;
* the evaluate path within 1.5x the function's memory (peak anonymous RSS).

Usage::

    python benchmarks/metrics.py                      # bootstrap + every module at 10^6 rows
    python benchmarks/metrics.py --quick              # 20,000 rows, 2,000 bootstrap draws
    python benchmarks/metrics.py --rows 100000 --modules nlg,visual_reliance --paths function
    python benchmarks/metrics.py --skip-modules       # the bootstrap benchmark only
    python benchmarks/metrics.py --skip-bootstrap --skip-modules --reference-rows 20000   # nlg vs its references only
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODULES = ("chexbert_f1", "delta_fn", "flip_rate", "occlusion_delta", "nlg", "visual_reliance", "hvrr", "swap_sensitivity")
ROW_KIND = {"chexbert_f1": "codes", "delta_fn": "codes", "flip_rate": "codes", "occlusion_delta": "codes",
            "visual_reliance": "answers", "swap_sensitivity": "answers", "hvrr": "answers", "nlg": "report text"}
PATHS = ("function", "evaluate")


# -- the bootstrap benchmark --------------------------------------------------------------------------


def bootstrap_benchmark(draws: int, trials: int, clusters: int) -> float:
    from shovir.metrics.bootstrap import bootstrap_interval

    rng = np.random.default_rng(0)
    patients = rng.integers(0, clusters, trials)
    flips_without = (rng.random(trials) < 0.21).astype(float)
    flips_with = (rng.random(trials) < 0.05).astype(float)
    units = np.stack([flips_without, flips_with, np.ones(trials)], axis=1)

    def paired_difference(sums: np.ndarray) -> np.ndarray:
        return (sums[:, 0] - sums[:, 1]) / sums[:, 2]

    bootstrap_interval(paired_difference, units, clusters=patients, n_resamples=min(draws, 200), seed=1)  # warm-up
    fast_s = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        fast = bootstrap_interval(paired_difference, units, clusters=patients, n_resamples=draws, seed=1)
        fast_s = min(fast_s, time.perf_counter() - start)

    start = time.perf_counter()
    _, first, inverse = np.unique(patients, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    members = [np.flatnonzero(order[inverse] == c) for c in range(first.size)]
    draw_rng = np.random.default_rng(1)
    estimates = np.empty(draws)
    for b in range(draws):
        chosen = draw_rng.integers(0, len(members), size=len(members))
        rows = np.concatenate([members[c] for c in chosen])
        estimates[b] = (flips_without[rows].sum() - flips_with[rows].sum()) / rows.size
    low, high = np.percentile(estimates, [2.5, 97.5])
    loop_s = time.perf_counter() - start

    speedup = loop_s / fast_s
    print(f"{draws} patient-clustered draws, {trials} paired trials, {clusters} clusters")
    print(f"  vectorised : {fast_s * 1000:8.1f} ms   CI [{fast.low:.5f}, {fast.high:.5f}]   (best of 3 warm calls)")
    print(f"  python loop: {loop_s * 1000:8.1f} ms   CI [{low:.5f}, {high:.5f}]")
    print(f"  speed-up   : {speedup:8.1f}x (target >= 100x); intervals agree: {np.allclose([low, high], [fast.low, fast.high])}")
    return speedup


# -- synthetic inputs of realistic shape ------------------------------------------------------------

_SENTENCES = (
    "The heart size is {adj}.", "There is a {size} {side} pleural effusion.", "No pneumothorax is seen.",
    "{Side} lower lobe opacity may represent atelectasis or pneumonia.", "The mediastinal contours are within normal limits.",
    "Endotracheal tube terminates {num} cm above the carina.", "No acute cardiopulmonary process.",
    "Mild pulmonary vascular congestion.", "There is a {num} cm nodule in the {side} upper lobe.",
    "Compared to the prior study, the {side} effusion has {change}.", "Osseous structures are intact.",
    "Bibasilar atelectasis, {side} greater than {other}.", "Lines and tubes are unchanged in position.",
    "The lungs are clear without focal consolidation, effusion, or pneumothorax.", "Cardiomegaly is {adj}.",
    "Degenerative changes of the thoracic spine.", "Right-sided PICC line ends in the mid SVC.",
    "Small hiatal hernia.", "There is no evidence of free air under the diaphragm.", "Patchy opacities at the {side} base.",
)
_FILL = {"adj": ("normal", "enlarged", "mildly enlarged", "stable", "top normal"), "size": ("small", "moderate", "large", "trace"),
         "side": ("left", "right"), "Side": ("Left", "Right"), "other": ("left", "right"),
         "num": ("1.2", "3.5", "4", "2.0", "0.8", "5.1", "2.7", "6"), "change": ("increased", "decreased", "resolved", "not changed")}


def _sentence_pool(rng: np.random.Generator, size: int = 4000) -> list[str]:
    pool = []
    for _ in range(size):
        template = _SENTENCES[rng.integers(len(_SENTENCES))]
        pool.append(template.format(**{key: values[rng.integers(len(values))] for key, values in _FILL.items()}))
    return pool


def _reports(rng: np.random.Generator, rows: int) -> tuple[list[str], list[str]]:
    """~50-token reference reports of 6-10 sentences; predictions keep each sentence with
    probability 0.6 and add others, as a report generator does."""
    pool = _sentence_pool(rng)
    counts = rng.integers(6, 11, rows)
    picks = rng.integers(0, len(pool), (rows, 10))
    keep = rng.random((rows, 10)) < 0.6
    extra = rng.integers(0, len(pool), (rows, 4))
    n_extra = rng.integers(0, 4, rows)
    references, predictions = [], []
    for i in range(rows):
        k = counts[i]
        references.append(" ".join([pool[j] for j in picks[i, :k]]))
        predictions.append(" ".join([pool[j] for j, kept in zip(picks[i, :k], keep[i, :k]) if kept] + [pool[j] for j in extra[i, : n_extra[i]]]))
    return predictions, references


def _codes(rng: np.random.Generator, rows: int, like: np.ndarray | None = None, flip: float = 0.1) -> np.ndarray:
    if like is None:
        return rng.choice(np.array([0, 1, 2, 3], dtype=np.int64), p=[0.75, 0.1, 0.12, 0.03], size=(rows, 14))
    changed = rng.random((rows, 14)) < flip
    return np.where(changed, rng.integers(0, 4, (rows, 14)), like)


def _answers(rng: np.random.Generator, rows: int, truth: np.ndarray, accuracy: float) -> list[str]:
    right = rng.random(rows) < accuracy
    return np.where(right, truth, np.where(truth == "yes", "no", "yes")).tolist()


def build_inputs(module: str, rows: int, seed: int = 0) -> dict[str, Any]:
    """Keyword arguments of ``module`` for ``rows`` synthetic rows (the same for both paths)."""
    from shovir import labels as L

    rng = np.random.default_rng(seed)
    if module == "nlg":
        predictions, references = _reports(rng, rows)
        return {"predictions": predictions, "references": references}
    if module in ("chexbert_f1", "delta_fn", "flip_rate", "occlusion_delta"):
        references = _codes(rng, rows)
        control = _codes(rng, rows, references, 0.1)
        predictions = _codes(rng, rows, references, 0.2)
        if module == "chexbert_f1":
            return {"predictions": predictions, "references": references}
        if module == "delta_fn":
            return {"references": references, "baseline_predictions": control, "predictions": predictions}
        classes = [c for c in L.CLASSES if c != "No Finding"]
        targets = np.array(classes, dtype=object)[rng.integers(0, len(classes), rows)].tolist()
        return {"references": references, "control_predictions": control, "predictions": predictions, "target_classes": targets}
    if module == "visual_reliance":
        truth = np.where(rng.random(rows) < 0.5, "yes", "no")
        return {"predictions_real": _answers(rng, rows, truth, 0.8), "predictions_shuffled": _answers(rng, rows, truth, 0.6),
                "references": truth.tolist(), "predictions_blank": _answers(rng, rows, truth, 0.55)}
    if module == "hvrr":
        truth = np.where(rng.random(rows) < 0.5, "yes", "no")
        findings = ("mass", "effusion", "nodule", "opacity", "fracture")
        places = ("left lung", "right lung", "upper lobe", "lower lobe", "base")
        cues = ("A spiculated {f} in the {p}.", "There is a small {f} in the {p}.", "Mild {f} is seen.",
                "Based on the question, yes.", "Cannot tell from the image.", "The {p} shows no {f}.")
        f_idx, p_idx, c_idx = rng.integers(0, 5, rows), rng.integers(0, 5, rows), rng.integers(0, len(cues), rows)
        rationales = [cues[c].format(f=findings[f], p=places[p]) for c, f, p in zip(c_idx, f_idx, p_idx)]
        questions = [f"Is there a {findings[f]} in the {places[p]}?" for f, p in zip(rng.integers(0, 5, rows), p_idx)]
        return {"rationales": rationales, "questions": questions, "predictions_real": _answers(rng, rows, truth, 0.8),
                "predictions_shuffled": _answers(rng, rows, truth, 0.7)}
    if module == "swap_sensitivity":
        trials = rows // 2
        truth = np.where(rng.random(trials) < 0.5, "yes", "no")
        original = np.concatenate([_answers(rng, trials, truth, 0.8), _answers(rng, trials, truth, 0.8)])
        flipped = rng.random(rows) < np.concatenate([np.full(trials, 0.05), np.full(trials, 0.2)])
        swapped = np.where(flipped, np.where(original == "yes", "no", "yes"), original)
        trial_ids = [f"t{i}" for i in range(trials)] * 2
        patients = [f"p{i // 10}" for i in range(trials)] * 2
        return {"original_answers": original.tolist(), "swapped_answers": swapped.tolist(),
                "arms": ["with_report"] * trials + ["without_report"] * trials, "trial_ids": trial_ids, "patient_ids": patients}
    raise ValueError(f"module: unknown {module!r}; choose from {', '.join(MODULES)}")


_FUNCTION_NAMES = {("delta_fn", "predictions"): "noise_predictions"}  # function argument names that differ from the module's


def _resolve_function(module: str) -> Callable[..., Any]:
    import importlib

    target = {
        "chexbert_f1": "shovir.metrics.clinical:chexbert_f1", "delta_fn": "shovir.metrics.clinical:delta_fn",
        "flip_rate": "shovir.metrics.clinical:flip_rate", "occlusion_delta": "shovir.metrics.clinical:occlusion_delta",
        "nlg": "shovir.metrics.nlg:nlg_scores", "visual_reliance": "shovir.metrics.visual_reliance:visual_reliance",
        "hvrr": "shovir.metrics.visual_reliance:hallucination_metrics", "swap_sensitivity": "shovir.metrics.swap:swap_sensitivity",
    }[module]
    path, name = target.split(":")
    return getattr(importlib.import_module(path), name)


# -- one measured run (in a fresh subprocess) --------------------------------------------------------


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def child(module: str, path: str, rows: int) -> dict[str, Any]:
    inputs = build_inputs(module, rows)
    if path == "function":
        call = _resolve_function(module)
        inputs = {_FUNCTION_NAMES.get((module, key), key): value for key, value in inputs.items()}
    else:
        import evaluate

        metric = evaluate.load(str(ROOT / "metrics" / module))
        call = metric.compute
    warm = build_inputs(module, 5000, seed=1)  # imports and first-call set-up stay out of the measurement (5,000 rows:
    # enough to take the column-wise paths that large inputs take)
    if path == "function":
        warm = {_FUNCTION_NAMES.get((module, key), key): value for key, value in warm.items()}
    call(**warm)
    gc.collect()
    before = _rss_kib("VmRSS")
    reset = False
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # reset VmHWM (peak RSS) to the current RSS
        reset = True
    except OSError:
        pass
    anon_before = _rss_kib("RssAnon")
    anon_peak = [anon_before]
    sampling = threading.Event()

    def sample() -> None:  # anonymous memory only: the peak without reclaimable file-backed pages
        while not sampling.wait(0.005):
            anon_peak[0] = max(anon_peak[0], _rss_kib("RssAnon"))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    call(**inputs)
    seconds = time.perf_counter() - start
    sampling.set()
    sampler.join()
    anon_peak[0] = max(anon_peak[0], _rss_kib("RssAnon"))
    peak = _rss_kib("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"module": module, "path": path, "rows": rows, "seconds": seconds, "peak_mib": (peak - before) / 1024,
            "anon_peak_mib": (anon_peak[0] - anon_before) / 1024, "rss_before_mib": before / 1024, "peak_reset": reset}


def run_child(module: str, path: str, rows: int, timeout: float) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", module, path, str(rows)]
    env = dict(os.environ, HF_EVALUATE_OFFLINE="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return {"module": module, "path": path, "rows": rows, "error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"module": module, "path": path, "rows": rows, "error": tail[0][:160]}
    return json.loads(lines[-1])


def modules_benchmark(rows: int, modules: list[str], paths: list[str], timeout: float) -> list[dict[str, Any]]:
    results = []
    for module in modules:
        for path in paths:
            result = run_child(module, path, rows, timeout)
            results.append(result)
            shown = result.get("error") or (f"{result['seconds']:.2f} s, {result['peak_mib']:.0f} MiB "
                                            f"({result['anon_peak_mib']:.0f} MiB anonymous)")
            print(f"  {module:17s} {path:9s} {shown}", flush=True)
    by = {(r["module"], r["path"]): r for r in results}
    print()
    print(f"{rows:,} rows, default resamples and permutations; peak = RSS high-water mark above the inputs")
    print("  MiB: peak RSS (all pages) / peak anonymous RSS (sampled every 5 ms; without evaluate's memory-mapped cache file)")
    print(f"  {'module':17s} {'row kind':>11s} {'function s':>10s} {'evaluate s':>10s} {'function MiB':>13s} {'evaluate MiB':>13s} "
          f"{'/fastest':>8s} {'/kind':>6s} {'mem eval/fn':>11s}")
    times = {r["module"]: r["seconds"] for r in results if "seconds" in r and r["path"] == "function"}
    fastest = min(times.values()) if times else float("nan")
    fastest_of_kind = {kind: min(t for m, t in times.items() if ROW_KIND[m] == kind) for kind in {ROW_KIND[m] for m in times}}
    for module in modules:
        fn, ev = by.get((module, "function"), {}), by.get((module, "evaluate"), {})

        def cell(result: dict[str, Any], key: str, fmt: str) -> str:
            return format(result[key], fmt) if key in result else ("error" if "error" in result else "-")

        def mem(result: dict[str, Any]) -> str:
            if "peak_mib" not in result:
                return "error" if "error" in result else "-"
            return f"{result['peak_mib']:.0f} / {result['anon_peak_mib']:.0f}"

        ratio = f"{fn['seconds'] / fastest:.1f}x" if "seconds" in fn else "-"
        kind_ratio = f"{fn['seconds'] / fastest_of_kind[ROW_KIND[module]]:.1f}x" if "seconds" in fn else "-"
        memory = "-"
        if "peak_mib" in fn and "peak_mib" in ev:
            memory = (f"{ev['peak_mib'] / max(fn['peak_mib'], 1.0):.2f}/"
                      f"{ev['anon_peak_mib'] / max(fn['anon_peak_mib'], 1.0):.2f}x")
        print(f"  {module:17s} {ROW_KIND[module]:>11s} {cell(fn, 'seconds', '10.2f')} {cell(ev, 'seconds', '10.2f')} {mem(fn):>13s} "
              f"{mem(ev):>13s} {ratio:>8s} {kind_ratio:>6s} {memory:>11s}")
    for result in results:
        if "error" in result:
            print(f"  ! {result['module']} {result['path']}: {result['error']}")
    print("  targets: /kind (time over the fastest module of the same row kind, function path) <= 3x; "
          "evaluate memory <= 1.5x the function's (anonymous)")
    return results


# -- nlg against the reference implementations -------------------------------------------------------


def reference_benchmark(rows: int) -> float:
    """shovir's nlg_scores against sacrebleu (BLEU-1, BLEU-4) and rouge-score (ROUGE-L F, mean
    over pairs) on the same ``rows`` report pairs: seconds, speed-up and the scores side by side."""
    import sacrebleu
    from rouge_score import rouge_scorer

    from shovir.metrics.nlg import nlg_scores

    inputs = build_inputs("nlg", rows)
    predictions, references = inputs["predictions"], inputs["references"]
    nlg_scores(predictions[:40], references[:40])  # imports and first-call set-up
    start = time.perf_counter()
    ours = nlg_scores(predictions, references)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    bleu_4 = sacrebleu.corpus_bleu(predictions, [references]).score / 100
    bleu_1 = sacrebleu.BLEU(max_ngram_order=1).corpus_score(predictions, [references]).score / 100
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    rouge_l = sum(scorer.score(r, p)["rougeL"].fmeasure for p, r in zip(predictions, references)) / rows
    reference_s = time.perf_counter() - start
    speedup = reference_s / ours_s
    print(f"nlg on {rows:,} report pairs against the reference implementations")
    print(f"  shovir nlg_scores        : {ours_s:8.2f} s   BLEU-1 {ours['bleu_1']:.6f}  BLEU-4 {ours['bleu_4']:.6f}  ROUGE-L {ours['rouge_l']:.6f}")
    print(f"  sacrebleu + rouge-score  : {reference_s:8.2f} s   BLEU-1 {bleu_1:.6f}  BLEU-4 {bleu_4:.6f}  ROUGE-L {rouge_l:.6f}")
    equal = all(abs(a - b) < 1e-9 for a, b in ((ours["bleu_1"], bleu_1), (ours["bleu_4"], bleu_4), (ours["rouge_l"], rouge_l)))
    print(f"  speed-up                 : {speedup:8.1f}x (target >= 10x); scores equal: {equal}")
    return speedup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=None, help="bootstrap draws (default 10000; 2000 with --quick)")
    parser.add_argument("--trials", type=int, default=50_000)
    parser.add_argument("--clusters", type=int, default=300)
    parser.add_argument("--rows", type=int, default=None, help="rows per module (default 1000000; 20000 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a short run: 20,000 rows and 2,000 bootstrap draws")
    parser.add_argument("--modules", default=",".join(MODULES), help="comma-separated subset of " + ", ".join(MODULES))
    parser.add_argument("--paths", default=",".join(PATHS), help="function, evaluate or both")
    parser.add_argument("--skip-bootstrap", action="store_true")
    parser.add_argument("--skip-modules", action="store_true")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per module run")
    parser.add_argument("--reference-rows", type=int, default=None,
                        help="report pairs for nlg against sacrebleu and rouge-score (default 20000; 2000 with --quick; 0 skips)")
    parser.add_argument("--json", type=Path, default=None, help="also write the module results here")
    parser.add_argument("--child", nargs=3, metavar=("MODULE", "PATH", "ROWS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        module, path, rows = args.child
        print(json.dumps(child(module, path, int(rows))))
        return
    draws = args.draws or (2_000 if args.quick else 10_000)
    rows = args.rows or (20_000 if args.quick else 1_000_000)
    modules = [m for m in args.modules.split(",") if m]
    paths = [p for p in args.paths.split(",") if p]
    for name in modules:
        if name not in MODULES:
            parser.error(f"--modules: unknown module {name!r}; choose from {', '.join(MODULES)}")
    for name in paths:
        if name not in PATHS:
            parser.error(f"--paths: unknown path {name!r}; choose from {', '.join(PATHS)}")
    if not args.skip_bootstrap:
        bootstrap_benchmark(draws, args.trials, args.clusters)
        print()
    if not args.skip_modules:
        results = modules_benchmark(rows, modules, paths, args.timeout)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        print()
    reference_rows = args.reference_rows if args.reference_rows is not None else (2_000 if args.quick else 20_000)
    if reference_rows > 0 and (args.skip_modules or "nlg" in modules):
        reference_benchmark(reference_rows)


if __name__ == "__main__":
    main()
