"""The ``shovir`` command (thin: it parses, validates and calls the library).

``shovir demo``            the main job on the built-in synthetic data, with a calibration verdict
``shovir run``             run a sweep (models x dataset x conditions); works under ``accelerate launch``
``shovir score``           label and score a run folder: results.json, tables, figures, report.md
``shovir preview``         build the synthetic set and render every intervention on a few samples
``shovir data build``      build a dataset from its sources and export it (parquet or arrow)
``shovir examples [DIR]``  copy the example sweep configs and scripts
``shovir metrics list``    the evaluate modules shipped with shovir
``shovir metrics install`` put them in evaluate's module cache: ``evaluate.load("shovir/<name>")``
                           then works offline

``shovir run`` precedence: flags > ``--config`` file > defaults. ``--model`` replaces the file's
models; ``--dataset-option`` and ``--model-option`` are merged into the file's dataset and every
model entry. Expected errors print one line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Sequence

__all__ = ["main"]


def _version() -> str:
    from shovir import __version__

    return __version__


def _is_main_rank() -> bool:
    return os.environ.get("RANK", "0") in ("0", "") and os.environ.get("LOCAL_RANK", "0") in ("0", "")


def _silence_bars(quiet: bool) -> None:
    """``--quiet`` silences every bar, the dataset builders' included; other ranks never draw."""
    if quiet or not _is_main_rank():
        import datasets

        datasets.disable_progress_bars()


def _preview(args: argparse.Namespace) -> int:
    from shovir.report.preview import render_preview

    render_preview(args.out, n_images=args.n_images, rows=args.rows, seed=args.seed, cache_dir=args.cache_dir)
    return 0


def _data_build(args: argparse.Namespace, rest: Sequence[str]) -> int:
    from shovir.data.export import main as export_main

    return export_main(None, ([args.name] if args.name else []) + list(rest))


def _metrics(args: argparse.Namespace) -> int:
    from shovir.evaluate_modules import install_modules, module_names

    if args.metrics_command == "list":
        print("\n".join(module_names()))
        return 0
    for path in install_modules(args.names or None, args.cache):
        print(f"installed shovir/{path.stem} -> {path}")
    return 0


def _examples(args: argparse.Namespace) -> int:
    from shovir.examples import copy_examples

    for path in copy_examples(args.dir, overwrite=args.force):
        print(f"wrote {path}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from shovir.calibration.demo import PROTOCOLS, run_demo

    _silence_bars(args.quiet)
    _, checks = run_demo(args.out, n_images=args.n_images, seed=args.seed, cache_dir=args.cache_dir, workers=args.workers,
                         n_resamples=args.n_resamples, progress=not args.quiet, quiet=args.quiet,
                         protocols=args.protocol or PROTOCOLS)
    return 0 if all(check.passed for check in checks) else 1


def sweep_config(args: argparse.Namespace) -> Any:
    """The sweep config of ``shovir run`` flags (and ``--config``), validated before any work."""
    from shovir.runner.config import SweepConfig, parse_options

    if not args.config and not args.model:
        raise ValueError("shovir run: give --config sweep.yaml or at least one --model (see `shovir examples`)")
    overrides: dict[str, Any] = {
        "seed": args.seed, "batch_size": args.batch_size, "conditions": args.conditions, "noise": args.noise,
        "limit": args.limit, "models": args.model or None,
        "dataset_options": parse_options(args.dataset_option, flag="--dataset-option"),
        "model_options": parse_options(args.model_option, flag="--model-option"),
    }
    if args.dataset is not None:
        overrides["dataset"] = args.dataset
    if not args.config:
        overrides.setdefault("dataset", "synthetic")
        overrides["conditions"] = overrides["conditions"] or "shovir"
        if _takes_rows(overrides["dataset"]) and "rows" not in overrides["dataset_options"]:
            overrides["dataset_options"] = {"rows": "pairs", **overrides["dataset_options"]}
    return SweepConfig.load(args.config, overrides)


def _takes_rows(name: str) -> bool:
    """Grounded datasets default to one row per (image, class) under ``shovir run``."""
    from shovir.data import BUILDERS, get_builder_class
    from shovir.registry import parameters

    if name not in BUILDERS:
        return False
    config_class = getattr(get_builder_class(name), "BUILDER_CONFIG_CLASS", None)
    return config_class is not None and "rows" in parameters(config_class)[0]


def _run(args: argparse.Namespace) -> int:
    from shovir.runner.run import run_sweep

    config = sweep_config(args)
    _silence_bars(args.quiet)
    run_sweep(config, args.out, cache_dir=args.cache_dir, progress=not args.quiet and _is_main_rank(),
              workers=args.workers, quiet=args.quiet or not _is_main_rank())
    if not args.quiet and _is_main_rank():
        print(f"done: {args.out} (score it with `shovir score {args.out}`)", file=sys.stderr)
    return 0


def _score(args: argparse.Namespace) -> int:
    from shovir.report import summary_table, write_report
    from shovir.scoring import score_run

    results = score_run(args.run_dir, labeler=args.labeler, n_resamples=args.n_resamples, seed=args.seed,
                        allow_partial=args.allow_partial)
    report = write_report(results, args.out or args.run_dir)
    if not args.quiet:
        print(summary_table(results))
        print(f"\nwrote {report}, results.json, tables and figures next to it", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shovir", description="Does your medical VLM really use the image?")
    parser.add_argument("--version", action="version", version=f"shovir {_version()}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of expected errors")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks of expected errors")
    subparsers = parser.add_subparsers(dest="command", required=True)

    class _Commands:
        def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
            return subparsers.add_parser(name, parents=[common], **kwargs)

    commands = _Commands()

    demo = commands.add_parser("demo", help="reference models with known behaviour on synthetic data, every protocol, "
                                            "with a calibration verdict")
    demo.add_argument("--protocol", action="append", choices=("shovir", "beyond_accuracy", "modalens"),
                      help="run only this protocol (repeatable; default: all)")
    demo.add_argument("--out", default="demo", help="output folder (default: demo)")
    demo.add_argument("--n-images", type=int, default=200)
    demo.add_argument("--seed", type=int, default=0, help="synthetic data seed")
    demo.add_argument("--workers", type=int, default=2, help="background processes preparing images")
    demo.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples")
    demo.add_argument("--cache-dir", help="datasets cache folder")
    demo.add_argument("--quiet", action="store_true", help="no progress bars or messages")

    run = commands.add_parser("run", help="run a sweep of models over interventions (accelerate-aware)")
    run.add_argument("--config", help="sweep YAML (dataset, models, conditions, seed, batch_size, limit)")
    run.add_argument("--model", action="append", default=[], help="model name, repeatable (replaces the config's models)")
    run.add_argument("--model-option", action="append", default=[], metavar="KEY=VALUE",
                     help="adapter option for every model, repeatable (e.g. checkpoint=/models/x, dtype=bfloat16)")
    run.add_argument("--dataset", help="dataset name (default without --config: synthetic)")
    run.add_argument("--dataset-option", action="append", default=[], metavar="KEY=VALUE",
                     help="builder option, repeatable (default without --config: rows=pairs for grounded datasets)")
    run.add_argument("--conditions", help="condition preset or label (shovir, shovir_area, beyond_accuracy, modalens)")
    run.add_argument("--seed", type=int, help="run seed (default 3)")
    run.add_argument("--batch-size", type=int, help="messages per model call (default 16; does not change outputs)")
    run.add_argument("--noise", choices=("paper", "authors"), help="noise model (default paper)")
    run.add_argument("--limit", type=int, help="only the first N samples (a trial run)")
    run.add_argument("--out", required=True, help="run folder (created, resumed or extended)")
    run.add_argument("--cache-dir", help="datasets cache folder")
    run.add_argument("--workers", type=int, default=0, help="background processes preparing images (needs torch)")
    run.add_argument("--quiet", action="store_true", help="no progress bars or messages")

    score = commands.add_parser("score", help="label and score a run folder")
    score.add_argument("run_dir")
    score.add_argument("--labeler", default="rule", help="rule (default) or chexbert")
    score.add_argument("--n-resamples", type=int, default=1000)
    score.add_argument("--seed", type=int, default=0)
    score.add_argument("--out", help="output folder (default: the run folder)")
    score.add_argument("--allow-partial", action="store_true",
                       help="score an incomplete run; coverage per model x condition goes into results.json")
    score.add_argument("--quiet", action="store_true", help="no summary table")

    preview = commands.add_parser("preview", help="render every intervention on synthetic samples")
    preview.add_argument("--out", default="preview", help="output folder (default: preview)")
    preview.add_argument("--n-images", type=int, default=60, help="synthetic images to build (default: 60)")
    preview.add_argument("--rows", type=int, default=4, help="samples shown (default: 4)")
    preview.add_argument("--seed", type=int, default=0)
    preview.add_argument("--cache-dir", default=None, help="datasets cache folder")

    data = commands.add_parser("data", help="dataset tools")
    data_commands = data.add_subparsers(dest="data_command", required=True)
    data_build = data_commands.add_parser("build", help="build a dataset and export it (shovir data build NAME --help)",
                                          add_help=False)
    data_build.add_argument("name", nargs="?")

    examples = commands.add_parser("examples", help="copy the example sweep configs and scripts into a folder")
    examples.add_argument("dir", nargs="?", default="shovir-examples", help="destination (default: shovir-examples)")
    examples.add_argument("--force", action="store_true", help="overwrite existing files")

    metrics = commands.add_parser("metrics", help="Hugging Face evaluate modules")
    metrics_commands = metrics.add_subparsers(dest="metrics_command", required=True)
    metrics_commands.add_parser("list", help="list the evaluate modules")
    install = metrics_commands.add_parser("install", help="install the modules into evaluate's module cache")
    install.add_argument("names", nargs="*", help="modules to install (default: all)")
    install.add_argument("--cache", help="modules cache folder (default: evaluate's HF_MODULES_CACHE)")
    return parser


_COMMANDS = {"demo": _demo, "run": _run, "score": _score, "preview": _preview, "metrics": _metrics, "examples": _examples}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``shovir`` console script."""
    from shovir.runner.lock import RunLocked
    from shovir.runner.run import IncompleteGenerations, RunInterrupted

    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    if args.command != "data" and rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        if args.command == "data":
            return _data_build(args, rest)
        return _COMMANDS[args.command](args)
    except RunInterrupted as stopped:
        print(f"shovir {args.command}: {stopped}", file=sys.stderr)
        return 130
    except IncompleteGenerations as incomplete:
        print(f"shovir {args.command}: {incomplete}", file=sys.stderr)
        return 3
    except (ValueError, FileNotFoundError, FileExistsError, RunLocked, ImportError, KeyError) as error:
        if args.debug:
            raise
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"shovir {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
