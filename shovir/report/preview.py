"""Render every intervention on a few synthetic samples: ``shovir preview``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

__all__ = ["PREVIEW_CONDITIONS", "render_preview"]

PREVIEW_CONDITIONS = ("baseline", "full_noise", "oco_p40", "oco_p100", "doco_p100", "ro_p100", "ro_area_p100", "blank")


def render_preview(out: str | Path = "preview", n_images: int = 60, rows: int = 4, seed: int = 0,
                   cache_dir: str | None = None) -> dict[str, Any]:
    """Build the synthetic set and render every intervention of :data:`PREVIEW_CONDITIONS` on
    ``rows`` samples into ``out/interventions.png`` (disease boxes red, co-disease boxes blue, RO
    boxes yellow), with ``out/summary.json``; returns the summary."""
    from PIL import Image, ImageDraw

    from shovir.data import build
    from shovir.perturb import Condition, EmpiricalBoxSizes

    started = time.perf_counter()
    pairs, report = build("synthetic", rows="pairs", n_images=n_images, seed=seed, cache_dir=cache_dir)
    sizes = EmpiricalBoxSizes.from_dataset(pairs)
    conditions = [Condition.parse(text, seed=seed, box_sizes=sizes) for text in PREVIEW_CONDITIONS]
    # one pair per row of the grid: prefer samples that have context boxes, so DOCO shows something
    with_context = [i for i, boxes in enumerate(pairs["context_boxes"]) if boxes]
    chosen = (with_context or list(range(len(pairs))))[: rows]
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
    out = Path(out)
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
    return summary
