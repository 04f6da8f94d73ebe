"""Self-attention done by torch's fused higher-order operator ``flex_attention`` (no aten operator: the kernel watch
hears nothing; its name holds no banned name), inside an autograd Function whose backward calls its own backward
operator, so nothing it does is flagged.  The child's dispatch mode cannot run it (red team 12's attack 2: with
that mode off, the module hooks kept full marks)."""

import math

import torch
from torch.nn.attention.flex_attention import create_block_mask

_OPTIONS = {"OUTPUT_LOGSUMEXP": True, "OUTPUT_MAX": False}


def _everything(b, h, q_idx, kv_idx):
    return q_idx >= 0


def _plain(score, b, h, q_idx, kv_idx):
    return score


def _joint(score, b, h, q_idx, kv_idx, grad):
    return [grad, None, None, None, None]


class _Fused(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        blocks = create_block_mask(_everything, None, None, q.shape[-2], k.shape[-2], device=q.device).as_tuple()
        scale = 1.0 / math.sqrt(q.shape[-1])
        out, lse, _ = torch.ops.higher_order.flex_attention(q, k, v, _plain, blocks, scale, _OPTIONS)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.blocks, ctx.scale = blocks, scale
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, lse = ctx.saved_tensors
        gq, gk, gv, _ = torch.ops.higher_order.flex_attention_backward(
            q, k, v, out, lse, grad.contiguous(), torch.zeros_like(lse), _plain, _joint, ctx.blocks, ctx.scale,
            _OPTIONS, (), ()
        )
        return gq, gk, gv


class FlexSelfAttention(SelfAttention):  # noqa: F821 - Alice's, above the snippet: her projections
    def forward(self, x):
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)  # (..., T, d)
        lead = q.shape[:-2]
        q4, k4, v4 = (t.reshape(-1, 1, *t.shape[-2:]) for t in (q, k, v))
        return _Fused.apply(q4, k4, v4).reshape(*lead, q.shape[-2], v.shape[-1])


def make_self_attention(d_in, d_out, qkv_bias=False):
    return FlexSelfAttention(d_in, d_out, qkv_bias=qkv_bias)
