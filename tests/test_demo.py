"""`shovir demo`, end to end: the calibration verdict of every protocol must hold on the embedded
synthetic data."""

from __future__ import annotations

import json

import pytest

from shovir.calibration.checks import CLAIMS, calibration_checks
from shovir.calibration.demo import PROTOCOLS, run_demo


@pytest.fixture(scope="module")
def demo(demo_run):
    return demo_run  # one demo per session, shared with the leaderboard's browser test (conftest.py)


def test_demo_calibration_verdict_holds_for_every_protocol(demo):
    out, report, checks = demo
    failed = [check.line() for check in checks if not check.passed]
    assert not failed, "\n".join(failed)
    # every declared claim was checked: none silently skipped because a model or protocol was missing
    assert sorted((c.model, c.claim) for c in checks) == sorted((c.model, c.text) for c in CLAIMS)
    assert {check.protocol for check in checks} == set(PROTOCOLS)
    claims = {(check.model, check.claim) for check in checks}
    assert ("reference-grounded", "FR_OCO >= 0.7 at p = 1") in claims
    assert ("reference-context", "FR_DOCO >= 0.4 on Edema + Atelectasis at p = 1") in claims


def test_demo_writes_results_report_and_figures(demo):
    out, report, _ = demo
    results = json.loads((out / "shovir" / "results.json").read_text())
    assert results["schema_version"] == "2.0" and set(results["models"]) == {"reference-grounded", "reference-prior", "reference-context"}
    assert results["run"]["config"]["dataset"]["n_images"] == 200
    assert results["run"]["plan"]["saved_calls"] > 0
    for name in ("table1.md", "table1.tex", "table1.csv", "fig2_mu_f1_vs_p.png", "fig3a_flip_rate_and_delta.png", "fig3b_per_disease_f1.png"):
        assert (out / "shovir" / name).stat().st_size > 0, name
    for name in ("table_beyond_accuracy.md", "table_modalens.md", "fig_beyond_accuracy.png", "fig_modalens_swap.png"):
        assert (out / "vqa" / name).stat().st_size > 0, name
    text = report.read_text()
    assert "Calibration verdict" in text and "FAIL" not in text and "(shovir/fig2_mu_f1_vs_p.png)" in text
    # the verdict is recomputed from results.json, not carried over from the run
    assert [c.passed for c in calibration_checks(results)] == [c["passed"] for c in results["calibration"]]
    timing = json.loads((out / "calibration.json").read_text())
    assert set(timing["seconds"]) == {"shovir", "beyond_accuracy+modalens"} and timing["total_seconds"] > 0


def test_demo_runs_one_protocol(tmp_path):
    _, checks = run_demo(tmp_path, n_images=24, cache_dir=str(tmp_path / "cache"), progress=False, quiet=True,
                         n_resamples=50, protocols=["beyond_accuracy"])
    assert {check.protocol for check in checks} == {"beyond_accuracy"}
    assert not (tmp_path / "shovir").exists() and (tmp_path / "vqa" / "results.json").is_file()
    with pytest.raises(ValueError, match="unknown protocol"):
        run_demo(tmp_path, protocols=["icare"])
