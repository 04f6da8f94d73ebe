from torch import nn

from .dropout import attention_dropout
from .heads import merge_heads, split_heads
from .masking import causal_mask
from .scores import context_vectors, scaled_dot_product_scores, softmax_weights


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        return context_vectors(softmax_weights(scaled_dot_product_scores(q, k)), v)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.p = dropout
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = scaled_dot_product_scores(q, k).masked_fill(self.mask[:t, :t], float("-inf"))
        w = attention_dropout(softmax_weights(scores), self.p, self.training)
        return context_vectors(w, v)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out must be divisible by num_heads")
        self.num_heads = num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.p = dropout
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x):
        t = x.shape[1]
        q = split_heads(self.W_query(x), self.num_heads)
        k = split_heads(self.W_key(x), self.num_heads)
        v = split_heads(self.W_value(x), self.num_heads)
        scores = scaled_dot_product_scores(q, k).masked_fill(self.mask[:t, :t], float("-inf"))
        w = attention_dropout(softmax_weights(scores), self.p, self.training)
        return self.out_proj(merge_heads(context_vectors(w, v)))


def make_self_attention(d_in, d_out, qkv_bias=False):
    return SelfAttention(d_in, d_out, qkv_bias)


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
