"""A trained transformers model (a checkpoint, or a candidate cut from it) timed as it is."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from explorer.errors import ConfigError, LimitError  # noqa: E402
from explorer.layout import LatencyConfig  # noqa: E402
from explorer.measure import pretrained_decode_latency, pretrained_latency  # noqa: E402
from explorer.model import hf_decode_step  # noqa: E402
from explorer.pretrained import HeadPlan, head_cost, shrink  # noqa: E402
from tests.pretrained.tiny_models import bert, llama, outputs  # noqa: E402

CFG = LatencyConfig(device="cpu", batch_size=2, threads=1, min_run_time=0.01)
CPU = torch.device("cpu")


def test_a_model_and_its_cut_copy_are_timed_forward_and_decoding_with_their_caches_bytes() -> None:
    model = llama()
    before = outputs(model)
    forward = pretrained_latency(model, 16, CFG, CPU)
    assert (forward.batch_size, forward.seq_len, forward.threads) == (2, 16, 1) and forward.median_ms > 0
    full = pretrained_decode_latency(model, 12, CFG, CPU)
    cut = shrink(model, HeadPlan(((0, 1), (2, 3)), (1, 1)))
    small = pretrained_decode_latency(cut, 12, CFG, CPU)
    assert full.context == small.context == 12 and full.ms_per_token > 0
    # 2 layers x (K and V) x kv heads x 8 wide x 4 bytes: 2 kv heads a layer before, 1 after
    assert full.kv_cache_bytes_per_token == head_cost(model).kv_bytes_per_token == 256
    assert small.kv_cache_bytes_per_token == 128
    assert small.kv_cache_bytes == 128 * 12 * 2
    assert torch.equal(outputs(model), before)  # timing leaves the weights as they were


def test_a_model_without_a_cache_is_not_timed_decoding() -> None:
    with pytest.raises(ConfigError, match="not a causal language model .* time its forward pass"):
        pretrained_decode_latency(bert(), 12, CFG, CPU)
    assert pretrained_latency(bert(), 8, CFG, CPU).seq_len == 8


def test_a_hostile_length_is_refused_before_anything_is_built() -> None:
    with pytest.raises(LimitError, match="65,536"):
        pretrained_latency(llama(), 10**9, CFG, CPU)


def test_every_decoding_step_decodes_the_same_position_against_the_same_cache() -> None:
    model = llama()
    step = hf_decode_step(model, 50, 2, 5, CPU)
    for _ in range(3):
        step()
        assert step.cache.get_seq_length() == 6  # cut back to the 5-token context, then one token appended
