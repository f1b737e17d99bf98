"""Head plans and the layouts they are checked against: every plan that cannot be carried out is refused with a
one-line ConfigError that names the problem and the fix."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")
from explorer.errors import ConfigError, EnvironmentLackError  # noqa: E402
from explorer.pretrained import HeadLayout, HeadPlan, check_plan, head_layout  # noqa: E402
from tests.pretrained.tiny_models import VOCAB, bert, llama  # noqa: E402


def test_a_layout_is_read_off_the_projections():
    assert head_layout(llama()) == HeadLayout(
        family="llama",
        architecture="LlamaForCausalLM",
        heads=(4, 4),
        kv_heads=(2, 2),
        head_dim=8,
        hidden_size=32,
        qkv_bias=False,
        dtype=llama().dtype,
    )
    layout = head_layout(bert(model_class="BertModel"))
    assert (layout.family, layout.architecture, layout.heads, layout.kv_heads, layout.qkv_bias) == (
        "bert",
        "BertModel",
        (4, 4),
        (4, 4),
        True,
    )
    assert layout.layers == 2


def test_the_unchanged_plan_keeps_every_head():
    plan = HeadPlan.unchanged(llama())
    assert plan == HeadPlan(((0, 1, 2, 3), (0, 1, 2, 3)), (2, 2))
    assert plan.heads == (4, 4)
    assert HeadPlan.unchanged(bert()).kv_heads == (4, 4)


def test_lists_and_numpy_integers_are_kept_as_tuples_of_ints():
    plan = HeadPlan([[0, 2], np.array([1])], [1, np.int64(1)])  # type: ignore[arg-type]
    assert plan.keep == ((0, 2), (1,)) and plan.kv_heads == (1, 1)
    assert {type(h) for layer in plan.keep for h in layer} | {type(k) for k in plan.kv_heads} == {int}
    assert hash(plan) == hash(HeadPlan(((0, 2), (1,)), (1, 1)))


@pytest.mark.parametrize(
    ("keep", "kv_heads", "message"),
    [
        ((), (), "the plan has no layer; give one keep tuple"),
        (
            ((0, 1), (0,)),
            (1,),
            "keeps heads in 2 layers and gives key/value heads for 1; give one kv_heads entry",
        ),
        (((0, 1), ()), (1, 1), "layer 1 keeps no head; keep at least one head in every layer"),
        (((0, 1.0),), (1,), r"layer 0 keeps 1.0, which is not a head index; give whole numbers"),
        (((0, True),), (1,), "layer 0 keeps True, which is not a head index"),
        (((-1, 0),), (1,), "layer 0 keeps head -1; head indices start at 0"),
        (((0, 2, 2),), (1,), "layer 0 keeps head 2 twice; list each kept head once"),
        (((3, 1),), (1,), r"layer 0 keeps heads \(3, 1\) out of order; list them sorted: \(1, 3\)"),
        (((0, 1),), (0,), "layer 0 has 0 key/value heads; give a whole number of at least 1"),
        (((0, 1),), (4,), "layer 0 keeps 2 query heads and asks for 4 key/value heads; give at most 2"),
        (
            ((0, 1, 2),),
            (2,),
            "layer 0: 2 key/value heads do not divide its 3 kept query heads; give one of 1, 3",
        ),
    ],
)
def test_a_plan_that_cannot_be_carried_out_is_refused_as_it_is_made(keep, kv_heads, message):
    with pytest.raises(ConfigError, match=message) as error:
        HeadPlan(keep, kv_heads)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("model", "plan", "message"),
    [
        (
            llama,
            HeadPlan(((0,), (0,), (0,)), (1, 1, 1)),
            "the plan has 3 layers and LlamaForCausalLM has 2; give one keep tuple and one kv_heads entry per layer",
        ),
        (
            llama,
            HeadPlan(((0, 1), (2, 4)), (1, 1)),
            "layer 1 keeps head 4, and LlamaForCausalLM's layer 1 has heads 0 to 3; keep indices below 4",
        ),
        (
            bert,
            HeadPlan(((0, 1, 2, 3), (0, 1)), (4, 1)),
            r"layer 1 keeps 2 heads with 1 key/value heads, and BERT has no grouped key/value heads; "
            r"set kv_heads\[1\] = 2",
        ),
    ],
)
def test_a_plan_that_does_not_fit_the_model_is_refused(model, plan, message):
    with pytest.raises(ConfigError, match=message) as error:
        check_plan(model(), plan)
    assert "\n" not in str(error.value)


def test_a_plan_that_fits_returns_the_layout_it_was_checked_against():
    assert check_plan(llama(), HeadPlan(((0, 3), (1,)), (1, 1))).heads == (4, 4)


def test_a_family_head_surgery_does_not_know_is_refused_by_name():
    import transformers

    gpt2 = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_embd=32, n_layer=1, n_head=4, vocab_size=VOCAB, n_positions=16)
    )
    with pytest.raises(
        ConfigError, match=r"GPT2LMHeadModel is not an architecture head surgery supports; give a Llama"
    ):
        head_layout(gpt2)
    with pytest.raises(ConfigError, match="GPT2LMHeadModel is not an architecture"):
        check_plan(gpt2, HeadPlan(((0,),), (1,)))


def test_bert_with_cross_attention_is_refused():
    model = bert(model_class="BertModel", is_decoder=True, add_cross_attention=True)
    with pytest.raises(ConfigError, match=r"has cross-attention layers \(add_cross_attention\)"):
        head_layout(model)


def test_a_transformers_release_before_5_is_refused(monkeypatch):
    import transformers

    model = llama()
    monkeypatch.setattr(transformers, "__version__", "4.47.1")
    with pytest.raises(EnvironmentLackError, match=r"needs transformers 5 or later.* this is 4\.47\.1"):
        head_layout(model)
