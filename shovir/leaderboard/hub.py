"""Hub layouts and publishing: metric Spaces, the leaderboard Space, results and annotations.

Every publisher first lays its repository out as a local folder (what ``--dry-run`` stops at),
then creates the repository and uploads the folder with ``huggingface_hub.HfApi``:

==========================  ===========================  ==========================================
command                     repository                   folder
==========================  ===========================  ==========================================
``publish-metrics``         Space ``NS/<metric>`` each   the evaluate module, its card and app;
                                                         ``requirements.txt`` pins this shovir
``publish-leaderboard``     Space ``NS/<name>``          ``examples/leaderboard_space`` + a
                                                         ``results/`` folder; pins this shovir
``publish-results RUN``     dataset ``--repo``           ``<dataset>/<run>/``: results.json, report,
                                                         tables and figures of the run
``publish-annotations``     dataset ``--repo`` (gated)   per-box annotations as parquet and a card
                                                         that requests credentialed access
==========================  ===========================  ==========================================

The token is huggingface_hub's own (``HF_TOKEN`` or ``huggingface-cli login``); nothing here
reads or writes it.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Iterable, Sequence

from shovir import __version__

__all__ = ["metric_space_folders", "leaderboard_space_folder", "results_folder", "annotations_folder", "upload",
           "ANNOTATION_FIELDS", "add_hub_commands"]

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _check_repo_id(repo_id: str, field: str) -> str:
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id) or ".." in repo_id:
        raise ValueError(f"{field}: {repo_id!r} is not a Hub repository id; write NAMESPACE/NAME (letters, digits, . _ -)")
    return repo_id


def _check_name(name: str, field: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise ValueError(f"{field}: {name!r} is not a valid name; use letters, digits, '.', '_' or '-'")
    return name


def _fresh(folder: Path) -> Path:
    if folder.exists() and any(folder.iterdir()):
        raise FileExistsError(f"{folder} already holds files; choose another --out (a layout never mixes two builds)")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _pin(requirements: str, requirement: str) -> str:
    """``requirements.txt`` with every shovir line replaced by ``requirement`` (first line).

    >>> _pin("shovir\\nnumpy>=1.24\\nshovir[scorers]>=0.1", "shovir==0.1.0")
    'shovir==0.1.0\\nnumpy>=1.24\\n'
    """
    kept = [line for line in requirements.splitlines()
            if line.strip() and not re.match(r"^\s*shovir(\[.*\])?\s*([<>=!~].*)?$", line)]
    return "\n".join([requirement, *kept]) + "\n"


def metric_space_folders(out: str | Path, namespace: str, names: Sequence[str] | None = None) -> list[Path]:
    """Lay out each evaluate module as a Space folder under ``out/<name>/``: its module, card
    (whose YAML header makes it a Gradio Space), app and requirements pinned to this shovir.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     folder = metric_space_folders(tmp, "me", ["flip_rate"])[0]
    ...     sorted(p.name for p in folder.iterdir()), (folder / "requirements.txt").read_text().splitlines()[0]
    (['README.md', 'app.py', 'flip_rate.py', 'requirements.txt'], 'shovir==0.1.0')
    """
    from shovir.evaluate_modules import module_names, modules_root

    _check_name(namespace, "--namespace")
    available = module_names()
    names = list(names) if names else available
    unknown = sorted(set(names) - set(available))
    if unknown:
        raise ValueError(f"--metric: unknown module(s) {unknown}; available: {', '.join(available)}")
    root, out = modules_root(), Path(out)
    folders = []
    for name in names:
        source, target = root / name, _fresh(out / name)
        card = (source / "README.md").read_text(encoding="utf-8")
        if not card.startswith("---\n") or "sdk: gradio" not in card.split("\n---", 2)[0]:
            raise ValueError(f"{source / 'README.md'}: the card needs a YAML header with 'sdk: gradio' to be a Space")
        for path in sorted(source.iterdir()):
            if path.is_file() and path.suffix in (".py", ".md", ".txt") and not path.name.startswith("."):
                shutil.copy2(path, target / path.name)
        requirements = (source / "requirements.txt").read_text(encoding="utf-8") if (source / "requirements.txt").is_file() else ""
        (target / "requirements.txt").write_text(_pin(requirements, f"shovir=={__version__}"), encoding="utf-8")
        folders.append(target)
    return folders


def leaderboard_space_folder(out: str | Path, results: Iterable[str | Path] = (), results_repo: str | None = None) -> Path:
    """Lay out the leaderboard Space under ``out``: ``examples/leaderboard_space`` (app, card,
    requirements pinned to this shovir) plus the given results files in ``results/``.

    ``results_repo`` (a Hub dataset, e.g. one ``publish-results`` fills) is written into the
    Space's card so the app downloads its results at start.
    """
    from shovir.examples import examples_root
    from shovir.leaderboard.data import validate_upload

    source = examples_root() / "leaderboard_space"
    if not source.is_dir():
        raise FileNotFoundError(f"{source}: the leaderboard Space template is missing from this installation")
    out = _fresh(Path(out))
    for path in sorted(source.iterdir()):
        if path.is_file() and not path.name.startswith("."):
            shutil.copy2(path, out / path.name)
    requirements = (source / "requirements.txt").read_text(encoding="utf-8")
    (out / "requirements.txt").write_text(_pin(requirements, f"shovir[leaderboard]=={__version__}"), encoding="utf-8")
    if results_repo is not None:
        _check_repo_id(results_repo, "--results-repo")
        card = (out / "README.md").read_text(encoding="utf-8")
        (out / "README.md").write_text(card.replace("\n---\n", f"\nshovir_results_repo: {results_repo}\n---\n", 1),
                                       encoding="utf-8")
    (out / "results").mkdir()
    for index, path in enumerate(Path(p) for p in results):
        path = path / "results.json" if path.is_dir() else path
        validate_upload(path.read_bytes(), str(path))  # only valid documents go up
        shutil.copy2(path, out / "results" / f"{index:03d}-{_check_name(path.parent.name or 'run', 'results')}.json")
    return out


def results_folder(run_dir: str | Path, out: str | Path) -> Path:
    """Lay out a scored run for a results dataset repo: ``out/<dataset>/<run name>/`` with its
    results.json, report.md, tables and figures. Generations and predictions stay home (they
    are large, and can hold model outputs you may not want public)."""
    from shovir.leaderboard.data import validate_upload

    run_dir = Path(run_dir)
    results = run_dir / "results.json"
    if not results.is_file():
        raise FileNotFoundError(f"{results}: no results file; run `shovir score {run_dir}` first")
    doc = validate_upload(results.read_bytes(), str(results))
    dataset = ((doc.get("run") or {}).get("config") or {}).get("dataset") or {}
    dataset_name = dataset.get("name", "unknown") if isinstance(dataset, dict) else str(dataset)
    target = _fresh(Path(out) / _check_name(dataset_name, "dataset") / _check_name(run_dir.resolve().name, "run folder"))
    for path in sorted(run_dir.iterdir()):
        if path.is_file() and (path.name in ("results.json", "report.md") or path.suffix in (".md", ".tex", ".csv", ".png")):
            shutil.copy2(path, target / path.name)
    return target


ANNOTATION_FIELDS = ("image_id", "patient_id", "study_id", "width", "height", "labels", "boxes")
"""What ``publish-annotations`` keeps per image: identifiers, the image size, the 14 CheXpert codes
and the boxes (pixel coordinates, classes, anatomical region) — derived annotations only. Images
and report or finding text are never written: MIMIC-CXR (PhysioNet Credentialed Health Data
License 1.5.0) and PadChest-GR (its research use agreement) forbid redistributing them, so a user
joins these annotations to their own licensed copy by ``image_id``. The identifiers and codes are
still derived from credentialed data, which is why the repository is gated."""

_GATES = {
    "mimic_cxr": ("MIMIC-CXR-JPG and Chest ImaGenome", "https://physionet.org/content/mimic-cxr-jpg/",
                  "PhysioNet username", "I am a credentialed PhysioNet user and have signed the data use agreements of "
                  "MIMIC-CXR-JPG and Chest ImaGenome"),
    "padchest_gr": ("PadChest-GR", "https://bimcv.cipf.es/bimcv-projects/padchest-gr/",
                    "BIMCV access request id", "I have been granted access to PadChest-GR by BIMCV and accept its "
                    "research use agreement"),
}


def annotations_folder(dataset: str, out: str | Path, **build_options: Any) -> Path:
    """Build ``dataset`` (``mimic_cxr`` or ``padchest_gr``) from the user's licensed copy and write
    its per-box annotations (:data:`ANNOTATION_FIELDS`) as ``out/annotations.parquet`` with a
    dataset card whose YAML header requests gated, credentialed access."""
    import datasets

    from shovir.data import build

    if dataset not in _GATES:
        raise ValueError(f"--dataset must be one of {', '.join(_GATES)}, got {dataset!r}")
    build_options.setdefault("rows", "images")
    if build_options["rows"] != "images":
        raise ValueError("annotations are published per image: pass rows=images (the default)")
    rows, report = build(dataset, **build_options)
    out = _fresh(Path(out))
    keep = [c for c in ANNOTATION_FIELDS if c in rows.column_names and c not in ("width", "height")]

    def with_size(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        sizes = [image.size for image in batch["image"]]
        return {**{c: batch[c] for c in keep}, "width": [w for w, _ in sizes], "height": [h for _, h in sizes]}

    table = rows.map(with_size, batched=True, remove_columns=rows.column_names, desc="annotations")
    table = table.cast(datasets.Features({**{c: table.features[c] for c in keep}, "width": datasets.Value("int32"),
                                          "height": datasets.Value("int32")}))
    table.to_parquet(str(out / "annotations.parquet"))
    name, link, field, agreement = _GATES[dataset]
    (out / "build_report.json").write_text(json.dumps(report.as_dict(), indent=2), encoding="utf-8")
    (out / "README.md").write_text(f"""---
license: other
license_name: {dataset}-derived-annotations
pretty_name: {name} annotations for shovir
tags: [medical, chest-x-ray, grounding, shovir]
extra_gated_heading: Credentialed access to {name} is required
extra_gated_prompt: >-
  These annotations are derived from {name}, which is distributed under a credentialed data use
  agreement ({link}). Request access only if you hold that access yourself.
extra_gated_fields:
  {field}: text
  {agreement}: checkbox
configs:
  - config_name: default
    data_files: annotations.parquet
---
# {name} annotations for shovir

Per-image annotations that shovir derives from {name}: {", ".join(f"`{c}`" for c in ANNOTATION_FIELDS)}.
No image and no report or finding text is included; join these rows to your own licensed copy by
`image_id`. {len(table)} images; what the build kept and skipped is in `build_report.json`.

Built with shovir {__version__} (`shovir hub publish-annotations --dataset {dataset}`).
""", encoding="utf-8")
    return out


def upload(folder: str | Path, repo_id: str, repo_type: str, api: Any = None, space_sdk: str | None = None,
           private: bool = False, gated: bool = False, message: str | None = None) -> str:
    """Create ``repo_id`` if needed and upload ``folder`` to it; returns the repository URL.

    ``api`` defaults to ``huggingface_hub.HfApi()`` (tests pass a stub). ``gated`` turns on manual
    access approval after the upload.
    """
    _check_repo_id(repo_id, "repository")
    if repo_type not in ("space", "dataset", "model"):
        raise ValueError(f"repo_type must be 'space', 'dataset' or 'model', got {repo_type!r}")
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    url = api.create_repo(repo_id=repo_id, repo_type=repo_type, space_sdk=space_sdk, private=private, exist_ok=True)
    api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type=repo_type,
                      commit_message=message or f"shovir {__version__}")
    if gated:
        api.update_repo_settings(repo_id=repo_id, repo_type=repo_type, gated="manual")
    return str(url)


# -- command line ------------------------------------------------------------------------------


def add_hub_commands(subparsers: Any, parents: Sequence[Any] = ()) -> None:
    """Add ``shovir hub ...`` to the ``shovir`` command's subparsers."""
    hub = subparsers.add_parser("hub", help="lay out and publish Spaces and datasets on the Hugging Face Hub",
                                parents=list(parents))
    commands = hub.add_subparsers(dest="hub_command", required=True)

    def command(name: str, help_text: str) -> Any:
        parser = commands.add_parser(name, help=help_text, parents=list(parents))
        parser.add_argument("--out", help="folder for the layout (default: a new temporary folder)")
        parser.add_argument("--dry-run", action="store_true", help="write the folders and stop before any upload")
        parser.add_argument("--private", action="store_true", help="create the repositories private")
        return parser

    metrics = command("publish-metrics", "one Space per evaluate module")
    metrics.add_argument("--namespace", required=True, help="Hub user or organisation")
    metrics.add_argument("--metric", action="append", help="only this module (repeatable)")
    board = command("publish-leaderboard", "the leaderboard Space")
    board.add_argument("--namespace", required=True)
    board.add_argument("--name", default="shovir-leaderboard", help="Space name (default shovir-leaderboard)")
    board.add_argument("--results", action="append", default=[], help="a results.json or run folder to ship (repeatable)")
    board.add_argument("--results-repo", help="a Hub dataset of results the Space downloads at start")
    results = command("publish-results", "a scored run's results and report to a dataset repository")
    results.add_argument("run", help="the run folder (after `shovir score`)")
    results.add_argument("--repo", required=True, help="dataset repository NAMESPACE/NAME")
    annotations = command("publish-annotations", "derived per-box annotations to a gated dataset repository")
    annotations.add_argument("--dataset", required=True, choices=sorted(_GATES))
    annotations.add_argument("--repo", help="dataset repository NAMESPACE/NAME (not needed with --dry-run)")
    annotations.add_argument("--data-dir", help="root of your licensed copy")
    annotations.add_argument("--set", dest="options", action="append", default=[], metavar="KEY=VALUE",
                             help="builder option, repeatable (e.g. --set metadata_file=mimic_test_annotation.json)")
    annotations.add_argument("--cache-dir")


def run_hub_command(args: Any, api: Any = None) -> int:
    """Execute a parsed ``shovir hub ...`` command; ``api`` stubs ``HfApi`` in tests."""
    import tempfile

    from shovir.data.export import parse_options

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="shovir-hub-"))
    planned: list[tuple[Path, str, str, dict[str, Any]]] = []
    if args.hub_command == "publish-metrics":
        for folder in metric_space_folders(out, args.namespace, args.metric):
            planned.append((folder, f"{args.namespace}/{folder.name}", "space", {"space_sdk": "gradio"}))
    elif args.hub_command == "publish-leaderboard":
        _check_name(args.name, "--name")
        folder = leaderboard_space_folder(out, args.results, args.results_repo)
        planned.append((folder, f"{_check_name(args.namespace, '--namespace')}/{args.name}", "space", {"space_sdk": "gradio"}))
    elif args.hub_command == "publish-results":
        _check_repo_id(args.repo, "--repo")
        results_folder(args.run, out)
        planned.append((out, args.repo, "dataset", {}))
    else:
        if not args.dry_run and not args.repo:
            raise ValueError("--repo is required unless --dry-run")
        annotations_folder(args.dataset, out, data_dir=args.data_dir, cache_dir=args.cache_dir, **parse_options(args.options))
        planned.append((out, _check_repo_id(args.repo, "--repo") if args.repo else "", "dataset", {"gated": True}))
    for folder, repo_id, repo_type, extra in planned:
        if args.dry_run:
            print(f"dry run: {folder} -> {repo_type} {repo_id or '(no --repo)'}")
        else:
            print(f"{folder} -> {upload(folder, repo_id, repo_type, api=api, private=args.private, **extra)}")
    return 0
