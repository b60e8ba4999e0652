"""shovir works from its wheel: every README command that needs no credentials or weights.

The module builds the wheel of a snapshot of the checkout, installs it with ``--no-deps
--no-index`` into a fresh venv and makes the running environment's dependencies visible there
through a ``.pth`` file listing this interpreter's site-packages. The editable install of shovir in
those site-packages is itself activated by a ``.pth`` file, and ``.pth`` files inside a directory
that another ``.pth`` added are not executed, so the fresh venv imports torch, datasets, … from
here but shovir only from the wheel. Commands then run with the venv's ``bin/shovir`` and
``bin/python`` from a folder outside the repository: a resource left out of the wheel fails here
although every other test passes.

A command that fails from the wheel is rerun from the source checkout, so the failure message says
whether the packaging (works from the checkout) or the command itself is broken.
"""

from __future__ import annotations

import hashlib
import json
import os
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import build_wheel

REPO = Path(__file__).resolve().parents[1]

def _dependency_dirs() -> list[str]:
    """Where the running interpreter finds shovir's dependencies."""
    return site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])


_OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg",
            "PYTHONNOUSERSITE": "1"}


@dataclass
class WheelEnv:
    """A venv with shovir installed from its wheel, and where commands run.

    Attributes:
        source: the snapshot of the checkout the wheel was built from; expected file contents
            are read from it, since other work may change the checkout during the test.
        wheel: the built ``.whl``.
        venv: the fresh venv; ``purelib`` its site-packages.
        work: the working directory of every command (outside the repository).
        out: where wheel commands write; ``checkout_out`` the same for checkout reruns.
        env: the environment of wheel commands (offline, caches under the temporary folder).
    """

    source: Path
    wheel: Path
    venv: Path
    purelib: Path
    work: Path
    out: Path
    checkout_out: Path
    env: dict[str, str]

    def run(self, argv: list[str], checkout: bool = False) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` (``argv[0]`` is ``shovir`` or ``python``) with the venv's scripts, or with
        this interpreter and the source checkout when ``checkout`` is true."""
        if checkout:
            head = [sys.executable, "-m", "shovir.cli"] if argv[0] == "shovir" else [sys.executable]
            rest = [arg.replace(str(self.out), str(self.checkout_out)) for arg in argv[1:]]
            # PYTHONPATH, so the checkout's shovir is imported whether or not it is installed here
            env = {key: value for key, value in self.env.items() if key != "VIRTUAL_ENV"}
            env.update(PATH=os.environ.get("PATH", ""), PYTHONPATH=str(REPO))
        else:
            head, rest, env = [str(self.venv / "bin" / argv[0])], argv[1:], self.env
        return subprocess.run([*head, *rest], check=False, cwd=self.work, env=env, capture_output=True, text=True, timeout=900)

    def ok(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` from the wheel and return it when it exits 0; see the module docstring for
        what happens when it does not."""
        result = self.run(argv)
        if result.returncode == 0:
            return result
        command = " ".join(argv)
        reference = self.run(argv, checkout=True)
        if reference.returncode != 0:
            last = (reference.stderr.strip() or reference.stdout.strip() or "(no output)").splitlines()[-1]
            pytest.fail(f"`{command}` fails from the wheel and from the source checkout (exit {reference.returncode}): {last}")
        pytest.fail(f"`{command}` works from the source checkout but exits {result.returncode} from the wheel"
                    f" (a file missing from the wheel?):\n{result.stdout}\n{result.stderr}")


def _call(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run a setup step; it has to exit 0."""
    result = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=900, **kwargs)
    assert result.returncode == 0, f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> WheelEnv:
    """Build the wheel, install it into a fresh venv and point that venv at our dependencies."""
    root = tmp_path_factory.mktemp("wheel")
    # pip builds in-tree: in the checkout, build/lib would keep modules deleted since an earlier
    # build and ship them, and parallel runs would share it; a snapshot avoids both.
    source, wheel = build_wheel(root)
    wheels = [wheel]

    venv = root / "venv"
    _call([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    # before the .pth exists, so pip sees no shovir (the editable one) already installed
    _call([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check", "-q",
           str(wheels[0])])
    purelib = Path(_call([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (purelib / "_shovir_test_dependencies.pth").write_text("\n".join(_dependency_dirs()) + "\n")

    work, out, checkout_out, hf = root / "work", root / "out", root / "checkout-out", root / "hf"
    for folder in (work, out, checkout_out):
        folder.mkdir()
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "SHOVIR_EXAMPLES_DIR",
                          "SHOVIR_METRICS_DIR")}
    env.update(_OFFLINE, HF_HOME=str(hf), HF_DATASETS_CACHE=str(hf / "datasets"), HF_MODULES_CACHE=str(hf / "modules"),
               VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    return WheelEnv(source=source, wheel=wheels[0], venv=venv, purelib=purelib, work=work, out=out,
                    checkout_out=checkout_out, env=env)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _keys(tree: Any) -> set[str]:
    """Every mapping key anywhere in a JSON document."""
    if isinstance(tree, dict):
        return set(tree).union(*(_keys(value) for value in tree.values()))
    if isinstance(tree, list):
        return set().union(*(_keys(value) for value in tree))
    return set()


def _metric_names(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "metrics").iterdir() if (p / f"{p.name}.py").is_file())


def test_shovir_imports_from_the_wheel_and_dependencies_from_here(wheel_env: WheelEnv) -> None:
    code = ("import json, shovir, torch, datasets, evaluate; "
            "print(json.dumps({'shovir': shovir.__file__, 'version': shovir.__version__, 'torch': torch.__file__,"
            " 'datasets': datasets.__file__, 'evaluate': evaluate.__file__}))")
    found = json.loads(wheel_env.ok(["python", "-c", code]).stdout)
    shovir_file = Path(found["shovir"]).resolve()
    assert shovir_file == (wheel_env.purelib / "shovir" / "__init__.py").resolve()
    assert not shovir_file.is_relative_to(REPO)
    assert f"shovir-{found['version']}-" in wheel_env.wheel.name
    here = [Path(p).resolve() for p in _dependency_dirs()]
    for name in ("torch", "datasets", "evaluate"):
        assert any(Path(found[name]).resolve().is_relative_to(p) for p in here), f"{name} from {found[name]}"


def test_every_package_file_is_in_the_wheel(wheel_env: WheelEnv) -> None:
    # resources are read next to the modules (importlib.resources, Path(__file__)), so every
    # file of the package tree must be installed: a missing pattern in package_data shows here
    package = wheel_env.source / "shovir"
    expected = sorted(p.relative_to(package) for p in package.rglob("*")
                      if p.is_file() and not p.name.startswith(".") and "__pycache__" not in p.parts)
    missing = [str(rel) for rel in expected if not (wheel_env.purelib / "shovir" / rel).is_file()]
    assert not missing, f"in the source tree but not installed from the wheel: {missing}"
    differing = [str(rel) for rel in expected if _sha256(package / rel) != _sha256(wheel_env.purelib / "shovir" / rel)]
    assert not differing


def test_help_lists_the_commands(wheel_env: WheelEnv) -> None:
    text = wheel_env.ok(["shovir", "--help"]).stdout
    for command in ("demo", "run", "score", "preview", "data", "metrics", "examples"):
        assert command in text


def test_metrics_list_names_every_module(wheel_env: WheelEnv) -> None:
    listed = wheel_env.ok(["shovir", "metrics", "list"]).stdout.split()
    assert "flip_rate" in listed
    assert listed == _metric_names(wheel_env.source)


def test_metrics_install_writes_evaluate_cache(wheel_env: WheelEnv) -> None:
    cache = wheel_env.out / "modules"
    text = wheel_env.ok(["shovir", "metrics", "install", "--cache", str(cache)]).stdout
    for name in _metric_names(wheel_env.source):
        code = (wheel_env.source / "metrics" / name / f"{name}.py").read_bytes()
        installed = cache / "evaluate_modules" / "metrics" / f"shovir--{name}" / hashlib.sha256(code).hexdigest() / f"{name}.py"
        assert installed.read_bytes() == code
        assert str(installed) in text


def test_examples_copies_every_example(wheel_env: WheelEnv) -> None:
    dest = wheel_env.out / "ex"
    wheel_env.ok(["shovir", "examples", str(dest)])
    expected = sorted(p.name for p in (wheel_env.source / "examples").iterdir() if p.is_file())
    assert {"sweep.yaml", "mimic_medgemma.yaml", "evaluate_modules.py"} <= set(expected)
    assert sorted(p.name for p in dest.iterdir()) == expected
    for name in expected:
        assert (dest / name).read_bytes() == (wheel_env.source / "examples" / name).read_bytes()

    (dest / "sweep.yaml").write_text("edited\n")
    refused = wheel_env.run(["shovir", "examples", str(dest)])
    assert refused.returncode != 0
    assert "already exists" in refused.stderr and "--force" in refused.stderr
    assert (dest / "sweep.yaml").read_text() == "edited\n"
    wheel_env.ok(["shovir", "examples", str(dest), "--force"])
    assert (dest / "sweep.yaml").read_bytes() == (wheel_env.source / "examples" / "sweep.yaml").read_bytes()


def test_data_build_help_shows_the_builder_options(wheel_env: WheelEnv) -> None:
    text = wheel_env.ok(["shovir", "data", "build", "synthetic", "--help"]).stdout
    for option in ("--out", "--format", "--set", "n_images"):
        assert option in text


def test_data_build_synthetic_writes_an_export(wheel_env: WheelEnv) -> None:
    import pyarrow.parquet as pq

    out = wheel_env.out / "export"
    wheel_env.ok(["shovir", "data", "build", "synthetic", "--set", "n_images=4", "--out", str(out),
                  "--cache-dir", str(wheel_env.out / "datasets")])
    table = pq.read_table(out / "synthetic" / "test.parquet")
    assert table.num_rows == 4
    assert sorted(table.column("image_id").to_pylist()) == [f"syn-{i:05d}" for i in range(4)]
    report = json.loads((out / "synthetic.build_report.json").read_text())
    assert (report["read"], report["kept"], report["skipped"]) == (4, 4, {})


def test_reference_models_load_their_resources(wheel_env: WheelEnv) -> None:
    code = ("import inspect, json; from shovir.models import get_model; model = get_model('reference-grounded'); "
            "print(json.dumps({'module': inspect.getfile(type(model)), 'sha256': model.detector.sha256}))")
    found = json.loads(wheel_env.ok(["python", "-c", code]).stdout)
    assert Path(found["module"]).resolve().is_relative_to(wheel_env.purelib.resolve())
    weights = sorted((wheel_env.source / "shovir").rglob("reference_detector.npz"))
    assert [_sha256(w) for w in weights] == [found["sha256"]]


def test_tiny_sweep_runs_and_scores(wheel_env: WheelEnv) -> None:
    # the shovir preset: beyond_accuracy runs on the synthetic pairs too, but its blank/shuffle
    # metrics are VQA answer metrics, so only the baseline of a report-generation run is scored
    run = wheel_env.out / "run"
    wheel_env.ok(["shovir", "run", "--model", "reference-prior", "--dataset", "synthetic", "--dataset-option",
                  "n_images=4", "--conditions", "shovir", "--out", str(run),
                  "--cache-dir", str(wheel_env.out / "datasets"), "--quiet"])
    wheel_env.ok(["shovir", "score", str(run), "--n-resamples", "20"])
    results = json.loads((run / "results.json").read_text())
    assert results["run"]["config"]["dataset"]["n_images"] == 4
    assert results["scoring"]["n_resamples"] == 20
    # the layout under a model is still changing; the metrics of the ShoViR protocol are not
    assert {"delta_fn", "mu_f1", "flip_rate"} <= _keys(results["models"]["reference-prior"])
    assert "reference-prior" in (run / "report.md").read_text()
    assert sorted(run.glob("*.png")), "score wrote no figures (matplotlib from the wheel's environment)"


def test_hub_layouts_work_from_the_wheel(wheel_env: WheelEnv) -> None:
    out = wheel_env.out / "hub"
    wheel_env.ok(["shovir", "hub", "publish-leaderboard", "--namespace", "me", "--dry-run", "--out", str(out / "board")])
    assert sorted(p.name for p in (out / "board").iterdir()) == ["README.md", "app.py", "requirements.txt", "results"]
    wheel_env.ok(["shovir", "hub", "publish-metrics", "--namespace", "me", "--metric", "flip_rate", "--dry-run",
                  "--out", str(out / "metrics")])
    assert (out / "metrics" / "flip_rate" / "flip_rate.py").is_file()
