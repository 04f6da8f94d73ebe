"""The exercise contract: one hookspec per function a learner writes.

Every solution -- the reference, each catalogued mistake, each learner's
submission, anything installed under the ``attnkit.solutions`` entry-point
group -- is a plugin that implements some or all of these hooks.  Each plugin
lives in its own plugin manager, so calling one solution never calls another.

The facts about each hook that are not its contract (its exercise group, the
chapter's class name, the banned calls and why, its output kind, its default
points) are in one row of :mod:`grader.hook_table`; the "Not allowed inside"
sentences below are documentation of that table's banned calls
(``tests/test_meta.py`` keeps them in step).

Conventions shared by every hook:

* Inputs are floating tensors (float32 or float64; float16/bfloat16 where a hook's hidden cases ask).
  Outputs keep the input's dtype and device.
* No hook modifies its inputs; it returns new tensors.
* "Leading dims" (``...``) means any number of batch dimensions, including none.
* Defaults written in these signatures are the defaults a caller sees; the
  grader always passes every argument explicitly.
"""

from __future__ import annotations

import pluggy

PROJECT_NAME = "attnkit"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# --- scores and softmax ---------------------------------------------------


@hookspec(firstresult=True)
def dot_product_scores(queries, keys):
    """Return the attention scores: every query dotted with every key.

    :param queries: ``(..., Tq, d)``
    :param keys: ``(..., Tk, d)`` with the same leading dims as ``queries``.
    :returns: ``(..., Tq, Tk)`` where entry ``[i, j] = <q_i, k_j>``.

    Edge cases the hidden suite holds: 2-D, 3-D and 4-D inputs; ``Tq != Tk``;
    ``T == 1``; ``d == 1``; non-contiguous inputs (a transposed view).
    ``queries @ keys.T`` is only right for 2-D input.
    """


@hookspec(firstresult=True)
def scaled_dot_product_scores(queries, keys):
    """Return the dot-product scores divided by ``sqrt(d_k)``.

    :param queries: ``(..., Tq, d_k)``
    :param keys: ``(..., Tk, d_k)``; ``d_k = keys.shape[-1]``.
    :returns: ``(..., Tq, Tk)``.

    Scaling keeps the softmax away from its flat, tiny-gradient regions when
    ``d_k`` is large.  Scale by the key dimension, not by ``d_in`` or ``T``,
    and scale exactly once.  Edge cases: ``d_in != d_out`` projections,
    ``d_k == 1``.
    """


@hookspec(firstresult=True)
def softmax_weights(scores, dim=-1):
    """Return a numerically stable softmax of ``scores`` along ``dim``.

    :param scores: any shape.
    :param dim: the dimension to normalise; positive or negative.
    :returns: same shape and dtype; every slice along ``dim`` sums to 1.

    ``-inf`` entries give exactly 0.  A slice that is entirely ``-inf`` gives
    all zeros, never NaN.  Logits around +-1e4 must not overflow (subtract the
    maximum first).  Not allowed inside: ``torch.softmax``, ``F.softmax``,
    ``Tensor.softmax``, ``log_softmax``, ``torch.special.softmax``.
    """


@hookspec(firstresult=True)
def softmax_with_temperature(scores, temperature, dim=-1):
    """Return ``softmax(scores / temperature)`` along ``dim``, numerically stable.

    :param scores: any shape.
    :param temperature: a positive number; below 1 sharpens the weights, above 1 flattens them.
    :param dim: the dimension to normalise; positive or negative.
    :returns: same shape and dtype; every slice along ``dim`` sums to 1.

    ``temperature == 1`` is ``softmax_weights``.  A tiny temperature (1e-4) gives
    (near) one-hot slices with no NaN: the scaled logits reach 1e4, so subtract
    the maximum first.  A huge one (1e4) gives near-uniform slices.  ``-inf``
    entries give exactly 0 and an all ``-inf`` slice gives zeros, never NaN.
    ``temperature <= 0`` raises ``ValueError``.  Not allowed inside:
    ``torch.softmax``, ``F.softmax``, ``Tensor.softmax``, ``log_softmax``,
    ``torch.special.softmax``.
    """


@hookspec(firstresult=True)
def context_vectors(weights, values):
    """Return the context vectors: each row of ``weights`` mixes the values.

    :param weights: ``(..., Tq, Tk)``
    :param values: ``(..., Tk, dv)``
    :returns: ``(..., Tq, dv)``.

    Edge cases: ``dv != Tk``; batched input.
    """


# --- the causal mask ------------------------------------------------------


@hookspec(firstresult=True)
def causal_mask(num_tokens, device=None):
    """Return the causal mask: True strictly above the diagonal (the future).

    :param num_tokens: ``T >= 1``.
    :param device: where to build the mask (``None`` = the default device).
    :returns: ``(T, T)`` tensor of dtype ``torch.bool`` on ``device``.

    The diagonal is False: a token may attend to itself.
    ``num_tokens < 1`` raises ``ValueError``.
    """


@hookspec(firstresult=True)
def apply_causal_mask(scores):
    """Return a copy of ``scores`` with every future entry set to ``-inf``.

    :param scores: ``(..., T, T)``.
    :returns: same shape, dtype and device; entries above the diagonal are
        ``-inf``, the rest unchanged.

    Works for any ``T`` (no fixed size) and builds the mask on the scores'
    device.  The input is left unchanged.  The last two dims differing raises
    ``ValueError``.
    """


@hookspec(firstresult=True)
def renormalize_masked_weights(weights):
    """Zero the future entries of row-normalised weights and renormalise.

    :param weights: ``(..., T, T)`` whose rows sum to 1.
    :returns: same shape; entries above the diagonal are 0 and every row sums
        to 1 again (each row divided by its new sum).

    This is the chapter's first approach; it equals the softmax of the masked
    scores.  The first row is always ``[1, 0, ..., 0]``.
    """


# --- dropout ----------------------------------------------------------------


@hookspec(firstresult=True)
def dropout_scale(weights, keep_mask, p):
    """Return ``weights * keep_mask / (1 - p)``: inverted-dropout scaling.

    :param weights: any shape.
    :param keep_mask: same shape, bool or 0/1; True where an entry is kept.
    :param p: the drop probability, ``0 <= p <= 1``.
    :returns: same shape and dtype as ``weights``.

    Scaling the survivors by ``1/(1-p)`` keeps each entry's expected value, so
    eval (no dropout) sees the same scale as training.  ``p == 0`` is the
    identity on kept entries; ``p == 1`` gives zeros, never inf or NaN.
    ``p`` outside ``[0, 1]`` raises ``ValueError``.
    """


@hookspec(firstresult=True)
def attention_dropout(weights, p, training=True, generator=None):
    """Return inverted dropout of the attention weights.

    :param weights: any shape.
    :param p: drop probability in ``[0, 1]``.
    :param training: in eval (``False``) dropout is off.
    :param generator: a ``torch.Generator`` to draw the keep mask from.
    :returns: same shape and dtype.  In eval or with ``p == 0``: the input's
        values.  Otherwise each entry is kept with probability ``1 - p`` and
        scaled by ``1/(1 - p)``; ``p == 1`` gives zeros.

    The same generator state gives the same output.  Not allowed inside:
    ``F.dropout``, ``nn.Dropout``, ``torch.dropout``.
    """


# --- heads ------------------------------------------------------------------


@hookspec(firstresult=True)
def split_heads(x, num_heads):
    """Split the feature dimension into heads.

    :param x: ``(b, T, d)``.
    :param num_heads: ``H``, a divisor of ``d``.
    :returns: ``(b, H, T, d/H)``; head ``h`` holds columns
        ``[h*d/H, (h+1)*d/H)`` of ``x``.

    ``view`` to ``(b, T, H, d/H)`` then ``transpose(1, 2)``; a bare ``view`` to
    ``(b, H, T, d/H)`` mixes tokens into heads.  Non-contiguous input must
    work.  ``d % H != 0`` raises ``ValueError``.
    """


@hookspec(firstresult=True)
def merge_heads(x):
    """Merge heads back: the inverse of ``split_heads``.

    :param x: ``(b, H, T, hd)``.
    :returns: ``(b, T, H*hd)``, contiguous.  ``merge_heads(split_heads(x, H))``
        equals ``x``.
    """


# --- the modules ---------------------------------------------------------------


@hookspec(firstresult=True)
def make_self_attention(d_in, d_out, qkv_bias=False):
    """Return an ``nn.Module``: trainable scaled dot-product self-attention.

    The module has ``W_query``, ``W_key``, ``W_value`` (``nn.Linear(d_in, d_out,
    bias=qkv_bias)``, created in that order, so a fixed seed gives the
    chapter's numbers).  ``forward(x)`` maps ``(..., T, d_in)`` to
    ``(..., T, d_out)``; no mask.  Graded by behaviour: the reference's weights
    are loaded into your layers (by name, or else by creation order and shape)
    and the outputs compared; one case of its own checks the layers' names.
    Not allowed inside: ``F.scaled_dot_product_attention``, ``nn.MultiheadAttention``.
    """


@hookspec(firstresult=True)
def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    """Return an ``nn.Module``: causal self-attention with attention dropout.

    As ``make_self_attention``, plus a ``(context_length, context_length)``
    causal mask held with ``register_buffer("mask", ...)`` (so it is in the
    ``state_dict`` and ``.to(device)`` moves it) and dropout with probability
    ``dropout`` on the attention weights.  ``forward(x)`` takes ``(b, T,
    d_in)`` with ``T <= context_length`` and returns ``(b, T, d_out)``.
    Changing token ``t`` leaves outputs before ``t`` unchanged; eval is
    deterministic; in training mode each attention weight is dropped (0) or
    scaled by ``1 / (1 - dropout)``.  The behaviour cases use your own mask.
    Not allowed inside: ``F.scaled_dot_product_attention``, ``nn.MultiheadAttention``.
    """


@hookspec(firstresult=True)
def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    """Return an ``nn.Module``: the chapter's ``MultiHeadAttention``.

    ``W_query``, ``W_key``, ``W_value`` (``nn.Linear(d_in, d_out,
    bias=qkv_bias)``, created in that order), ``out_proj`` (``d_out -> d_out``,
    with bias), a ``(context_length, context_length)`` ``mask`` buffer and
    attention dropout with probability ``dropout``.  Heads are split with view + transpose;
    ``forward(x)``: ``(b, T, d_in) -> (b, T, d_out)`` equals per-head causal
    attention, concatenated, then projected.  ``d_out % num_heads != 0``
    raises when the module is built: ``ValueError`` (the chapter's ``assert``
    is accepted, with a note).  Not allowed inside: ``F.scaled_dot_product_attention``,
    ``nn.MultiheadAttention``.
    """


# --- long sequences ---------------------------------------------------------------


@hookspec(firstresult=True)
def sliding_window_mask(num_tokens, window, device=None):
    """Return the sliding-window (local) causal mask: True where a query may not look.

    :param num_tokens: ``T >= 1``.
    :param window: ``w >= 1``, how many keys each query sees: itself and the
        ``w - 1`` tokens before it.
    :param device: where to build the mask (``None`` = the default device).
    :returns: ``(T, T)`` tensor of dtype ``torch.bool`` on ``device``; entry
        ``[i, j]`` is True when ``j > i`` (the future) or ``j <= i - w`` (more
        than ``w - 1`` positions back).

    ``window >= T`` equals ``causal_mask(T)``; ``window == 1`` lets each token
    see only itself.  ``window < 1`` or ``num_tokens < 1`` raises ``ValueError``.
    """


@hookspec(firstresult=True)
def chunked_attention(queries, keys, values, chunk_size, causal=False):
    """Return scaled dot-product attention computed over blocks of keys (online softmax).

    :param queries: ``(..., Tq, d)``
    :param keys: ``(..., Tk, d)`` with the same leading dims.
    :param values: ``(..., Tk, dv)``.
    :param chunk_size: ``c >= 1``, the number of keys per block; the last
        block may be shorter (``c`` need not divide ``Tk``; ``c >= Tk`` is one block).
    :param causal: when True, query ``i`` sees keys ``j <= i + (Tk - Tq)``
        (the queries are the last ``Tq`` of the ``Tk`` positions; ``Tq == Tk``
        is the causal mask).
    :returns: ``(..., Tq, dv)``, equal to ``softmax(q k^T / sqrt(d)) v``.

    Walk the key blocks keeping, per query, a running max, a running sum of
    ``exp(score - max)`` and a running weighted sum of values; when the max
    grows, rescale both sums by ``exp(old_max - new_max)``.  Never hold a
    ``(..., Tq, Tk)`` tensor, not even one ``(Tq, Tk)`` batch-head at a time:
    the grader measures the memory the call's tensors hold at once, in the
    calling thread, and no value may leave torch (``Tensor.numpy``, ``tolist``)
    (long sequences: ``Tq = Tk = 2048``, ``d = 16``); at ``Tq = 2048, Tk = 16384``
    it also reads from the kernel what your whole process held.  A query row with every
    key masked gives zeros, never NaN.  Not allowed inside:
    ``F.scaled_dot_product_attention``, ``nn.MultiheadAttention``.
    """


# --- plotting ------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def plot_attention(weights, tokens=None):
    """Return a matplotlib ``Figure`` drawing one attention matrix as a heatmap.

    :param weights: ``(Tq, Tk)``, one matrix (rows: queries, columns: keys), on any device; it may
        require grad (the weights of a model).  Anything that is not 2-D (a batch ``(b, Tq, Tk)``,
        heads ``(b, H, Tq, Tk)``, a vector) raises ``ValueError``: pick one matrix first.
    :param tokens: ``None``; or one sequence of ``T`` strings for square ``(T, T)`` (self-attention)
        weights, naming the keys and the queries alike; or a pair ``(query_tokens, key_tokens)`` of
        sequences of ``Tq`` and ``Tk`` strings (any weights).  Lengths that do not match the weights
        raise ``ValueError``.
    :returns: the ``Figure``, neither shown nor closed.

    The figure holds one image, ``imshow`` of the weights as they are (row ``i`` is query ``i``:
    the image's array equals ``weights``, never its transpose), with a colorbar for it.  Without
    tokens the x axis is labelled "Key positions" and the y axis "Query positions"; with tokens,
    key token ``j`` labels the x tick at ``j`` and query token ``i`` the y tick at ``i``, for
    every position.  The grader reads the figure as data (the image's array, the axis labels,
    the tick labels, the colorbar), headless.  Not allowed inside: ``pyplot.show``.
    """


__all__ = [  # the markers and every hookspec above, in hookspec order
    "PROJECT_NAME",
    "hookimpl",
    "hookspec",
    *(name for name, value in list(globals().items()) if hasattr(value, f"{PROJECT_NAME}_spec")),
]
