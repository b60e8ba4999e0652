"""Run a sweep: every model over every planned call, sharded across processes, resumable.

Launch with ``shovir run`` in one process, or ``accelerate launch -m shovir.cli run ...`` on
several GPUs (or ``ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 ...`` on
CPU). Calls are split by stride (call ``i`` goes to rank ``i % world_size``); each rank appends
its records to its own JSONL file, flushed batch by batch; a restart skips every finished record.
When all ranks are done, the main process merges the records into one file per
model × dataset × condition under ``predictions/``.

Run folder::

    run.json                      config, config hash, plan summary, build report, versions
    samples.jsonl                 per sample: ids, target class, reference report, labels
    records/<model>/<hash>/rank-<r>.jsonl
    predictions/<model>/<dataset>/<condition>.jsonl
"""

from __future__ import annotations

import inspect
import json
import platform
from pathlib import Path
from typing import Any

from shovir.data import build
from shovir.models import Message, get_model
from shovir.perturb import AUTHORS_PADCHEST_BOX_SIZES, Condition, EmpiricalBoxSizes, NoiseModel
from shovir.runner.config import SweepConfig
from shovir.runner.plan import Call, Plan, build_plan
from shovir.runner.store import RecordWriter, merge_records, read_records, record_key

__all__ = ["run_sweep", "load_dataset_for", "package_versions"]

_SAMPLE_FIELDS = ("sample_id", "image_id", "patient_id", "study_id", "target_class", "report", "labels", "question",
                  "answer", "options", "finding")


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
    options = {k: v for k, v in config.dataset.items() if k != "name"}
    return build(config.dataset["name"], cache_dir=cache_dir, **options)


def _state() -> Any:
    from accelerate import PartialState
    from accelerate.utils import parse_flag_from_env

    # PartialState only forms a CPU process group when asked: honour the variable that
    # `accelerate launch` users set for multi-process CPU runs
    return PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU"))


def _conditions(config: SweepConfig, dataset: Any) -> dict[tuple[str, float], Condition]:
    noise = NoiseModel.authors() if config.noise == "authors" else NoiseModel()
    sizes = None
    if any(spec.name in ("ro", "ro_area") for spec in config.conditions):
        sizes = AUTHORS_PADCHEST_BOX_SIZES if config.box_sizes == "authors" else EmpiricalBoxSizes.from_dataset(dataset)
    out = {}
    for spec in config.conditions:
        name = spec.image_condition
        if name in ("shuffle", "swap"):
            name = "baseline"  # the donor image itself is shown unperturbed
        key = (name, spec.p if name != "baseline" else 0.0)
        if key not in out:
            out[key] = Condition(name, key[1] if name != "blank" else 1.0, seed=config.seed, noise=noise, box_sizes=sizes)
    return out


def _messages(batch: list[Call], dataset: Any, conditions: dict, prompt: str | None) -> list[Message]:
    rows = sorted({call.row for call in batch} | {call.donor_row for call in batch if call.donor_row is not None})
    fetched = dataset[rows]
    position = {row: i for i, row in enumerate(rows)}
    columns = list(fetched)
    messages = []
    for call in batch:
        row = {name: fetched[name][position[call.row]] for name in columns}
        source = row if call.donor_row is None else {name: fetched[name][position[call.donor_row]] for name in columns}
        condition = conditions[(call.image_condition if call.image_condition not in ("shuffle", "swap") else "baseline",
                                call.p if call.image_condition not in ("baseline", "shuffle", "swap") else 0.0)]
        image, _ = condition.apply(source["image"], source)
        messages.append(Message(images=[image], prompt=row.get("question") or prompt,
                                report=row.get("report") if call.with_report else None, options=row.get("options") or None))
    return messages


def _identity(item: Any) -> Any:
    return item


class _Batches:
    """Batches of (calls, messages), prepared by ``workers`` background processes when asked.

    Decoding and perturbing images is CPU work independent of the model: with workers it runs
    ahead of generation (a torch DataLoader over batches), otherwise inline.
    """

    def __init__(self, calls: list[Call], batch_size: int, dataset: Any, conditions: dict, prompt: str | None) -> None:
        self.batches = [calls[i : i + batch_size] for i in range(0, len(calls), batch_size)]
        self.dataset, self.conditions, self.prompt = dataset, conditions, prompt

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> tuple[list[Call], list[Message]]:
        batch = self.batches[index]
        return batch, _messages(batch, self.dataset, self.conditions, self.prompt)

    def iterate(self, workers: int) -> Any:
        if workers <= 0 or len(self) < 2:
            return (self[i] for i in range(len(self)))
        from torch.utils.data import DataLoader

        return iter(DataLoader(self, batch_size=None, num_workers=min(workers, len(self)), prefetch_factor=4,
                               collate_fn=_identity))


def _model_store(out_dir: Path, config: SweepConfig, model: Any, slug: str) -> Path:
    return out_dir / "records" / slug / f"{config.hash()}-{model.config_hash()}"


def run_sweep(
    config: SweepConfig, out_dir: str | Path, cache_dir: str | None = None, progress: bool = True, workers: int = 0
) -> Path:
    """Run (or resume) the sweep into ``out_dir``; returns the run folder.

    ``workers`` background processes decode and perturb the next batches while the model
    generates (needs torch); 0 does it inline.
    """
    from tqdm.auto import tqdm

    state = _state()
    out_dir = Path(out_dir)
    dataset, report = load_dataset_for(config, cache_dir)
    metadata = dataset.remove_columns([c for c in dataset.column_names if c == "image"])[:]
    plan: Plan = build_plan(metadata, config.conditions, config.seed, config.prompt)
    if state.is_main_process:
        out_dir.mkdir(parents=True, exist_ok=True)
        with open(out_dir / "samples.jsonl", "w", encoding="utf-8") as handle:
            for i in range(len(dataset)):
                handle.write(json.dumps({k: metadata[k][i] for k in _SAMPLE_FIELDS if k in metadata}, ensure_ascii=False) + "\n")
        run_info = {"config": config.as_dict(), "config_hash": config.hash(), "plan": plan.summary(),
                    "skipped": plan.skipped, "dataset_build": report.as_dict(), "versions": package_versions(),
                    "world_size": state.num_processes}
        (out_dir / "run.json").write_text(json.dumps(run_info, indent=2, default=str))
        print(f"plan: {len(plan.requests)} records from {len(plan.calls)} model calls per model "
              f"({plan.saved_calls} duplicate calls removed)")
    state.wait_for_everyone()
    conditions = _conditions(config, dataset)
    dataset_name = config.dataset["name"]
    for spec in config.models:
        options = dict(spec.options)
        model = get_model(spec.name, **_with_device(spec.name, options, state))
        store = _model_store(out_dir, config, model, spec.slug)
        done = {record_key(r) for r in read_records(sorted(store.glob("rank-*.jsonl")))} if store.exists() else set()
        mine = [call for i, call in enumerate(plan.calls) if i % state.num_processes == state.process_index]
        pending = [call for call in mine if any(r.key not in done for r in call.requests)]
        bar = tqdm(total=len(mine), initial=len(mine) - len(pending), desc=f"{spec.name} [rank {state.process_index}]",
                   disable=not progress, position=state.process_index, leave=True)
        batch_size = config.batch_size
        with RecordWriter(store / f"rank-{state.process_index}.jsonl") as writer:
            for batch, messages in _Batches(pending, batch_size, dataset, conditions, config.prompt).iterate(workers):
                generations = model.generate(messages)
                if len(generations) != len(batch):
                    raise RuntimeError(f"{spec.name} returned {len(generations)} generations for {len(batch)} inputs")
                records = []
                for call, generation in zip(batch, generations):
                    for request in call.requests:
                        records.append({
                            "sample_id": request.sample_id, "image_id": request.image_id,
                            "target_class": request.target_class, "condition": request.condition, "p": request.p,
                            "with_report": request.with_report, "donor_image_id": call.donor_image_id,
                            "seed": config.seed, "model": spec.name, "prompt_hash": model.config_hash(),
                            "call": call.key, "text": generation.text, "reasoning": generation.reasoning,
                            "scores": generation.scores,
                        })
                writer.write(records)
                bar.update(len(batch))
        bar.close()
        state.wait_for_everyone()
        if state.is_main_process:
            merged = merge_records(sorted(store.glob("rank-*.jsonl")), [r.key for r in plan.requests])
            by_condition: dict[str, list[dict[str, Any]]] = {}
            for record in merged.values():
                by_condition.setdefault(record["condition"], []).append(record)
            target = out_dir / "predictions" / spec.slug / dataset_name
            target.mkdir(parents=True, exist_ok=True)
            for condition, records in by_condition.items():
                records.sort(key=lambda r: r["sample_id"])
                with open(target / f"{condition}.jsonl", "w", encoding="utf-8") as handle:
                    handle.write("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records))
        state.wait_for_everyone()
    if state.num_processes > 1:
        state.destroy_process_group()  # a clean teardown; without it gloo ranks can abort at exit
    return out_dir


def _with_device(name: str, options: dict[str, Any], state: Any) -> dict[str, Any]:
    """Place each rank's model on its own device when the adapter takes ``device``."""
    from shovir.models import MODELS

    if "device" in options or name not in MODELS:
        return options
    import importlib

    module_name, class_name = MODELS[name].split(":")
    adapter_class = getattr(importlib.import_module(module_name), class_name)
    if "device" in inspect.signature(adapter_class.__init__).parameters and str(state.device) != "cpu":
        return {**options, "device": str(state.device)}
    return options
