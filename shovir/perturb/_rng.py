"""Per-sample random generators keyed by the sample's identity, never by its position.

The ShoViR authors reseeded with ``seed + index`` (reference code §4.8), so a sample got other
noise in DOCO than in OCO once filtering shifted the indices (defect 6). Here the generator of a
sample is a pure function of ``(seed, image_id, condition, target_class)``: the same inputs give
the same bytes in any process, worker or machine, whatever the dataset order.
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np

__all__ = ["sample_key", "sample_rng", "as_generator"]


def sample_key(
    seed: int,
    image_id: str,
    condition: str,
    target_class: str | None = None,
    p: float | None = None,
) -> int:
    """A 128-bit integer key from a BLAKE2b digest of the sample's identity.

    ``p`` is left out by default (see :class:`shovir.perturb.Condition`, ``noise_per_p``);
    when given it is written with 6 decimals so ``0.2`` and ``0.2000000001`` agree.

    >>> sample_key(3, "img-1", "oco", "Edema") == sample_key(3, "img-1", "oco", "Edema")
    True
    >>> sample_key(3, "img-1", "oco", "Edema") == sample_key(3, "img-1", "doco", "Edema")
    False
    >>> hex(sample_key(0, "a", "oco"))[:10]
    '0xab2a69ed'
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    fields: list[object] = [int(seed), str(image_id), str(condition), "" if target_class is None else str(target_class)]
    if p is not None:
        if not math.isfinite(float(p)):
            raise ValueError(f"p must be finite, got {p!r}")
        fields.append(f"{float(p):.6f}")
    digest = hashlib.blake2b(json.dumps(fields).encode("utf-8"), digest_size=16).digest()
    return int.from_bytes(digest, "little")


def sample_rng(
    seed: int,
    image_id: str,
    condition: str,
    target_class: str | None = None,
    p: float | None = None,
) -> np.random.Generator:
    """The generator of one sample: SFC64 seeded with :func:`sample_key`.

    SFC64 draws full-frame Gaussian noise about 2.5× faster than Philox on this workload; each
    sample has its own 128-bit key, so no stream counter or jump-ahead is needed.

    >>> float(sample_rng(3, "img-1", "oco").standard_normal()) == float(sample_rng(3, "img-1", "oco").standard_normal())
    True
    """
    return np.random.Generator(np.random.SFC64(np.random.SeedSequence(sample_key(seed, image_id, condition, target_class, p))))


def as_generator(rng: np.random.Generator | int) -> np.random.Generator:
    """Accept a ready generator or an integer seed.

    >>> isinstance(as_generator(7), np.random.Generator)
    True
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.Generator(np.random.SFC64(np.random.SeedSequence(int(rng))))
    raise ValueError(
        f"rng must be a numpy Generator or an integer seed, got {type(rng).__name__}; "
        "use shovir.perturb.sample_rng(seed, image_id, condition, target_class) for per-sample streams"
    )
