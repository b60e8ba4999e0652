"""Report labelers: free-text reports → 14 CheXpert codes (see :mod:`shovir.labels`).

Every labeler is a callable ``labeler(reports: Sequence[str]) -> np.ndarray`` of shape
``(len(reports), 14)``, dtype ``int8``, codes 0 blank / 1 positive / 2 negative / 3 uncertain in
CheXbert head order. :func:`get_labeler` builds one by name:

* ``"rule"`` — the offline, rule-based CheXpert labeler (default; no weights);
* ``"chexbert"`` — CheXbert from a local checkpoint.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from shovir.registry import Registry, check_options

__all__ = ["Labeler", "LABELERS", "get_labeler"]


@runtime_checkable
class Labeler(Protocol):
    """The labeler interface: a name and a batch call."""

    name: str

    def __call__(self, reports: Sequence[str]) -> np.ndarray:  # pragma: no cover - protocol
        ...


LABELERS = Registry("labeler", "shovir.labelers", {
    "rule": "shovir.labelers.rule_based:RuleBasedLabeler",
    "chexbert": "shovir.labelers.chexbert:CheXbertLabeler",
})
"""Labeler name → ``module:Class``, imported on first use (entry-point group ``shovir.labelers``)."""


def get_labeler(name: str = "rule", **kwargs: Any) -> Labeler:
    """Build the labeler registered as ``name`` with its keyword options.

    >>> get_labeler("rule").name
    'rule'
    """
    labeler_class = LABELERS.load(name, field="labeler")
    check_options(labeler_class, kwargs, field=f"labeler {name}")
    return labeler_class(**kwargs)
