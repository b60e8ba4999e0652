"""The ``shovir`` command (thin: it parses, validates and calls the library).

``shovir demo``            the main job on the built-in synthetic data, with a calibration verdict
``shovir run``             run a sweep (models x dataset x conditions); works under ``accelerate launch``
``shovir score``           label and score a run folder: results.json, tables, figures, report.md
                           (``--icare BACKEND`` / ``--green BACKEND`` add the LLM-judged metrics)
``shovir icare``           ICARE agreement of two report files (``--refs``, ``--hyps``) with an LLM backend
``shovir green``           GREEN of two report files with a judge backend, or from saved judge responses
``shovir preview``         build the synthetic set and render every intervention on a few samples
``shovir data build``      build a dataset from its sources and export it (parquet or arrow)
``shovir examples [DIR]``  copy the example sweep configs and scripts
``shovir metrics list``    the evaluate modules shipped with shovir
``shovir metrics install`` put them in evaluate's module cache: ``evaluate.load("shovir/<name>")``
                           then works offline
``shovir leaderboard``     serve the leaderboard of a folder of results files on localhost
``shovir hub ...``         lay out and publish metric Spaces, the leaderboard Space, results, annotations

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
    icare = _demo_icare_check(args.out)
    return 0 if all(check.passed for check in checks) and (icare is None or icare["passed"]) else 1


def _demo_icare_check(out: str) -> dict[str, Any] | None:
    """The demo's ICARE check (in ``calibration.json`` beside the protocol checks), if it ran."""
    import json
    from pathlib import Path

    path = Path(out) / "calibration.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("icare")


def sweep_config(args: argparse.Namespace) -> Any:
    """The sweep config of ``shovir run`` flags (and ``--config``), validated before any work."""
    from shovir.runner.config import SweepConfig, parse_options

    if not args.config and not args.model:
        raise ValueError("shovir run: give --config sweep.yaml or at least one --model (see `shovir examples`)")
    overrides: dict[str, Any] = {
        "seed": args.seed, "batch_size": args.batch_size, "conditions": args.conditions, "noise": args.noise,
        "blank": args.blank, "swap_ssim_below": args.swap_ssim_below, "limit": args.limit, "models": args.model or None,
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


def _judges(args: argparse.Namespace) -> dict[str, Any]:
    """``shovir score``'s ``--icare`` / ``--green`` backends and their ``--*-option KEY=VALUE``."""
    from shovir.runner.config import parse_options

    judges: dict[str, Any] = {}
    for name in ("icare", "green"):
        backend, pairs = getattr(args, name), getattr(args, f"{name}_option")
        if backend is None:
            if pairs:
                raise ValueError(f"--{name}-option needs --{name} BACKEND (offline, openai or transformers)")
            continue
        judges[name] = {"backend": backend, "options": parse_options(pairs, flag=f"--{name}-option")}
    return judges


def _score(args: argparse.Namespace) -> int:
    from shovir.report import summary_table, write_report
    from shovir.scoring import score_run

    results = score_run(args.run_dir, labeler=args.labeler, n_resamples=args.n_resamples, seed=args.seed,
                        allow_partial=args.allow_partial, judges=_judges(args) or None, progress=not args.quiet)
    report = write_report(results, args.out or args.run_dir)
    if not args.quiet:
        print(summary_table(results))
        print(f"\nwrote {report}, results.json, tables and figures next to it", file=sys.stderr)
    return 0


def _backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--backend-option KEY=VALUE`` pairs plus the shortcut flags (``--model``, ``--base-url``, ...)."""
    from shovir.runner.config import parse_options

    options = parse_options(args.backend_option, flag="--backend-option")
    for flag, key in (("model", "model"), ("base_url", "base_url"), ("api_key_env", "api_key_env"),
                      ("max_concurrency", "max_concurrency")):
        value = getattr(args, flag)
        if value is not None:
            if key in options and options[key] != value:
                raise ValueError(f"--{flag.replace('_', '-')} and --backend-option {key}=... disagree; give one")
            options[key] = value
    return options


def _write_result(result: dict[str, Any], path: Any) -> None:
    import json
    from pathlib import Path

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(result, indent=2), encoding="utf-8")


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}"


def icare_summary(result: dict[str, Any]) -> str:
    """The console summary of ``shovir icare``: scores with intervals, question counts, calls.

    >>> from shovir.icare import icare
    >>> print(icare_summary(icare({"a": "Cardiomegaly."}, {"a": "Cardiomegaly."}, n_resamples=0)).splitlines()[4])
    | ICARE-GT | 1.000 | 1 / 1 | 1.000 ± 0.000 (1) |
    """
    config = result["config"]
    backend = config["backend"]
    lines = [f"ICARE — {result['n']} report pairs; backend {backend.get('backend')} "
             f"({backend.get('model', backend.get('labeler', ''))}), {config['n_questions']} questions per report, "
             f"seed {config['seed']}, {config['variant']}", "",
             "| score | dataset [95% CI] | agreements / answered | report level mean ± std (n) |", "|---|---|---|---|"]
    for key, label in (("icare_gt", "ICARE-GT"), ("icare_gen", "ICARE-GEN"), ("icare_avg", "ICARE-AVG")):
        ci, level = result["ci"][key], result["report_level"][key]
        interval = f" [{ci['low']:.3f}, {ci['high']:.3f}]" if ci["low"] is not None and ci["high"] is not None else ""
        side = key.split("_")[1]
        ratio = f"{result['agreements'][side]} / {result['questions'][side]}" if side in ("gt", "gen") else ""
        spread = f"{_fmt(level['mean'])} ± {_fmt(level['std'])} ({level['n']})"
        lines.append(f"| {label} | {_fmt(result[key])}{interval} | {ratio} | {spread} |")
    rows = (("asked for", "requested"), ("written (unique)", "yielded"), ("incomplete items", "incomplete"),
            ("duplicates removed", "duplicates"), ("kept", "kept"),
            ("filtered: wrong with the report", "filtered_wrong_with_report"),
            ("filtered: right without a report", "filtered_right_without_report"),
            ("lost to failures (filter)", "lost_to_failures"), ("answered by both agents", "answered"),
            ("answer failures", "answer_failures"))
    lines += ["", "| questions | from reference reports (GT) | from generated reports (GEN) |", "|---|---|---|"]
    lines += [f"| {label} | {result['counts']['gt'][key]} | {result['counts']['gen'][key]} |" for label, key in rows]
    off_key = result["agreements_off_key"]
    lines.append(f"| agreements on a wrong option | {off_key['gt']} | {off_key['gen']} |")
    calls = result["calls"]
    lines += ["", f"calls: {calls['made']} made, {calls['saved']} saved (cache or repeated), {calls['failed']} failed"]
    return "\n".join(lines)


def green_summary_text(result: dict[str, Any]) -> str:
    """The console summary of ``shovir green`` (scores, failures, error-free share per category).

    >>> from shovir.icare import green
    >>> print(green_summary_text(green(["r"], ["p"], judge_responses=["[Matched Findings]:\\n1. x"], n_resamples=0)).splitlines()[4])
    | 1.000 | 0.000 | 1 | 0 | 0 |
    """
    backend = (result.get("config") or {}).get("backend") or {}
    source = "saved judge responses" if backend == {} else \
        f"backend {backend.get('backend')} ({backend.get('model', backend.get('labeler', ''))})"
    ci = result["ci"]["green"]
    interval = f" [{ci['low']:.3f}, {ci['high']:.3f}]" if ci["low"] is not None and ci["high"] is not None else ""
    lines = [f"GREEN — {result['n_pairs']} report pairs; {source}", "",
             "| GREEN [95% CI] | std | scored | failed | no section found |", "|---|---|---|---|---|",
             f"| {_fmt(result['green'])}{interval} | {_fmt(result['std'])} | {result['n']} | {result['failed']} | "
             f"{result['unparsed']} |", "", "| error category | share of reports without it |", "|---|---|"]
    lines += [f"| {result['categories'][k]} | {_fmt(v)} |" for k, v in result["error_free"].items()]
    calls = result["calls"]
    lines += ["", f"calls: {calls['made']} made, {calls['saved']} saved (cache or repeated), {calls['failed']} failed"]
    return "\n".join(lines)


def _icare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from shovir.icare import Icare, read_reports

    refs, hyps = read_reports(args.refs, field="--refs"), read_reports(args.hyps, field="--hyps")
    out = Path(args.out)
    cache = None if args.no_cache else (args.cache or out / "calls.jsonl")
    with Icare(args.backend, _backend_options(args), cache=cache, n_questions=args.n_questions, seed=args.seed,
               variant=args.variant, max_attempts=args.max_attempts, progress=not args.quiet) as evaluator:
        result = evaluator.evaluate(refs, hyps, log_path=out / "icare_questions.jsonl", n_resamples=args.n_resamples)
    _write_result(result, out / "icare.json")
    if not args.quiet:
        print(icare_summary(result))
        print(f"\nwrote {out / 'icare.json'} and the per-question log {out / 'icare_questions.jsonl'}", file=sys.stderr)
    return 0


def _green(args: argparse.Namespace) -> int:
    from pathlib import Path

    from shovir.icare import Green, green, read_reports

    refs, hyps = read_reports(args.refs, field="--refs"), read_reports(args.hyps, field="--hyps")
    out = Path(args.out)
    if args.responses:
        responses = read_reports(args.responses, field="--responses")
        result = green(refs, hyps, judge_responses=responses, log_path=out / "green_reports.jsonl",
                       n_resamples=args.n_resamples)
    else:
        cache = None if args.no_cache else (args.cache or out / "calls.jsonl")
        evaluator = Green(args.backend, _backend_options(args), cache=cache, progress=not args.quiet)
        try:
            result = evaluator.evaluate(refs, hyps, log_path=out / "green_reports.jsonl", n_resamples=args.n_resamples)
        finally:
            evaluator.close()
    _write_result(result, out / "green.json")
    if not args.quiet:
        print(green_summary_text(result))
        print(f"\nwrote {out / 'green.json'} and the per-report log {out / 'green_reports.jsonl'}", file=sys.stderr)
    return 0


def _judge_command(commands: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    command = commands.add_parser(name, help=help_text)
    command.add_argument("--refs", required=True, help="reference reports: JSONL {id, report}, JSON {id: report} or .txt")
    command.add_argument("--hyps", required=True, help="generated reports, same formats; paired with --refs by id")
    command.add_argument("--backend", default="offline", help="offline (default; an approximation), openai or transformers")
    command.add_argument("--backend-option", action="append", default=[], metavar="KEY=VALUE",
                         help="backend option, repeatable (e.g. timeout=60, max_retries=5, dtype=bfloat16)")
    command.add_argument("--model", help="openai: the served model name; transformers: the local checkpoint folder")
    command.add_argument("--base-url", help="openai: the API root, e.g. http://127.0.0.1:8000/v1")
    command.add_argument("--api-key-env", help="openai: the environment variable holding the API key")
    command.add_argument("--max-concurrency", type=int, help="openai: requests in flight at once (default 16)")
    command.add_argument("--out", default=name, help=f"output folder (default: {name}); its calls.jsonl caches every call")
    command.add_argument("--cache", help="call cache file (default: OUT/calls.jsonl)")
    command.add_argument("--no-cache", action="store_true", help="keep the call cache in memory only")
    command.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples (0: no intervals)")
    command.add_argument("--quiet", action="store_true", help="no progress bars or summary")
    return command


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
    run.add_argument("--blank", choices=("paper", "input"),
                     help="blank image: paper (224x224 RGB gray, the default) or input (each image's size and mode)")
    run.add_argument("--swap-ssim-below", type=float, metavar="SSIM",
                     help="ModaLens guard: refuse swap donors whose SSIM with the image is not below this (e.g. 0.9)")
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
    score.add_argument("--icare", metavar="BACKEND", help="add ICARE to Table 1 with this LLM backend (offline, openai, "
                                                          "transformers); calls cached in RUN/judges/calls.jsonl")
    score.add_argument("--icare-option", action="append", default=[], metavar="KEY=VALUE",
                       help="ICARE backend option, repeatable (e.g. base_url=..., model=..., api_key_env=...)")
    score.add_argument("--green", metavar="BACKEND", help="add GREEN to Table 1 with this judge backend")
    score.add_argument("--green-option", action="append", default=[], metavar="KEY=VALUE",
                       help="GREEN backend option, repeatable (transformers: model=/models/GREEN-RadLlama2-7b)")

    icare = _judge_command(commands, "icare", "ICARE agreement of generated vs reference reports (LLM agents)")
    icare.add_argument("--n-questions", type=int, default=40, help="questions asked per report (default 40)")
    icare.add_argument("--seed", type=int, default=123, help="evaluation seed (default 123)")
    icare.add_argument("--variant", choices=("shuffled", "unshuffled"), default="shuffled",
                       help="options shuffled before and after filtering (default; the result of record) or not")
    icare.add_argument("--max-attempts", type=int, default=3, help="question-writing calls per report at most")
    green = _judge_command(commands, "green", "GREEN of generated vs reference reports (an LLM judge)")
    green.add_argument("--responses", help="saved judge responses (same formats as --refs): recompute without a judge")

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

    board = commands.add_parser("leaderboard", help="serve the leaderboard of a folder of results files (Gradio)")
    board.add_argument("--results", required=True,
                       help="folder of results.json files, or hf://datasets/NAMESPACE/NAME (downloaded first)")
    board.add_argument("--port", type=int, default=7860)
    board.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: localhost only)")
    board.add_argument("--no-upload", action="store_true", help="hide the upload tab")

    from shovir.leaderboard.hub import add_hub_commands

    add_hub_commands(subparsers, parents=[common])
    return parser


def _leaderboard(args: argparse.Namespace) -> int:
    from pathlib import Path

    from shovir.leaderboard import serve

    results = args.results
    if results.startswith("hf://datasets/"):
        import tempfile

        from shovir.leaderboard.data import fetch_results

        results = str(fetch_results(results.removeprefix("hf://datasets/"), tempfile.mkdtemp(prefix="shovir-results-")))
    elif not Path(results).is_dir():
        raise FileNotFoundError(f"--results: no folder {results!r}; pass a folder of results.json files "
                                "(e.g. a run folder after `shovir score`) or hf://datasets/NAMESPACE/NAME")
    serve(results, port=args.port, host=args.host, allow_upload=not args.no_upload)
    return 0


def _hub(args: argparse.Namespace) -> int:
    from shovir.leaderboard.hub import run_hub_command

    return run_hub_command(args)


_COMMANDS = {"demo": _demo, "run": _run, "score": _score, "preview": _preview, "metrics": _metrics, "examples": _examples,
             "icare": _icare, "green": _green, "leaderboard": _leaderboard, "hub": _hub}


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
