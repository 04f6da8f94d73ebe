"""Self-attention by ``F.scaled_dot_product_attention``, which the module exercises ban: the honest version of a
fused kernel reached under another name."""

import torch.nn.functional as F


class SdpaSelfAttention(SelfAttention):  # noqa: F821 - Alice's, above the snippet: her projections
    def forward(self, x):
        return F.scaled_dot_product_attention(self.W_query(x), self.W_key(x), self.W_value(x))


def make_self_attention(d_in, d_out, qkv_bias=False):
    return SdpaSelfAttention(d_in, d_out, qkv_bias=qkv_bias)
