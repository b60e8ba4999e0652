"""``shovir.load_metric``: the shipped module, from a local path, never the Hub (issue 8, item 8).

evaluate reads ``"shovir/<name>"`` as a Hub Space id (and before that as a folder relative to the
working directory); ``shovir.load_metric`` hands it the installed script's absolute path instead.
The network test runs in a fresh interpreter with the Hub switched *on* (``HF_HUB_OFFLINE=0``) but
pointed at a closed port, and every socket connection recorded and refused: the safe loader makes
none, while ``evaluate.load("shovir/flip_rate")`` tries the Hub.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

evaluate = pytest.importorskip("evaluate")

import shovir  # noqa: E402
from shovir.evaluate_modules import load_metric, module_names, module_script, modules_root  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CARDIOMEGALY = [0, 1] + [0] * 12
NEGATED = [0, 2] + [0] * 12


def _loaded_file(module) -> Path:
    return Path(sys.modules[type(module).__module__].__file__)


def test_load_metric_is_exported_from_the_package():
    assert shovir.load_metric is load_metric
    assert "load_metric" in shovir.__all__


@pytest.mark.parametrize("name", module_names())
def test_load_metric_loads_the_shipped_script(name):
    module = load_metric(name)
    loaded = _loaded_file(module)
    # evaluate copies a local script into its cache under metrics/<name>/<hash>/, byte for byte;
    # a Hub or cached-Hub module would sit under metrics/shovir--<name>/ instead
    assert loaded.read_bytes() == module_script(name).read_bytes()
    assert loaded.parent.parent.name == name
    assert module.name == name


def test_the_loaded_module_computes_a_hand_case():
    # two Cardiomegaly findings detected under RO, one lost under OCO: FR = 1 / 2
    flip_rate = load_metric("flip_rate")
    result = flip_rate.compute(references=[CARDIOMEGALY] * 2, control_predictions=[CARDIOMEGALY] * 2,
                               predictions=[NEGATED, CARDIOMEGALY], target_classes=["Cardiomegaly"] * 2)
    assert result["flip_rate"] == 0.5 and result["flips"]["Cardiomegaly"] == 1
    assert load_metric("shovir/nlg").compute(predictions=["no acute process"], references=["no acute process"])["rouge_l"] == 1.0


def test_hub_style_ids_resolve_to_the_same_local_script():
    assert module_script("shovir/flip_rate") == module_script("flip_rate") == modules_root() / "flip_rate" / "flip_rate.py"


@pytest.mark.parametrize("name, closest", [("flip_rates", "flip_rate"), ("shovir/visual_reliace", "visual_reliance"),
                                           ("chexbert", "chexbert_f1")])
def test_an_unknown_name_lists_the_modules_and_the_closest_match(name, closest):
    with pytest.raises(ValueError) as error:
        load_metric(name)
    message = str(error.value)
    assert repr(name) in message and f"did you mean {closest!r}" in message
    assert all(available in message for available in module_names())


@pytest.mark.parametrize("name", ["", None, 3, "../metrics/flip_rate", "someone/flip_rate", "bleu"])
def test_names_that_are_not_shipped_modules_are_refused(name):
    with pytest.raises(ValueError, match="shovir metric") as error:
        load_metric(name)
    assert "available: " in str(error.value)


@pytest.mark.parametrize("argument", ["revision", "download_config", "download_mode"])
def test_hub_only_arguments_are_refused_rather_than_ignored(argument):
    with pytest.raises(ValueError, match=f"{argument}: only used for Hub modules"):
        load_metric("flip_rate", **{argument: "main"})


def test_other_arguments_reach_evaluate_load(tmp_path):
    module = load_metric("flip_rate", experiment_id="loading-test", cache_dir=str(tmp_path))
    assert module.experiment_id == "loading-test"


def test_a_module_that_would_fetch_remote_code_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "metrics" / "remote"
    folder.mkdir(parents=True)
    (folder / "remote.py").write_text("import evaluate\nfrom .helper import x  # From: http://127.0.0.1:9/helper.py\n")
    monkeypatch.setenv("SHOVIR_METRICS_DIR", str(tmp_path / "metrics"))
    with pytest.raises(ValueError, match=r"imports remote files \['http://127.0.0.1:9/helper.py'\]"):
        load_metric("remote")


def test_a_planted_folder_in_the_working_directory_cannot_hijack_it(tmp_path, monkeypatch):
    # evaluate.load("shovir/flip_rate") first looks for ./shovir/flip_rate/flip_rate.py: a folder
    # in the working directory supplies the code. load_metric uses an absolute path, so it does not.
    planted = tmp_path / "shovir" / "flip_rate"
    planted.mkdir(parents=True)
    (planted / "flip_rate.py").write_text(textwrap.dedent('''\
        import datasets
        import evaluate


        class FlipRate(evaluate.Metric):
            def _info(self):
                return evaluate.MetricInfo(description="planted", citation="", inputs_description="",
                                           features=datasets.Features({"predictions": datasets.Value("int64")}))

            def _compute(self, predictions):
                return {"planted": True}
        '''))
    monkeypatch.chdir(tmp_path)
    assert evaluate.load("shovir/flip_rate").info.description == "planted"  # the hazard is real
    safe = load_metric("shovir/flip_rate")
    assert safe.info.description != "planted"
    assert _loaded_file(safe).read_bytes() == module_script("flip_rate").read_bytes()


_PROBE = r'''
import json, socket, sys
attempts = []

def refuse(self, address):
    attempts.append(repr(address))
    raise ConnectionRefusedError(f"test: network blocked ({address})")

socket.socket.connect = refuse
socket.socket.connect_ex = lambda self, address: refuse(self, address)
import evaluate, shovir

module = shovir.load_metric("flip_rate")
cardiomegaly = [0, 1] + [0] * 12
value = module.compute(references=[cardiomegaly] * 2, control_predictions=[cardiomegaly] * 2,
                       predictions=[[0, 2] + [0] * 12, cardiomegaly])["flip_rate"]
report = {"file": sys.modules[type(module).__module__].__file__, "flip_rate": value, "safe_attempts": list(attempts)}
try:
    evaluate.load("shovir/flip_rate")
    report["hub_id"] = "loaded"
except Exception as error:
    report["hub_id"] = type(error).__name__
report["hub_attempts"] = attempts[len(report["safe_attempts"]):]
print(json.dumps(report))
'''


def test_online_with_a_dead_hub_load_metric_makes_no_connection(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "SHOVIR_"))}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="0", HF_EVALUATE_OFFLINE="0", HF_DATASETS_OFFLINE="0",
               HF_ENDPOINT="http://127.0.0.1:9", PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", _PROBE], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["safe_attempts"] == [], "load_metric opened a connection"
    assert report["flip_rate"] == 0.5
    assert Path(report["file"]).read_bytes() == module_script("flip_rate").read_bytes()
    # the contrast: the Hub id does go to the (dead) Hub, so the probe would have caught the safe loader
    assert report["hub_attempts"] and all("127.0.0.1" in address for address in report["hub_attempts"])
    assert report["hub_id"] != "loaded"
