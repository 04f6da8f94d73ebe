"""Bob's attention exercises, one topic per file."""

from .dropout import attention_dropout, dropout_scale
from .extras import (
    attention_entropy,
    chunked_attention,
    dilated_window_mask,
    plot_attention,
    plot_head_grid,
    sliding_window_mask,
    strided_mask,
)
from .heads import merge_heads, split_heads
from .masking import apply_causal_mask, causal_mask, renormalize_masked_weights
from .modules import (
    CausalAttention,
    MultiHeadAttention,
    SelfAttention,
    make_causal_attention,
    make_multihead_attention,
    make_self_attention,
)
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
    "SelfAttention",
    "CausalAttention",
    "MultiHeadAttention",
    "make_self_attention",
    "make_causal_attention",
    "make_multihead_attention",
    "sliding_window_mask",
    "chunked_attention",
    "plot_attention",
    "strided_mask",
    "dilated_window_mask",
    "attention_entropy",
    "plot_head_grid",
]
