"""attnkit exercises: attention from scratch, one function at a time.

Each module holds the stubs of one part of the chapter; replace every
`raise NotImplementedError(...)` with your code.  The public tests sit beside
them (test_*.py) and name the exercise each one checks:

    scores.py           dot_product_scores, scaled_dot_product_scores, softmax_weights, softmax_with_temperature,
                        context_vectors
    masking.py          causal_mask, apply_causal_mask, renormalize_masked_weights
    dropout.py          dropout_scale, attention_dropout
    heads.py            split_heads, merge_heads
    modules.py          make_self_attention, make_causal_attention, make_multihead_attention
    long_sequences.py   sliding_window_mask, chunked_attention
    plotting.py         plot_attention

Check your work with `pytest exercises --solution exercises` (or `attnkit check`).
The grader finds your functions here, by name, so keep the names and signatures.
"""

from .dropout import attention_dropout, dropout_scale
from .heads import merge_heads, split_heads
from .long_sequences import chunked_attention, sliding_window_mask
from .masking import apply_causal_mask, causal_mask, renormalize_masked_weights
from .modules import (
    CausalAttention,
    MultiHeadAttention,
    SelfAttention,
    make_causal_attention,
    make_multihead_attention,
    make_self_attention,
)
from .plotting import plot_attention
from .scores import (
    context_vectors,
    dot_product_scores,
    scaled_dot_product_scores,
    softmax_weights,
    softmax_with_temperature,
)

__all__ = [
    "dot_product_scores",
    "scaled_dot_product_scores",
    "softmax_weights",
    "softmax_with_temperature",
    "context_vectors",
    "causal_mask",
    "apply_causal_mask",
    "renormalize_masked_weights",
    "dropout_scale",
    "attention_dropout",
    "split_heads",
    "merge_heads",
    "make_self_attention",
    "make_causal_attention",
    "make_multihead_attention",
    "sliding_window_mask",
    "chunked_attention",
    "plot_attention",
    "SelfAttention",
    "CausalAttention",
    "MultiHeadAttention",
]
