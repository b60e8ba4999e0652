"""The ``shovir`` command.

``shovir demo``         the main job on the built-in synthetic data, with a calibration verdict
``shovir run``          run a sweep (models x dataset x conditions); works under ``accelerate launch``
``shovir score``        label and score a run folder: results.json, tables, figures, report.md
``shovir preview``      build the synthetic set and render every intervention on a few samples
``shovir data build``   build a dataset from its sources and export it (parquet or arrow)
``shovir metrics list``    the evaluate modules shipped with shovir
``shovir metrics install`` put them in evaluate's module cache: ``evaluate.load("shovir/<name>")``
                           then works offline
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

__all__ = ["main"]

PREVIEW_CONDITIONS = ("baseline", "full_noise", "oco_p40", "oco_p100", "doco_p100", "ro_p100", "ro_area_p100", "blank")


def _preview(args: argparse.Namespace) -> int:
    from PIL import Image, ImageDraw

    from shovir.data import build
    from shovir.perturb import Condition, EmpiricalBoxSizes

    started = time.perf_counter()
    pairs, report = build("synthetic", rows="pairs", n_images=args.n_images, seed=args.seed, cache_dir=args.cache_dir)
    sizes = EmpiricalBoxSizes.from_dataset(pairs)
    conditions = [Condition.parse(text, seed=args.seed, box_sizes=sizes) for text in PREVIEW_CONDITIONS]
    # one pair per row of the grid: prefer samples that have context boxes, so DOCO shows something
    with_context = [i for i, boxes in enumerate(pairs["context_boxes"]) if boxes]
    chosen = (with_context or list(range(len(pairs))))[: args.rows]
    tile = 192
    sheet = Image.new("RGB", (tile * len(conditions), tile * len(chosen) + 18 * (len(chosen) + 1)), "white")
    draw = ImageDraw.Draw(sheet)
    for column, condition in enumerate(conditions):
        draw.text((column * tile + 4, 2), condition.label, fill="black")
    summary_rows = []
    for row_index, pair_index in enumerate(chosen):
        row = pairs[pair_index]
        top = 18 + row_index * (tile + 18)
        draw.text((4, top - 2 + tile + 2), f"{row['sample_id']}", fill="black")
        for column, condition in enumerate(conditions):
            image, info = condition.apply(row["image"], row)
            scale = tile / max(row["width"], row["height"])
            thumb = image.convert("RGB").resize((int(row["width"] * scale), int(row["height"] * scale)))
            overlay = ImageDraw.Draw(thumb)
            for box in row["disease_boxes"]:
                overlay.rectangle([box["x_min"] * scale, box["y_min"] * scale, box["x_max"] * scale, box["y_max"] * scale], outline=(220, 40, 40))
            for box in row["context_boxes"]:
                overlay.rectangle([box["x_min"] * scale, box["y_min"] * scale, box["x_max"] * scale, box["y_max"] * scale], outline=(40, 120, 220))
            if condition.name.startswith("ro"):
                for x0, y0, x1, y1 in info["occluder_boxes"]:
                    overlay.rectangle([x0 * scale, y0 * scale, x1 * scale, y1 * scale], outline=(240, 200, 40))
            sheet.paste(thumb, (column * tile, top))
            summary_rows.append({"sample_id": row["sample_id"], **{k: info[k] for k in ("condition", "p", "occluded_pixels", "occlusion_complete")}})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sheet.save(out / "interventions.png")
    per_class: dict[str, int] = {}
    for name in pairs["target_class"]:
        per_class[name] = per_class.get(name, 0) + 1
    summary = {
        "dataset": "synthetic",
        "images": report.kept,
        "pairs": len(pairs),
        "pairs_per_class": dict(sorted(per_class.items())),
        "build_report": report.as_dict(),
        "preview": summary_rows,
        "seconds": round(time.perf_counter() - started, 2),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"synthetic: {report.summary()}; {len(pairs)} (image, class) pairs")
    for name, count in summary["pairs_per_class"].items():
        print(f"  {name:<28} {count:>4} pairs")
    print(f"wrote {out / 'interventions.png'} ({len(chosen)} samples x {len(conditions)} conditions) and {out / 'summary.json'}"
          f" in {summary['seconds']} s")
    return 0


def _data_build(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from shovir.data.export import main as export_main

    return export_main(None, [args.name, *rest])


def _metrics(args: argparse.Namespace) -> int:
    from shovir.evaluate_modules import install_modules, module_names

    if args.metrics_command == "list":
        print("\n".join(module_names()))
        return 0
    for path in install_modules(args.names or None, args.cache):
        print(f"installed shovir/{path.stem} -> {path}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from shovir.runner.demo import run_demo

    _, checks = run_demo(args.out, n_images=args.n_images, seed=args.seed, cache_dir=args.cache_dir, workers=args.workers,
                         n_resamples=args.n_resamples, progress=not args.quiet)
    return 0 if all(check.passed for check in checks) else 1


def _run(args: argparse.Namespace) -> int:
    from shovir.runner.config import SweepConfig
    from shovir.runner.run import run_sweep

    if args.config:
        config = SweepConfig.from_yaml(args.config)
    else:
        if not args.model:
            raise SystemExit("shovir run: give --config sweep.yaml or at least one --model")
        dataset: dict = {"name": args.dataset}
        from shovir.data.export import parse_options

        dataset.update(parse_options(args.dataset_option))
        config = SweepConfig.from_dict({"dataset": dataset, "models": args.model, "conditions": args.conditions,
                                        "seed": args.seed, "batch_size": args.batch_size, "noise": args.noise})
    run_sweep(config, args.out, cache_dir=args.cache_dir, progress=not args.quiet, workers=args.workers)
    return 0


def _score(args: argparse.Namespace) -> int:
    from shovir.report import write_report
    from shovir.runner.score import score_run

    results = score_run(args.run_dir, labeler=args.labeler, n_resamples=args.n_resamples, seed=args.seed)
    report = write_report(results, args.out or args.run_dir)
    print(f"wrote {report} and results.json, table1.{{md,tex,csv}}, figures next to it")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``shovir`` console script."""
    parser = argparse.ArgumentParser(prog="shovir", description="Does your medical VLM really use the image?")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="reference models on synthetic data: every ShoViR condition, scored")
    demo.add_argument("--out", default="demo", help="output folder (default: demo)")
    demo.add_argument("--n-images", type=int, default=200)
    demo.add_argument("--seed", type=int, default=0, help="synthetic data seed")
    demo.add_argument("--workers", type=int, default=2, help="background processes preparing images")
    demo.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples")
    demo.add_argument("--cache-dir", help="datasets cache folder")
    demo.add_argument("--quiet", action="store_true")

    run = commands.add_parser("run", help="run a sweep of models over interventions (accelerate-aware)")
    run.add_argument("--config", help="sweep YAML (dataset, models, conditions, seed, batch_size)")
    run.add_argument("--model", action="append", default=[], help="model name, repeatable (instead of --config)")
    run.add_argument("--dataset", default="synthetic", help="dataset name (default: synthetic)")
    run.add_argument("--dataset-option", action="append", default=["rows=pairs"], metavar="KEY=VALUE",
                     help="builder option, repeatable (default: rows=pairs)")
    run.add_argument("--conditions", default="shovir", help="condition preset (shovir, shovir_area, beyond_accuracy, modalens)")
    run.add_argument("--seed", type=int, default=3)
    run.add_argument("--batch-size", type=int, default=16)
    run.add_argument("--noise", default="paper", choices=("paper", "authors"))
    run.add_argument("--out", required=True, help="run folder (created or resumed)")
    run.add_argument("--cache-dir", help="datasets cache folder")
    run.add_argument("--workers", type=int, default=0, help="background processes preparing images (needs torch)")
    run.add_argument("--quiet", action="store_true", help="no progress bars")

    score = commands.add_parser("score", help="label and score a run folder")
    score.add_argument("run_dir")
    score.add_argument("--labeler", default="rule", help="rule (default) or chexbert")
    score.add_argument("--n-resamples", type=int, default=1000)
    score.add_argument("--seed", type=int, default=0)
    score.add_argument("--out", help="output folder (default: the run folder)")

    preview = commands.add_parser("preview", help="render every intervention on synthetic samples")
    preview.add_argument("--out", default="preview", help="output folder (default: preview)")
    preview.add_argument("--n-images", type=int, default=60, help="synthetic images to build (default: 60)")
    preview.add_argument("--rows", type=int, default=4, help="samples shown (default: 4)")
    preview.add_argument("--seed", type=int, default=0)
    preview.add_argument("--cache-dir", default=None, help="datasets cache folder")

    data = commands.add_parser("data", help="dataset tools")
    data_commands = data.add_subparsers(dest="data_command", required=True)
    data_build = data_commands.add_parser("build", help="build a dataset and export it", add_help=False)
    data_build.add_argument("name")

    metrics = commands.add_parser("metrics", help="Hugging Face evaluate modules")
    metrics_commands = metrics.add_subparsers(dest="metrics_command", required=True)
    metrics_commands.add_parser("list", help="list the evaluate modules")
    install = metrics_commands.add_parser("install", help="install the modules into evaluate's module cache")
    install.add_argument("names", nargs="*", help="modules to install (default: all)")
    install.add_argument("--cache", help="modules cache folder (default: evaluate's HF_MODULES_CACHE)")

    args, rest = parser.parse_known_args(argv)
    if args.command in ("demo", "run", "score"):
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return {"demo": _demo, "run": _run, "score": _score}[args.command](args)
    if args.command == "metrics":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return _metrics(args)
    if args.command == "preview":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return _preview(args)
    return _data_build(args, rest)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
