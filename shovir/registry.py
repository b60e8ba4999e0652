"""One lazy registry type for everything shovir finds by name.

Datasets, labelers, models, metrics and verifiers are each a :class:`Registry`: built-in entries
are ``"module:attribute"`` strings imported on first use (so ``import shovir`` stays light, as in
lm-evaluation-harness and RadEval), third-party packages add entries through an entry-point group
(``shovir.models``, ``shovir.datasets``, ``shovir.labelers``, ``shovir.metrics``,
``shovir.verifiers``), and code can :meth:`Registry.register` at run time. A name that two sources
claim for different targets is an error, never a silent override. Entries carry metadata (for
metrics: direction, protocol, evaluate module).

Configs name things only through these registries: a sweep YAML can never make shovir import an
arbitrary callable (``subprocess:run`` as a "verifier" is refused).

>>> colours = Registry("colour", entries={"red": "colorsys:rgb_to_hsv"})
>>> colours.load("red").__name__
'rgb_to_hsv'
>>> colours.load("rde")
Traceback (most recent call last):
...
ValueError: unknown colour 'rde' (did you mean 'red'?); available: red
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Callable, Iterator, Mapping

from shovir.conditions import closest

__all__ = ["Entry", "Registry", "check_options", "parameters"]


@dataclass(frozen=True)
class Entry:
    """A registered name: where it lives and what is known about it without importing it."""

    name: str
    target: str | None
    source: str = "built-in"
    metadata: Mapping[str, Any] = field(default_factory=dict)
    loaded: Any = None
    point: Any = None


class Registry(Mapping[str, str]):
    """Names → lazily imported objects (a read-only mapping of name → ``"module:attr"``).

    Args:
        kind: what is registered, for messages (``"model"``, ``"dataset"``).
        group: the entry-point group third-party packages use, or ``None``.
        entries: built-in ``name → "module:attribute"``.
        metadata: built-in ``name → dict`` of metadata.
    """

    def __init__(self, kind: str, group: str | None = None, entries: Mapping[str, str] | None = None,
                 metadata: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.kind, self.group = kind, group
        self._entries: dict[str, Entry] = {}
        for name, target in (entries or {}).items():
            self.register(name, target, metadata=(metadata or {}).get(name, {}))

    # ----- registration
    def register(self, name: str, target: str | Any, *, metadata: Mapping[str, Any] | None = None,
                 source: str = "built-in") -> None:
        """Add ``name``: a ``"module:attribute"`` string or the object itself.

        Registering a name again with the same target is a no-op; another target is refused.

        >>> r = Registry("thing", entries={"a": "json:dumps"})
        >>> r.register("a", "json:loads")
        Traceback (most recent call last):
        ...
        ValueError: thing 'a' is already registered as json:dumps (built-in); pick another name
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.kind} names must be non-empty strings, got {name!r}")
        if isinstance(target, str):
            if target.count(":") != 1 or not all(target.split(":")):
                raise ValueError(f"{self.kind} {name!r}: target must look like 'package.module:attribute', got {target!r}")
            entry = Entry(name, target, source, dict(metadata or {}))
        else:
            entry = Entry(name, _describe(target), source, dict(metadata or {}), loaded=target)
        existing = self._entries.get(name)
        if existing is not None:
            if existing.target == entry.target:
                return
            raise ValueError(f"{self.kind} {name!r} is already registered as {existing.target} ({existing.source}); "
                             "pick another name")
        self._entries[name] = entry

    def _plugins(self) -> list[Any]:
        if self.group is None:
            return []
        return list(entry_points(group=self.group))

    def _all(self) -> dict[str, Entry]:
        entries = dict(self._entries)
        for point in self._plugins():
            target = getattr(point, "value", None)
            existing = entries.get(point.name)
            if existing is not None:
                if target is not None and existing.target == target:
                    continue
                raise ValueError(
                    f"{self.kind} {point.name!r} is claimed twice: {existing.target} ({existing.source}) and the "
                    f"entry point {target or point} (group {self.group}); uninstall one of the packages or rename")
            entries[point.name] = Entry(point.name, target, f"entry point ({self.group})", {}, point=point)
        return entries

    # ----- lookup
    def names(self) -> list[str]:
        """Built-in, registered and entry-point names, sorted."""
        return sorted(self._all())

    def entry(self, name: str, *, field: str | None = None) -> Entry:
        """The entry of ``name``; an unknown name is a ``ValueError`` with the closest match."""
        entries = self._all()
        if name not in entries:
            where = f"{field}: " if field else ""
            raise ValueError(f"{where}unknown {self.kind} {name!r}{closest(str(name), list(entries))}; "
                             f"available: {', '.join(sorted(entries))}")
        return entries[name]

    def metadata(self, name: str) -> Mapping[str, Any]:
        return self.entry(name).metadata

    def load(self, name: str, *, field: str | None = None) -> Any:
        """Import (once) and return the object registered as ``name``."""
        entry = self.entry(name, field=field)
        if entry.loaded is not None:
            return entry.loaded
        if entry.point is not None:
            return entry.point.load()
        module_name, attribute = entry.target.split(":")  # type: ignore[union-attr]
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
        self._entries[name] = Entry(entry.name, entry.target, entry.source, entry.metadata, loaded=target)
        return target

    # ----- Mapping protocol (name → target string), for listing
    def __getitem__(self, name: str) -> str:
        return self.entry(name).target or name

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._all())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._all()

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._entries)} built-in, group={self.group!r})"


def _describe(target: Any) -> str:
    module = getattr(target, "__module__", None) or type(target).__module__
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}:{qualname}"


def check_options(target: Callable[..., Any], options: Mapping[str, Any], *, field: str) -> None:
    """Refuse option names ``target`` (a class or function) does not accept, before anything runs.

    A ``**kwargs`` parameter accepts everything, except that the keywords of the parents a
    subclass forwards them to are checked too (``MedGemma(**options)`` → ``ImageTextToTextAdapter``).

    >>> def build(rows="images", n_images=200): ...
    >>> check_options(build, {"n_image": 10}, field="dataset")
    Traceback (most recent call last):
    ...
    ValueError: dataset: unknown option 'n_image' (did you mean 'n_images'?); valid options: n_images, rows
    """
    accepted, open_ended = parameters(target)
    if open_ended:
        return
    for key in options:
        if key not in accepted:
            raise ValueError(f"{field}: unknown option {key!r}{closest(key, sorted(accepted))}; "
                             f"valid options: {', '.join(sorted(accepted)) or '(none)'}")


def parameters(target: Callable[..., Any]) -> tuple[set[str], bool]:
    """Keyword names a callable accepts and whether it takes any (``**kwargs`` to the end),
    following ``**kwargs`` up a class's hierarchy.

    >>> class Base:
    ...     def __init__(self, rows="images"): ...
    >>> class Child(Base):
    ...     def __init__(self, n_images=200, **kwargs): ...
    >>> sorted(parameters(Child)[0]), parameters(Child)[1]
    (['n_images', 'rows'], False)
    """
    if not isinstance(target, type):
        return _signature_keywords(target)
    accepted: set[str] = set()
    for item in target.__mro__:
        function = vars(item).get("__init__")
        if function is None:
            continue
        if item is object:
            return accepted, False
        names, open_ended = _signature_keywords(function)
        accepted |= names
        if not open_ended:
            return accepted, False
    return accepted, False


def _signature_keywords(function: Callable[..., Any]) -> tuple[set[str], bool]:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return set(), True
    names = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"}
    return names, any(p.kind is p.VAR_KEYWORD for p in parameters)
