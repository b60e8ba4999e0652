"""Runs that never lose or mix results: aliases, the per-generation cache, per-message seeds, one
writer per folder, clean stops, complete-or-refuse scoring, a CLI that fails early."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from shovir.models import Generation, ModelAdapter, register_model
from shovir.results import Results
from shovir.runner.config import SweepConfig
from shovir.runner.lock import RunLock, RunLocked
from shovir.runner.run import placement_options, run_sweep
from shovir.scoring import IncompleteRun, score_run

CALLS: list[int] = []


class Counting(ModelAdapter):
    """Reports from image brightness; counts the messages it is asked for."""

    name = "counting"

    def __init__(self, checkpoint: str = "a", device: str | None = None) -> None:
        self.checkpoint = checkpoint

    def config(self):
        return {"name": self.name, "checkpoint": self.checkpoint}

    def generate(self, messages):
        CALLS.append(len(messages))
        out = []
        for message in messages:
            mean = float(np.asarray(message.images[0].convert("L")).mean())
            text = "The heart is enlarged." if mean > 90 else "No acute cardiopulmonary process."
            out.append(Generation(f"{text} {self.checkpoint}"))
        return out


register_model("counting", Counting)


def _config(models, conditions, **extra) -> SweepConfig:
    return SweepConfig.from_dict({"dataset": {"name": "synthetic", "rows": "pairs", "n_images": 6}, "models": models,
                                  "conditions": conditions, "seed": 3, "batch_size": 4, **extra})


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("datasets-cache"))


def _run(config: SweepConfig, out: Path, cache: str) -> dict:
    run_sweep(config, out, cache_dir=cache, progress=False, quiet=True)
    return json.loads((out / "run.json").read_text())


def _predictions(run: Path) -> dict[str, dict[str, str]]:
    out = {}
    for path in sorted((run / "predictions").rglob("*.jsonl")):
        out[str(path.relative_to(run / "predictions"))] = {json.loads(l)["sample_id"]: json.loads(l)["text"]
                                                           for l in path.read_text().splitlines()}
    return out


def test_adding_a_model_and_a_condition_redoes_no_finished_generation(tmp_path, cache):
    out = tmp_path / "run"
    CALLS.clear()
    first = _run(_config(["counting"], ["baseline", {"name": "oco", "p": [1.0]}]), out, cache)
    made_first = sum(CALLS)
    assert first["models"]["counting"]["made"] == made_first == first["plan"]["calls"]
    before = _predictions(out)
    CALLS.clear()
    extended = _config(["counting", {"name": "counting", "checkpoint": "b"}], ["baseline", {"name": "oco", "p": [1.0]}, "doco_p100"])
    second = _run(extended, out, cache)
    summary = second["models"]
    # the finished model: every old generation reused, only the DOCO calls made
    assert summary["counting"]["reused"] == made_first
    assert summary["counting"]["made"] == second["plan"]["calls"] - made_first
    # the new model generates everything; nothing else was asked of either model
    assert summary["counting@b"]["reused"] == 0 and summary["counting@b"]["made"] == second["plan"]["calls"]
    assert sum(CALLS) == summary["counting"]["made"] + summary["counting@b"]["made"]
    after = _predictions(out)
    for name, texts in before.items():
        assert after[name] == texts
    # two checkpoints of one adapter: two aliases, two prediction folders, two result rows
    assert {Path(name).parts[0] for name in after} == {"counting", "counting@b"}
    results = Results(score_run(out, n_resamples=20))
    assert results.aliases == ["counting", "counting@b"]
    assert all(text.endswith(" b") for text in after["counting@b/synthetic/baseline.jsonl"].values())


def test_two_entries_with_one_alias_are_refused():
    with pytest.raises(ValueError, match="share the alias 'counting@x'"):
        _config([{"name": "counting", "checkpoint": "x"}, {"name": "counting", "checkpoint": "/other/x"}], "baseline")
    config = _config([{"name": "counting", "checkpoint": "x", "alias": "first"}, {"name": "counting", "checkpoint": "/o/x"}], "baseline")
    assert [m.alias for m in config.models] == ["first", "counting@x"]


def test_generic_adapter_checkpoints_get_their_own_rows(tmp_path, cache):
    pytest.importorskip("transformers")
    from shovir.models.testing import build_tiny_llava

    checkpoints = []
    for name in ("tiny-a", "tiny-b"):
        build_tiny_llava(tmp_path / name)
        checkpoints.append({"name": "hf-image-text-to-text", "checkpoint": str(tmp_path / name), "max_new_tokens": 4,
                            "prompt": "Describe."})
    info = _run(_config(checkpoints, ["baseline"], limit=3), tmp_path / "run", cache)
    assert sorted(info["models"]) == ["hf-image-text-to-text@tiny-a", "hf-image-text-to-text@tiny-b"]
    results = Results(score_run(tmp_path / "run", n_resamples=10))
    from shovir.report import protocol_rows

    assert [row["model"] for row in protocol_rows(results, "shovir")] == sorted(info["models"])


def test_sampled_texts_do_not_depend_on_batch_size_or_resume(tmp_path, cache):
    pytest.importorskip("transformers")
    from shovir.models.testing import build_tiny_llava

    build_tiny_llava(tmp_path / "tiny")
    model = {"name": "hf-image-text-to-text", "checkpoint": str(tmp_path / "tiny"), "max_new_tokens": 6, "prompt": "Describe.",
             "do_sample": True, "seed": 5, "temperature": 1.5}
    conditions = ["baseline", "full_noise"]
    one = tmp_path / "batch1"
    _run(_config([model], conditions, limit=4, batch_size=1), one, cache)
    four = tmp_path / "batch4"
    _run(_config([model], conditions, limit=4, batch_size=4), four, cache)
    texts = _predictions(one)
    assert _predictions(four) == texts
    assert len({t for condition in texts.values() for t in condition.values()}) > 2  # sampling does vary the text
    # a resume: drop half the finished generations, run again, the same texts come back
    rank = next((four / "generations").rglob("rank-0.jsonl"))
    lines = rank.read_text().splitlines()
    rank.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    info = _run(_config([model], conditions, limit=4, batch_size=3), four, cache)
    assert info["models"][next(iter(info["models"]))]["made"] == len(lines) - len(lines) // 2
    assert _predictions(four) == texts


def test_a_second_writer_is_refused_and_a_stale_lock_recovered(tmp_path, cache):
    out = tmp_path / "run"
    with RunLock(out):
        with pytest.raises(RunLocked, match="is being written by pid"):
            run_sweep(_config(["counting"], "baseline"), out, cache_dir=cache, progress=False, quiet=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    import socket

    (out / "run.lock").write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname(), "started": "then"}))
    info = _run(_config(["counting"], "baseline"), out, cache)
    assert info["status"] == "complete" and not (out / "run.lock").exists()


def _scored_run(tmp_path: Path, cache: str) -> Path:
    out = tmp_path / "run"
    _run(_config(["counting", {"name": "counting", "checkpoint": "b"}], ["baseline", "full_noise", "oco_p100", "ro_p100"]), out, cache)
    return out


def test_score_refuses_an_incomplete_run_and_scores_it_with_allow_partial(tmp_path, cache, capsys):
    from shovir.cli import main

    out = _scored_run(tmp_path, cache)
    info = json.loads((out / "run.json").read_text())
    store = out / "generations" / info["models"]["counting@b"]["model_hash"] / "rank-0.jsonl"
    lines = store.read_text().splitlines()
    store.write_text("\n".join(lines[:5]) + "\n")  # a run killed half-way through model 2
    with pytest.raises(IncompleteRun, match=r"counting@b / baseline: \d+ of \d+ missing"):
        score_run(out, n_resamples=10)
    assert main(["score", str(out), "--n-resamples", "10"]) == 2
    error = capsys.readouterr().err
    assert "generations the plan expects are missing" in error and "Traceback" not in error
    results = score_run(out, n_resamples=10, allow_partial=True)
    coverage = results["coverage"]
    assert not results["complete"]
    assert all(c["present"] == c["expected"] for c in coverage["counting"].values())
    assert sum(c["present"] for c in coverage["counting@b"].values()) < sum(c["expected"] for c in coverage["counting@b"].values())
    from shovir.report import write_report

    assert "Partial run" in write_report(results, tmp_path / "report").read_text()


def test_a_folder_mixing_two_configs_is_refused(tmp_path, cache):
    out = _scored_run(tmp_path, cache)
    path = next((out / "predictions").rglob("baseline.jsonl"))
    records = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, "config_hash": "0123456789ab"}) + "\n" for r in records))
    with pytest.raises(IncompleteRun, match="mixes two sweeps"):
        score_run(out, n_resamples=10)


def test_a_corrupt_generation_names_its_file_and_line(tmp_path, cache):
    out = _scored_run(tmp_path, cache)
    store = next((out / "generations").rglob("rank-0.jsonl"))
    lines = store.read_text().splitlines()
    store.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    with pytest.raises(ValueError, match=r"rank-0\.jsonl:2: corrupt record"):
        score_run(out, n_resamples=10)


def test_sigint_flushes_the_batch_and_a_rerun_completes(tmp_path, cache):
    script = tmp_path / "slow.py"
    script.write_text(
        "import sys, time\nfrom shovir.models import register_model\nsys.path.insert(0, %r)\n"
        "import test_runs\n\nclass Slow(test_runs.Counting):\n    def generate(self, messages):\n"
        "        time.sleep(0.2)\n        return super().generate(messages)\n\n"
        "register_model('slow', Slow)\nfrom shovir.cli import main\nsys.exit(main(sys.argv[1:]))\n" % str(Path(__file__).parent))
    out = tmp_path / "run"
    command = [sys.executable, str(script), "run", "--model", "slow", "--dataset-option", "n_images=6", "--conditions",
               "shovir", "--batch-size", "2", "--out", str(out), "--cache-dir", cache, "--quiet"]
    env = {**os.environ, "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    import time

    deadline = time.time() + 120
    while time.time() < deadline and not list(out.glob("generations/*/rank-0.jsonl")):
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "run the same command again to resume" in stderr and "Traceback" not in stderr
    rank = next(out.glob("generations/*/rank-0.jsonl"))
    text = rank.read_text()
    assert text.endswith("\n") and all(json.loads(line)["text"] for line in text.splitlines())
    assert not (out / "run.lock").exists()
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert json.loads((out / "run.json").read_text())["models"]["slow"]["reused"] == len(text.splitlines())


def _args(**values):
    defaults = dict(config=None, model=[], model_option=[], dataset=None, dataset_option=[], conditions=None, seed=None,
                    batch_size=None, noise=None, limit=None, blank=None, swap_ssim_below=None)
    return types.SimpleNamespace(**{**defaults, **values})


def test_flags_override_the_config_file(tmp_path):
    from shovir.cli import sweep_config

    path = tmp_path / "sweep.yaml"
    path.write_text("dataset: {name: synthetic, rows: pairs, n_images: 20}\nmodels: [counting]\nconditions: shovir\n"
                    "seed: 1\nbatch_size: 8\nblank: input\n")
    config = sweep_config(_args(config=str(path), seed=9, batch_size=2, conditions="baseline", limit=5,
                                dataset_option=["n_images=4"], model_option=["checkpoint=z"], blank="paper",
                                swap_ssim_below=0.9))
    assert (config.seed, config.batch_size, config.limit, [c.label for c in config.conditions]) == (9, 2, 5, ["baseline"])
    assert (config.blank, config.swap_ssim_below) == ("paper", 0.9)
    assert config.dataset == {"name": "synthetic", "rows": "pairs", "n_images": 4}
    assert [(m.name, dict(m.options), m.alias) for m in config.models] == [("counting", {"checkpoint": "z"}, "counting@z")]
    unchanged = sweep_config(_args(config=str(path)))
    assert (unchanged.seed, unchanged.batch_size, len(unchanged.conditions), unchanged.blank) == (1, 8, 20, "input")


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "--model", "medgema", "--out", "x"], "unknown model 'medgema' (did you mean 'medgemma'?)"),
    (["run", "--model", "hf-image-text-to-text", "--model-option", "max_new_token=3", "--out", "x"],
     "unknown option 'max_new_token' (did you mean 'max_new_tokens'?)"),
    (["run", "--model", "counting", "--dataset-option", "n_image=3", "--out", "x"], "unknown option 'n_image' (did you mean 'n_images'?)"),
    (["run", "--model", "counting", "--conditions", "shovr", "--out", "x"], "did you mean 'shovir'?"),
    (["run", "--config", "missing.yaml", "--out", "x"], "--config: no such file 'missing.yaml'"),
    (["score", "no-such-run"], "no-such-run: no such run folder"),
])
def test_expected_errors_are_one_line_before_any_work(argv, message, capsys, tmp_path, monkeypatch):
    from shovir.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert message in error and len(error.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_version_and_data_build_help(capsys):
    from shovir import __version__
    from shovir.cli import main

    with pytest.raises(SystemExit) as version:
        main(["--version"])
    assert version.value.code == 0 and capsys.readouterr().out.strip() == f"shovir {__version__}"
    with pytest.raises(SystemExit) as shown:
        main(["data", "build", "--help"])
    assert shown.value.code == 0 and "shovir data build" in capsys.readouterr().out


def test_latex_escapes_every_special_character():
    from shovir.report import to_latex

    latex = to_latex([{"model": r"evil\input{/etc/passwd}_$x$ & 100% #1 ~^", "F1-14": 0.5}])
    body = latex.splitlines()[4]
    assert r"\input{" not in body and "$x$" not in body
    assert body.startswith(r"evil\textbackslash{}input\{/etc/passwd\}\_\$x\$ \& 100\% \#1 \textasciitilde{}\textasciicircum{} & 0.500")


def test_rank_r_uses_device_r_for_built_in_and_entry_point_adapters(monkeypatch):
    import shovir.registry as registry_module
    from shovir.models import adapter_class

    class Plugin(ModelAdapter):
        name = "plugin"

        def __init__(self, device: str | None = None) -> None:
            self.device = device

        def generate(self, messages):
            return []

    point = types.SimpleNamespace(name="acme-plugin", value="acme:Plugin", load=lambda: Plugin)
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [point] if group == "shovir.models" else [])
    for rank in (0, 1, 2):
        state = types.SimpleNamespace(device=f"cuda:{rank}", process_index=rank, num_processes=3)
        for name in ("acme-plugin", "hf-image-text-to-text"):
            cls = adapter_class(name)
            assert placement_options(cls, {}, state) == {"device": f"cuda:{rank}"}, name
        assert placement_options(adapter_class("acme-plugin"), {"device": "cuda:7"}, state) == {"device": "cuda:7"}
    cpu = types.SimpleNamespace(device="cpu", process_index=0, num_processes=1)
    assert placement_options(adapter_class("acme-plugin"), {}, cpu) == {}


def test_a_config_cannot_name_an_arbitrary_callable_as_verifier(tmp_path):
    from shovir.data.padchest_gr import PadChestGR

    with pytest.raises(ValueError, match="verifier 'subprocess:run' is not registered"):
        PadChestGR(config_name="images", data_dir=str(tmp_path), cache_dir=str(tmp_path / "c"), verifier="subprocess:run")


def test_records_never_contain_secrets(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("SHOVIR_TEST_API_KEY", "sk-secret-value")
    out = tmp_path / "run"
    _run(_config(["counting"], "baseline"), out, cache)
    for path in out.rglob("*"):
        if path.is_file():
            assert "sk-secret-value" not in path.read_text(errors="ignore"), path


def test_ranks_stop_when_their_launcher_is_gone(monkeypatch):
    from shovir.runner.run import _StopFlag

    flag = _StopFlag(launched=True)
    assert flag.check() is None
    monkeypatch.setattr(os, "getppid", lambda: flag.parent + 1)  # re-parented: the launcher exited
    assert flag.check() == "launcher exited"
    alone = _StopFlag(launched=False)  # a plain `shovir run` never stops on its own
    assert alone.check() is None


@pytest.mark.parametrize("name", ["sweep.yaml", "mimic_medgemma.yaml"])
def test_example_configs_load_and_validate(name):
    from shovir.examples import examples_root

    config = SweepConfig.load(examples_root() / name)
    assert config.models and config.conditions and config.dataset["name"] in ("synthetic", "mimic_cxr")


def test_without_accelerate_runs_single_process_and_refuses_a_multi_process_launch(monkeypatch):
    import builtins

    from shovir.runner.run import SingleProcess, _state

    real_import = builtins.__import__

    def no_accelerate(name, *args, **kwargs):
        if name == "accelerate" or name.startswith("accelerate."):
            raise ImportError("No module named 'accelerate'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_accelerate)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert isinstance(_state(), SingleProcess)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ImportError, match=r"one of 2 launched ranks, but accelerate is not installed: pip install 'shovir\[models\]'"):
        _state()


class Flaky(Counting):
    """Fails every message whose image is bright while ``FAILING`` is set, as a server might."""

    name = "flaky"
    FAILING = True

    def generate(self, messages):
        out = super().generate(messages)
        if not Flaky.FAILING:
            return out
        return [Generation.failure("HTTP 500 after 3 attempts") if "enlarged" in g.text else g for g in out]


register_model("flaky", Flaky)


def test_failed_generations_are_recorded_never_scored_and_retried(tmp_path, cache):
    from shovir.runner.run import IncompleteGenerations

    out = tmp_path / "run"
    config = _config(["flaky"], ["baseline", "full_noise"])
    Flaky.FAILING = True
    with pytest.raises(IncompleteGenerations, match="generations failed"):
        run_sweep(config, out, cache_dir=cache, progress=False, quiet=True)
    info = json.loads((out / "run.json").read_text())
    failed = info["models"]["flaky"]["failed"]
    assert failed > 0 and info["status"] == "incomplete" and info["models"]["flaky"]["made"] == info["plan"]["calls"] - failed
    records = [json.loads(line) for line in next((out / "generations").rglob("rank-0.jsonl")).read_text().splitlines()]
    assert sum(r["error"] == "HTTP 500 after 3 attempts" and r["text"] is None for r in records) == failed
    with pytest.raises(IncompleteRun, match="generations the plan expects are missing"):
        score_run(out, n_resamples=10)
    Flaky.FAILING = False
    CALLS.clear()
    info = _run(config, out, cache)
    assert info["status"] == "complete" and info["models"]["flaky"]["made"] == failed == sum(CALLS)
    assert score_run(out, n_resamples=10)["complete"]
