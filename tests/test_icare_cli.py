"""The command line and the scorer: `shovir icare` / `shovir green` on report files, and
`shovir score --icare BACKEND --green BACKEND` adding both to a run's Table 1 through the protocol
declarations, with the judges' calls cached in the run folder."""

from __future__ import annotations

import json

import pytest

from shovir.cli import main

REFS = [{"id": "s1", "report": "Mild cardiomegaly. Small left pleural effusion."},
        {"id": "s2", "report": "No acute cardiopulmonary process."}]
HYPS = [{"id": "s2", "report": "No acute cardiopulmonary process."}, {"id": "s1", "report": "Mild cardiomegaly."}]


def _write(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_shovir_icare_writes_scores_a_log_and_a_cache(tmp_path, capsys):
    refs, hyps, out = _write(tmp_path / "refs.jsonl", REFS), _write(tmp_path / "hyps.jsonl", HYPS), tmp_path / "icare"
    assert main(["icare", "--refs", refs, "--hyps", hyps, "--out", str(out), "--n-resamples", "50"]) == 0
    printed = capsys.readouterr().out
    assert "| ICARE-GT | 0.500" in printed and "| ICARE-GEN | 1.000" in printed and "| kept | 2 | 1 |" in printed
    result = json.loads((out / "icare.json").read_text())
    assert result["icare_avg"] == 0.75 and result["config"]["n_questions"] == 40 and result["config"]["seed"] == 123
    log = [json.loads(line) for line in (out / "icare_questions.jsonl").read_text().splitlines()]
    assert {row["report_id"] for row in log} == {"s1", "s2"} and any(row["record"] == "report" for row in log)
    assert main(["icare", "--refs", refs, "--hyps", hyps, "--out", str(out), "--quiet"]) == 0
    again = json.loads((out / "icare.json").read_text())
    assert again["calls"]["made"] == 0 and again["icare_avg"] == 0.75  # every call came from OUT/calls.jsonl


def test_shovir_green_from_a_judge_or_from_saved_responses(tmp_path, capsys):
    refs, hyps = _write(tmp_path / "refs.jsonl", REFS), _write(tmp_path / "hyps.jsonl", HYPS)
    assert main(["green", "--refs", refs, "--hyps", hyps, "--out", str(tmp_path / "g"), "--n-resamples", "0"]) == 0
    assert "GREEN — 2 report pairs; backend offline" in capsys.readouterr().out
    saved = _write(tmp_path / "responses.jsonl", [{"id": "s1", "text": "[Matched Findings]:\n1. heart"},
                                                  {"id": "s2", "text": "[Clinically Significant Errors]:\n(b) Missing: 1."
                                                                       "\n\n[Matched Findings]:\n1. normal"}])
    assert main(["green", "--refs", refs, "--hyps", hyps, "--responses", saved, "--out", str(tmp_path / "r"),
                 "--n-resamples", "0"]) == 0
    assert "saved judge responses" in capsys.readouterr().out
    result = json.loads((tmp_path / "r" / "green.json").read_text())
    assert result["green"] == 0.75 and [r["green"] for r in result["reports"]] == [1.0, 0.5]


def test_bad_inputs_fail_in_one_line(tmp_path, capsys):
    refs = _write(tmp_path / "refs.jsonl", REFS)
    hyps = _write(tmp_path / "hyps.jsonl", HYPS[:1])
    assert main(["icare", "--refs", refs, "--hyps", hyps, "--out", str(tmp_path / "x")]) == 2
    assert "no report for id(s) ['s1']" in capsys.readouterr().err
    assert main(["icare", "--refs", refs, "--hyps", str(tmp_path / "missing.jsonl")]) == 2
    assert "--hyps: no such file" in capsys.readouterr().err
    assert main(["icare", "--refs", refs, "--hyps", refs, "--backend", "openai"]) == 2
    assert "base_url is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["score", str(tmp_path), "--icare-option"])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from shovir.runner.config import SweepConfig
    from shovir.runner.run import run_sweep

    root = tmp_path_factory.mktemp("judged-run")
    config = SweepConfig.from_dict({"dataset": {"name": "synthetic", "rows": "pairs", "n_images": 8},
                                    "models": ["reference-grounded", "reference-prior"], "conditions": ["baseline"],
                                    "seed": 3, "batch_size": 16})
    run_sweep(config, root / "run", cache_dir=str(root / "cache"), progress=False, quiet=True)
    return root / "run"


def test_score_adds_icare_and_green_to_table_1(run_dir, capsys):
    assert main(["score", str(run_dir), "--n-resamples", "50", "--icare", "offline", "--green", "offline"]) == 0
    printed = capsys.readouterr().out
    header, _, *rows = (run_dir / "table1.md").read_text().splitlines()[:4]
    assert "| GREEN | ICARE-AVG |" in header and len(rows) == 2
    results = json.loads((run_dir / "results.json").read_text())
    section = results["models"]["reference-grounded"]["protocols"]["shovir"]
    assert section["icare"]["baseline"]["icare_avg"] is not None and "per_report" not in section["icare"]["baseline"]
    assert 0 <= section["green"]["baseline"]["green"] <= 1 and "ICARE-AVG" in printed
    judges = results["scoring"]["judges"]
    assert judges["icare"]["backend"]["backend"] == "offline" and judges["icare"]["calls"]["made"] > 0
    grounded = section["icare"]["baseline"]["icare_avg"]
    prior = results["models"]["reference-prior"]["protocols"]["shovir"]["icare"]["baseline"]["icare_avg"]
    assert grounded > prior  # the image-reading model agrees more with the reference reports than the prior one
    # the reference side was written and filtered once, for both models
    assert results["models"]["reference-prior"]["protocols"]["shovir"]["icare"]["baseline"]["calls"]["reports_reused"] > 0
    logs = sorted(p.relative_to(run_dir).as_posix() for p in (run_dir / "judges").rglob("*.jsonl"))
    assert logs == ["judges/calls.jsonl", "judges/green/reference-grounded/baseline.jsonl",
                    "judges/green/reference-prior/baseline.jsonl", "judges/icare/reference-grounded/baseline.jsonl",
                    "judges/icare/reference-prior/baseline.jsonl"]
    # a rescore makes no call; without --icare the columns stay empty
    assert main(["score", str(run_dir), "--n-resamples", "50", "--icare", "offline", "--quiet"]) == 0
    assert json.loads((run_dir / "results.json").read_text())["scoring"]["judges"]["icare"]["calls"]["made"] == 0
    assert main(["score", str(run_dir), "--n-resamples", "50", "--quiet"]) == 0
    results = json.loads((run_dir / "results.json").read_text())
    assert "icare" not in results["models"]["reference-grounded"]["protocols"]["shovir"]
    assert results["scoring"]["judges"] == {}


def test_judge_options_need_their_backend(run_dir, capsys):
    assert main(["score", str(run_dir), "--icare-option", "model=x"]) == 2
    assert "--icare-option needs --icare BACKEND" in capsys.readouterr().err
    assert main(["score", str(run_dir), "--green", "openai", "--green-option", "modle=x", "--quiet"]) == 2
    assert "unknown option 'modle' (did you mean 'model'?)" in capsys.readouterr().err
