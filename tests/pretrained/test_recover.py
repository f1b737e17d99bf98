"""Recovery of a shrunk model: a short budget of distillation and training brings it back towards the model it was
cut from (measured: the KL to the original falls, a classifier's accuracy rises), reproducibly from its seed,
without touching the teacher; the loss is what its weights say; a diverging run and bad budgets or examples are
refused in one line."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("transformers")
from explorer.errors import ConfigError, LimitError, TrainingDivergedError  # noqa: E402
from explorer.limits import STEPS  # noqa: E402
from explorer.pretrained import (  # noqa: E402
    Examples,
    HeadPlan,
    Recovery,
    RecoveryResult,
    accuracy,
    as_examples,
    cross_entropy,
    distillation_gap,
    recover,
    shrink,
)
from tests.pretrained.tiny_models import VOCAB, bert, llama  # noqa: E402

HALF = HeadPlan(((0, 1), (0, 1)), (1, 1))  # 2 of the 4 query heads of each layer, sharing 1 key/value head
HALF_BERT = HeadPlan(((0, 1), (0, 1)), (2, 2))  # BERT's key/value heads are its query heads


def tokens(n: int, length: int, seed: int) -> torch.Tensor:
    """``n`` random token sequences of ``length`` tokens: [n, length]."""
    return torch.randint(VOCAB, (n, length), generator=torch.Generator().manual_seed(seed))


def labelled_by(model, ids: torch.Tensor) -> Examples:
    """``ids`` labelled with ``model``'s own predictions: a task the original model solves exactly."""
    with torch.inference_mode():
        return Examples(ids, model(input_ids=ids).logits.argmax(dim=-1))


def bert_task() -> tuple[torch.nn.Module, Examples, Examples]:
    """The tiny BERT classifier, and 128 training and 256 held-out random sequences labelled by it."""
    original = bert()
    ids = tokens(384, 12, seed=1)
    return original, labelled_by(original, ids[:128]), labelled_by(original, ids[128:])


def parameters(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def same_weights(a, b) -> bool:
    pa, pb = parameters(a), parameters(b)
    return pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)


def test_recovery_brings_a_shrunk_llama_closer_to_its_original():
    """Half the heads of each layer cut: the KL to the original on held-out batches is clearly positive (0.67
    nats), and 60 steps of distillation lower it by more than a fifth (to 0.44 here, in about 0.4 s)."""
    original = llama()
    student = shrink(original, HALF)
    train, held_out = Examples(tokens(64, 16, seed=5)), Examples(tokens(32, 16, seed=6))
    before = distillation_gap(student, original, held_out)
    seen: list[tuple[int, float]] = []
    result = recover(
        student,
        original,
        train,
        Recovery(steps=60, lr=3e-3, distill=1.0, batch_size=8),
        on_step=lambda step, loss: seen.append((step, loss)),
    )
    after = distillation_gap(student, original, held_out)
    assert before > 0.3
    assert after < 0.8 * before, (before, after)
    assert isinstance(result, RecoveryResult) and len(result.losses) == 60 and result.seconds > 0
    assert seen == list(enumerate(result.losses, 1))
    assert result.losses[-1] < result.losses[0]
    assert not student.training
    assert distillation_gap(original, original, held_out) == pytest.approx(0.0, abs=1e-6)


def test_recovery_wins_back_a_bert_classifiers_accuracy():
    """A task the original solves (its own predictions on random sequences): cut to half its heads it gets 47% of
    the held-out labels right; after 60 steps of distillation 70%, its KL to the original down sixfold (0.116 to
    0.019 nats)."""
    original, train, held_out = bert_task()
    student = shrink(original, HALF_BERT)
    assert accuracy(original, held_out) == 1.0
    accuracy_before, gap_before = accuracy(student, held_out), distillation_gap(student, original, held_out)
    recover(student, original, train, Recovery(steps=60, lr=1e-3, distill=1.0, batch_size=16))
    accuracy_after, gap_after = accuracy(student, held_out), distillation_gap(student, original, held_out)
    assert accuracy_after > accuracy_before + 0.1, (accuracy_before, accuracy_after)
    assert gap_after < gap_before / 2, (gap_before, gap_after)


def test_the_same_seed_gives_the_same_run_and_another_seed_another():
    """BERT trains with dropout: the seed fixes its draws as well as the minibatches; the caller's random state is
    left as it was."""
    original, train, _ = bert_task()
    shrunk = shrink(original, HALF_BERT)
    runs = {}
    for name, seed in (("first", 3), ("again", 3), ("other", 4)):
        student = copy.deepcopy(shrunk)
        state = torch.random.get_rng_state()
        losses = recover(student, original, train, Recovery(steps=8, lr=1e-3, distill=0.5, seed=seed)).losses
        assert torch.equal(torch.random.get_rng_state(), state)
        runs[name] = (losses, student)
    assert runs["first"][0] == runs["again"][0]
    assert same_weights(runs["first"][1], runs["again"][1])
    assert runs["first"][0] != runs["other"][0]
    assert not same_weights(runs["first"][1], runs["other"][1])


def test_the_teacher_is_unchanged_and_runs_in_eval_mode_without_gradients():
    original, train, _ = bert_task()
    student = shrink(original, HALF_BERT)
    original.train()  # left as it was found: in train mode
    before = parameters(original)
    calls: list[tuple[bool, bool]] = []
    original.register_forward_pre_hook(lambda m, args: calls.append((m.training, torch.is_grad_enabled())))
    recover(student, original, train, Recovery(steps=5, lr=1e-2, distill=0.5))
    assert calls == [(False, False)] * 5
    assert original.training
    assert all(torch.equal(p, before[name]) for name, p in original.named_parameters())
    assert all(p.grad is None for p in original.parameters())
    assert not same_weights(student, shrink(original, HALF_BERT))  # the student did train


def test_distillation_alone_ignores_the_labels():
    """distill=1: permuted labels, or none at all, give the same losses."""
    original, train, _ = bert_task()
    shrunk = shrink(original, HALF_BERT)
    budget = Recovery(steps=6, lr=1e-3, distill=1.0)
    permuted = Examples(
        train.input_ids, train.labels[torch.randperm(len(train), generator=torch.Generator())]
    )
    unlabelled = Examples(train.input_ids)
    losses = [
        recover(copy.deepcopy(shrunk), original, e, budget).losses for e in (train, permuted, unlabelled)
    ]
    assert losses[0] == losses[1] == losses[2]
    # with a task term the labels count
    mixed = Recovery(steps=6, lr=1e-3, distill=0.5)
    assert recover(copy.deepcopy(shrunk), original, train, mixed).losses != (
        recover(copy.deepcopy(shrunk), original, permuted, mixed).losses
    )


def test_the_task_alone_ignores_the_teacher():
    """distill=0: another teacher gives the same losses, and no teacher is run."""
    original, train, _ = bert_task()
    shrunk = shrink(original, HALF_BERT)
    stranger = bert(seed=7)
    calls: list[int] = []
    stranger.register_forward_pre_hook(lambda m, args: calls.append(1))
    budget = Recovery(steps=6, lr=1e-3, distill=0.0)
    mine = recover(copy.deepcopy(shrunk), original, train, budget).losses
    assert recover(copy.deepcopy(shrunk), stranger, train, budget).losses == mine
    assert calls == []


def test_the_first_loss_is_the_models_own_loss_or_the_kl_by_hand():
    """Llama (no dropout), one batch of all the examples: at distill=0 the first loss is transformers' own
    next-token loss, at distill=1 it is T^2 times the KL per position computed by hand."""
    original = llama()
    shrunk = shrink(original, HALF)
    ids = tokens(8, 10, seed=2)
    task = recover(copy.deepcopy(shrunk), original, Examples(ids), Recovery(steps=1, distill=0.0)).losses[0]
    with torch.inference_mode():
        assert task == pytest.approx(shrunk(input_ids=ids, labels=ids).loss.item(), rel=1e-5)
        s, t = shrunk(input_ids=ids).logits / 2, original(input_ids=ids).logits / 2  # temperature 2
        by_hand = 4 * F.kl_div(
            s.log_softmax(-1).flatten(0, 1),
            t.log_softmax(-1).flatten(0, 1),
            log_target=True,
            reduction="batchmean",
        )
    budget = Recovery(steps=1, distill=1.0, temperature=2.0)
    assert recover(copy.deepcopy(shrunk), original, Examples(ids), budget).losses[0] == pytest.approx(
        by_hand.item(), rel=1e-5
    )


def test_padding_does_not_count():
    """Right-padded examples, the padding masked: the measures and the loss are those of the examples cut short
    (a causal model's positions do not see the tokens after them)."""
    original = llama()
    shrunk = shrink(original, HALF)
    ids = tokens(6, 12, seed=3)
    mask = torch.ones_like(ids)
    mask[:, 8:] = 0
    padded, cut = Examples(ids, attention_mask=mask), Examples(ids[:, :8])
    assert distillation_gap(shrunk, original, padded) == pytest.approx(
        distillation_gap(shrunk, original, cut)
    )
    assert accuracy(shrunk, padded) == pytest.approx(accuracy(shrunk, cut))
    budget = Recovery(steps=1, distill=0.5)
    first = [recover(copy.deepcopy(shrunk), original, e, budget).losses[0] for e in (padded, cut)]
    assert first[0] == pytest.approx(first[1], rel=1e-5)


def test_measures_run_in_batches_and_take_a_mapping():
    """70 examples, 32 at a time: three forward passes of 32, 32 and 6, the same measures as all at once."""
    original, _, held_out = bert_task()
    shrunk = shrink(original, HALF_BERT)
    some = held_out.rows(torch.arange(70))
    sizes: list[int] = []
    shrunk.register_forward_pre_hook(
        lambda m, args, kwargs: sizes.append(len(kwargs["input_ids"])), with_kwargs=True
    )
    gap = distillation_gap(shrunk, original, some, batch_size=32)
    assert sizes == [32, 32, 6]
    assert gap == pytest.approx(distillation_gap(shrunk, original, some, batch_size=1000))
    mapping = {"input_ids": some.input_ids, "labels": some.labels}
    assert as_examples(mapping) == Examples(some.input_ids, some.labels)
    assert accuracy(shrunk, mapping, batch_size=7) == accuracy(shrunk, some)


def test_a_diverging_recovery_raises_in_one_line():
    original = llama()
    train = Examples(tokens(16, 8, seed=4))
    student = shrink(original, HALF)
    with pytest.raises(
        TrainingDivergedError, match=r"at step \d+ of 20; lower the learning rate \(lr=1e\+30\)\.$"
    ):
        recover(student, original, train, Recovery(steps=20, lr=1e30))
    assert not student.training
    broken = shrink(original, HALF)
    with torch.no_grad():
        for p in broken.parameters():
            p.fill_(float("inf"))
    with pytest.raises(TrainingDivergedError, match="became nan at step 1 of 5;"):
        recover(broken, original, train, Recovery(steps=5))


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"steps": 0}, r"steps=0 is not a whole number of at least 1; give the optimizer steps"),
        ({"steps": 2.5}, r"steps=2.5 is not a whole number"),
        ({"steps": True}, r"steps=True is not a whole number"),
        ({"lr": 0}, r"lr=0.0 is not above 0; give a learning rate such as lr=1e-4\.$"),
        ({"lr": float("nan")}, r"lr=nan is not a finite number; give a learning rate"),
        ({"distill": 1.5}, r"distill=1.5 is not a weight from 0 to 1; give 0 \(the task loss alone\)"),
        ({"distill": -0.1}, r"distill=-0.1 is not a weight from 0 to 1"),
        ({"temperature": float("inf")}, r"temperature=inf is not a finite number; give a temperature"),
        ({"batch_size": 0}, r"batch_size=0 is not a whole number of at least 1"),
        ({"seed": -1}, r"seed=-1 is not a whole number of at least 0"),
        ({"seed": 2**63}, r"seed=9223372036854775808 is not below 2\*\*63"),
        ({"temperature": 0}, r"temperature=0.0 is not above 0"),
        ({"distill": "1"}, r"distill='1' is not a finite number"),
    ],
)
def test_a_bad_budget_is_refused_in_one_line(settings, match):
    with pytest.raises(ConfigError, match=match) as caught:
        Recovery(**settings)
    assert "\n" not in str(caught.value)


def test_a_budget_keeps_numpy_numbers_as_python_ones():
    budget = Recovery(steps=np.int64(5), lr=np.float32(0.5), distill=1, seed=np.uint8(2))
    assert budget == Recovery(steps=5, lr=0.5, distill=1.0, seed=2)
    assert type(budget.steps) is int and type(budget.lr) is float and type(budget.distill) is float


def test_a_budget_above_its_limit_is_refused(monkeypatch):
    monkeypatch.setenv(STEPS.env, "50")
    assert Recovery(steps=50).steps == 50
    with pytest.raises(
        LimitError, match=r"Recovery steps is 51, above the limit of 50 .* EXPLORER_MAX_STEPS=51"
    ):
        Recovery(steps=51)


def test_a_batch_whose_logits_do_not_fit_is_refused(monkeypatch):
    """64 sequences of 16 tokens over 50 token ids: 1.6 MB of logits and what is computed from them."""
    original = llama()
    monkeypatch.setenv("EXPLORER_MAX_MEMORY_MB", "1")
    train = Examples(tokens(64, 16, seed=5))
    with pytest.raises(LimitError, match="a batch of 64 examples of 16 tokens .* give a smaller batch_size"):
        recover(shrink(original, HALF), original, train, Recovery(batch_size=64))


IDS = tokens(4, 6, seed=9)
BAD_EXAMPLES = {
    "float ids": (
        lambda: Examples(IDS.float()),
        r"input_ids is a torch.float32 tensor of shape \(4, 6\); give token ids",
    ),
    "1-D ids": (
        lambda: Examples(IDS[0]),
        r"input_ids is a torch.int64 tensor of shape \(6,\); give token ids as a 2-D",
    ),
    "labels per token": (
        lambda: Examples(IDS, IDS),
        r"labels is a torch.int64 tensor of shape \(4, 6\); give one integer class id per example, a tensor of shape \(4,\)",
    ),
    "mask of another shape": (
        lambda: Examples(IDS, attention_mask=torch.ones(4, 5)),
        r"attention_mask is a torch.float32 tensor of shape \(4, 5\); give one 0 or 1 per token",
    ),
    "mask of 2s": (
        lambda: Examples(IDS, attention_mask=2 * torch.ones_like(IDS)),
        "values other than 0 and 1",
    ),
    "an empty row": (
        lambda: Examples(IDS, attention_mask=torch.ones_like(IDS).index_fill(0, torch.tensor([2]), 0)),
        "example 2 has no token its attention_mask keeps",
    ),
    "another key": (
        lambda: as_examples({"input_ids": IDS, "token_type_ids": IDS}),
        "token_type_ids, which are not",
    ),
    "a list": (lambda: as_examples([IDS]), "examples are a list; give Examples"),
}


@pytest.mark.parametrize("case", list(BAD_EXAMPLES))
def test_malformed_examples_are_refused_in_one_line(case):
    make, match = BAD_EXAMPLES[case]
    with pytest.raises(ConfigError, match=match):
        make()


def test_examples_the_models_cannot_read_are_refused():
    original, model = llama(), bert()
    student = shrink(original, HALF)
    with pytest.raises(
        ConfigError, match=r"input_ids hold token \d+, and the model's embedding has tokens 0 to 49; tokenize"
    ):
        distillation_gap(student, original, Examples(IDS + 50))
    with pytest.raises(
        ConfigError, match="a causal LM learns the next token of input_ids and takes no labels"
    ):
        recover(student, original, Examples(IDS, IDS[:, 0] % 3))
    with pytest.raises(ConfigError, match="fewer than 2 tokens"):
        accuracy(student, Examples(IDS[:, :1]))
    with pytest.raises(ConfigError, match="labels hold class 3, and the classifier has classes 0 to 2"):
        accuracy(model, Examples(IDS, torch.tensor([0, 1, 2, 3])))
    with pytest.raises(
        ConfigError, match="needs labels and the examples have none; give labels, or distill=1"
    ):
        recover(shrink(model, HALF_BERT), model, Examples(IDS), Recovery(distill=0.5))
    with pytest.raises(ConfigError, match="reads at most 64 positions"):
        accuracy(model, Examples(tokens(2, 65, seed=0), torch.tensor([0, 1])))
    with pytest.raises(ConfigError, match="batch_size=0 is not a whole number"):
        accuracy(student, Examples(IDS), batch_size=0)


def test_a_teacher_the_student_was_not_cut_from_is_refused():
    original = llama()
    student = shrink(original, HALF)
    with pytest.raises(
        ConfigError, match="predicts the next token of 50 .* and the teacher .* one of 3 classes"
    ):
        recover(student, bert(), Examples(IDS))
    with pytest.raises(ConfigError, match="shares .* parameters with the teacher"):
        recover(original, original, Examples(IDS))
    with pytest.raises(ConfigError, match="LlamaModel has no logits to recover"):
        distillation_gap(original.model, original, Examples(IDS))


def test_the_cross_entropy_is_the_models_own_loss_for_both_families():
    """A causal LM's mean next-token cross-entropy, and a classifier's on its labels, are what transformers'
    own loss gives on one batch of all the examples; measured in batches of 3 they are the same."""
    model = llama()
    ids = tokens(8, 10, seed=3)
    with torch.inference_mode():
        own = model(input_ids=ids, labels=ids).loss.item()
    assert cross_entropy(model, Examples(ids), batch_size=3) == pytest.approx(own, rel=1e-5)
    classifier, _, held_out = bert_task()
    with torch.inference_mode():
        own = classifier(input_ids=held_out.input_ids, labels=held_out.labels).loss.item()
    assert cross_entropy(classifier, held_out, batch_size=7) == pytest.approx(own, rel=1e-5)
    with pytest.raises(ConfigError, match="cross-entropy needs labels"):
        cross_entropy(classifier, Examples(held_out.input_ids))
