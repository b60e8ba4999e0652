"""shovir: does your medical vision-language model really use the image?

Controlled image interventions (occlusion of disease and context boxes, matched noise,
blank / shuffled / swapped images) and the shortcut metrics of four published protocols
(ShoViR, Beyond Accuracy, ModaLens, ICARE), packaged as one reproducible suite.
"""

__version__ = "0.1.0"

from shovir.evaluate_modules import load_metric  # noqa: E402  (stdlib-only import: evaluate is imported on call)

__all__ = ["__version__", "load_metric"]
