"""``relations``: synthetic token sequences whose label needs several different relations at once.

Why this task exists: the tutorial's first claim is that one head learns one attention pattern, so an input that
holds several kinds of relation at once needs several heads. This task makes that claim testable: with ``k``
relations, every example needs ``k`` different attention patterns, and a model with fewer than ``k`` heads
per layer has to emulate the missing ones with harder circuits.

Design (``k = n_relations``, ``V = vocab_size``, ``T = seq_len``):

* Tokens ``0 .. k-1`` are *markers*, one per relation; tokens ``k .. V-1`` are *content*.
* Every sequence holds each marker ``r`` exactly once, at a random position ``m_r``; the rest is uniform
  random content.
* Relation ``r`` has a fixed rule: a relative offset ``o_r`` (``+1, -1, +2, -2, +3, -3, +4, -4`` for
  ``r = 0..7``) and a fixed half ``S_r`` of the content tokens (drawn once from a constant generator, so it is
  the same for every seed). Its bit is ``b_r = [x[m_r + o_r] in S_r]``: "is the token ``o_r`` steps from
  marker ``r`` one of relation ``r``'s tokens?". Different relations look in different places and ask
  different questions.
* The label is the bit pattern ``sum_r b_r 2^r`` (``n_classes = 2^k``). Bits are drawn uniformly and
  independently, then the target token is drawn from ``S_r`` or its complement, so classes are balanced and
  no bit predicts another. The ``2k`` marker and target positions are all distinct.

Why one head is not enough: a head's score between positions ``i`` and ``j`` is a bilinear form of their
(token + position) embeddings, so in the first layer the relative offsets it attends to cannot depend on the
marker's type, while the task asks for ``k`` different offsets. A head can still attend to several offsets at
once and let the marker identity it reads pick the relation, and a model can route through later layers; so the
task makes one head per relation the easy circuit, not the only one. Bag of tokens carries almost no signal
(every marker occurs once; a target is one token among ``T - k`` uniform ones), nor does any fixed position
(markers move).

Measured (d_model 64, 2 layers, batch 64, lr 3e-3, k=4; benchmarks/relations_heads.md): with n_samples=4000
neither 1 nor 4 heads learns it (val stays near chance, 0.06-0.12; the model memorizes 2,800 examples), which is why the
default is n_samples=20000. Learning then has a long plateau: after 40 epochs 4 heads reach only 0.35 val, but
trained 120 epochs they reach 0.999-1.000 and the last layer's 4 heads follow one relation each; 1 head per
layer stays at 0.39-0.53, and 2 heads per layer depend on the seed (0.56, 0.76, 0.996): there a first-layer head
follows relations +1, -1 and +2 at once.

Known shortcut: the bag of tokens is not quite blind. Relation r's target is one of the ``T - k`` content tokens,
so counting ``S_r`` tokens predicts ``b_r`` a little better than chance (a Bayes-optimal count reaches 0.584 for
one bit at k = 1). With k = 1 that shortcut is a trap: 1 head per layer sits at 0.616 after 120 epochs.

Splits: the ``n_samples`` generated examples (seeded by ``seed``, i.i.d.) are cut in order into 70/15/15
train/val/test; with the defaults that is 14,000 / 3,000 / 3,000.
"""

from __future__ import annotations

import numpy as np
import torch

from explorer.data._base import Task, check_int
from explorer.errors import ConfigError
from explorer.layout import InputSpec
from explorer.limits import EXAMPLES, SEQ_LEN, VOCAB, check_memory

OFFSETS = (1, -1, 2, -2, 3, -3, 4, -4)  # relation r looks OFFSETS[r] positions away from its marker
MAX_RELATIONS = len(OFFSETS)
_RULE_SEED = 7_351  # fixes each relation's token set S_r; independent of the data seed on purpose
_MIN_CONTENT = 4  # content tokens needed so each S_r and its complement hold at least two tokens
_MAX_PLACEMENT_TRIES = 200


def min_seq_len(n_relations: int) -> int:
    """Shortest sequence that leaves room for every marker, its target and some filler."""
    reach = max(abs(o) for o in OFFSETS[:n_relations])
    return max(3 * n_relations, 2 * n_relations + 2 * reach) + 2


def relation_rules(n_relations: int, vocab_size: int) -> list[tuple[int, np.ndarray]]:
    """Each relation's ``(offset, accept)``: ``accept[t]`` says whether token ``t`` is in ``S_r``.

    Markers are never accepted; exactly ``(vocab_size - n_relations) // 2`` content tokens are.
    """
    rng = np.random.default_rng([_RULE_SEED, n_relations, vocab_size])
    content = np.arange(n_relations, vocab_size)
    rules = []
    for r in range(n_relations):
        accept = np.zeros(vocab_size, dtype=bool)
        accept[rng.choice(content, size=len(content) // 2, replace=False)] = True
        rules.append((OFFSETS[r], accept))
    return rules


def _place(rng: np.random.Generator, n: int, seq_len: int, n_relations: int) -> np.ndarray:
    """Marker positions ``[n, k]`` whose markers and targets occupy ``2k`` distinct positions."""
    pos = np.zeros((n, n_relations), dtype=np.int64)
    todo = np.arange(n)
    for _ in range(_MAX_PLACEMENT_TRIES):
        busy = np.zeros((len(todo), seq_len), dtype=bool)
        ok = np.ones(len(todo), dtype=bool)
        for r in range(n_relations):
            o = OFFSETS[r]
            starts = np.arange(max(0, -o), seq_len - max(0, o))
            free = ~busy[:, starts] & ~busy[:, starts + o]  # [len(todo), len(starts)]
            ok &= free.any(axis=1)
            # A uniform choice among the free starts: the largest random score wins.
            choice = starts[np.where(free, rng.random(free.shape), -1.0).argmax(axis=1)]
            pos[todo, r] = choice
            busy[np.arange(len(todo)), choice] = True
            busy[np.arange(len(todo)), choice + o] = True
        todo = todo[~ok]  # greedy placement got stuck: redo those rows from scratch
        if len(todo) == 0:
            return pos
    raise ConfigError(
        f"could not place {n_relations} relations in sequences of {seq_len} tokens; raise seq_len."
    )


def load_relations(
    *, seed: int = 0, n_relations: int = 2, seq_len: int = 24, n_samples: int = 20000, vocab_size: int = 16
) -> Task:
    """Generate the relations task (see the module docstring); the same arguments give the same task."""
    k = check_int("relations", "n_relations", n_relations, 1, MAX_RELATIONS)
    seq_len = check_int("relations", "seq_len", seq_len, min_seq_len(k))
    n = check_int("relations", "n_samples", n_samples, 40)
    vocab_size = check_int("relations", "vocab_size", vocab_size, k + _MIN_CONTENT)
    SEQ_LEN.check(seq_len, "relations option seq_len")
    EXAMPLES.check(n, "relations option n_samples")
    VOCAB.check(vocab_size, "relations option vocab_size")
    # int64 tokens, then the placement masks and the torch copy: about four copies of [n, seq_len]
    check_memory(4 * 8 * n * seq_len, "the relations task", "lower n_samples or seq_len")

    rng = np.random.default_rng([seed, k, seq_len, vocab_size])
    X = rng.integers(k, vocab_size, size=(n, seq_len))  # uniform content filler
    bits = rng.integers(0, 2, size=(n, k))
    marker = _place(rng, n, seq_len, k)
    rows = np.arange(n)
    for r, (offset, accept) in enumerate(relation_rules(k, vocab_size)):
        inside = np.flatnonzero(accept)
        outside = np.flatnonzero(~accept)[k:]  # content tokens outside S_r (markers come first)
        pick_in = inside[rng.integers(0, len(inside), size=n)]
        pick_out = outside[rng.integers(0, len(outside), size=n)]
        X[rows, marker[:, r]] = r
        X[rows, marker[:, r] + offset] = np.where(bits[:, r] == 1, pick_in, pick_out)
    y = (bits << np.arange(k)).sum(axis=1)

    n_train, n_val = round(0.70 * n), round(0.15 * n)
    Xt, yt = torch.from_numpy(X).long(), torch.from_numpy(y).long()
    cuts = (slice(0, n_train), slice(n_train, n_train + n_val), slice(n_train + n_val, n))
    train, val, test = ((Xt[c], yt[c]) for c in cuts)
    spec = InputSpec(kind="tokens", seq_len=seq_len, n_classes=2**k, vocab_size=vocab_size)
    description = (
        f"relations: {k} relation(s), label = {k}-bit pattern ({2**k} classes), "
        f"{seq_len} tokens from {vocab_size}, {n} examples"
    )
    offsets = tuple(offset for offset, _ in relation_rules(k, vocab_size))
    return Task("relations", spec, train, val, test, description, relation_offsets=offsets)
