"""Whether this machine can hold a study's largest model, checked before a run writes anything.

The largest shape a space can build (:func:`largest_shape`: its widest d_model, deepest n_layers, the most heads,
key/value heads and head width it lists, its largest MLP ratio) is estimated by explorer.model._footprint for
training at ``[task] batch_size`` and for timing at ``[latency] batch_size`` (and decoding at ``[decode]``), once
per worker process, and compared with the memory available (explorer.limits.check_memory). It is an
upper bound: the space may hold no model quite that large.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from explorer.layout import InputSpec, SpaceSpec
from explorer.limits import check_memory
from explorer.measure import deployment_spec
from explorer.model import Shape, inference_bytes, training_bytes
from explorer.spec import StudySpec

if TYPE_CHECKING:
    import torch

PROCESS_BYTES = 500 * 10**6  # what one more worker process takes before its model: Python, torch, Optuna


def largest_shape(space: SpaceSpec) -> Shape:
    """An upper bound of the models ``space`` builds: every layer at the most heads, kv heads and head width."""
    d_model, heads = max(space.d_model), max(space.heads)
    kv = heads if space.kv_heads is None else min(heads, max(space.kv_heads))
    hidden = max(1, round(max(space.mlp_ratio) * d_model))
    # without head_dim the projections are d_model wide whatever the count: d_k = d_model / heads
    width = max(space.head_dim) if space.head_dim else max(1, d_model // heads)
    return Shape(d_model, hidden, ((heads, kv, width),) * max(space.n_layers))


def check_study_fits(spec: StudySpec, task: InputSpec, workers: int, device: torch.device) -> int:
    """The bytes the study's largest model takes in ``workers`` processes on ``device`` if that fits, else a
    LimitError."""
    shape = largest_shape(spec.space)
    timed = deployment_spec(task, spec.latency)
    per_worker = max(
        training_bytes(shape, task, spec.task.batch_size),
        inference_bytes(shape, timed, spec.latency.batch_size),
        0
        if spec.decode is None
        else inference_bytes(shape, task, spec.decode.batch_size, spec.decode.context),
    )
    layers = len(shape.layers)
    what = (
        f"the study's largest model (d_model {shape.d_model}, {layers} layers of {shape.layers[0][0]} heads, "
        f"[task] batch_size {spec.task.batch_size}) in {workers} worker(s)"
    )
    estimate = workers * per_worker + (workers - 1) * PROCESS_BYTES
    return check_memory(
        estimate,
        what,
        "lower d_model, n_layers, heads or the batch sizes, or use fewer --workers",
        device,
    )
