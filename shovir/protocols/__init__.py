"""Protocols as first-class declarations: condition presets, metric bindings, table, figures.

A :class:`Protocol` states everything the suite does with one paper's design, and nothing else:

* ``presets`` — named condition lists a sweep can use (``conditions: shovir``);
* ``metrics`` — :class:`Binding` lines, each feeding conditions of a run to one metric of
  :data:`shovir.metrics.METRICS` through a *feed* of :mod:`shovir.scoring` (how the inputs are
  assembled: per image, per (image, class) pair, per contrast with a control, per VQA item);
* ``table`` — :class:`Column` lines for the protocol's table (ShoViR's is Table 1);
* ``figures`` — the figure functions of :mod:`shovir.report.figures` it draws.

The scorer runs one generic loop over the protocols whose conditions a run has; the report and
the leaderboard read the declarations to lay out results. Adding a metric to a protocol is one
:class:`Binding` line; a new protocol is one module here plus one :data:`PROTOCOLS` entry.

>>> sorted(PROTOCOLS)
['beyond_accuracy', 'modalens', 'shovir']
>>> [b.key for b in get_protocol("modalens").metrics]
['swap_sensitivity']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

from shovir.registry import Registry

__all__ = ["Binding", "Column", "Protocol", "PROTOCOLS", "get_protocol", "presets", "protocols_for"]


@dataclass(frozen=True)
class Binding:
    """One metric of a protocol, fed by conditions of a run.

    Attributes:
        key: where the results go in the protocol's section of a model (``flip_rate``).
        metric: a :data:`shovir.metrics.METRICS` name.
        feed: how :mod:`shovir.scoring` assembles the inputs (``image_codes``, ``image_texts``,
            ``image_contrast``, ``pair_codes``, ``pair_contrast``, ``curve``, ``vqa_reliance``,
            ``vqa_swap``).
        conditions: the condition kinds the feed reads; for contrasts the control comes first.
        options: feed options (e.g. ``reference="dataset_labels"``).
    """

    key: str
    metric: str
    feed: str
    conditions: tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Column:
    """One table column: a binding's result for one condition, and the field inside it."""

    label: str
    key: str
    condition: str
    field: tuple[str, ...]


@dataclass(frozen=True)
class Protocol:
    """One protocol's declaration (see the module docstring)."""

    name: str
    title: str
    paper: str
    task: Literal["report", "vqa"]
    presets: Mapping[str, Sequence[Any]]
    metrics: tuple[Binding, ...]
    table: tuple[Column, ...] = ()
    figures: tuple[str, ...] = ()

    def kinds(self) -> set[str]:
        """Every condition kind its metrics read."""
        return {kind for binding in self.metrics for kind in binding.conditions}


PROTOCOLS = Registry("protocol", "shovir.protocols", {
    "shovir": "shovir.protocols.shovir:PROTOCOL",
    "beyond_accuracy": "shovir.protocols.beyond_accuracy:PROTOCOL",
    "modalens": "shovir.protocols.modalens:PROTOCOL",
})


def get_protocol(name: str) -> Protocol:
    """The declaration registered as ``name``."""
    protocol = PROTOCOLS.load(name)
    if not isinstance(protocol, Protocol):
        raise TypeError(f"protocol {name!r} ({PROTOCOLS[name]}) is not a shovir Protocol")
    return protocol


def presets() -> dict[str, Sequence[Any]]:
    """Every protocol's condition presets by name (a name two protocols claim is refused).

    >>> [len(presets()[name]) for name in ("beyond_accuracy", "modalens")]
    [3, 4]
    """
    out: dict[str, Sequence[Any]] = {}
    for name in PROTOCOLS.names():
        for preset, entries in get_protocol(name).presets.items():
            if preset in out:
                raise ValueError(f"condition preset {preset!r} is declared by two protocols")
            out[preset] = entries
    return out


def protocols_for(task: str, kinds: set[str]) -> list[Protocol]:
    """The protocols that apply to a run: same task, and every kind of one of their bindings present.

    >>> [p.name for p in protocols_for("vqa", {"baseline", "shuffle"})]
    ['beyond_accuracy']
    """
    out = []
    for name in PROTOCOLS.names():
        protocol = get_protocol(name)
        if protocol.task == task and any(set(b.conditions[:2]) <= kinds for b in protocol.metrics):
            out.append(protocol)
    return out
