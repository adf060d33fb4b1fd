"""A gallery of attention variants, each a few lines of tile language (``score_mod`` / ``mask_mod`` hooks).

Model
-----
Each entry is a factory returning ``@ct.inline`` hooks with FlexAttention's
signatures (see ``hooks``); its parameters (a window, a cap, a head count)
are closure constants folded at compile time. Factories are memoised: the
same parameters give the same function object, so a second call with them
reuses the compiled kernel.

=====================  ===========  ===========================================
entry                  hook         what it computes
=====================  ===========  ===========================================
``soft_cap(cap)``      score_mod    cap · tanh(score / cap) (Gemma 2: cap 50)
``alibi(heads)``       score_mod    score + slope(h) · (kv - q), slope 2^(-8(h+1)/heads)
``causal()``           mask_mod     kv <= q
``sliding_window(w)``  mask_mod     0 <= q - kv < w (causal, w keys)
``prefix_lm(p)``       mask_mod     kv < p or kv <= q
``document(s)``        mask_mod     doc[b, q] == doc[b, kv]  (capture: doc ids, flattened (B·s,))
``rel_bias(r)``        score_mod    score + table[h, clip(kv - q, -r, r) + r]  (capture: (H·(2r+1),))
=====================  ===========  ===========================================

Causal + sink is ``causal()`` with ``learnable_sink``; the decode variant is
``soft_cap`` on a paged cache (``block_table``). Every entry is also checked
against the float64 golden that applies the same hooks in numpy.
"""

from __future__ import annotations

import math
from functools import lru_cache

import cvtile.dsl as ct

__all__ = ["soft_cap", "alibi", "causal", "sliding_window", "prefix_lm", "document", "rel_bias", "GALLERY",
           "hook_from_spec"]


@lru_cache(maxsize=None)
def soft_cap(cap: float = 50.0):
    """Logit soft-capping (Gemma 2): the score squashed into (-cap, cap)."""
    @ct.inline
    def soft_cap_mod(score, b, h, q_idx, kv_idx):
        return ct.tanh(score * (1.0 / cap)) * cap
    return soft_cap_mod


@lru_cache(maxsize=None)
def alibi(heads: int):
    """ALiBi: a per-head linear penalty on the distance, slope 2^(-8(h+1)/heads) (exp of a constant times h+1)."""
    step = -8.0 * math.log(2.0) / heads

    @ct.inline
    def alibi_mod(score, b, h, q_idx, kv_idx):
        slope = ct.exp(ct.cast(h + 1, ct.float32) * step)
        return score + slope * ct.cast(kv_idx - q_idx, ct.float32)
    return alibi_mod


@lru_cache(maxsize=None)
def causal():
    """Causal: a query sees the keys up to its own position."""
    @ct.inline
    def causal_mask(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx
    return causal_mask


@lru_cache(maxsize=None)
def sliding_window(window: int):
    """Causal sliding window: a query sees its own position and the window - 1 before it."""
    @ct.inline
    def sliding_window_mask(b, h, q_idx, kv_idx):
        d = q_idx - kv_idx
        return (d >= 0) & (d < window)
    return sliding_window_mask


@lru_cache(maxsize=None)
def prefix_lm(prefix: int):
    """Prefix LM: the first ``prefix`` keys are seen by every query, the rest causally."""
    @ct.inline
    def prefix_lm_mask(b, h, q_idx, kv_idx):
        return (kv_idx < prefix) | (kv_idx <= q_idx)
    return prefix_lm_mask


@lru_cache(maxsize=None)
def document(seq: int):
    """Document masking of packed sequences: a query sees the keys of its own document. Capture: the document
    id of every position, flattened to (B·seq,) (batch b's ids at b·seq ...)."""
    @ct.inline
    def document_mask(b, h, q_idx, kv_idx, doc):
        return ct.gather(doc, q_idx + b * seq) == ct.gather(doc, kv_idx + b * seq)
    return document_mask


@lru_cache(maxsize=None)
def rel_bias(max_distance: int):
    """A learned relative-position bias per head, the distance clipped to ±max_distance. Capture: the table
    (H, 2·max_distance + 1) flattened to (H·(2·max_distance + 1),)."""
    width = 2 * max_distance + 1

    @ct.inline
    def rel_bias_mod(score, b, h, q_idx, kv_idx, table):
        rel = ct.minimum(ct.maximum(kv_idx - q_idx, -max_distance), max_distance)
        return score + ct.cast(ct.gather(table, h * width + rel + max_distance), ct.float32)
    return rel_bias_mod


#: name -> factory, for ``cvtile variant NAME`` style lookups and the gallery tests
GALLERY = {"soft_cap": soft_cap, "alibi": alibi, "causal": causal, "sliding_window": sliding_window,
           "prefix_lm": prefix_lm, "document": document, "rel_bias": rel_bias}


def hook_from_spec(spec: str):
    """The hook a command-line spec names: ``NAME`` or ``NAME:ARG[,ARG...]`` of the gallery (``sliding_window:256``,
    ``prefix_lm:128``, ``soft_cap:50``), or ``package.module:attribute`` naming an ``@ct.inline`` function or a
    factory called with no arguments. Raises ``VariantError`` naming the spec."""
    from .hooks import VariantError

    name, _, rest = spec.partition(":")
    if name in GALLERY:
        args = []
        for a in filter(None, rest.split(",")):
            try:
                args.append(int(a))
            except ValueError:
                try:
                    args.append(float(a))
                except ValueError:
                    raise VariantError("mask_mod", spec, f"argument {a!r} of {name} is not a number") from None
        try:
            return GALLERY[name](*args)
        except TypeError as exc:
            raise VariantError("mask_mod", spec, f"{name}: {exc}") from None
    if "." in name and rest:
        import importlib

        try:
            obj = getattr(importlib.import_module(name), rest)
        except (ImportError, AttributeError) as exc:
            raise VariantError("mask_mod", spec, f"cannot load it: {exc}") from None
        from cvtile.dsl.frontend import InlineFunction

        return obj if isinstance(obj, InlineFunction) else obj()
    raise VariantError("mask_mod", spec, f"not a gallery entry ({', '.join(sorted(GALLERY))}) nor module:attribute")
