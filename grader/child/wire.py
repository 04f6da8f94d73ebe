"""The wire format, both ways: an 8-byte length, a JSON header, an 8-byte length and a safetensors blob.

Data only: nothing is ever pickled.  Sizes over the caps are refused from the length prefix, unread.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Any

MAX_HEADER = 4 << 20
_LEN = struct.Struct(">Q")

# --- the wire format -------------------------------------------------------------


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


def send_message(sock: socket.socket, header: dict[str, Any], blob: bytes = b"") -> None:
    data = json.dumps(header, allow_nan=True).encode()
    sock.sendall(_LEN.pack(len(data)) + data + _LEN.pack(len(blob)) + blob)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    """``n`` bytes from ``sock``; with a ``deadline`` (``time.monotonic()``), TimeoutError once it passes.

    The time left is recomputed before every ``recv``, so a peer that drips one
    byte at a time cannot stretch a read past the deadline.
    """
    chunks = bytearray()
    while len(chunks) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the deadline passed")
            sock.settimeout(left)
        part = sock.recv(min(n - len(chunks), 1 << 20))
        if not part:
            raise EOFError("the other side closed the connection")
        chunks += part
    return bytes(chunks)


def recv_message(
    sock: socket.socket, max_blob: int = 1 << 30, max_header: int = MAX_HEADER, deadline: float | None = None
) -> tuple[dict[str, Any], bytes]:
    """One message: ``(header, blob)``.  Sizes over the caps are refused from the length prefix, unread.

    Raises ProtocolError for anything that is not a well-formed message (a
    header that is not a JSON object, too deeply nested JSON, bad UTF-8),
    EOFError when the peer closed, TimeoutError when ``deadline`` passed.
    """
    (size,) = _LEN.unpack(_recv_exact(sock, 8, deadline))
    if size > max_header:
        raise ProtocolError(f"header of {size} bytes is over the {max_header} byte limit")
    try:
        header = json.loads(_recv_exact(sock, size, deadline))
    except (ValueError, RecursionError, MemoryError) as exc:  # UnicodeDecodeError is a ValueError
        raise ProtocolError(f"header is not JSON: {type(exc).__name__}: {str(exc)[:200]}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    (blob_size,) = _LEN.unpack(_recv_exact(sock, 8, deadline))
    if blob_size > max_blob:
        raise ProtocolError(f"data of {blob_size} bytes is over the {max_blob} byte limit")
    return header, _recv_exact(sock, blob_size, deadline)
