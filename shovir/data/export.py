"""Command-line export shared by ``dataset_scripts/<name>.py`` and ``shovir data build``.

Builds one registered dataset from its sources and writes it under ``OUT``::

    OUT/<name>/test.parquet           Parquet, images embedded as bytes (portable), or
    OUT/<name>/                       an Arrow dataset folder (``save_to_disk``)
    OUT/<name>.build_report.json      what was kept and skipped, by reason

The build report sits beside the data folder, not in it, so the folder loads as it is:
``datasets.load_dataset("parquet", data_dir="OUT/<name>")`` or ``datasets.load_from_disk``.
Builder options pass through as ``--set key=value`` (values parsed as JSON when they parse).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

from datasets.table import embed_table_storage

from shovir.data import BUILDERS, build

__all__ = ["parse_options", "export", "main"]


def parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    """Turn ``["n_images=20", "rows=pairs"]`` into ``{"n_images": 20, "rows": "pairs"}``.

    >>> parse_options(["n_images=20", "rows=pairs", "iou_inclusive=true"])
    {'n_images': 20, 'rows': 'pairs', 'iou_inclusive': True}
    """
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--set expects key=value, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def export(name: str, out: str | Path, fmt: str = "parquet", **build_kwargs: Any) -> Path:
    """Build dataset ``name`` and write it under ``out`` (layout in the module docstring); return
    the data folder."""
    if fmt not in ("parquet", "arrow"):
        raise ValueError(f"format must be 'parquet' or 'arrow', got {fmt!r}")
    dataset, report = build(name, **build_kwargs)
    out = Path(out)
    target = out / name
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(f"{target} already holds files; choose another --out or remove it first "
                              "(an export never mixes two builds)")
    target.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        # Builders store image files by path; embed the bytes so the export stands alone.
        dataset = dataset.with_format("arrow").map(embed_table_storage, batched=True, keep_in_memory=True)
        dataset.to_parquet(str(target / f"{build_kwargs.get('split', 'test')}.parquet"))
    else:
        dataset.save_to_disk(str(target))
    (out / f"{name}.build_report.json").write_text(json.dumps(report.as_dict(), indent=2))
    print(f"{name}: {len(dataset)} rows -> {target} ({report.summary()})")
    return target


def main(name: str | None = None, argv: Sequence[str] | None = None) -> int:
    """Entry point: ``python dataset_scripts/<name>.py --data-dir ... --out ...``."""
    parser = argparse.ArgumentParser(
        prog="shovir data build" if name is None else f"dataset_scripts/{name}.py",
        description=f"Build the {name} dataset from its sources and export it." if name else
        "Build a registered dataset from its sources and export it.",
    )
    if name is None:
        parser.add_argument("name", choices=sorted(BUILDERS))
    parser.add_argument("--data-dir", help="root of the dataset's local files (not needed for synthetic)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--format", default="parquet", choices=("parquet", "arrow"))
    parser.add_argument("--rows", choices=("images", "pairs"), help="row kind of grounded datasets")
    parser.add_argument("--on-error", default="raise", choices=("raise", "skip"))
    parser.add_argument("--cache-dir", help="datasets cache folder")
    parser.add_argument("--set", dest="options", action="append", default=[], metavar="KEY=VALUE",
                        help="builder option, repeatable (e.g. --set n_images=200)")
    args = parser.parse_args(argv)
    options = parse_options(args.options)
    if args.rows:
        options["rows"] = args.rows
    export(
        name or args.name,
        args.out,
        fmt=args.format,
        data_dir=args.data_dir,
        cache_dir=args.cache_dir,
        on_error=args.on_error,
        **options,
    )
    return 0
