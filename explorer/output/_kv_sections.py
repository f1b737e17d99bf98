"""The answer's wording for modern heads: a (heads, kv_heads) recommendation, quality in the task's
own terms (bits per byte for a language model), decoding time and key/value cache, and what grouping the
key/value heads saves against full multi-head attention at the same heads.

Used by :func:`explorer.output._answer_sections.answer_blocks` for a language-model task, a study that searches
key/value heads or head widths, or one that measures decoding; a classic classification study keeps its wording.
"""

from __future__ import annotations

from explorer.answer import Answer, Architecture, Contrast, CostAxis, attention_kind
from explorer.output._fmt import heads, is_bpb, latency_text, mib, pct, quality_text, runs_text
from explorer.output._render import Block, Bold, Para
from explorer.spec import StudySpec


def is_modern(ans: Answer, spec: StudySpec) -> bool:
    """Whether the answer needs the modern wording."""
    rec = ans.recommended
    return (
        spec.space.kv_heads is not None
        or spec.space.head_dim is not None
        or spec.decode is not None
        or (rec is not None and is_bpb(rec.metric))
    )


def layout_phrase(a: Architecture) -> str:
    """The layout in words, e.g. "8 heads per layer with 2 key/value heads (grouped-query attention, 4 query
    heads per key/value head)"."""
    c = a.config
    kind = attention_kind(c)
    if len(set(c.heads)) == 1 and len(set(c.kv_per_layer)) == 1:
        h, k = c.heads[0], c.kv_per_layer[0]
        text = f"{h} head{'s' * (h != 1)} per layer with {k} key/value head{'s' * (k != 1)}"
        if kind == "grouped-query":
            return f"{text} (grouped-query attention, {h // k} query heads per key/value head)"
        return f"{text} ({kind} attention)" if h > 1 else text
    return f"{heads(c.heads)} heads per layer with {heads(c.kv_per_layer)} key/value heads ({kind})"


def modern_figures(ans: Answer, spec: StudySpec) -> str:
    """The answer's own figures: layout, quality, latency, decoding and cache, parameters."""
    rec = ans.recommended
    assert rec is not None
    c = rec.config
    bpb = is_bpb(rec.metric)
    width = "" if c.head_dim is None else f", head width {heads(c.head_dim)} apart from d_model / heads"
    q = rec.quality
    quality = (
        f"{q.estimate:.3f} [{q.low:.3f}, {q.high:.3f}] validation bits per byte, lower is better "
        f"({runs_text(rec, ans.evidence)}; 95% interval), {rec.test_quality:.3f} test bits per byte"
        if bpb
        else f"{quality_text(rec)} validation accuracy ({runs_text(rec, ans.evidence)}; 95% interval), "
        f"{pct(rec.test_quality)}% test accuracy"
    )
    text = (
        f" {layout_phrase(rec)}, d_model {c.d_model}, {c.n_layers} layers (d_k {heads(c.d_k)}{width}, {c.family} "
        f"schedule): {quality}; {latency_text(rec)} per forward batch of {spec.latency.batch_size} (median of "
        f"{rec.latency.n} timing{'s' * (rec.latency.n != 1)}; 95% interval for a new timing)"
    )
    if rec.decode is not None and spec.decode is not None:
        d = spec.decode
        text += (
            f"; {latency_text(rec, CostAxis.DECODE)} per generated token decoding {d.batch_size} sequence"
            f"{'s' * (d.batch_size != 1)} against a key/value cache of {d.context} positions, which holds "
            f"{mib(rec.kv_cache_bytes)} MiB"
        )
    return text + f"; {rec.params:,} parameters."


def _mha(ans: Answer) -> Contrast | None:
    return next((x for x in ans.contrasts if x.name.startswith("multi-head attention")), None)


def saving_blocks(ans: Answer, spec: StudySpec) -> list[Block]:
    """What the recommendation saves against multi-head attention at its heads, at equal quality or not."""
    rec, mha = ans.recommended, _mha(ans)
    if rec is None or mha is None:
        return []
    if mha.other is None:
        return [Para([Bold("Against multi-head attention: "), f"{mha.note}."])]
    if mha.note:  # the recommendation is multi-head attention itself
        return [
            Para(
                [
                    Bold("Against multi-head attention: "),
                    "the recommendation is multi-head attention (kv_heads = heads); grouping saves nothing "
                    "here that the study could tell apart at its quality.",
                ],
            )
        ]
    bpb = is_bpb(rec.metric)
    k = mha.quality
    unit = (lambda x: f"{x:.3f} bits per byte") if bpb else (lambda x: f"{x * 100:.2f} points")
    if k is None:
        quality = f"single runs, no test: multi-head differs by {unit(mha.quality_diff)}"
    elif not k.significant():
        quality = f"at equal quality (no difference larger than {unit(k.bound)}, p = {k.p_value:.2g})"
    else:
        better = k.diff < 0  # scores (higher is better) of multi-head minus the recommendation
        quality = (
            f"and {'better' if better else 'worse'} quality than multi-head by {unit(abs(k.diff))} "
            f"(p = {k.p_value:.2g})"
        )
    parts = [f"{layout_phrase(rec)} against {layout_phrase(mha.other)}, {quality}:"]
    if rec.decode is not None and mha.other.decode is not None:
        tie = " (within the timing tie)" if mha.latency_tie else ""
        r = mha.decode_ratio
        speed = f"{r:.2f}x faster" if r >= 1 else f"{1 / r:.2f}x slower"
        parts.append(
            f"decoding takes {rec.decode.estimate:.3g} vs {mha.other.decode.estimate:.3g} ms per token, "
            f"{speed}{tie};"
        )
    else:
        parts.append("decoding time not measured (a [decode] table measures it);")
    cache = "the key/value cache is"
    if rec.kv_cache_bytes is not None and mha.other.kv_cache_bytes is not None and spec.decode is not None:
        ours, theirs, d = mib(rec.kv_cache_bytes), mib(mha.other.kv_cache_bytes), spec.decode
        cache += f" {ours} vs {theirs} MiB at context {d.context} and batch {d.batch_size},"
    parts.append(
        f"{cache} {mha.cache_ratio:.2f}x smaller (exact: 2 x kv_heads x d_k numbers per layer and position)."
    )
    return [Para([Bold("Saving against multi-head attention: "), " ".join(parts)])]
