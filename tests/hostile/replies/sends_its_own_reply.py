"""Answers softmax_weights, but its process sends the grader a reply of its own instead: KIND.

A snippet (see tests/submissions/README.md): appended to Alice's solution, whose
own softmax_weights is renamed out of the way.  ``__REPLY_KIND__`` is filled in
at test time with one of the kinds of ``_payload``.  The submission patches the
child runtime's ``send_message`` (reached through the globals of the template's
``serve_template``, which ``sys.modules['__main__']`` holds in the learner's process):
the reply to each softmax_weights call is replaced by hand-made bytes on the grader's socket; every other
reply goes out as usual.
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


_runtime = _sys.modules["__main__"].serve_template.__globals__  # grader.child.serve's namespace
_honest_send = _runtime["send_message"]
_armed = []


def _hostile_send(sock, header, blob=b""):
    if _armed and "id" in header:
        _armed.clear()
        sock.sendall(_payload(KIND, header["id"]))
        return
    _honest_send(sock, header, blob)


_runtime["send_message"] = _hostile_send


def softmax_weights(scores, dim=-1):
    _armed.append(True)
    exp = (scores - scores.amax(dim=dim, keepdim=True)).exp()
    return exp / exp.sum(dim=dim, keepdim=True)
