"""Model inputs, prepared image by image: each image decoded once for all of its conditions.

The plan lists calls image by image (:func:`shovir.runner.plan.build_plan`). The pipeline cuts that
list into *chunks*: consecutive calls that show the same image, at most ``chunk_size`` of them. A
chunk decodes its image once, wraps it with :func:`shovir.perturb.prepare` (so the matched-noise
histogram is counted once and shared by every condition and strength) and builds one
:class:`~shovir.models.Message` per call. Model batches are then cut from the stream of messages,
so a batch can span two images and an image can span several batches without being decoded twice
within a chunk.

Ranks receive whole images (:func:`shard_calls`): an image is decoded by one rank, not by all.

With ``workers > 0`` the chunks are prepared by a torch ``DataLoader`` in background processes
while the model generates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from shovir.models import Message
from shovir.perturb import Condition, prepare
from shovir.runner.plan import Call

__all__ = ["Chunk", "InputPipeline", "chunk_calls", "shard_calls", "DEFAULT_CHUNK_SIZE"]

DEFAULT_CHUNK_SIZE = 32
"""Calls per chunk: enough to amortise a decode over a whole ShoViR condition set of one
(image, class) pair, few enough that prefetched chunks of full-size radiographs fit in memory."""


@dataclass(frozen=True)
class Chunk:
    """Consecutive calls that show the image first held by row ``image_row``."""

    image_row: int
    calls: tuple[Call, ...]


def _runs(calls: Sequence[Call]) -> list[list[Call]]:
    runs: list[list[Call]] = []
    for call in calls:
        if runs and runs[-1][0].image_row == call.image_row:
            runs[-1].append(call)
        else:
            runs.append([call])
    return runs


def chunk_calls(calls: Sequence[Call], chunk_size: int = DEFAULT_CHUNK_SIZE) -> list[Chunk]:
    """Cut ``calls`` into chunks of at most ``chunk_size`` consecutive calls showing one image.

    >>> calls = [Call(f"k{i}", "oco", 1.0, row, None, None, False) for i, row in enumerate([0, 0, 0, 1, 0])]
    >>> [(c.image_row, len(c.calls)) for c in chunk_calls(calls, chunk_size=2)]
    [(0, 2), (0, 1), (1, 1), (0, 1)]
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    chunks = []
    for run in _runs(calls):
        for start in range(0, len(run), chunk_size):
            chunks.append(Chunk(run[0].image_row, tuple(run[start: start + chunk_size])))
    return chunks


def shard_calls(calls: Sequence[Call], world_size: int, rank: int) -> list[Call]:
    """The calls of ``rank``: whole images, dealt to the least-loaded rank in plan order, so that
    each image is decoded by one rank and the ranks' call counts differ by at most one image's.

    Deterministic: every rank computes the same assignment from the same plan.

    >>> calls = [Call(f"k{i}", "oco", 1.0, row, None, None, False) for i, row in enumerate([0, 0, 0, 1, 2, 2])]
    >>> [[c.row for c in shard_calls(calls, 2, r)] for r in range(2)]
    [[0, 0, 0], [1, 2, 2]]
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    loads = [0] * world_size
    mine: list[Call] = []
    for run in _runs(calls):
        target = min(range(world_size), key=lambda r: (loads[r], r))
        loads[target] += len(run)
        if target == rank:
            mine.extend(run)
    return mine


def _identity(item: Any) -> Any:
    return item


class InputPipeline:
    """The model inputs of ``calls``, as ``(calls, messages)`` batches (see the module docstring).

    Args:
        calls: the calls to prepare, in plan order (image by image).
        seeds: the sampling seed of each call, by call key.
        images: a dataset whose rows hold the ``image`` column (decoded on access).
        rows: the other columns of the same dataset, as a dict of lists.
        conditions: the :class:`~shovir.perturb.Condition` of each ``(image_condition, p)``.
        prompt: the prompt of rows without a ``question``.
        chunk_size: calls prepared together from one decoded image.
    """

    def __init__(self, calls: Sequence[Call], seeds: Mapping[str, int], images: Any, rows: Mapping[str, list[Any]],
                 conditions: Mapping[tuple[str, float], Condition], prompt: str | None,
                 chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        self.chunks = chunk_calls(calls, chunk_size)
        self.seeds, self.images, self.rows, self.conditions, self.prompt = seeds, images, rows, conditions, prompt

    def __len__(self) -> int:
        return len(self.chunks)

    def _row(self, index: int) -> dict[str, Any]:
        return {name: values[index] for name, values in self.rows.items()}

    def __getitem__(self, index: int) -> list[tuple[Call, Message]]:
        chunk = self.chunks[index]
        canvas = prepare(self.images[chunk.image_row]["image"], field=f"image of row {chunk.image_row}")
        prepared = []
        for call in chunk.calls:
            row = self._row(call.row)
            source = row if call.source_row == call.row else self._row(call.source_row)
            image, _ = self.conditions[(call.image_condition, call.p)].apply(canvas, source)
            prepared.append((call, Message(images=[image], prompt=row.get("question") or self.prompt,
                                           report=row.get("report") if call.with_report else None,
                                           options=row.get("options") or None, seed=self.seeds[call.key])))
        return prepared

    def _chunks(self, workers: int) -> Iterator[list[tuple[Call, Message]]]:
        if workers <= 0 or len(self) < 2:
            return (self[i] for i in range(len(self)))
        from torch.utils.data import DataLoader

        return iter(DataLoader(self, batch_size=None, num_workers=min(workers, len(self)), prefetch_factor=2,
                               collate_fn=_identity))

    def batches(self, batch_size: int, workers: int = 0) -> Iterator[tuple[list[Call], list[Message]]]:
        """``(calls, messages)`` batches of ``batch_size`` (the last one may be shorter).

        >>> pipeline = InputPipeline([], {}, None, {}, {}, None)
        >>> list(pipeline.batches(8))
        []
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        pending: list[tuple[Call, Message]] = []
        for prepared in self._chunks(workers):
            pending.extend(prepared)
            while len(pending) >= batch_size:
                batch, pending = pending[:batch_size], pending[batch_size:]
                yield [call for call, _ in batch], [message for _, message in batch]
        if pending:
            yield [call for call, _ in pending], [message for _, message in pending]
