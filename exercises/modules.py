"""The attention modules: trainable projections, the causal mask as a buffer, many heads.

Fill in the three classes; the make_* functions below only build them.  You may
reuse your own functions from the other exercise modules:

    from .scores import scaled_dot_product_scores, softmax_weights, context_vectors
    from .masking import causal_mask
    from .dropout import attention_dropout
    from .heads import split_heads, merge_heads

Not allowed: F.scaled_dot_product_attention, nn.MultiheadAttention.

Run `pytest exercises/test_modules.py` to check your work.
"""

from torch import nn


class SelfAttention(nn.Module):
    """Scaled dot-product self-attention with trainable query, key and value projections.

    The simple version attends with the raw embeddings; learned projections let
    the model decide what a token asks for (query), what it offers to be found
    by (key) and what it hands over (value).
    """

    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        # self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        # self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        # self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        # (create them in this order: with torch.manual_seed(789) you then get the chapter's numbers)
        raise NotImplementedError(
            "exercise make_self_attention: not implemented yet — create W_query, W_key, W_value in SelfAttention"
        )

    def forward(self, x):
        # x: (..., T, d_in)
        # queries, keys, values = W_query(x), W_key(x), W_value(x)   # (..., T, d_out) each
        # weights = softmax of the scaled scores, over the keys      # (..., T, T)
        # return the context vectors                                  # (..., T, d_out)
        raise NotImplementedError("exercise make_self_attention: not implemented yet — SelfAttention.forward")


class CausalAttention(nn.Module):
    """Self-attention that cannot look ahead, with dropout on the attention weights.

    The mask is a buffer, not a plain attribute: it is saved in the state_dict
    and `.to(device)` moves it along with the weights, so it is never left on
    the CPU while the scores live on a GPU.  It is built once for the longest
    input (context_length) and sliced to the actual T in forward.
    """

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        # self.W_query, self.W_key, self.W_value: nn.Linear(d_in, d_out, bias=qkv_bias), in that order
        # self.dropout = dropout   # the drop probability (attention_dropout, or nn.Dropout(dropout))
        # self.register_buffer("mask", causal_mask(context_length))   # (context_length, context_length)
        raise NotImplementedError(
            "exercise make_causal_attention: not implemented yet — projections, dropout and the mask buffer"
        )

    def forward(self, x):
        # b, T, _ = x.shape                                          # T <= context_length
        # queries, keys, values = ...                                # (b, T, d_out)
        # scores = scaled dot-product scores                         # (b, T, T)
        # set the future to -inf with self.mask[:T, :T]              # (b, T, T)
        # weights = softmax, then dropout (only while self.training)  # (b, T, T)
        # return the context vectors                                  # (b, T, d_out)
        raise NotImplementedError("exercise make_causal_attention: not implemented yet — CausalAttention.forward")


class MultiHeadAttention(nn.Module):
    """The chapter's MultiHeadAttention: H causal heads computed in one batched pass.

    One projection of width d_out serves all heads, split into H slices of
    head_dim = d_out // H columns; out_proj then mixes what the heads found.
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        # d_out % num_heads != 0 -> raise ValueError (every head needs the same head_dim)
        # self.num_heads, self.head_dim = num_heads, d_out // num_heads
        # self.W_query, self.W_key, self.W_value: nn.Linear(d_in, d_out, bias=qkv_bias), in that order
        # self.out_proj = nn.Linear(d_out, d_out)                    # combines the heads' outputs
        # self.dropout = dropout
        # self.register_buffer("mask", causal_mask(context_length))   # (context_length, context_length)
        raise NotImplementedError(
            "exercise make_multihead_attention: not implemented yet — projections, out_proj and the mask buffer"
        )

    def forward(self, x):
        # b, T, _ = x.shape
        # queries = split_heads(self.W_query(x), self.num_heads)     # (b, H, T, hd); keys, values alike
        # scores = scaled dot-product scores                         # (b, H, T, T): one map per head
        # mask the future with self.mask[:T, :T], softmax, dropout   # (b, H, T, T)
        # context = merge_heads(weights @ values)                    # (b, T, d_out)
        # return self.out_proj(context)                              # (b, T, d_out)
        raise NotImplementedError("exercise make_multihead_attention: not implemented yet — MultiHeadAttention.forward")


def make_self_attention(d_in, d_out, qkv_bias=False):
    """Build your SelfAttention (the grader calls this; fill in the class above)."""
    return SelfAttention(d_in, d_out, qkv_bias)


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    """Build your CausalAttention (the grader calls this; fill in the class above)."""
    return CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    """Build your MultiHeadAttention (the grader calls this; fill in the class above)."""
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
