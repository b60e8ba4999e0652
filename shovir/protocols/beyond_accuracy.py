"""Beyond Accuracy (``beyond_accuracy_vrs_hvrr.txt``): VQA with real, blank and shuffled images.

§3.3 defines the counterfactual images, §3.4 the metrics: accuracy per condition, the Visual
Reliance Score VRS = Acc(real) − Acc(shuffled), Blank Drop, Image Sensitivity, with bootstrap
intervals; §3.5–3.6 the rationale metrics NVCR and HVRR (visual claims whose answer does not change
when the image is shuffled), computed whenever the outputs carry a rationale. Run with and without a
context report, each arm is scored on its own.
"""

from __future__ import annotations

from shovir.protocols import Binding, Column, Protocol

PROTOCOL = Protocol(
    name="beyond_accuracy",
    title="Beyond Accuracy — visual reliance in VQA",
    paper="beyond_accuracy_vrs_hvrr.txt",
    task="vqa",
    presets={"beyond_accuracy": [{"name": "baseline"}, {"name": "blank"}, {"name": "shuffle"}]},
    metrics=(
        Binding("visual_reliance", "visual_reliance", "vqa_reliance", ("baseline", "shuffle", "blank")),
        Binding("hvrr", "hallucination_metrics", "vqa_rationales", ("baseline", "shuffle")),
    ),
    table=(
        Column("Acc real", "visual_reliance", "baseline", ("accuracy_real",)),
        Column("Acc shuffled", "visual_reliance", "baseline", ("accuracy_shuffled",)),
        Column("Acc blank", "visual_reliance", "baseline", ("accuracy_blank",)),
        Column("VRS", "visual_reliance", "baseline", ("vrs",)),
        Column("Image sensitivity", "visual_reliance", "baseline", ("image_sensitivity",)),
        Column("NVCR", "hvrr", "baseline", ("nvcr",)),
        Column("HVRR", "hvrr", "baseline", ("hvrr",)),
    ),
    figures=("shovir.report.figures:vqa_accuracy",),
)
