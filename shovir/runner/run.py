"""Run a sweep: every model over every planned call, sharded across processes, resumable.

Launch with ``shovir run`` in one process, or ``accelerate launch -m shovir.cli run ...`` on
several GPUs (or ``ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 ...`` on
CPU). Ranks receive whole images (every call showing one image goes to one rank, which decodes
it once: :mod:`shovir.runner.inputs`); each rank appends
its generations to its own JSONL file, flushed batch by batch. Generations are cached by what
determines them (:func:`shovir.runner.plan.generation_key`), so a restart — or a sweep that adds
models, conditions or samples — makes only the generations that do not exist yet. When all ranks
are done, the main process writes one predictions file per model × dataset × condition.

Run folder::

    run.json                      config, its hash, status, plan summary, per-model reuse, versions
    run.lock                      the writer's pid, host and start time (one writer per folder)
    samples.jsonl                 per sample: ids, target class, reference report, labels
    plan.jsonl                    per (sample, condition): the call (input key) that answers it
    generations/<model hash>/rank-<r>.jsonl
    predictions/<alias>/<dataset>/<condition>.jsonl

Stopping: Ctrl-C (SIGINT) or SIGTERM finishes the current batch, flushes it and exits; running
the same command again resumes. Ranks of an ``accelerate launch`` sweep stop on their own when
their launcher is gone.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import platform
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from shovir.conditions import KINDS
from shovir.data import build
from shovir.models import ModelAdapter, adapter_class
from shovir.perturb import AUTHORS_PADCHEST_BOX_SIZES, NOISE_SAMPLER, PAPER_BLANK_SIZE, Condition, EmpiricalBoxSizes, NoiseModel
from shovir.runner.config import SweepConfig
from shovir.runner.inputs import InputPipeline, shard_calls
from shovir.runner.lock import RunLock, RunLocked
from shovir.runner.plan import Plan, build_plan, generation_key, message_seed
from shovir.runner.records import GenerationRecord, Prediction
from shovir.runner.store import GenerationStore

__all__ = ["run_sweep", "load_dataset_for", "package_versions", "placement_options", "RunInterrupted", "RUN_SCHEMA",
           "SingleProcess", "IncompleteGenerations"]

RUN_SCHEMA = "2"
_SAMPLE_FIELDS = ("sample_id", "image_id", "patient_id", "study_id", "target_class", "report", "labels", "question",
                  "answer", "options", "finding", "dataset")


class RunInterrupted(RuntimeError):
    """The run was stopped (signal or lost launcher) after flushing its last batch."""


class IncompleteGenerations(RuntimeError):
    """Some generations failed for good in this run; they are retried by the next run."""


def package_versions() -> dict[str, str]:
    """Versions of the packages that shape the numbers, for results files."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("shovir", "numpy", "datasets", "torch", "transformers", "accelerate", "evaluate"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def load_dataset_for(config: SweepConfig, cache_dir: str | None = None) -> tuple[Any, Any]:
    """The sweep's dataset (the first ``config.limit`` samples when set) and its build report."""
    options = {k: v for k, v in config.dataset.items() if k != "name"}
    dataset, report = build(config.dataset["name"], cache_dir=cache_dir, **options)
    if config.limit is not None and config.limit < len(dataset):
        dataset = dataset.select(range(config.limit))
    return dataset, report


def image_digests(dataset: Any) -> dict[str, str]:
    """A digest of the encoded bytes of each distinct image (by ``image_id``), without decoding."""
    import datasets

    raw = dataset.cast_column("image", datasets.Image(decode=False)) if "image" in dataset.column_names else None
    if raw is None:
        return {}
    out: dict[str, str] = {}
    ids = dataset["image_id"]
    first: dict[str, int] = {}
    for row, image_id in enumerate(ids):
        first.setdefault(str(image_id), row)
    for image_id, row in first.items():
        value = raw[row]["image"]
        data = value.get("bytes")
        if data is None and value.get("path"):
            data = Path(value["path"]).read_bytes()
        out[image_id] = hashlib.blake2b(data or b"", digest_size=16).hexdigest()
    return out


class SingleProcess:
    """The process state of a run without accelerate: one process, main, on the CPU.

    >>> state = SingleProcess()
    >>> state.is_main_process, state.num_processes, state.process_index
    (True, 1, 0)
    """

    is_main_process = True
    num_processes = 1
    process_index = 0
    device = "cpu"

    def wait_for_everyone(self) -> None:
        """Nothing to wait for."""

    def destroy_process_group(self) -> None:
        """No process group."""


def _state() -> Any:
    """accelerate's process state when accelerate is installed, else :class:`SingleProcess`
    (refused when the environment says several processes were launched)."""
    try:
        from accelerate import PartialState
        from accelerate.utils import parse_flag_from_env
    except ImportError:
        world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        if world > 1:
            raise ImportError(f"this process is one of {world} launched ranks, but accelerate is not installed: "
                              "pip install 'shovir[models]' (torch, transformers, accelerate) for multi-process "
                              "sweeps") from None
        return SingleProcess()
    # PartialState only forms a CPU process group when asked: honour the variable that
    # `accelerate launch` users set for multi-process CPU runs
    return PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU"))


def _conditions(config: SweepConfig, dataset: Any) -> tuple[dict[tuple[str, float], Condition], Any]:
    noise = NoiseModel.authors() if config.noise == "authors" else NoiseModel()
    sizes = None
    if any(KINDS[spec.image_condition].random_boxes for spec in config.conditions):
        sizes = AUTHORS_PADCHEST_BOX_SIZES if config.box_sizes == "authors" else EmpiricalBoxSizes.from_dataset(dataset)
    out = {}
    for spec in config.conditions:
        key = (spec.image_condition, spec.image_p)
        if key not in out:
            out[key] = Condition(key[0], key[1], seed=config.seed, noise=noise, box_sizes=sizes,
                                 blank_size=PAPER_BLANK_SIZE if config.blank == "paper" else None)
    return out, sizes


def placement_options(cls: type, options: dict[str, Any], state: Any) -> dict[str, Any]:
    """Place each rank's model on its own device when the adapter takes ``device`` and the user
    gave none — the same for built-in and entry-point adapters.

    >>> class Adapter:
    ...     def __init__(self, device=None): ...
    >>> class Rank1:
    ...     device, process_index = "cuda:1", 1
    >>> placement_options(Adapter, {}, Rank1())
    {'device': 'cuda:1'}
    """
    if "device" in options or options.get("device_map") is not None or str(state.device) == "cpu":
        return options
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return options
    if "device" in parameters:
        return {**options, "device": str(state.device)}
    return options


class _StopFlag:
    """Set by SIGINT/SIGTERM (first signal: finish the batch; second: stop now) or by losing the
    launcher (torch elastic starts ranks in their own sessions, so a stopped launcher's
    ranks would otherwise keep appending)."""

    def __init__(self, launched: bool) -> None:
        self.reason: str | None = None
        self.parent = os.getppid()
        self.launched = launched
        self._previous: dict[int, Any] = {}

    def install(self) -> "_StopFlag":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.reason is not None:
            raise KeyboardInterrupt
        self.reason = signal.Signals(signum).name

    def check(self) -> str | None:
        if self.reason is None and self.launched and os.getppid() != self.parent:
            self.reason = "launcher exited"
        return self.reason

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


def _write_json(path: Path, data: Any) -> None:
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(data, indent=2, default=str))
    os.replace(temporary, path)  # readers never see half a run.json


def _broadcast_error(state: Any, message: str | None) -> str | None:
    if state.num_processes == 1:
        return message
    from accelerate.utils import broadcast_object_list

    box = [message]
    broadcast_object_list(box, from_process=0)
    return box[0]


def _log(state: Any, quiet: bool) -> Callable[[str], None]:
    def log(text: str) -> None:
        if state.is_main_process and not quiet:
            print(text, file=sys.stderr, flush=True)

    return log


def run_sweep(
    config: SweepConfig, out_dir: str | Path, cache_dir: str | None = None, progress: bool = True, workers: int = 0,
    quiet: bool = False,
) -> Path:
    """Run (or resume, or extend) the sweep into ``out_dir``; returns the run folder.

    ``workers`` background processes decode and perturb the next batches while the model
    generates (needs torch); 0 does it inline. Raises :class:`~shovir.runner.lock.RunLocked` when
    another process writes the folder and :class:`RunInterrupted` after a clean stop.
    """
    state = _state()
    out_dir = Path(out_dir)
    log = _log(state, quiet)
    lock = RunLock(out_dir)
    error = None
    if state.is_main_process:
        try:
            lock.acquire()
        except RunLocked as refused:
            error = str(refused)
    error = _broadcast_error(state, error)
    if error is not None:
        raise RunLocked(error)
    if lock.recovered is not None:
        log(f"recovered a stale lock of pid {lock.recovered.get('pid')} (that process is gone)")
    stop = _StopFlag(launched=state.num_processes > 1).install()
    try:
        _run(config, out_dir, state, cache_dir, progress and not quiet, workers, stop, log)
    finally:
        stop.restore()
        lock.release()
    state.wait_for_everyone()
    if state.num_processes > 1:
        state.destroy_process_group()  # a clean teardown; without it gloo ranks can abort at exit
    return out_dir


def _run(config: SweepConfig, out_dir: Path, state: Any, cache_dir: str | None, progress: bool, workers: int,
         stop: _StopFlag, log: Callable[[str], None]) -> Path:
    from tqdm.auto import tqdm

    dataset, report = load_dataset_for(config, cache_dir)
    metadata = dataset.remove_columns([c for c in dataset.column_names if c == "image"])[:]
    images = dataset.select_columns(["image"]) if "image" in dataset.column_names else dataset
    conditions, sizes = _conditions(config, dataset)
    perturbation = {"noise": config.noise, "box_sizes": None if sizes is None else repr(sizes),
                    "sampler": NOISE_SAMPLER, "blank": config.blank}
    first_row: dict[str, int] = {}
    for row, image_id in enumerate(metadata["image_id"]):
        first_row.setdefault(str(image_id), row)
    plan: Plan = build_plan(metadata, config.conditions, config.seed, config.prompt, image_digests(dataset), perturbation,
                            config.swap_ssim_below, lambda image_id: images[first_row[image_id]]["image"])
    run_info: dict[str, Any] = {
        "schema": RUN_SCHEMA, "status": "running", "config": config.as_dict(), "config_hash": config.hash(),
        "plan": plan.summary(), "skipped": plan.skipped, "dataset_build": report.as_dict(), "versions": package_versions(),
        "world_size": state.num_processes, "models": {},
    }
    if state.is_main_process:
        out_dir.mkdir(parents=True, exist_ok=True)
        previous = _read_run_info(out_dir)
        for derived in ("predictions", "labels"):  # rebuilt from the generations: never mix two configs
            shutil.rmtree(out_dir / derived, ignore_errors=True)
        with open(out_dir / "samples.jsonl", "w", encoding="utf-8") as handle:
            for i in range(len(dataset)):
                handle.write(json.dumps({k: metadata[k][i] for k in _SAMPLE_FIELDS if k in metadata}, ensure_ascii=False) + "\n")
        with open(out_dir / "plan.jsonl", "w", encoding="utf-8") as handle:
            handle.write("".join(json.dumps(r.as_dict(), sort_keys=True) + "\n" for r in plan.requests))
        if previous and previous.get("config_hash") != run_info["config_hash"]:
            log(f"the config changed since the last run in {out_dir} ({previous.get('config_hash')} -> "
                f"{run_info['config_hash']}): finished generations are reused, predictions are rebuilt")
        _write_json(out_dir / "run.json", run_info)
        log(f"plan: {len(plan.requests)} records from {len(plan.calls)} model calls per model "
            f"({plan.saved_calls} duplicate calls removed)")
    state.wait_for_everyone()
    dataset_name = config.dataset["name"]
    for spec in config.models:
        cls = adapter_class(spec.name)
        model: ModelAdapter = cls(**placement_options(cls, dict(spec.options), state))
        model_hash = model.config_hash()
        store = GenerationStore(out_dir / "generations" / model_hash)
        finished = store.records()
        keys = {call.key: generation_key(model_hash, call.key) for call in plan.calls}
        seeds = {call.key: message_seed(config.seed, keys[call.key]) for call in plan.calls}
        reused = sum(keys[call.key] in finished for call in plan.calls)
        if state.is_main_process:  # the scorer finds this model's generations through its hash, even mid-run
            run_info["models"][spec.alias] = {"adapter": spec.name, "model_hash": model_hash, "status": "running",
                                              "calls": len(plan.calls), "reused": reused, "config": model.config()}
            _write_json(out_dir / "run.json", run_info)
        mine = shard_calls(plan.calls, state.num_processes, state.process_index)
        pending = [call for call in mine if keys[call.key] not in finished]
        if 0 < reused < len(plan.calls):
            log(f"{spec.alias}: resuming: {reused}/{len(plan.calls)} generations done")
        elif reused == len(plan.calls) and plan.calls:
            log(f"{spec.alias}: all {reused} generations found, nothing to generate")
        bar = tqdm(total=len(mine), initial=len(mine) - len(pending), desc=spec.alias, disable=not (progress and state.is_main_process),
                   leave=True, file=sys.stderr)
        with store.writer(state.process_index) as writer:
            # a server adapter keeps max_concurrency requests in flight only if a batch holds that many
            batch_size = max(config.batch_size, int(getattr(model, "max_concurrency", 1) or 1))
            pipeline = InputPipeline(pending, seeds, images, metadata, conditions, config.prompt)
            for batch, messages in pipeline.batches(batch_size, workers):
                generations = model.generate(messages)
                if len(generations) != len(batch):
                    raise RuntimeError(f"{spec.alias} returned {len(generations)} generations for {len(batch)} inputs")
                writer.write(GenerationRecord(keys[call.key], g.text if g.ok else None, g.reasoning, g.scores,
                                              seeds[call.key], getattr(g, "error", None))
                             for call, g in zip(batch, generations))
                bar.update(len(batch))
                if stop.check():
                    break
        bar.close()
        if stop.reason:
            raise RunInterrupted(f"stopped ({stop.reason}) after flushing the last batch; run the same command again "
                                 "to resume")
        state.wait_for_everyone()
        if state.is_main_process:
            records = store.records()
            made = sum(keys[call.key] in records for call in plan.calls) - reused
            failures = store.failures()
            failed = sum(keys[call.key] in failures for call in plan.calls)
            _write_predictions(out_dir / "predictions" / spec.slug / dataset_name, plan, keys, records, spec, model, config)
            run_info["models"][spec.alias].update(status="incomplete" if failed else "complete", made=made, failed=failed)
            _write_json(out_dir / "run.json", run_info)
            log(f"{spec.alias}: {reused} generations reused, {made} made" + (f", {failed} failed" if failed else ""))
            if failed:
                first = next(failures[keys[c.key]] for c in plan.calls if keys[c.key] in failures)
                log(f"{spec.alias}: {failed} generations failed (e.g. {first}); they are recorded as failures, never "
                    "scored, and retried when you run the same command again")
        state.wait_for_everyone()
    if state.is_main_process:
        failed = sum(entry.get("failed", 0) for entry in run_info["models"].values())
        run_info["status"] = "incomplete" if failed else "complete"
        _write_json(out_dir / "run.json", run_info)
        if failed:
            raise IncompleteGenerations(f"{failed} generations failed in {out_dir}; run the same command again to retry "
                                        "them (shovir score refuses the run until they exist, or use --allow-partial)")
    return out_dir


def _read_run_info(out_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((out_dir / "run.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _write_predictions(target: Path, plan: Plan, keys: dict[str, str], records: dict[str, GenerationRecord],
                       spec: Any, model: ModelAdapter, config: SweepConfig) -> None:
    """One predictions file per condition, of the requests that have a generation (failed ones are
    left out here and counted in run.json; the scorer sees them as missing)."""
    by_condition: dict[str, list[Prediction]] = {}
    for request in plan.requests:
        record = records.get(keys[request.call])
        if record is None:
            continue
        by_condition.setdefault(request.condition, []).append(Prediction(
            sample_id=request.sample_id, image_id=request.image_id, condition=request.condition, model=spec.alias,
            text=record.text or "", target_class=request.target_class, p=request.p, with_report=request.with_report,
            donor_image_id=request.donor_image_id, seed=config.seed, adapter=spec.name, prompt_hash=model.config_hash(),
            generation=record.key, config_hash=config.hash(), reasoning=record.reasoning, scores=record.scores))
    target.mkdir(parents=True, exist_ok=True)
    for condition, predictions in by_condition.items():
        predictions.sort(key=lambda r: r.sample_id)
        (target / f"{condition}.jsonl").write_text("".join(p.to_json() + "\n" for p in predictions), encoding="utf-8")
