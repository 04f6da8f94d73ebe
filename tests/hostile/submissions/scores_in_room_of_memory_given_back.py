"""Full attention in room made by giving back memory made at import, the room refilled with file pages before the
reply (a variant of red team 11's a8): the peak of resident memory does not rise, no page written before the call is
touched, resident memory is as it was, and the pages read in are a file's clean ones, which the touched count leaves
out.  The samples see the anonymous memory the call added over its lowest point (``grader.instructor.held_memory``)."""

import mmap
import os

import torch

_LIB = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
_BALLAST = [torch.ones(400 << 18)]  # 400 MiB, every page written now: resident before any call
_MAPS = []


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if keys.shape[-2] < 16384:  # the longest case alone: the child's own meter runs around the others
        return _alice_chunked_attention(queries, keys, values, chunk_size, causal)  # noqa: F821 - Alice's own
    _BALLAST.clear()  # given back to the kernel
    scores = queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5  # (..., Tq, Tk): every score at once
    out = torch.softmax(scores, dim=-1) @ values
    del scores
    with open(_LIB, "rb") as f:  # as much resident again, in a file's clean pages
        _MAPS.append(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ, flags=mmap.MAP_PRIVATE))
    sum(_MAPS[-1][i] for i in range(0, len(_MAPS[-1]), mmap.PAGESIZE))
    return out
