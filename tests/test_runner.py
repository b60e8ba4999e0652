"""The sweep runner: plan de-duplication, sharding under accelerate, resume after SIGKILL, scoring.

The redesign's own guarantees (aliases, per-generation cache, lock, complete-or-refuse scoring, the
CLI) are tested in tests/test_runs.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TOY_MODEL

from shovir.runner.config import ConditionSpec, SweepConfig
from shovir.runner.plan import build_plan
from shovir.runner.store import RecordWriter, read_lines


SWEEP = '''
import sys
import toy_model  # registers the model
from shovir.runner.config import SweepConfig
from shovir.runner.run import run_sweep

config = SweepConfig.from_dict({
    "dataset": {"name": "synthetic", "rows": "pairs", "n_images": 8},
    "models": [{"name": "toy", "delay": float(sys.argv[2])}],
    "conditions": ["baseline", "full_noise", {"name": "ro", "p": [0, 1]}, {"name": "oco", "p": [0, 0.6, 1]},
                   {"name": "doco", "p": [1]}],
    "seed": 3, "batch_size": 4})
run_sweep(config, sys.argv[1], cache_dir=sys.argv[3], progress=False, workers=int(sys.argv[4]) if len(sys.argv) > 4 else 0)
'''


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runner_scripts")
    (folder / "toy_model.py").write_text(TOY_MODEL)
    (folder / "sweep.py").write_text(SWEEP)
    return folder


def _env(scripts: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{scripts}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}


def _predictions(run: Path) -> dict[str, list[dict]]:
    out = {}
    for path in sorted((run / "predictions").rglob("*.jsonl")):
        # the sweep's config hash differs when only a model option that does not change outputs does
        out[str(path.relative_to(run))] = [{k: v for k, v in json.loads(line).items() if k != "config_hash"}
                                           for line in path.read_text().splitlines()]
    return out


def _run(scripts: Path, out: Path, cache: Path, delay: float = 0.0, processes: int = 1, workers: int = 0) -> subprocess.CompletedProcess:
    command = [sys.executable, str(scripts / "sweep.py"), str(out), str(delay), str(cache), str(workers)]
    if processes > 1:
        command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", *command[1:]]
    return subprocess.run(command, env=_env(scripts), capture_output=True, text=True, timeout=300, cwd=scripts)


@pytest.fixture(scope="module")
def single_run(scripts, tmp_path_factory):
    root = tmp_path_factory.mktemp("single")
    result = _run(scripts, root / "run", root / "cache")
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "run"


def test_plan_removes_duplicate_calls():
    columns = {"image_id": ["a", "a", "b"], "sample_id": ["a::Edema", "a::Cardiomegaly", "b::Edema"],
               "target_class": ["Edema", "Cardiomegaly", "Edema"]}
    conditions = [ConditionSpec("baseline"), ConditionSpec("full_noise"), ConditionSpec("ro", 0.0), ConditionSpec("oco", 0.0),
                  ConditionSpec("oco", 1.0), ConditionSpec("doco", 1.0)]
    plan = build_plan(columns, conditions, seed=0)
    # 6 conditions x 3 samples = 18 records; calls: baseline 2 images (shared by ro/oco p0), full noise 2 images,
    # oco p1 and doco p1 one per sample (3 + 3)
    assert (len(plan.requests), len(plan.calls), plan.saved_calls) == (18, 10, 8)


def test_config_presets_and_errors():
    config = SweepConfig.from_dict({"dataset": "synthetic", "models": ["reference-prior"], "conditions": "shovir"})
    labels = [c.label for c in config.conditions]
    assert labels[:3] == ["baseline", "full_noise", "ro_p00"] and "doco_p100" in labels and len(labels) == 20
    with pytest.raises(ValueError, match="unknown condition"):
        SweepConfig.from_dict({"dataset": "synthetic", "models": ["reference-prior"], "conditions": ["occlude"]})
    with pytest.raises(ValueError, match="listed more than once"):
        SweepConfig.from_dict({"dataset": "synthetic", "models": ["reference-prior"], "conditions": ["baseline", "baseline"]})


def test_store_tolerates_a_truncated_last_line(tmp_path):
    path = tmp_path / "rank-0.jsonl"
    with RecordWriter(path) as writer:
        writer.write([json.dumps({"sample_id": "a", "condition": "baseline", "text": "x"})])
    with open(path, "a") as handle:
        handle.write('{"sample_id": "b", "cond')  # a writer killed mid-line
    assert [json.loads(line)["sample_id"] for _, line in read_lines([path])] == ["a"]
    with RecordWriter(path) as writer:  # reopening cuts the partial line before appending
        writer.write([json.dumps({"sample_id": "b", "condition": "baseline", "text": "y"})])
    assert [json.loads(line)["sample_id"] for _, line in read_lines([path])] == ["a", "b"]
    assert [where.rsplit(":", 1)[1] for where, _ in read_lines([path])] == ["1", "2"]


def test_single_process_run_writes_one_file_per_condition(single_run):
    predictions = _predictions(single_run)
    names = sorted(Path(k).stem for k in predictions)
    assert names == sorted(["baseline", "full_noise", "ro_p00", "ro_p100", "oco_p00", "oco_p60", "oco_p100", "doco_p100"])
    run_info = json.loads((single_run / "run.json").read_text())
    n_pairs = len((single_run / "samples.jsonl").read_text().splitlines())
    without_context = run_info["plan"]["skipped"]["doco_without_context_boxes"]  # DOCO only where B_c̄ exists
    assert 0 < without_context < n_pairs and run_info["plan"]["requests"] == 8 * n_pairs - without_context
    assert run_info["plan"]["samples_per_kind"]["doco"] == n_pairs - without_context
    baseline = {r["sample_id"]: r for r in predictions["predictions/toy/synthetic/baseline.jsonl"]}
    oco0 = {r["sample_id"]: r for r in predictions["predictions/toy/synthetic/oco_p00.jsonl"]}
    assert {k: v["text"] for k, v in baseline.items()} == {k: v["text"] for k, v in oco0.items()}  # p = 0 is the baseline


def test_two_processes_give_the_same_records(scripts, single_run, tmp_path):
    result = _run(scripts, tmp_path / "run", tmp_path / "cache", processes=2)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _predictions(tmp_path / "run") == _predictions(single_run)
    ranks = sorted(p.name for p in (tmp_path / "run" / "generations").rglob("rank-*.jsonl"))
    assert ranks == ["rank-0.jsonl", "rank-1.jsonl"]


def test_background_workers_give_the_same_records(scripts, single_run, tmp_path):
    pytest.importorskip("torch")
    result = _run(scripts, tmp_path / "run", tmp_path / "cache", workers=2)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _predictions(tmp_path / "run") == _predictions(single_run)


def test_sigkill_and_restart_give_the_same_records(scripts, single_run, tmp_path):
    out, cache = tmp_path / "run", tmp_path / "cache"
    command = [sys.executable, str(scripts / "sweep.py"), str(out), "0.15", str(cache)]
    process = subprocess.Popen(command, env=_env(scripts), cwd=scripts, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    written = 0
    while time.time() < deadline and process.poll() is None:
        files = list((out / "generations").rglob("rank-*.jsonl")) if (out / "generations").exists() else []
        written = sum(len(f.read_text().splitlines()) for f in files)
        if written >= 20:
            break
        time.sleep(0.05)
    assert process.poll() is None, "the run finished before it could be interrupted"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (out / "predictions").exists() and written > 0
    result = _run(scripts, out, cache, delay=0.15)  # the same sweep (the delay is part of its config)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _predictions(out) == _predictions(single_run)
    keys = [json.loads(line)["key"] for _, line in read_lines(sorted((out / "generations").rglob("rank-*.jsonl")))]
    assert len(keys) == len(set(keys))


def test_score_and_report(single_run, tmp_path):
    from shovir.labelers import get_labeler
    from shovir.metrics import flip_rate
    from shovir.report import write_report
    from shovir.results import Results
    from shovir.scoring import score_run

    results = score_run(single_run, n_resamples=50)
    assert results["schema_version"] == "2.0" and results["scoring"]["protocols"] == ["shovir"] and results["complete"]
    view = Results(results)
    assert {p for p, _ in view.curve("toy", "shovir", "mu_f1", "oco", "mu_f1")} == {0.0, 0.6, 1.0}
    assert {p for p, _ in view.curve("toy", "shovir", "mu_f1", "ro", "mu_f1")} == {0.0, 1.0}
    assert [p for p, _ in view.curve("toy", "shovir", "mu_f1", "doco", "mu_f1")] == [1.0]
    # the flip rate in results.json equals the metric recomputed from the prediction files
    samples = {json.loads(l)["sample_id"]: json.loads(l) for l in (single_run / "samples.jsonl").read_text().splitlines()}
    ro = {json.loads(l)["sample_id"]: json.loads(l)["text"] for l in (single_run / "predictions/toy/synthetic/ro_p100.jsonl").read_text().splitlines()}
    oco = {json.loads(l)["sample_id"]: json.loads(l)["text"] for l in (single_run / "predictions/toy/synthetic/oco_p100.jsonl").read_text().splitlines()}
    ids = sorted(samples)
    labeler = get_labeler("rule")
    expected = flip_rate([samples[i]["labels"] for i in ids], labeler([ro[i] for i in ids]), labeler([oco[i] for i in ids]),
                         [samples[i]["target_class"] for i in ids])
    assert view.value("toy", "shovir", "flip_rate", "oco", 1.0, "flip_rate") == expected["flip_rate"]
    # the labeler's codes are saved beside the predictions, so every score traces to its samples
    saved = {json.loads(l)["sample_id"]: json.loads(l)["codes"] for l in (single_run / "labels/toy/oco_p100.jsonl").read_text().splitlines()}
    assert [saved[i] for i in ids] == labeler([oco[i] for i in ids]).tolist()
    report = write_report(results, tmp_path)
    for name in ("results.json", "table1.md", "table1.tex", "table1.csv", "fig2_mu_f1_vs_p.png", "fig3a_flip_rate_and_delta.png",
                 "fig3b_per_disease_f1.png"):
        assert (tmp_path / name).is_file(), name
    assert "Table 1" in report.read_text()
