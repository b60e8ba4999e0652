"""Fit the patch detector of the reference models and print their known-answer calibration.

    python -m shovir.calibration.fit              # fit, write the resources, evaluate
    python -m shovir.calibration.fit --evaluate   # evaluate the shipped resources only

Fitting needs PyTorch (``pip install torch``; about 15 minutes on 2 CPU cores) and writes
``shovir/calibration/resources/reference_detector.{npz,json}``, the only fitted numbers of
:mod:`shovir.calibration.reference`. It never sees the evaluation seed (0, the demo's data):

1. **Render** ``--train-images`` phantoms of seed 1000 (training) and ``--threshold-images`` of
   seed 1001 (thresholds), each with its *evidence*: for every class, the mean |Δ| per 4×4-pixel
   block between the image and the same image rendered without that class's findings (same
   anatomy and acquisition noise; the phantom's findings are exactly zero outside their boxes).
2. **Augment**: ``--variants`` versions of each training image, the clean one and matched-noise
   occlusions (:func:`shovir.perturb.occlude`, the paper's noise model and for 20 % the authors'
   blurred one): 50 % the boxes of a random subset of its findings (OCO-like), 45 % 1-5 random
   boxes anywhere with sizes of real boxes, 5 % the whole image; p = 1 for 60 %, else one of
   0.2, 0.4, 0.6, 0.8. A block's evidence becomes ``Δ · max(0, 1 − 2·p·covered)``: findings under
   half-strength noise or more are gone.
3. **Train** the network of :class:`shovir.calibration.reference.PatchDetector` (deterministic
   PyTorch on CPU): a cell (8×8 pixels) is a positive example of a class where its evidence is
   ≥ 3 grey levels, a negative one below 0.75 (in between: ignored); loss = weighted per-cell
   binary cross-entropy + binary cross-entropy of each class's best cell against "the image
   shows this class". Weights are exported as float32 ``.npz`` (no pickle).
4. **Thresholds** on the seed-1001 set (numpy inference, as shipped): the clean images, plus for
   every (image, class with boxes) the image with that class's boxes occluded (OCO, p = 1; the
   class's evidence is gone, so a report of it there is a false positive). The *positive*
   threshold maximises the class's F1 against the reference codes (1 = positive) with
   precision ≥ 0.5, else the class is never reported (``null``; Fracture, as shipped); the
   *uncertain* threshold (≤ positive) maximises F1 of "positive or uncertain" against "present"
   (codes 1 or 3), except for Support Devices, which the report templates never hedge.
5. **Evaluate** on the demo data (synthetic, 200 images, seed 0, per-(image, class) rows, p = 1,
   default noise, RO box sizes from the dataset): FR_OCO, FR_DOCO, ΔFN, F1-14/F1-5 of the three
   models, and milliseconds per image.

Every step is seeded, so a rerun on the same platform and PyTorch version writes the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np

from shovir import labels as L
from shovir.data import phantom
from shovir.perturb import NoiseModel, occlude, sample_rng

RESOURCES = Path(__file__).resolve().with_name("resources")

TRAIN_SEED, THRESHOLD_SEED, EVALUATION_SEED = 1000, 1001, 0
CLASSES = phantom.LOCALIZED_FINDINGS
T_POSITIVE, T_NEGATIVE = 3.0, 0.75
SIZE, BLOCK, GRID = 320, 4, 80


# ----------------------------------------------------------------------------------------------
# 1. Rendering with per-class evidence
# ----------------------------------------------------------------------------------------------


def render_with_evidence(job: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, ...]]]:
    """Image, evidence (12, 80, 80) uint8, 14 codes and boxes ``(class, x0, y0, x1, y1)`` of one case."""
    seed, index = job
    case = phantom.sample_case(index, seed=seed)
    fields = phantom._render_anatomy(case.anatomy, SIZE)
    attenuation = fields.attenuation.copy()
    deltas = []
    for spec in case.specs:
        (y0, y1, x0, x1), delta = phantom._finding_delta(fields, spec)
        deltas.append((spec.name, (y0, y1, x0, x1), delta))
        attenuation[y0:y1, x0:x1] += delta
    image = phantom._to_image(fields, attenuation, phantom.stable_rng(seed, "noise", index))
    evidence = np.zeros((len(CLASSES), GRID, GRID), np.uint8)
    for j, name in enumerate(CLASSES):
        mine = [d for d in deltas if d[0] == name]
        if not mine:
            continue
        without = attenuation.copy()
        for _, (y0, y1, x0, x1), delta in mine:
            without[y0:y1, x0:x1] -= delta
        other = phantom._to_image(fields, without, phantom.stable_rng(seed, "noise", index))
        change = np.abs(image.astype(np.float32) - other.astype(np.float32))
        evidence[j] = np.clip(np.rint(change.reshape(GRID, BLOCK, GRID, BLOCK).mean(axis=(1, 3))), 0, 255)
    boxes = [(L.class_index(name), x0, y0, x1, y1) for name, (y0, y1, x0, x1), _ in deltas]
    return image, evidence, np.array(case.labels, np.int8), boxes


def render_set(seed: int, n: int, workers: int) -> dict[str, Any]:
    """Render ``n`` cases of ``seed`` (checked against :func:`shovir.data.phantom.render_case`)."""
    with Pool(workers) as pool:
        results = pool.map(render_with_evidence, [(seed, i) for i in range(n)], chunksize=8)
    reference, _ = phantom.render_case(phantom.sample_case(0, seed=seed), size=SIZE)
    if not np.array_equal(reference, results[0][0]):
        raise RuntimeError("render_with_evidence no longer reproduces phantom.render_case")
    return {
        "images": np.stack([r[0] for r in results]),
        "evidence": np.stack([r[1] for r in results]),
        "labels": np.stack([r[2] for r in results]),
        "boxes": [np.array(r[3], np.int64).reshape(-1, 5) for r in results],
    }


# ----------------------------------------------------------------------------------------------
# 2. Augmentation
# ----------------------------------------------------------------------------------------------

_AUG: dict[str, Any] = {}


def _init_augment(images: np.ndarray, evidence: np.ndarray, boxes: list[np.ndarray], seed: int) -> None:
    sizes = np.concatenate([b[:, 3:5] - b[:, 1:3] for b in boxes if len(b)])
    _AUG.update(images=images, evidence=evidence, boxes=boxes, sizes=sizes, seed=seed)


def augment_one(job: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Variant ``k`` of training image ``i`` and its evidence after the occlusion."""
    i, k = job
    image, evidence, boxes = _AUG["images"][i], _AUG["evidence"][i], _AUG["boxes"][i]
    if k == 0:
        return image, evidence
    rng = np.random.default_rng([_AUG["seed"], i, k])
    u = rng.random()
    rects: list[tuple[int, int, int, int]] = []
    if u < 0.5 and len(boxes):
        classes = np.unique(boxes[:, 0])
        chosen = rng.choice(classes, size=int(rng.integers(1, len(classes) + 1)), replace=False)
        rects = [tuple(int(v) for v in b[1:]) for b in boxes if b[0] in chosen]
    elif u < 0.95:
        for _ in range(int(rng.integers(1, 6))):
            w, h = (int(v) for v in _AUG["sizes"][int(rng.integers(len(_AUG["sizes"])))])
            x0, y0 = int(rng.integers(0, SIZE - w + 1)), int(rng.integers(0, SIZE - h + 1))
            rects.append((x0, y0, x0 + w, y0 + h))
    else:
        rects = [(0, 0, SIZE, SIZE)]
    p = 1.0 if rng.random() < 0.6 else float(rng.choice([0.2, 0.4, 0.6, 0.8]))
    model = NoiseModel() if rng.random() < 0.8 else NoiseModel.authors()
    out = occlude(image, rects, p, rng, model)
    covered = np.zeros((SIZE, SIZE), np.float32)
    for x0, y0, x1, y1 in rects:
        covered[y0:y1, x0:x1] = 1.0
    covered = covered.reshape(GRID, BLOCK, GRID, BLOCK).mean(axis=(1, 3))
    keep = np.maximum(0.0, 1.0 - 2.0 * p * covered)
    return out, np.clip(np.rint(evidence * keep[None]), 0, 255).astype(np.uint8)


def augment_set(train: dict[str, Any], variants: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    jobs = [(i, k) for i in range(len(train["images"])) for k in range(variants)]
    args = (train["images"], train["evidence"], train["boxes"], TRAIN_SEED)
    with Pool(workers, initializer=_init_augment, initargs=args) as pool:
        results = pool.map(augment_one, jobs, chunksize=32)
    return np.stack([r[0] for r in results]), np.stack([r[1] for r in results])


# ----------------------------------------------------------------------------------------------
# 3. Training
# ----------------------------------------------------------------------------------------------


def make_net(stem: int, hidden: int):
    import torch
    import torch.nn.functional as F

    class Net(torch.nn.Module):
        """The PatchDetector network in PyTorch (same layers, same order of input channels)."""

        def __init__(self) -> None:
            super().__init__()
            self.stem = torch.nn.Conv2d(1, stem, 8, stride=4, padding=2)
            self.conv2 = torch.nn.Conv2d(stem + 3, hidden, 3, stride=2, padding=1)
            self.conv3 = torch.nn.Conv2d(hidden, hidden, 3, padding=1)
            self.head = torch.nn.Conv2d(hidden, len(CLASSES), 1)
            grid = torch.linspace(-1, 1, GRID)
            rows, cols = torch.meshgrid(grid, grid, indexing="ij")
            self.register_buffer("coords", torch.stack([rows, cols])[None], persistent=False)

        def forward(self, images):
            x = images.float()[:, None] / 255.0
            energy = torch.zeros_like(x)
            d = x[..., :, 1:] - x[..., :, :-1]
            energy[..., :, :-1] = d * d
            d = x[..., 1:, :] - x[..., :-1, :]
            energy[..., :-1, :] += d * d
            energy = (torch.log(F.avg_pool2d(energy, BLOCK) + 1e-4) + 6.0) * 0.5
            z = torch.cat([F.relu(self.stem(x - 0.5)), energy, self.coords.expand(x.shape[0], -1, -1, -1)], 1)
            z = F.relu(self.conv2(z))
            z = F.relu(self.conv3(z))
            return self.head(z)

    return Net()


def cell_targets(evidence: np.ndarray) -> tuple[np.ndarray, ...]:
    """(B, 12, 80, 80) block evidence → positive / negative cells (B, 12, 40, 40) and image labels."""
    cells = evidence.reshape(evidence.shape[0], len(CLASSES), GRID // 2, 2, GRID // 2, 2).mean(axis=(3, 5))
    best = cells.reshape(cells.shape[0], len(CLASSES), -1).max(axis=2)
    return cells >= T_POSITIVE, cells < T_NEGATIVE, best >= T_POSITIVE, best < T_NEGATIVE


def train(images: np.ndarray, evidence: np.ndarray, args: argparse.Namespace):
    import torch
    import torch.nn.functional as F

    torch.manual_seed(TRAIN_SEED)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    net = make_net(args.stem, args.hidden)
    positives = np.zeros(len(CLASSES))
    for start in range(0, len(evidence), 512):
        positives += cell_targets(evidence[start:start + 512].astype(np.float32))[0].sum(axis=(0, 2, 3))
    class_weight = np.clip(np.sqrt(np.median(positives) / np.maximum(positives, 1)), 0.5, 3.0)
    pos_weight = torch.tensor(args.pos_weight * class_weight, dtype=torch.float32)[None, :, None, None]
    optimizer = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=1e-4)
    steps_per_epoch = len(images) // args.batch
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, args.lr, total_steps=args.epochs * steps_per_epoch, pct_start=0.15)
    rng = np.random.default_rng(TRAIN_SEED)
    for epoch in range(args.epochs):
        order, start_time, total = rng.permutation(len(images)), time.time(), 0.0
        for step in range(steps_per_epoch):
            idx = np.sort(order[step * args.batch:(step + 1) * args.batch])
            pos, neg, image_pos, image_neg = (torch.from_numpy(a) for a in cell_targets(evidence[idx].astype(np.float32)))
            logits = net(torch.from_numpy(images[idx]))
            weight = pos.float() * pos_weight + neg.float()
            cell_loss = F.binary_cross_entropy_with_logits(logits, pos.float(), weight=weight, reduction="sum") / weight.sum()
            best = logits.flatten(2).max(dim=2).values
            image_weight = (image_pos | image_neg).float()
            image_loss = F.binary_cross_entropy_with_logits(best, image_pos.float(), weight=image_weight,
                                                            reduction="sum") / image_weight.sum().clamp(min=1)
            loss = cell_loss + image_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total += float(loss.detach())
        print(f"  epoch {epoch + 1}/{args.epochs}: loss {total / steps_per_epoch:.4f} ({time.time() - start_time:.0f} s)", flush=True)
    return net


def export(net, path: Path) -> str:
    arrays = {key: value.detach().cpu().numpy().astype(np.float32) for key, value in net.state_dict().items()}
    np.savez(path, **arrays)
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------------------------
# 4. Thresholds
# ----------------------------------------------------------------------------------------------


def _best_threshold(scores: np.ndarray, truth: np.ndarray, below: float = np.inf, min_precision: float = 0.5) -> tuple[float | None, float]:
    """The midpoint threshold (≤ ``below``) with the highest F1 at precision ≥ ``min_precision``."""
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], truth[order].astype(np.float64)
    tp, fp = np.cumsum(y), np.cumsum(1 - y)
    last = np.r_[s[1:] != s[:-1], True]  # cut after the last of equal scores
    f1 = 2 * tp / (tp + fp + y.sum())
    precision = tp / (tp + fp)
    cut = (s + np.r_[s[1:], s[-1] - 1.0]) / 2
    ok = last & (precision >= min_precision) & (cut <= below)
    if not ok.any() or y.sum() == 0:
        return None, 0.0
    k = int(np.argmax(np.where(ok, f1, -1.0)))
    return float(np.float32(cut[k])), float(f1[k])


def fit_thresholds(detector, data: dict[str, Any], seed: int) -> tuple[dict, dict, dict]:
    clean = np.stack([detector.logits(image).reshape(-1, len(CLASSES)).max(axis=0) for image in data["images"]])
    scores = {c: [clean[:, j]] for j, c in enumerate(CLASSES)}
    positive = {c: [data["labels"][:, L.class_index(c)] == L.POSITIVE] for c in CLASSES}
    present = {c: [np.isin(data["labels"][:, L.class_index(c)], (L.POSITIVE, L.UNCERTAIN))] for c in CLASSES}
    for i, (image, boxes) in enumerate(zip(data["images"], data["boxes"])):
        for class_index in np.unique(boxes[:, 0]):
            name = L.CLASSES[int(class_index)]
            rects = [tuple(int(v) for v in b[1:]) for b in boxes if b[0] == class_index]
            occluded = occlude(image, rects, 1.0, sample_rng(seed, f"syn-{i:05d}", "oco", name))
            j = CLASSES.index(name)
            scores[name].append(detector.logits(occluded)[:, :, j].max(keepdims=True).ravel())
            positive[name].append(np.zeros(1, bool))
            present[name].append(np.zeros(1, bool))
    t_positive, t_uncertain, report = {}, {}, {}
    for c in CLASSES:
        s, y1, y13 = (np.concatenate(v[c]) for v in (scores, positive, present))
        t1, f1 = _best_threshold(s, y1)
        t0, f13 = _best_threshold(s, y13, below=t1 if t1 is not None else np.inf)
        if t1 is None or c == "Support Devices":  # never reported / the templates never hedge a device
            t0 = t1
        t_positive[c], t_uncertain[c] = t1, (t0 if t0 is not None else t1)
        report[c] = {"f1_positive": round(f1, 4), "f1_present": round(f13, 4), "n": int(len(s)), "n_positive": int(y1.sum())}
    return t_positive, t_uncertain, report


# ----------------------------------------------------------------------------------------------
# 5. Evaluation on the demo data
# ----------------------------------------------------------------------------------------------


def calibration(n_images: int = 200, seed: int = EVALUATION_SEED) -> dict[str, Any]:
    """The three calibration properties and baseline F1s on the demo data (seed 0)."""
    from shovir.data import build
    from shovir.labelers import get_labeler
    from shovir.metrics.clinical import chexbert_f1, delta_fn, flip_rate
    from shovir.models import Message, get_model
    from shovir.perturb import Condition, EmpiricalBoxSizes

    with tempfile.TemporaryDirectory() as cache:
        pairs, _ = build("synthetic", rows="pairs", n_images=n_images, seed=seed, cache_dir=cache)
        rows = pairs[:]
        sizes = EmpiricalBoxSizes.from_dataset(pairs)
        every, _ = build("synthetic", rows="images", n_images=n_images, seed=seed, cache_dir=cache)
        all_rows = every[:]
    labeler = get_labeler("rule")
    n = len(rows["image_id"])
    first: dict[str, int] = {}
    for i, image_id in enumerate(rows["image_id"]):
        first.setdefault(image_id, i)
    per_image = sorted(first.values())
    row = lambda i: {key: rows[key][i] for key in rows}  # noqa: E731
    noise = Condition("full_noise", p=1.0, seed=seed, noise=NoiseModel())
    images = {"baseline": [rows["image"][i] for i in per_image],
              "full_noise": [noise.apply(rows["image"][i], row(i))[0] for i in per_image]}
    for name in ("ro", "oco", "doco"):
        condition = Condition(name, p=1.0, seed=seed, noise=NoiseModel(), box_sizes=sizes)
        images[name] = [condition.apply(rows["image"][i], row(i))[0] for i in range(n)]
    all_images = {"baseline": list(all_rows["image"]),
                  "full_noise": [noise.apply(image, {"image_id": image_id})[0]
                                 for image, image_id in zip(all_rows["image"], all_rows["image_id"])]}
    truth = np.array(rows["labels"], np.int8)
    targets = list(rows["target_class"])
    reference = labeler([rows["report"][i] for i in per_image])
    all_reference = labeler(list(all_rows["report"]))
    out: dict[str, Any] = {}
    for model_name in ("reference-grounded", "reference-prior", "reference-context"):
        model = get_model(model_name)
        codes = {condition: labeler([g.text for g in model.generate([Message(images=[im]) for im in batch])])
                 for condition, batch in images.items()}

        def fr(condition: str, classes: tuple[str, ...] | None = None) -> dict[str, Any]:
            keep = np.array([classes is None or t in classes for t in targets])
            return flip_rate(truth[keep], codes["ro"][keep], codes[condition][keep], [t for t, k in zip(targets, keep) if k])

        f1 = chexbert_f1(reference, codes["baseline"])
        dfn = delta_fn(reference, codes["baseline"], codes["full_noise"])
        all_codes = {condition: labeler([g.text for g in model.generate([Message(images=[im]) for im in batch])])
                     for condition, batch in all_images.items()}
        all_dfn = delta_fn(all_reference, all_codes["baseline"], all_codes["full_noise"])
        result = {
            "fr_oco": fr("oco"), "fr_doco": fr("doco"),
            "f1_14_micro": f1["f1_14"]["micro"], "f1_5_micro": f1["f1_5"]["micro"],
            "f1_14_macro": f1["f1_14"]["macro"], "delta_fn_f1_14_micro": dfn["f1_14_micro"],
            "per_class_f1": {c: round(v["f1"], 3) for c, v in f1["per_class"].items()},
            "all_images": {"n": len(all_reference), "f1_14_micro": all_dfn["baseline"]["f1_14_micro"],
                           "f1_5_micro": all_dfn["baseline"]["f1_5_micro"], "delta_fn_f1_14_micro": all_dfn["f1_14_micro"]},
        }
        if model_name == "reference-context":
            result["context_fr_doco"] = fr("doco", ("Edema", "Atelectasis"))
            result["context_fr_oco"] = fr("oco", ("Edema", "Atelectasis"))
        out[model_name] = result
    return out


def timing(n: int = 50, repeats: int = 3) -> dict[str, float]:
    """Milliseconds per image (one message per call, best of ``repeats`` passes over ``n`` phantoms)."""
    from PIL import Image

    from shovir.models import Message, get_model

    images = [Image.fromarray(phantom.render_case(phantom.sample_case(i, seed=EVALUATION_SEED))[0]) for i in range(n)]
    out = {}
    for name in ("reference-grounded", "reference-prior", "reference-context"):
        model = get_model(name)
        best = np.inf
        for _ in range(repeats):
            start = time.perf_counter()
            for image in images:
                model.generate([Message(images=[image])])
            best = min(best, (time.perf_counter() - start) / n * 1000)
        out[name] = round(best, 3)
    return out


def print_calibration(result: dict[str, Any], ms: dict[str, float]) -> None:
    def rate(r: dict[str, Any]) -> str:
        den = sum(r["denominators"].values())
        return f"{r['flip_rate']:.3f} ({sum(r['flips'].values())}/{den})" if r["flip_rate"] is not None else "n/a"

    for name, r in result.items():
        print(f"{name}: FR_OCO {rate(r['fr_oco'])}  FR_DOCO {rate(r['fr_doco'])}  F1-14 micro {r['f1_14_micro']:.3f}  "
              f"F1-5 micro {r['f1_5_micro']:.3f}  ΔFN(F1-14 micro) {r['delta_fn_f1_14_micro']:+.3f}  {ms[name]:.2f} ms/image")
        a = r["all_images"]
        print(f"  all {a['n']} images (normal studies included): F1-14 micro {a['f1_14_micro']:.3f}  "
              f"F1-5 micro {a['f1_5_micro']:.3f}  ΔFN(F1-14 micro) {a['delta_fn_f1_14_micro']:+.3f}")
        if "context_fr_doco" in r:
            print(f"  context-derived (Edema + Atelectasis): FR_DOCO {rate(r['context_fr_doco'])}  FR_OCO {rate(r['context_fr_oco'])}")
        per = {c: (None if v is None else round(v, 2)) for c, v in r["fr_oco"]["per_class"].items()}
        print(f"  FR_OCO per class {per}")
        per = {c: (None if v is None else round(v, 2)) for c, v in r["fr_doco"]["per_class"].items()}
        print(f"  FR_DOCO per class {per}")
        print(f"  F1 per class {r['per_class_f1']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evaluate", action="store_true", help="only evaluate the shipped resources")
    parser.add_argument("--skip-evaluation", action="store_true", help="fit only")
    parser.add_argument("--out", type=Path, default=RESOURCES)
    parser.add_argument("--train-images", type=int, default=3000)
    parser.add_argument("--threshold-images", type=int, default=800)
    parser.add_argument("--variants", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=16)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--pos-weight", type=float, default=5.0)
    parser.add_argument("--stem", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    if not args.evaluate:
        import torch

        from shovir.calibration.reference import PatchDetector

        start = time.time()
        print(f"rendering {args.train_images} training phantoms (seed {TRAIN_SEED}) and {args.threshold_images} "
              f"threshold phantoms (seed {THRESHOLD_SEED})", flush=True)
        train_set = render_set(TRAIN_SEED, args.train_images, args.workers)
        threshold_set = render_set(THRESHOLD_SEED, args.threshold_images, args.workers)
        print(f"augmenting ({args.variants} variants per image)", flush=True)
        images, evidence = augment_set(train_set, args.variants, args.workers)
        del train_set
        print(f"training on {len(images)} images", flush=True)
        net = train(images, evidence, args)
        del images, evidence
        args.out.mkdir(parents=True, exist_ok=True)
        weights, card = args.out / "reference_detector.npz", args.out / "reference_detector.json"
        sha = export(net, weights)
        provisional = {"classes": list(CLASSES), "positive_threshold": {c: 0.0 for c in CLASSES},
                       "uncertain_threshold": {c: 0.0 for c in CLASSES}, "weights_sha256": sha}
        card.write_text(json.dumps(provisional))
        detector = PatchDetector(weights, card)
        print("fitting thresholds", flush=True)
        t_positive, t_uncertain, fit = fit_thresholds(detector, threshold_set, THRESHOLD_SEED)
        card.write_text(json.dumps({
            "model": "shovir.calibration.reference.PatchDetector",
            "classes": list(CLASSES),
            "positive_threshold": t_positive,
            "uncertain_threshold": t_uncertain,
            "weights_sha256": sha,
            "architecture": {"stem": args.stem, "hidden": args.hidden},
            "training": {
                "script": "shovir/calibration/fit.py",
                "phantom_version": phantom.PHANTOM_VERSION,
                "train_seed": TRAIN_SEED, "train_images": args.train_images, "variants": args.variants,
                "threshold_seed": THRESHOLD_SEED, "threshold_images": args.threshold_images,
                "epochs": args.epochs, "batch": args.batch, "lr": args.lr, "pos_weight": args.pos_weight,
                "cell_positive": T_POSITIVE, "cell_negative": T_NEGATIVE, "torch": torch.__version__,
                "numpy": np.__version__,
            },
            "threshold_fit": fit,
        }, indent=1) + "\n")
        print(f"fitted in {time.time() - start:.0f} s")
        print(json.dumps({"positive": t_positive, "uncertain": t_uncertain}, indent=1))
        print(json.dumps(fit, indent=1))
        PatchDetector._cached.cache_clear()
    if args.skip_evaluation:
        return
    print("calibration on the demo data (synthetic, 200 images, seed 0, p = 1; per-pair images unless noted)", flush=True)
    print_calibration(calibration(), timing())


if __name__ == "__main__":
    main()
