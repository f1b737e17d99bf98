"""Every key a study spec may hold, by table: the one list the spec readers accept and docs/spec.md documents.

The readers (:mod:`explorer.search.spec`, :mod:`explorer.search.goals`, :mod:`explorer.search.evidence_spec`)
refuse any other key with a line naming it and the allowed ones; ``tests/test_docs.py`` fails when docs/spec.md
and this list disagree, so the reference cannot drift from the code.
"""

from __future__ import annotations

__all__ = ["SPEC_KEYS", "TABLES"]

TABLES = ("objectives", "task", "model", "space", "latency", "decode", "budgets", "early_stopping", "finalists",
          "answer", "tracking")  # fmt: skip

SPEC_KEYS: dict[str, tuple[str, ...]] = {
    "": ("name", "storage", "artifacts", "n_trials", "timeout", "sampler", "seed", "bench", *TABLES),
    "objectives": ("accuracy", "bpb", "latency", "params", "decode"),
    "task": ("name", "options", "epochs", "batch_size"),
    "model": ("build", "hf", "config"),
    "space": ("d_model", "n_layers", "heads", "min_dk", "families", "mlp_ratio", "lr", "dropout", "attention",
              "kv_heads", "kv_per_layer", "head_dim"),  # fmt: skip
    "latency": ("device", "batch_size", "threads", "dtype", "min_run_time", "runtime", "seq_len"),
    "decode": ("context", "batch_size"),
    "budgets": ("max_latency_ms", "max_params", "max_decode_ms", "max_kv_cache_mb"),
    "early_stopping": ("enabled", "min_epochs", "reduction", "alpha"),
    "finalists": ("enabled", "top", "references", "ladder", "seeds", "folds", "epochs", "timing_rounds", "start",
                  "budget", "minutes"),
    "answer": ("margin", "risk", "latency_tie"),
    "tracking": ("mlflow", "experiment"),
}
