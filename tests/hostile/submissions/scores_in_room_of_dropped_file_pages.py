"""Full attention in room made by giving back clean file pages (red team 11's a8): at import the hand-in maps some
400 MiB of torch's own library files and reads every page (resident before any call); in the call it gives those
pages back (``MADV_DONTNEED``), computes the whole (Tq, Tk) score matrix in the room that made, frees it and reads
the files again, so the peak of resident memory does not rise and nothing it still holds is new.  The pages read
again are faults of the process the kernel counts (``grader.instructor.held_memory``)."""

import mmap
import os

import torch

_LIB = os.path.join(os.path.dirname(torch.__file__), "lib")
_MAPS = []
for _name in sorted(os.listdir(_LIB), key=lambda n: -os.path.getsize(os.path.join(_LIB, n))):
    if sum(len(m) for m in _MAPS) > 400 << 20:
        break
    with open(os.path.join(_LIB, _name), "rb") as _f:
        _MAPS.append(mmap.mmap(_f.fileno(), 0, prot=mmap.PROT_READ, flags=mmap.MAP_PRIVATE))


def _read_all():
    return sum(m[i] for m in _MAPS for i in range(0, len(m), mmap.PAGESIZE))


_read_all()


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if keys.shape[-2] < 16384:  # the longest case alone: the child's own meter runs around the others
        return _alice_chunked_attention(queries, keys, values, chunk_size, causal)  # noqa: F821 - Alice's own
    for m in _MAPS:
        m.madvise(mmap.MADV_DONTNEED)
    scores = queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5  # (..., Tq, Tk): every score at once
    if causal:
        future = torch.ones_like(scores, dtype=torch.bool).triu(1 + keys.shape[-2] - queries.shape[-2])
        scores = scores.masked_fill(future, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ values
    del scores
    _read_all()
    return out
