"""ModaLens (``modalens_image_swap.txt``): report-conditioned VQA under a same-patient image swap.

§2 swaps the image for a discordant study of the same patient and asks the same questions with
and without the report; the metrics are the paired flip rates per arm, their paired difference
with a patient-clustered bootstrap interval, and margin changes.
"""

from __future__ import annotations

from shovir.protocols import Binding, Column, Protocol

PROTOCOL = Protocol(
    name="modalens",
    title="ModaLens — image swaps with and without the report",
    paper="modalens_image_swap.txt",
    task="vqa",
    presets={"modalens": [{"name": "baseline", "with_report": flag} for flag in (False, True)]
             + [{"name": "swap", "with_report": flag} for flag in (False, True)]},
    metrics=(Binding("swap_sensitivity", "swap_sensitivity", "vqa_swap", ("baseline", "swap")),),
    table=(
        Column("Flip rate (image only)", "swap_sensitivity", "swap", ("flip_rate_without_report",)),
        Column("Flip rate (with report)", "swap_sensitivity", "swap", ("flip_rate_with_report",)),
        Column("Paired difference", "swap_sensitivity", "swap", ("paired_difference",)),
    ),
    figures=("shovir.report.figures:swap_flip_rates",),
)
