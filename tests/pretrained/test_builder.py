"""A trained checkpoint as a study's model: each layout is the checkpoint cut to its heads (the most important
kept, chosen without labels), the full layout is the original unchanged, every process cuts alike, and training
adds the distillation term from the original."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from explorer.data import load_task  # noqa: E402
from explorer.errors import ConfigError  # noqa: E402
from explorer.layout import ModelConfig  # noqa: E402
from explorer.pretrained import (  # noqa: E402
    IMPORTANCE_EXAMPLES,
    PretrainedBuilder,
    PretrainedModel,
    plan_by_importance,
)
from tests.pretrained import tiny_checkpoints  # noqa: E402


def layout(heads: tuple[int, int], kv: tuple[int, int] | None = None) -> ModelConfig:
    return ModelConfig(d_model=16, heads=heads, kv_heads=kv, head_dim=(4, 4), mlp_ratio=2.0)


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> PretrainedBuilder:
    folder = tiny_checkpoints.llama(tmp_path_factory.mktemp("ckpt") / "llama")
    return PretrainedBuilder.of(str(folder), "text", tiny_checkpoints.TEXT, 0.5)


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> PretrainedBuilder:
    folder = tiny_checkpoints.bert(tmp_path_factory.mktemp("ckpt") / "bert")
    return PretrainedBuilder.of(str(folder), "relations", tiny_checkpoints.RELATIONS, 0.5)


def test_the_full_layout_is_the_original_model_and_a_cut_keeps_the_most_important_heads(llama) -> None:
    task = load_task("text", **tiny_checkpoints.TEXT)
    x = task.val[0][:8]
    whole = llama.build(layout((4, 4), (2, 2)), task.spec).eval()
    with torch.inference_mode():
        assert torch.equal(whole(x), llama.original(input_ids=x, use_cache=False).logits)
    cut = llama.build(layout((2, 1), (1, 1)), task.spec)
    assert isinstance(cut, PretrainedModel) and len(task.train[0]) > IMPORTANCE_EXAMPLES
    assert llama.importance.examples == IMPORTANCE_EXAMPLES  # the training split's first examples, no more
    assert cut.plan == plan_by_importance(llama.original, llama.importance, (2, 1), (1, 1))
    assert cut.explorer_heads == [2, 1] and cut.explorer_kv_heads == [1, 1]
    q_rows = [block.self_attn.q_proj.out_features for block in cut.hf.model.layers]
    assert q_rows == [2 * 4, 1 * 4]  # the heads kept, each 4 wide
    assert [b.self_attn.q_proj.out_features for b in llama.original.model.layers] == [16, 16]  # left whole


def test_every_process_cuts_the_same_heads_and_a_sent_builder_carries_no_model(llama) -> None:
    task = load_task("text", **tiny_checkpoints.TEXT)
    cfg = layout((1, 2), (1, 2))
    first = llama.build(cfg, task.spec).plan
    sent = pickle.dumps(llama)
    assert len(sent) < 2_000  # the fields alone: the receiving process loads the checkpoint itself
    again = pickle.loads(sent)
    assert "original" not in again.__dict__ and again.build(cfg, task.spec).plan == first
    assert again.fingerprint == llama.fingerprint


def test_heads_are_chosen_without_labels(bert, monkeypatch) -> None:
    # the classifier's importance is measured against the original's own predictions, not the task's labels:
    # the same task with its training labels shuffled ranks the heads exactly alike
    scores = [s.copy() for s in bert.importance.scores]
    assert any(s.std() > 0 for s in scores)  # heads differ: the ranking is not a tie everywhere
    real = load_task

    def shuffled(name, **options):
        task = real(name, **options)
        x, y = task.train
        return dataclasses.replace(
            task, train=(x, y[torch.randperm(len(y), generator=torch.Generator().manual_seed(1))])
        )

    monkeypatch.setattr("explorer.data.load_task", shuffled)
    fresh = PretrainedBuilder.of(bert.path, "relations", tiny_checkpoints.RELATIONS, 0.5)
    assert all((a == b).all() for a, b in zip(scores, fresh.importance.scores, strict=True))


def test_training_adds_the_distillation_term_weighted_as_given(bert) -> None:
    task = load_task("relations", **tiny_checkpoints.RELATIONS)
    x, y = task.train[0][:16], task.train[1][:16]
    full = layout((4, 4))
    task_loss = torch.tensor(0.7)
    model = bert.build(full, task.spec)
    logits = model(x)
    # the original taught by itself: the KL is zero, so the loss is the task's share alone
    assert torch.isclose(model.recovery_loss(x, logits, task_loss), 0.5 * task_loss, atol=1e-6)
    cut = bert.build(layout((1, 1)), task.spec)
    cut_logits = cut(x)
    kl_half = cut.recovery_loss(x, cut_logits, task_loss) - 0.5 * task_loss
    assert kl_half > 1e-4  # a cut model disagrees with its teacher
    task_only = PretrainedBuilder.of(bert.path, "relations", tiny_checkpoints.RELATIONS, 0.0)
    assert task_only.build(layout((1, 1)), task.spec).recovery_loss(x, cut_logits, task_loss) is task_loss
    # the teacher is neither a submodule nor in the state a trial saves
    assert not any(k.startswith("_teacher") for k in cut.state_dict())
    del y


def test_a_task_the_checkpoint_was_not_trained_for_is_one_line(bert, llama) -> None:
    digits = load_task("digits", patch=4)
    with pytest.raises(ConfigError, match="reads token ids"):
        bert.build(layout((4, 4)), digits.spec)
    relations = load_task("relations", **tiny_checkpoints.RELATIONS)
    with pytest.raises(ConfigError, match="does not do classification"):
        llama.build(layout((4, 4), (2, 2)), relations.spec)
    with pytest.raises(ConfigError, match="more than the checkpoint's 4"):
        bert.build(ModelConfig(d_model=16, heads=(8, 8), head_dim=(4, 4), mlp_ratio=2.0), relations.spec)


def test_a_base_model_without_a_task_head_is_refused_by_name(tmp_path: Path) -> None:
    from tests.pretrained.tiny_models import bert as tiny_bert

    tiny_bert(model_class="BertModel").save_pretrained(tmp_path / "base")
    builder = PretrainedBuilder.of(str(tmp_path / "base"), "relations", tiny_checkpoints.RELATIONS, 0.5)
    relations = load_task("relations", **tiny_checkpoints.RELATIONS)
    with pytest.raises(ConfigError, match="BertModel.* without a task head.*BertForSequenceClassification"):
        builder.build(layout((4, 4)), relations.spec)


def test_decoding_runs_on_a_cut_models_own_cache(llama) -> None:
    task = load_task("text", **tiny_checkpoints.TEXT)
    step = llama.decoder(layout((2, 2), (1, 1)), task.spec, 2, 8, torch.device("cpu"), torch.float32)
    step()
    step()
    assert step.cache.get_seq_length() == 9  # the context and the one token of the last step
    assert llama.decodes


def test_the_fingerprint_changes_with_the_checkpoint(tmp_path: Path) -> None:
    folder = tiny_checkpoints.bert(tmp_path / "b")
    first = PretrainedBuilder.of(str(folder), "relations", tiny_checkpoints.RELATIONS, 0.5).fingerprint
    again = PretrainedBuilder.of(str(folder), "relations", tiny_checkpoints.RELATIONS, 0.5).fingerprint
    other = PretrainedBuilder.of(str(folder), "relations", tiny_checkpoints.RELATIONS, 0.25).fingerprint
    assert first == again != other
    (folder / "config.json").write_text((folder / "config.json").read_text().replace('"gelu"', '"relu"'))
    assert (
        PretrainedBuilder.of(str(folder), "relations", tiny_checkpoints.RELATIONS, 0.5).fingerprint != first
    )
