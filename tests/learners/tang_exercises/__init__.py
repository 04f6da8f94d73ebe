"""Tang's chapter-3 exercises, one file per topic (same layout as the kit's exercises/)."""

from .dropout import attention_dropout, dropout_scale
from .heads import merge_heads, split_heads
from .masking import apply_causal_mask, causal_mask, renormalize_masked_weights
from .modules import CausalAttention, MultiHeadAttention, SelfAttention
from .scores import context_vectors, dot_product_scores, scaled_dot_product_scores, softmax_weights
