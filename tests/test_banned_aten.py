"""The banned-call recorder hears an aten operator reached directly (an overload, a private kernel), not only
the Python names: a red team's ``torch.ops.aten._safe_softmax.default`` and ``softmax.int`` scored full marks."""

import pytest
import torch

from grader.child.call import _recording_mode

BANNED = ["softmax", "log_softmax", "scaled_dot_product_attention"]
X = torch.randn(2, 3, 4)
Q = torch.randn(1, 2, 3, 4)


@pytest.mark.parametrize(
    "call, heard",
    [
        (lambda: torch.ops.aten._safe_softmax.default(X, -1), "torch.ops.aten._safe_softmax"),
        (lambda: torch.ops.aten.softmax.int(X, -1), "torch.ops.aten.softmax"),
        (lambda: torch.ops.aten._log_softmax.default(X, -1, False), "torch.ops.aten._log_softmax"),
        (
            lambda: torch.ops.aten.scaled_dot_product_attention.default(Q, Q, Q),
            "torch.ops.aten.scaled_dot_product_attention",
        ),
        (
            lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(Q, Q, Q),
            "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
        ),
        (lambda: torch.softmax(X, -1), "torch.softmax"),
    ],
)
def test_a_banned_operator_is_heard_by_any_name(call, heard):
    with _recording_mode(BANNED) as mode:
        call()
    assert mode.seen == [heard]


def test_the_ops_a_hand_written_softmax_uses_are_not_banned():
    with _recording_mode(BANNED) as mode:
        shifted = X - X.amax(dim=-1, keepdim=True)
        torch.ops.aten.exp.default(shifted).div(shifted.exp().sum(-1, keepdim=True))
        torch.ops.aten.mm.default(X[0], X[0].T)
    assert mode.seen == []


def _softmin():
    return torch.nn.functional.softmin(X, dim=-1)


def _softmax_in_a_backward_hook():
    leaf = X.clone().requires_grad_(True)
    leaf.register_hook(lambda grad: (torch.softmax(grad, -1), grad)[1])
    (leaf * 2).sum().backward()


def _softmax_by_attention():  # zero queries and keys, the scores as the additive mask, identity values
    zeros, eye = torch.zeros(2, 3, 1), torch.eye(4).expand(2, 4, 4)
    return torch.nn.functional.scaled_dot_product_attention(zeros, torch.zeros(2, 4, 1), eye, attn_mask=X)


@pytest.mark.parametrize(
    "call, banned",
    [
        (_softmin, ["softmax"]),  # F.softmin calls Tensor.softmax inside the function mode's own handler
        (_softmax_in_a_backward_hook, ["softmax"]),  # a hook runs inside Tensor.backward's handler
        (_softmax_by_attention, ["scaled_dot_product_attention"]),
        (lambda: torch.nn.functional.dropout1d(X, 0.5), ["feature_dropout", "bernoulli_"]),
    ],
    ids=["softmin", "backward-hook", "sdpa", "dropout1d"],
)
def test_a_banned_kernel_reached_through_another_call_is_heard_at_dispatch(call, banned):
    """Red team facts3 B1-B4: the function mode alone saw none of these; the dispatch mode hears the kernel."""
    with _recording_mode(banned) as mode:
        call()
    assert mode.seen and all(name.startswith(("torch.", "F.", "Tensor.")) for name in mode.seen), mode.seen


# --- the kernels: heard whatever modes the call stepped out of (round 5's facts f1, f2) ----------------------

KERNEL_PROBE = r"""
import json, re, threading, torch
from grader.child.kernels import MARK, banned_op, watch_kernels, _backend_keys, _kernel_for
from grader.hook_table import BANNED_NAMES
C, x = torch._C, torch.randn(3, 4)
running = watch_kernels(BANNED_NAMES)

def both_off():
    with C.DisableTorchFunction(), torch.utils._python_dispatch._disable_current_modes():
        torch.softmax(x, -1)

def python_key_excluded():
    with C.DisableTorchFunction(), C._ExcludeDispatchKeyGuard(C.DispatchKeySet(C.DispatchKey.Python)):
        torch.log_softmax(x, -1)

def sdpa_math_off():
    with C.DisableTorchFunction(), torch.utils._python_dispatch._disable_current_modes():
        torch.ops.aten._scaled_dot_product_attention_math(x[None], x[None], x[None])

def in_a_thread():
    t = threading.Thread(target=lambda: torch.nn.functional.dropout(x, 0.5))
    t.start(); t.join()

def mkldnn_redispatched():  # round 6's a1: a backend key the enum does not name, below every mode
    m = x.to_mkldnn()
    keys = C._dispatch_keys(m).remove(C.DispatchKey.ADInplaceOrView).remove(C.DispatchKey.AutogradOther)
    return torch.ops.aten._softmax.default.redispatch(keys, m, 1, False)

def redispatched():
    return torch.ops.aten._softmax.default.redispatch(C.DispatchKeySet(C.DispatchKey.CPU), x, -1, False)

def sdpa():
    return torch.nn.functional.scaled_dot_product_attention(x[None], x[None], x[None])

def keys_of(op):
    composite = C._dispatch_has_kernel_for_dispatch_key(op, "CompositeImplicitAutograd")
    return [*_backend_keys(C), *(["AutogradCPU"] if composite else [])]

ROUTES = {
    "both-off": (both_off, ["softmax"]),
    "python-key-excluded": (python_key_excluded, ["log_softmax"]),
    "redispatch": (redispatched, ["softmax"]),
    "mkldnn": (mkldnn_redispatched, ["softmax"]),
    "meta": (lambda: torch.softmax(torch.empty(3, 4, device="meta"), -1), ["softmax"]),
    "sparse": (lambda: torch.sparse.softmax(x.to_sparse(), 1), ["softmax"]),
    "thread": (in_a_thread, ["dropout"]),
    "sdpa": (sdpa, ["scaled_dot_product_attention"]),
    "sdpa-math-off": (sdpa_math_off, ["scaled_dot_product_attention"]),
    "dropout-composite": (lambda: torch.nn.functional.dropout(x, 0.5), ["dropout"]),
    "allowed": (lambda: torch.softmax(x, -1), ["dropout"]),
    "hand-written": (lambda: (x - x.amax(-1, keepdim=True)).exp().div(x.exp().sum(-1, keepdim=True)), ["softmax"]),
}
heard = {}
for name, (route, banned) in ROUTES.items():
    notes = []
    running(banned, notes.append)
    route()
    running([], None)
    heard[name] = sorted(set(notes))
notes = []
torch.softmax(x, -1)  # no call running: nothing heard
unreplaced = [
    f"{op} {key}"
    for op in C._dispatch_get_all_op_names()
    if op.startswith("aten::") and banned_op(op, BANNED_NAMES)
    for key in keys_of(op)
    if (k := _kernel_for(C, op, key)) is not None and MARK not in repr(k)
]
FORWARDS = (r"(Autograd|Autocast|FuncTorch|Python|Functionalize|ADInplaceOrView|BackendSelect|Tracer|Named|Batched"
            r"|VmapMode)")
tables = {op: C._dispatch_dump(op) for op in C._dispatch_get_all_op_names() if op.startswith("aten::")}
unreplaced += [  # every key a banned operator's own table lists, the enum's or not (MkldnnCPU)
    f"{op} {line.split(':')[0]}"
    for op, table in tables.items() if banned_op(op, BANNED_NAMES)
    for line in table.splitlines()[4:]
    if ": registered at" in line and "[alias]" not in line and "(inactive)" not in line
    and not re.match(FORWARDS, line) and MARK not in line
]
print(json.dumps({"heard": heard, "after": notes, "unreplaced": unreplaced}))
"""


@pytest.fixture(scope="module")
def kernels_heard():
    """What :func:`grader.child.kernels.watch_kernels` heard on each route, in a process of its own (it replaces
    kernels process-wide, as it does in a learner's process)."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", KERNEL_PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize(
    "route, heard",
    [
        ("both-off", ["torch.ops.aten._softmax", "torch.ops.aten.softmax"]),
        ("python-key-excluded", ["torch.ops.aten._log_softmax", "torch.ops.aten.log_softmax"]),
        ("redispatch", ["torch.ops.aten._softmax"]),
        ("mkldnn", ["torch.ops.aten._softmax"]),
        ("meta", ["torch.ops.aten._softmax", "torch.ops.aten.softmax"]),
        ("sparse", ["torch.ops.aten._sparse_softmax"]),
        ("thread", ["torch.ops.aten.dropout"]),  # torch.bernoulli is no ban (drawing the keep mask is the exercise)
        ("sdpa", ["torch.ops.aten._scaled_dot_product_attention_math", "torch.ops.aten.scaled_dot_product_attention"]),
        ("sdpa-math-off", ["torch.ops.aten._scaled_dot_product_attention_math"]),
        ("dropout-composite", ["torch.ops.aten.dropout"]),
        ("allowed", []),
        ("hand-written", []),
    ],
)
def test_a_banned_kernel_is_heard_whatever_modes_or_thread_it_ran_in(kernels_heard, route, heard):
    assert kernels_heard["heard"][route] == heard


def test_no_kernel_is_heard_outside_a_call(kernels_heard):
    assert kernels_heard["after"] == []


def test_every_backend_kernel_of_every_banned_operator_is_replaced(kernels_heard):
    """The invariant, walked over the dispatcher's own table: no backend (CPU … Meta, sparse, nested) keeps a
    kernel of an operator a ban names that runs unheard."""
    assert kernels_heard["unreplaced"] == []
