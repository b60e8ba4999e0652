"""How a checkpoint-backed adapter finds and loads its weights: one validated :class:`LoadOptions`.

Every adapter built on a checkpoint takes the same loading keywords (``checkpoint``, ``revision``,
``dtype``, ``device`` or ``device_map``, ``trust_remote_code``, ``local_files_only`` and, where
the model class accepts it, ``attn_implementation``). They are validated once, here, and travel
together as a frozen :class:`LoadOptions`; the adapters only add what is particular to their
model.

Defects of the reference code avoided here (reference §9)
---------------------------------------------------------
* **No remote code unless asked**: ``trust_remote_code`` is an explicit argument defaulting to
  ``False`` and is not even passed to ``from_pretrained`` unless it is ``True``.
* **Nothing downloads unless asked** (DESIGN: offline first): ``local_files_only=True`` by default;
  a missing local folder is an immediate :class:`FileNotFoundError`, before any Hub call
  (:func:`resolve_checkpoint`), and a Hub id missing from the local cache fails with a message
  that says how to get it (:func:`hub_hint`).

Example::

    >>> options = LoadOptions("google/medgemma-1.5-4b-it", dtype="bf16")
    >>> options.dtype, options.is_local, options.hub_kwargs()
    ('bfloat16', False, {'local_files_only': True})
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "LoadOptions",
    "canonical_dtype",
    "default_device",
    "hub_hint",
    "local_snapshot",
    "resolve_checkpoint",
    "torch_dtype",
]

_DTYPES = {
    "auto": "auto",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
}


def resolve_checkpoint(checkpoint: Any, *, field: str = "checkpoint") -> tuple[str, bool]:
    """``(checkpoint, is_local_folder)``, refusing a local path that does not exist.

    A string naming an existing folder is local. Something that can only be a filesystem path
    (absolute, ``./``, ``../``, ``~``, a backslash, more than one ``/``, a trailing ``/``) but does
    not exist raises :class:`FileNotFoundError` at once, before any Hub call. Anything else is a
    Hub id (``org/name``).

    >>> resolve_checkpoint("google/medgemma-1.5-4b-it")
    ('google/medgemma-1.5-4b-it', False)
    >>> resolve_checkpoint("/no/such/folder")
    Traceback (most recent call last):
    ...
    FileNotFoundError: checkpoint: no such folder '/no/such/folder' ...
    """
    if isinstance(checkpoint, os.PathLike):
        checkpoint = os.fspath(checkpoint)
    if not isinstance(checkpoint, str) or not checkpoint.strip():
        raise ValueError(f"{field} must be a local folder or a Hugging Face Hub id ('org/name'), got {checkpoint!r}")
    expanded = os.path.expanduser(checkpoint)
    if os.path.isdir(expanded):
        return expanded, True
    if os.path.exists(expanded):
        raise ValueError(f"{field}: {checkpoint!r} is a file; pass the checkpoint folder that holds config.json")
    looks_local = (
        os.path.isabs(expanded)
        or checkpoint.startswith((".", "~"))
        or "\\" in checkpoint
        or checkpoint.count("/") > 1
        or checkpoint.endswith("/")
    )
    if looks_local:
        raise FileNotFoundError(
            f"{field}: no such folder {checkpoint!r} (nothing was downloaded). Pass an existing checkpoint "
            "folder (config.json, weights, processor/tokenizer files) or a Hugging Face Hub id such as 'org/name'."
        )
    return checkpoint, False


def local_snapshot(checkpoint: str, *, revision: str | None = None, local_files_only: bool = True,
                   field: str = "checkpoint") -> str:
    """A local folder for ``checkpoint``: the folder itself, or the Hub snapshot in the cache.

    Research code that builds models itself (Libra's and RaDialog's builders) has no
    ``local_files_only`` switch, so shovir hands it a folder. With ``local_files_only=True`` (the
    default) only the local Hugging Face cache is read; otherwise the snapshot may be downloaded.

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> local_snapshot(folder) == folder
    True
    """
    path, is_local = resolve_checkpoint(checkpoint, field=field)
    if is_local:
        return path
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(repo_id=path, revision=revision, local_files_only=local_files_only)
    except Exception as error:  # LocalEntryNotFoundError, OfflineModeIsEnabled, HTTP errors, ...
        raise OSError(hub_hint(path, local_files_only, field)) from error


def hub_hint(checkpoint: str, local_files_only: bool, field: str = "checkpoint") -> str:
    """What to do when a Hub checkpoint could not be loaded (cache miss, or no network).

    >>> "hf download org/name" in hub_hint("org/name", local_files_only=True)
    True
    """
    if local_files_only:
        return (
            f"{field}: {checkpoint!r} is not a local folder and is not in the local Hugging Face cache; downloads are "
            f"off by default (local_files_only=True). Download it once (`hf download {checkpoint}`), pass a local "
            "folder, or pass local_files_only=False to let it be downloaded."
        )
    return (
        f"{field}: {checkpoint!r} could not be fetched from the Hugging Face Hub (offline? HF_HUB_OFFLINE=1? gated "
        "model without accepted terms or a token?). Download it where the Hub is reachable and pass the folder."
    )


def canonical_dtype(dtype: Any, *, field: str = "dtype") -> str:
    """A dtype name: ``float32``, ``float16``, ``bfloat16`` or ``auto`` (the checkpoint's own).

    >>> canonical_dtype("bf16"), canonical_dtype(None)
    ('bfloat16', 'auto')
    """
    if dtype is None:
        return "auto"
    name = str(dtype).removeprefix("torch.")
    if name not in _DTYPES:
        raise ValueError(f"{field} must be one of float32, float16, bfloat16, auto (or None), got {dtype!r}")
    return _DTYPES[name]


def torch_dtype(name: str) -> Any:
    """The torch dtype for a :func:`canonical_dtype` name (``"auto"`` stays a string).

    >>> torch_dtype("auto")
    'auto'
    """
    if name == "auto":
        return "auto"
    import torch

    return getattr(torch, name)


def default_device(device: str | None = None) -> str:
    """``device`` itself, else ``"cuda"`` when a GPU is visible, else ``"cpu"``.

    >>> default_device("cpu")
    'cpu'
    """
    if device is not None:
        return str(device)
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _optional_string(value: Any, name: str) -> None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} must be a string or None, got {type(value).__name__}")


@dataclass(frozen=True)
class LoadOptions:
    """Where the weights come from and how they are loaded, validated once.

    Args:
        checkpoint: a local folder or a Hub id; a path-like folder that does not exist is refused
            at once (:func:`resolve_checkpoint`).
        revision: a Hub revision (a commit hash is recommended).
        dtype: ``float32``, ``float16``, ``bfloat16`` (or ``fp32``/``fp16``/``bf16``), or ``None``
            / ``"auto"`` for the checkpoint's own; stored as its :func:`canonical_dtype` name.
        device: e.g. ``"cuda:0"`` or ``"cpu"`` (``None``: CUDA when available).
        device_map: e.g. ``"auto"`` (needs accelerate) to shard a large model; not with ``device``.
        trust_remote_code: run code shipped with the checkpoint; only passed when ``True``.
        local_files_only: read only local files / the local Hub cache (default ``True``).
        attn_implementation: e.g. ``"sdpa"`` or ``"eager"`` for model classes that take it;
            ``None`` lets transformers choose.

    ``path`` (the resolved folder or Hub id) and ``is_local`` are derived from ``checkpoint``.

    >>> LoadOptions("org/name", device="cpu", device_map="auto")
    Traceback (most recent call last):
    ...
    ValueError: pass either device or device_map, not both
    >>> LoadOptions("org/name", dtype="float64")
    Traceback (most recent call last):
    ...
    ValueError: dtype must be one of float32, float16, bfloat16, auto (or None), got 'float64'
    """

    checkpoint: str | os.PathLike
    revision: str | None = None
    dtype: str | None = None
    device: str | None = None
    device_map: str | dict | None = None
    trust_remote_code: bool = False
    local_files_only: bool = True
    attn_implementation: str | None = None
    path: str = field(init=False, repr=False)
    is_local: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.trust_remote_code, bool):
            raise ValueError(f"trust_remote_code must be True or False, got {self.trust_remote_code!r}")
        if not isinstance(self.local_files_only, bool):
            raise ValueError(f"local_files_only must be True or False, got {self.local_files_only!r}")
        if self.device is not None and self.device_map is not None:
            raise ValueError("pass either device or device_map, not both")
        if self.device_map is not None and not isinstance(self.device_map, (str, dict)):
            raise ValueError(f"device_map must be a string (e.g. 'auto'), a dict or None, got {self.device_map!r}")
        _optional_string(self.revision, "revision")
        _optional_string(self.attn_implementation, "attn_implementation")
        path, is_local = resolve_checkpoint(self.checkpoint)
        # frozen: the normalised values are written once, here
        object.__setattr__(self, "checkpoint", os.fspath(self.checkpoint))
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "is_local", is_local)

    def hub_kwargs(self) -> dict[str, Any]:
        """Keywords for every ``from_pretrained`` (processor, tokenizer and model alike)."""
        kwargs: dict[str, Any] = {"local_files_only": self.local_files_only}
        if self.revision is not None:
            kwargs["revision"] = self.revision
        if self.trust_remote_code:
            kwargs["trust_remote_code"] = True
        return kwargs

    def model_kwargs(self) -> dict[str, Any]:
        """:meth:`hub_kwargs` plus the dtype, ``device_map`` and ``attn_implementation`` (when set)."""
        kwargs = self.hub_kwargs()
        kwargs["dtype"] = torch_dtype(self.dtype)
        if self.device_map is not None:
            kwargs["device_map"] = self.device_map
        if self.attn_implementation is not None:
            kwargs["attn_implementation"] = self.attn_implementation
        return kwargs

    def target_device(self) -> str:
        """Where an unsharded model goes (:func:`default_device` of ``device``)."""
        return default_device(self.device)

    def snapshot(self) -> str:
        """A local folder holding the checkpoint (:func:`local_snapshot`)."""
        return local_snapshot(self.path, revision=self.revision, local_files_only=self.local_files_only)

    def call(self, loader: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a ``from_pretrained``; cache misses and remote-code refusals become errors that say what to do."""
        try:
            return loader(*args, **kwargs)
        except ValueError as error:
            if "trust_remote_code" in str(error):
                raise ValueError(
                    f"{self.checkpoint!r} ships its own model code; review it and pass trust_remote_code as True"
                ) from error
            raise
        except OSError as error:
            if self.is_local:
                raise OSError(f"checkpoint folder {self.path!r} could not be loaded: {error}") from error
            raise OSError(hub_hint(self.path, self.local_files_only)) from error
