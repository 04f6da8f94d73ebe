"""Answers softmax_weights, but its process sends the grader a reply of its own instead: KIND.

A snippet (see tests/submissions/README.md): appended to Alice's solution, whose
own softmax_weights is renamed out of the way.  ``__REPLY_KIND__`` is filled in
at test time with one of the kinds of ``_payload``.  Its softmax_weights writes hand-made bytes as the reply
to its own call straight to the grader's socket (the one socket among its descriptors, the call's id read
from the runtime's frames), where another call of the batch follows: the runtime's serve loop holds what it
calls, so no reply of its own can be swapped in, and the runtime's reply that follows answers nothing the
grader asked (it ends the process).  Every other call is answered as usual.
"""

import json as _json
import struct as _struct
import sys as _sys

KIND = "__REPLY_KIND__"


def _frame(header, blob=b""):
    return _struct.pack(">Q", len(header)) + header + _struct.pack(">Q", len(blob)) + blob


def _tensors(entries, data):
    text = _json.dumps(entries).encode()
    return _struct.pack("<Q", len(text)) + text + data


def _payload(kind, call_id):
    ok = {
        "id": call_id,
        "ok": True,
        "seconds": 0.01,
        "banned": [],
        "peak_rss_kib": 1,
        "results": [
            {
                "type": "torch.Tensor",
                "is_tensor": True,
                "exact_tensor": True,
                "dtype": "float32",
                "shape": [1],
                "device": "cpu",
                "contiguous": True,
            }
        ],
    }
    if kind == "deep_nesting":  # RecursionError in json.loads
        return _frame(b"[" * 100_000 + b"]" * 100_000)
    if kind == "string_for_number":
        return _frame(_json.dumps(dict(ok, peak_rss_kib="lots")).encode())
    if kind == "list_for_dict":
        return _frame(_json.dumps(dict(ok, error=["TypeError", "no"])).encode())
    if kind == "nan_seconds":  # SQLite would store NULL in a NOT NULL column
        return _frame(_json.dumps(dict(ok, seconds=float("nan"))).encode())
    if kind == "huge_message":  # 3.9 MB per call, past the child's own 2,000-character cut
        error = {"type": "RuntimeError", "mro": ["RuntimeError"], "message": "M" * 3_900_000, "where": None}
        return _frame(_json.dumps(dict(ok, ok=False, error=error, results=[])).encode())
    if kind == "surrogate_message":  # a lone surrogate: not encodable as UTF-8
        error = {"type": "RuntimeError", "mro": ["RuntimeError"], "message": "\ud800 boom", "where": None}
        return _frame(_json.dumps(dict(ok, ok=False, error=error, results=[])).encode())
    if kind == "tensor_250mib":
        n = 250 << 20
        entries = {"out0": {"dtype": "F32", "shape": [n // 4], "data_offsets": [0, n]}}
        return _frame(_json.dumps(ok).encode(), _tensors(entries, bytes(n)))
    if kind == "million_empty_tensors":  # a 59 MB blob of a million empty tensors
        text = ",".join(f'"t{i}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}' for i in range(1_000_000))
        text = ("{" + text + "}").encode()
        return _frame(_json.dumps(ok).encode(), _struct.pack("<Q", len(text)) + text)
    if kind == "wrong_tensor_names":
        entries = {f"evil{i}": {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]} for i in range(9)}
        return _frame(_json.dumps(ok).encode(), _tensors(entries, bytes(36)))
    raise ValueError(kind)


def _grader_socket():
    import os
    import stat

    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return fd
        except OSError:
            continue
    raise RuntimeError("no socket")


def _serving():
    """The call being served and whether another of its batch follows (from the runtime's frames)."""
    frame = _sys._getframe(1)
    while frame is not None and not ("request" in frame.f_locals and "header" in frame.f_locals):
        frame = frame.f_back
    calls, request = frame.f_locals["header"]["calls"], frame.f_locals["request"]
    return request["id"], request is not calls[-1]


def softmax_weights(scores, dim=-1):
    import os
    import socket

    call_id, more = _serving()
    if more:  # the runtime's own reply follows and answers the next call: the grader ends this process then
        with socket.socket(fileno=os.dup(_grader_socket())) as sock:
            sock.sendall(_payload(KIND, call_id))
    exp = (scores - scores.amax(dim=dim, keepdim=True)).exp()
    return exp / exp.sum(dim=dim, keepdim=True)
