"""Hub publishing, up to the upload call: the folders each command lays out, and the calls it makes
to a stubbed ``HfApi``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from shovir import __version__
from shovir.evaluate_modules import module_names
from shovir.leaderboard.data import space_results_repo
from shovir.leaderboard.hub import ANNOTATION_FIELDS, add_hub_commands, run_hub_command

sys.path.insert(0, str(Path(__file__).parent))
from test_data_mimic_cxr import D1, D2, write_fixture  # noqa: E402  (the MIMIC fixture in the real format)


class StubApi:
    """Records what a publisher asks of ``huggingface_hub.HfApi``."""

    def __init__(self):
        self.calls = []

    def create_repo(self, **kwargs):
        self.calls.append(("create_repo", kwargs))
        return f"https://huggingface.co/{kwargs['repo_id']}"

    def upload_folder(self, **kwargs):
        self.calls.append(("upload_folder", {**kwargs, "files": sorted(p.relative_to(kwargs["folder_path"]).as_posix()
                                                                        for p in Path(kwargs["folder_path"]).rglob("*")
                                                                        if p.is_file())}))

    def update_repo_settings(self, **kwargs):
        self.calls.append(("update_repo_settings", kwargs))


def _hub(argv, api=None):
    parser = argparse.ArgumentParser()
    add_hub_commands(parser.add_subparsers(dest="command"))
    return run_hub_command(parser.parse_args(["hub", *argv]), api=api)


def _front_matter(path: Path) -> dict:
    return yaml.safe_load(path.read_text().split("---\n")[1])


def test_publish_metrics_lays_out_one_space_per_module_pinned_to_this_version(tmp_path, capsys):
    assert _hub(["publish-metrics", "--namespace", "me", "--out", str(tmp_path / "spaces"), "--dry-run"]) == 0
    names = module_names()
    assert sorted(p.name for p in (tmp_path / "spaces").iterdir()) == sorted(names)
    for name in names:
        folder = tmp_path / "spaces" / name
        assert {"README.md", "app.py", f"{name}.py", "requirements.txt"} <= {p.name for p in folder.iterdir()}
        assert (folder / "requirements.txt").read_text().splitlines()[0] == f"shovir=={__version__}"
        header = _front_matter(folder / "README.md")
        assert header["sdk"] == "gradio" and header["app_file"] == "app.py"
    assert capsys.readouterr().out.count("dry run:") == len(names)

    api = StubApi()
    _hub(["publish-metrics", "--namespace", "me", "--metric", "flip_rate", "--out", str(tmp_path / "one")], api)
    assert api.calls[0] == ("create_repo", {"repo_id": "me/flip_rate", "repo_type": "space", "space_sdk": "gradio",
                                            "private": False, "exist_ok": True})
    assert api.calls[1][1]["repo_id"] == "me/flip_rate" and api.calls[1][1]["files"] == [
        "README.md", "app.py", "flip_rate.py", "requirements.txt"]
    with pytest.raises(ValueError, match="unknown module"):
        _hub(["publish-metrics", "--namespace", "me", "--metric", "bleu", "--out", str(tmp_path / "x"), "--dry-run"])
    with pytest.raises(FileExistsError, match="already holds files"):
        _hub(["publish-metrics", "--namespace", "me", "--metric", "flip_rate", "--out", str(tmp_path / "one"), "--dry-run"])


def _results(folder: Path, alias: str = "m") -> Path:
    folder.mkdir(parents=True)
    doc = {"schema_version": "2.0", "run": {"config": {"dataset": {"name": "synthetic"}}}, "models": {alias: {
        "adapter": "a", "protocols": {"shovir": {"flip_rate": {"oco_p100": {"flip_rate": 0.5}}}}}}}
    (folder / "results.json").write_text(json.dumps(doc))
    return folder


def test_publish_leaderboard_ships_the_space_and_valid_results_only(tmp_path):
    run = _results(tmp_path / "run-a")
    api = StubApi()
    _hub(["publish-leaderboard", "--namespace", "me", "--results", str(run), "--results-repo", "me/shovir-results",
          "--out", str(tmp_path / "space")], api)
    space = tmp_path / "space"
    assert sorted(p.relative_to(space).as_posix() for p in space.rglob("*") if p.is_file()) == [
        "README.md", "app.py", "requirements.txt", "results/000-run-a.json"]
    assert (space / "requirements.txt").read_text() == f"shovir[leaderboard]=={__version__}\n"
    assert _front_matter(space / "README.md")["sdk"] == "gradio"
    assert space_results_repo(space / "README.md") == "me/shovir-results"
    assert [c[0] for c in api.calls] == ["create_repo", "upload_folder"] and api.calls[0][1]["repo_id"] == "me/shovir-leaderboard"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text('{"schema_version": "1.0", "models": {}}')
    with pytest.raises(ValueError, match="schema_version '1.0' is not supported"):
        _hub(["publish-leaderboard", "--namespace", "me", "--results", str(tmp_path / "bad"), "--out", str(tmp_path / "s2"),
              "--dry-run"])
    with pytest.raises(ValueError, match="--results-repo: 'no-slash' is not a Hub repository id"):
        _hub(["publish-leaderboard", "--namespace", "me", "--results-repo", "no-slash", "--out", str(tmp_path / "s3"), "--dry-run"])


def test_publish_results_uploads_results_report_tables_and_figures_only(tmp_path):
    run = _results(tmp_path / "medgemma-run")
    for name in ("report.md", "table1.md", "table1.tex", "fig2_mu_f1_vs_p.png", "run.json", "plan.jsonl"):
        (run / name).write_text("x")
    (run / "generations").mkdir()
    (run / "generations" / "rank-0.jsonl").write_text("{}")
    api = StubApi()
    _hub(["publish-results", str(run), "--repo", "me/shovir-results", "--out", str(tmp_path / "layout")], api)
    assert api.calls[1][1]["files"] == [f"synthetic/medgemma-run/{n}" for n in (
        "fig2_mu_f1_vs_p.png", "report.md", "results.json", "table1.md", "table1.tex")]
    assert api.calls[0][1]["repo_type"] == "dataset"
    with pytest.raises(FileNotFoundError, match="run `shovir score"):
        _hub(["publish-results", str(tmp_path), "--repo", "me/r", "--out", str(tmp_path / "l2")], api)


def test_publish_annotations_keeps_boxes_and_codes_never_images_or_text_and_gates_the_repo(tmp_path):
    root, meta_file = write_fixture(tmp_path)
    api = StubApi()
    _hub(["publish-annotations", "--dataset", "mimic_cxr", "--repo", "me/mimic-boxes", "--data-dir", str(root),
          "--set", f"metadata_file={meta_file}", "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "ann")], api)
    table = pq.read_table(tmp_path / "ann" / "annotations.parquet")
    assert sorted(table.column_names) == sorted(ANNOTATION_FIELDS)
    rows = {row["image_id"]: row for row in table.to_pylist()}
    assert set(rows) == {D1, D2} and (rows[D1]["width"], rows[D1]["height"]) == (64, 48)
    assert rows[D2]["boxes"][0]["classes"] == ["Lung Opacity"]
    text = (tmp_path / "ann" / "annotations.parquet").read_bytes()
    assert b"Moderate cardiomegaly" not in text  # no report text
    header = _front_matter(tmp_path / "ann" / "README.md")
    assert "checkbox" in header["extra_gated_fields"].values() and "PhysioNet username" in header["extra_gated_fields"]
    assert api.calls[-1] == ("update_repo_settings", {"repo_id": "me/mimic-boxes", "repo_type": "dataset", "gated": "manual"})
    with pytest.raises(ValueError, match="--repo is required unless --dry-run"):
        _hub(["publish-annotations", "--dataset", "mimic_cxr", "--data-dir", str(root), "--out", str(tmp_path / "a2")])
