"""Self-attention done by torch's fused kernel under a name of its own (``aten::_native_multi_head_attention``):
one head, identity in-projections, so the kernel computes softmax(QK^T / sqrt(d)) V (red team 7's 1)."""

import torch


class FusedSelfAttention(SelfAttention):  # noqa: F821 - Alice's, above the snippet: her projections
    def forward(self, x):
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)  # (b, T, d)
        flat = q.dim() == 2
        if flat:
            q, k, v = q[None], k[None], v[None]
        d = q.shape[-1]
        eye = torch.eye(d, dtype=q.dtype, device=q.device)
        zeros = torch.zeros(d, dtype=q.dtype, device=q.device)
        out = torch._native_multi_head_attention(q, k, v, d, 1, torch.cat([eye] * 3), torch.cat([zeros] * 3),
                                                 eye, zeros, None, False, True)[0]  # fmt: skip
        return out[0] if flat else out


def make_self_attention(d_in, d_out, qkv_bias=False):
    return FusedSelfAttention(d_in, d_out, qkv_bias=qkv_bias)
