"""What a trial is and how it came about, as enums: its role (which is also the stage of a study's run that runs
it), how the search proposed it, and why it was closed without running; and what a re-timing of its architecture
timed.

Each member's value is the string stored in the study (a user attribute's value, or for :class:`Closure` the
attribute's name), so studies written before these enums read the same. The members are ``str`` subclasses:
they compare equal to the stored strings and are written to JSON as them.
"""

from __future__ import annotations

from enum import Enum


class _Stored(str, Enum):
    """An enum whose members are the strings a study stores (printed as them, too)."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Role(_Stored):
    """What a trial is: a search trial (one new architecture) or a finalist run (a chosen one, a fresh seed).
    A study runs in stages named the same way: each stage runs the trials of its role."""

    SEARCH = "search"
    FINALIST = "finalist"


class Proposal(_Stored):
    """How the search chose a trial's architecture (its ``proposal`` attribute)."""

    SAMPLER = "sampler"  # the study's sampler proposed an untaken architecture
    RANDOM = "random"  # the sampler was still starting up: drawn uniformly from the untaken ones
    UNEVALUATED = "unevaluated"  # the sampler kept proposing taken ones: drawn from the untaken ones instead
    EXHAUSTED = "exhausted"  # none was left
    ENQUEUED = "enqueued"  # the trial was queued with its parameters (a retry, a finalist run)


class Closure(_Stored):
    """Why a trial was closed without running; the value is the attribute that marks it (it holds a detail)."""

    SURPLUS = "surplus"  # beyond its stage's total (True)
    DUPLICATE = "duplicate_of"  # its configuration is another trial's (that trial's number)
    EXHAUSTED = "exhausted"  # every architecture of the space is taken (True)


class TimingKind(_Stored):
    """What a re-timing timed (:class:`explorer.storage._record.Retiming`): a forward pass, or one decoding step
    against a key/value cache."""

    FORWARD = "forward"
    DECODE = "decode"
