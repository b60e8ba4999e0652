"""A multi-node sweep: two ``accelerate launch`` launchers ("machines") on loopback, one process each.

On a cluster every node runs its own launcher (``--num_machines N --machine_rank i
--main_process_ip <node 0> --main_process_port <port>``) and all of them write the same run folder on
a shared filesystem (see ``examples/slurm_sweep.sh``). Here both "machines" are launchers on this
host that meet through torch elastic's static rendezvous on 127.0.0.1, each with its own dataset
cache (node-local scratch) and both writing one run folder. The predictions must equal a
single-process run of the same sweep, and only the main process (machine 0) takes ``run.lock``.

Self-contained: the toy model and the sweep script are copies of those of tests/test_runner.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TOY_MODEL

pytest.importorskip("torch")
pytest.importorskip("accelerate")

TIMEOUT_S = 120  # per launcher pair; a hung rendezvous fails the test instead of blocking CI


SWEEP = '''
import json, os, sys
import toy_model  # registers the model
from shovir.runner import lock as lock_module
from shovir.runner.config import SweepConfig
from shovir.runner.run import run_sweep

out, cache, takers = sys.argv[1], sys.argv[2], sys.argv[3]
acquire = lock_module.RunLock.acquire

def recorded_acquire(self):  # who takes run.lock, written outside the run folder
    with open(takers, "a") as handle:
        handle.write(json.dumps({"rank": os.environ.get("RANK", "0"), "pid": os.getpid()}) + "\\n")
    return acquire(self)

lock_module.RunLock.acquire = recorded_acquire
config = SweepConfig.from_dict({
    "dataset": {"name": "synthetic", "rows": "pairs", "n_images": 8},
    "models": [{"name": "toy"}],
    "conditions": ["baseline", "full_noise", {"name": "ro", "p": [0, 1]}, {"name": "oco", "p": [0, 0.6, 1]},
                   {"name": "doco", "p": [1]}],
    "seed": 3, "batch_size": 4})
run_sweep(config, out, cache_dir=cache, progress=False)
'''


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("multinode_scripts")
    (folder / "toy_model.py").write_text(TOY_MODEL)
    (folder / "sweep.py").write_text(SWEEP)
    return folder


def _env(scripts: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{scripts}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):  # never inherit a launcher's
        env.pop(name, None)
    return env


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``: torch elastic starts ranks in their own sessions, so killing a
    launcher's process group does not reach them."""
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        try:
            return [child.pid for child in psutil.Process(pid).children(recursive=True)]
        except psutil.Error:
            return []
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill(processes: list[subprocess.Popen]) -> None:
    """Stop the launchers and every rank below them: SIGTERM first (the agent stops its workers),
    SIGKILL for whatever is left."""
    victims = {p.pid: _descendants(p.pid) for p in processes if p.poll() is None}
    for pid in victims:
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.time() + 5
    while time.time() < deadline and any(p.poll() is None for p in processes):
        time.sleep(0.1)
    for pid, children in victims.items():
        for target in (pid, *children):
            try:
                os.killpg(target, signal.SIGKILL) if target == pid else os.kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for p in processes:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _launch_machines(scripts: Path, run: Path, caches: list[Path], takers: Path, logs: Path) -> list[tuple[int, str]]:
    """Both machines' launchers, started together; their exit codes and logs (or a failure on timeout)."""
    port = _free_port()
    processes, handles = [], []
    with contextlib.ExitStack() as files, _killing(processes):
        for machine, cache in enumerate(caches):
            command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_machines", "2",
                       "--machine_rank", str(machine), "--main_process_ip", "127.0.0.1", "--main_process_port", str(port),
                       "--num_processes", "2", "--mixed_precision", "no", "--dynamo_backend", "no",
                       "--rdzv_backend", "static", str(scripts / "sweep.py"), str(run), str(cache), str(takers)]
            handle = files.enter_context(open(logs / f"machine-{machine}.log", "w+"))
            handles.append(handle)
            processes.append(subprocess.Popen(command, env=_env(scripts), cwd=scripts, stdout=handle,
                                              stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.time() + TIMEOUT_S
        while time.time() < deadline and any(p.poll() is None for p in processes):
            if any(p.poll() not in (None, 0) for p in processes):
                break  # one machine failed: the other would wait for it in a collective until the timeout
            time.sleep(0.2)
        hung = [machine for machine, p in enumerate(processes) if p.poll() is None]
        if hung:
            _kill(processes)
        out = []
        for handle, p in zip(handles, processes):
            handle.seek(0)
            out.append((p.returncode, handle.read()))
        if hung:
            pytest.fail(f"machine(s) {hung} killed (still running after {TIMEOUT_S} s or after the other failed):\n"
                        + "\n".join(f"--- machine {m} ---\n{log[-3000:]}" for m, (_, log) in enumerate(out)))
        return out


@contextlib.contextmanager
def _killing(processes: list[subprocess.Popen]):
    """Whatever happens (a failed assertion, KeyboardInterrupt), no launcher or rank outlives the test."""
    try:
        yield
    finally:
        _kill(processes)


def _predictions(run: Path) -> dict[str, list[dict]]:
    return {str(path.relative_to(run)): [json.loads(line) for line in path.read_text().splitlines()]
            for path in sorted((run / "predictions").rglob("*.jsonl"))}


def test_two_machines_give_the_same_predictions_as_one_process(scripts, tmp_path):
    single = tmp_path / "single"
    result = subprocess.run([sys.executable, str(scripts / "sweep.py"), str(single / "run"), str(single / "cache"),
                             str(tmp_path / "single-lock-takers.jsonl")], env=_env(scripts), cwd=scripts, capture_output=True,
                            text=True, timeout=TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stderr[-3000:]

    shared = tmp_path / "shared"  # the cluster's shared filesystem: one run folder for both machines
    shared.mkdir()
    run, takers = shared / "run", shared / "lock-takers.jsonl"
    caches = [tmp_path / f"node{machine}-scratch" / "cache" for machine in (0, 1)]  # node-local dataset caches
    outcomes = _launch_machines(scripts, run, caches, takers, tmp_path)
    _assert_clean_exits(outcomes)

    ranks = sorted(p.name for p in (run / "generations").rglob("rank-*.jsonl"))
    assert ranks == ["rank-0.jsonl", "rank-1.jsonl"]
    assert all(p.stat().st_size > 0 for p in (run / "generations").rglob("rank-*.jsonl"))
    assert json.loads((run / "run.json").read_text())["world_size"] == 2
    assert json.loads((run / "run.json").read_text())["status"] == "complete"
    predictions = _predictions(run)
    assert predictions and predictions == _predictions(single / "run")  # every field, config hash included
    # only the main process (global rank 0, on machine 0) took the lock, and it released it
    assert [entry["rank"] for entry in map(json.loads, takers.read_text().splitlines())] == ["0"]
    assert not (run / "run.lock").exists()

    # resubmitting the same job resumes: every generation is reused, nothing is appended, and
    # machine 0 takes the lock again (released by the first job)
    sizes = {p.name: p.stat().st_size for p in (run / "generations").rglob("rank-*.jsonl")}
    outcomes = _launch_machines(scripts, run, caches, takers, tmp_path)
    _assert_clean_exits(outcomes)
    assert "generations reused, 0 made" in outcomes[0][1], outcomes[0][1][-3000:]
    assert {p.name: p.stat().st_size for p in (run / "generations").rglob("rank-*.jsonl")} == sizes
    assert _predictions(run) == _predictions(single / "run")
    assert [entry["rank"] for entry in map(json.loads, takers.read_text().splitlines())] == ["0", "0"]
    assert not (run / "run.lock").exists()


def _assert_clean_exits(outcomes: list[tuple[int, str]]) -> None:
    for machine, (code, log) in enumerate(outcomes):
        assert code == 0, f"machine {machine} exited {code}:\n{log[-3000:]}"
        # the second machine never takes run.lock, so it is never refused by it
        assert "RunLocked" not in log and "is being written by" not in log, log[-3000:]
