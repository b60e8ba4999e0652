"""The input pipeline: image-by-image plans, one decode per chunk, whole images per rank, and the
same bytes as perturbing a freshly decoded image for every call."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from shovir.conditions import expand_conditions
from shovir.data import build
from shovir.perturb import AUTHORS_PADCHEST_BOX_SIZES, Condition
from shovir.protocols import presets
from shovir.runner.inputs import InputPipeline, chunk_calls, shard_calls
from shovir.runner.plan import build_plan


class CountingImages:
    """The image column of a dataset, counting how many images were decoded."""

    def __init__(self, dataset):
        self.dataset, self.decoded = dataset.select_columns(["image"]), 0

    def __getitem__(self, row):
        self.decoded += 1
        return self.dataset[row]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    dataset, _ = build("synthetic", rows="pairs", n_images=4, cache_dir=str(tmp_path_factory.mktemp("cache")))
    specs = expand_conditions("shovir", presets())
    rows = dataset.remove_columns(["image"])[:]
    plan = build_plan(rows, specs, seed=3)
    conditions = {(s.image_condition, s.image_p): Condition(s.image_condition, s.image_p, seed=3,
                                                            box_sizes=AUTHORS_PADCHEST_BOX_SIZES) for s in specs}
    return dataset, rows, plan, conditions


def test_the_plan_lists_calls_image_by_image(sweep):
    dataset, _, plan, _ = sweep
    shown = [call.image_row for call in plan.calls]
    runs = [row for i, row in enumerate(shown) if i == 0 or shown[i - 1] != row]
    assert len(runs) == len(set(runs)) == len(set(dataset["image_id"]))  # one contiguous run per image
    # the full ShoViR set of one image: baseline + full noise + 15 box calls per (image, class) pair
    # (OCO, RO, DOCO at p = 0.2 .. 1), less DOCO's 5 on pairs without context boxes
    pairs_per_row = Counter(dataset["image_id"])
    first_rows = {image_id: dataset["image_id"].index(image_id) for image_id in pairs_per_row}
    without_context = Counter(image for image, boxes in zip(dataset["image_id"], dataset["context_boxes"]) if not boxes)
    assert 0 < sum(without_context.values()) < len(dataset)  # the fixture has both kinds of pair
    for image_id, pairs in pairs_per_row.items():
        assert shown.count(first_rows[image_id]) == 2 + 15 * pairs - 5 * without_context[image_id]
    assert plan.skipped["doco_without_context_boxes"] == [
        s for s, boxes in zip(dataset["sample_id"], dataset["context_boxes"]) if not boxes]
    assert plan.samples_per_kind()["doco"] == len(dataset) - sum(without_context.values())
    assert plan.samples_per_kind()["oco"] == plan.samples_per_kind()["ro"] == len(dataset)


def test_each_chunk_decodes_its_image_once_and_matches_per_call_perturbation(sweep):
    dataset, rows, plan, conditions = sweep
    images = CountingImages(dataset)
    seeds = {call.key: i for i, call in enumerate(plan.calls)}
    pipeline = InputPipeline(plan.calls, seeds, images, rows, conditions, prompt="Findings:", chunk_size=32)
    batches = list(pipeline.batches(batch_size=5))
    assert images.decoded == len(pipeline) == len(chunk_calls(plan.calls, 32)) < len(plan.calls) / 10
    calls = [call for batch, _ in batches for call in batch]
    messages = [message for _, batch in batches for message in batch]
    assert [call.key for call in calls] == [call.key for call in plan.calls]
    assert [len(batch) for batch, _ in batches] == [5] * (len(plan.calls) // 5) + ([len(plan.calls) % 5] if len(plan.calls) % 5 else [])
    for call, message in zip(calls, messages):
        source = {name: values[call.source_row] for name, values in rows.items()}
        fresh = dataset[call.source_row]["image"]  # decoded again, perturbed alone: the old per-call path
        expected, _ = conditions[(call.image_condition, call.p)].apply(fresh, source)
        assert np.array_equal(np.asarray(message.images[0]), np.asarray(expected)), (call.image_condition, call.p)
        assert message.seed == seeds[call.key] and message.prompt == "Findings:"


def test_ranks_receive_whole_images_and_balanced_loads(sweep):
    _, _, plan, _ = sweep
    for world in (1, 2, 3):
        shards = [shard_calls(plan.calls, world, rank) for rank in range(world)]
        assert sorted(call.key for shard in shards for call in shard) == sorted(call.key for call in plan.calls)
        owners = {}
        for rank, shard in enumerate(shards):
            for call in shard:
                assert owners.setdefault(call.image_row, rank) == rank  # an image is decoded by one rank
        largest_image = max(Counter(call.image_row for call in plan.calls).values())
        sizes = [len(shard) for shard in shards]
        assert max(sizes) - min(sizes) <= largest_image
    with pytest.raises(ValueError, match="rank must be in"):
        shard_calls(plan.calls, 2, 2)


def test_bad_sizes_are_refused(sweep):
    _, rows, plan, conditions = sweep
    with pytest.raises(ValueError, match="chunk_size must be at least 1"):
        chunk_calls(plan.calls, 0)
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        next(InputPipeline(plan.calls, {}, None, rows, conditions, None).batches(0))


def test_blank_mode_and_swap_ssim_guard_are_sweep_options():
    from shovir.conditions import ConditionSpec
    from shovir.runner.config import SweepConfig

    base = {"dataset": "synthetic", "models": ["reference-prior"], "conditions": "beyond_accuracy"}
    assert SweepConfig.from_dict(base).blank == "paper"
    assert SweepConfig.from_dict({**base, "blank": "input", "swap_ssim_below": 0.9}).swap_ssim_below == 0.9
    for key, bad in (("blank", "small"), ("swap_ssim_below", 1.5), ("swap_ssim_below", True), ("swap_ssim_below", "0.9")):
        with pytest.raises(ValueError, match=f"sweep config: {key} must be"):
            SweepConfig.from_dict({**base, key: bad})
    # the blank image's form keys its generations: a run that changes it never reuses the other's
    columns = {"image_id": ["a"], "sample_id": ["a"]}
    keys = {mode: build_plan(columns, [ConditionSpec("blank")], 0, perturbation={"blank": mode}).calls[0].key
            for mode in ("paper", "input")}
    assert keys["paper"] != keys["input"]

    # ModaLens §2: no swap pair may exceed SSIM 0.9. Study b is a copy of a (SSIM 1): with the
    # guard, a is never paired with b; without it, some seeds pair them.
    rng = np.random.default_rng(0)
    pixels = {"a": rng.integers(0, 256, (64, 64), dtype=np.uint8), "c": rng.integers(0, 256, (64, 64), dtype=np.uint8)}
    pixels["b"] = pixels["a"].copy()
    columns = {"image_id": ["a", "b", "c"], "sample_id": ["a", "b", "c"], "patient_id": ["p"] * 3,
               "study_id": ["s1", "s2", "s3"], "labels": [[0] * 13 + [1], [0, 1] + [0] * 12, [0, 0, 1] + [0] * 11]}

    def donor_of_a(seed, guard):
        plan = build_plan(columns, [ConditionSpec("swap")], seed, swap_ssim_below=guard, load_image=pixels.__getitem__)
        return next(call.donor_image_id for call in plan.calls if call.row == 0)

    assert {donor_of_a(seed, 0.9) for seed in range(8)} == {"c"}
    assert "b" in {donor_of_a(seed, None) for seed in range(8)}
