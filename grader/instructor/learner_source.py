"""What a learner's own text shows: the line a failing case stopped at, and the code of each exercise.

The trusted side holds the submission's text (``Submission.files``), where the learner's process found each hook
(``file:line``, from the load reply) and, for a case that raised, the deepest learner frame (``file:line``, from the
call reply).  The diagnosis reads facts off that text here, with :mod:`ast`, to tell apart mistakes no output can (a
``masked_fill`` whose result is thrown away is the same function as a mask never applied) and to confirm what an
error's shapes suggest (``.T`` on the failing line).  Nothing here runs learner code; a text that does not parse, or
a place that does not exist, is simply no evidence.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "LearnerSource",
    "builds_off_device",
    "discards_masked_fill",
    "draws_from_global_rng",
    "fixed_six",
    "mask_attribute",
    "multiplies",
    "uses_dot_t",
    "uses_mask",
]

SUBMISSION_ROOT = "submission/"
"""The folder the learner's process writes the files into: ``where`` of an error is relative to its parent."""

MAX_PARSED_CHARS = 2_000_000
NEW_TENSORS = frozenset(
    {"ones", "zeros", "full", "empty", "eye", "arange", "tensor", "rand", "randn", "from_numpy", "as_tensor"}
)
"""Calls that make a new tensor (not ``tril``/``triu``: in ``torch.tril(torch.ones(...))`` the inner call decides
the device; ``torch.from_numpy`` of a NumPy mask is on the CPU)."""
_COMPOUND = (
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor,
    ast.AsyncWith,
)  # fmt: skip

Node = ast.AST
_PARSE_LOCK = threading.Lock()
"""ast.parse is not safe in two threads at once on CPython 3.11 ("AST constructor recursion depth mismatch")."""


@dataclass
class LearnerSource:
    """One submission's text: ``files`` (relative path -> text) and ``hooks`` (hook -> ``path:line`` it is at)."""

    files: Mapping[str, str]
    hooks: Mapping[str, str] = field(default_factory=dict)
    _trees: dict[str, ast.Module | None] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, files: Mapping[str, str] | None, hooks: Mapping[str, Any] | None) -> LearnerSource:
        """From ``Submission.files`` and the load reply's ``hooks`` (``{hook: {"where": "path:line", ...}}``)."""
        where = {h: str(info.get("where", "")) for h, info in (hooks or {}).items() if isinstance(info, Mapping)}
        return cls(dict(files or {}), where)

    def tree(self, path: str) -> ast.Module | None:
        if path not in self._trees:
            text = self.files.get(path)
            try:
                with _PARSE_LOCK:
                    parsed = ast.parse(text) if text is not None and len(text) <= MAX_PARSED_CHARS else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                parsed = None
            self._trees[path] = parsed
        return self._trees[path]

    def _place(self, where: str | None) -> tuple[str, int] | None:
        """``(path, line)`` of a ``file:line`` the learner's process reported, if it names one of the files."""
        if not where or ":" not in where:
            return None
        path, _, line = where.rpartition(":")
        path = path[len(SUBMISSION_ROOT) :] if path.startswith(SUBMISSION_ROOT) else path
        if path not in self.files or not line.isdigit():
            return None
        return path, int(line)

    def statement_at(self, where: str | None) -> ast.stmt | None:
        """The innermost simple statement that holds line ``where`` (``file:line``), or None."""
        place = self._place(where)
        tree = self.tree(place[0]) if place else None
        if tree is None or place is None:
            return None
        line = place[1]
        found: ast.stmt | None = None
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt) and not isinstance(node, _COMPOUND):
                if node.lineno <= line <= (node.end_lineno or node.lineno) and (
                    found is None or node.lineno >= found.lineno
                ):
                    found = node
        return found

    def hook_code(self, hook: str, class_name: str | None = None) -> Node | None:
        """The class (or function) the learner's process adopted for ``hook``, or None where it cannot be told: by the
        ``file:line`` the load reply gave (a class's ``__init__``, or the function), else by the chapter's class name
        where exactly one class has it."""
        place = self._place(self.hooks.get(hook))
        if place is not None and (tree := self.tree(place[0])) is not None:
            at = [
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.lineno <= place[1] <= (n.end_lineno or n.lineno)
            ]
            classes = [n for n in at if isinstance(n, ast.ClassDef)]
            if classes:
                return max(classes, key=lambda n: n.lineno)
            functions = [n for n in at if isinstance(n, ast.FunctionDef)]
            if functions:
                fn = min(functions, key=lambda n: n.lineno)
                return self._returned_class(fn) or fn
        if class_name:
            named = [n for n in self._nodes() if _is_class(n, class_name)]
            if len(named) == 1:
                return named[0]
        return None

    def _returned_class(self, fn: ast.FunctionDef) -> ast.ClassDef | None:
        """The class a ``make_*`` function returns an instance of (``return CausalAttention(...)``), if one."""
        names = {
            r.value.func.id
            for r in ast.walk(fn)
            if isinstance(r, ast.Return) and isinstance(r.value, ast.Call) and isinstance(r.value.func, ast.Name)
        }
        if len(names) != 1:
            return None
        (name,) = names
        found = [n for n in self._nodes() if isinstance(n, ast.ClassDef) and n.name == name]
        return found[0] if len(found) == 1 else None

    def _nodes(self) -> Iterator[Node]:
        for path in self.files:
            yield from _walk(self.tree(path))


def _walk(tree: Node | None) -> Iterator[Node]:
    return ast.walk(tree) if tree is not None else iter(())


def _is_class(node: Node, name: str) -> bool:
    return isinstance(node, ast.ClassDef) and node.name == name


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _method(code: Node | None, name: str) -> Node | None:
    """``code`` itself for a function; its method ``name`` for a class."""
    if isinstance(code, ast.ClassDef):
        methods = [n for n in code.body if isinstance(n, ast.FunctionDef) and n.name == name]
        return methods[0] if methods else None
    return code


# --- facts about a line -------------------------------------------------------------------------


def uses_dot_t(statement: Node | None) -> bool:
    """The statement takes ``.T`` of something (``queries @ keys.T``): on a 3-D tensor that reverses every dim."""
    return any(isinstance(n, ast.Attribute) and n.attr == "T" for n in _walk(statement))


def uses_mask(statement: Node | None) -> bool:
    """The statement works with a mask: a name or attribute with "mask" in it, or a ``masked_fill`` call."""
    return any(
        "mask" in (n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else "").lower()
        for n in _walk(statement)
    )


def multiplies(statement: Node | None) -> bool:
    """The statement multiplies matrices (``weights @ values``, ``torch.matmul``, ``bmm``, ``einsum``)."""
    return any(
        (isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult))
        or (isinstance(n, ast.Call) and _called(n) in ("matmul", "bmm", "einsum"))
        for n in _walk(statement)
    )


TRANSPOSES = frozenset({"transpose", "permute", "swapaxes", "swapdims", "t"})
"""Calls that transpose a tensor (a view with swapped strides)."""


def _transposed(node: ast.expr) -> bool:
    """``w.T``, ``w.mT``, ``w.transpose(-2, -1)``, ``torch.transpose(w, 1, 2)``, ``w.permute(0, 2, 1)``."""
    if isinstance(node, ast.Attribute):
        return node.attr in ("T", "mT")
    return isinstance(node, ast.Call) and _called(node) in TRANSPOSES


def multiplies_transposed_left(statement: Node | None) -> bool:
    """The statement multiplies a transposed left factor: ``weights.T @ values``, ``torch.matmul(w.mT, v)``."""
    return any(
        (isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult) and _transposed(n.left))
        or (isinstance(n, ast.Call) and _called(n) in ("matmul", "bmm") and bool(n.args) and _transposed(n.args[0]))
        for n in _walk(statement)
    )


# --- facts about a hook's code --------------------------------------------------------------------


def discards_masked_fill(code: Node | None) -> bool:
    """``scores.masked_fill(mask, -inf)`` as a statement of its own: the masked tensor is thrown away."""
    return any(
        isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and _called(n.value) == "masked_fill"
        for n in _walk(code)
    )


def fixed_six(code: Node | None) -> bool:
    """A tensor made with the literal size 6 (``torch.ones(6, 6)``): a mask for the chapter's six tokens only."""
    for n in _walk(code):
        if isinstance(n, ast.Call) and _called(n) in NEW_TENSORS:
            sizes = [a for arg in n.args for a in (arg.elts if isinstance(arg, ast.Tuple | ast.List) else [arg])]
            if any(isinstance(a, ast.Constant) and a.value == 6 and type(a.value) is int for a in sizes):
                return True
    return False


def mask_attribute(code: Node | None) -> bool:
    """``self.mask = ...`` assigned in the class (a plain attribute, unless it is already a registered buffer)."""
    return any(
        isinstance(t, ast.Attribute) and t.attr == "mask" and isinstance(t.value, ast.Name) and t.value.id == "self"
        for n in _walk(code)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else [])
    )


def builds_off_device(code: Node | None, method: str = "forward") -> bool:
    """``method`` (or the function) makes a new tensor without saying where (no ``device=``, no ``.to(...)``): on the
    CPU whatever the input's device.  A statement that mentions a device (``x.device``, ``device=``) or moves the
    tensor (``.to``, ``.cuda``) is taken to put it in the right place."""
    body = _method(code, method)
    for statement in _walk(body):
        if not isinstance(statement, ast.stmt) or isinstance(statement, _COMPOUND):
            continue
        nodes = list(ast.walk(statement))
        placed = any(
            (isinstance(n, ast.Attribute) and n.attr in ("device", "to", "cuda", "type_as"))
            or (isinstance(n, ast.Name) and "device" in n.id.lower())
            or (isinstance(n, ast.keyword) and n.arg == "device")
            for n in nodes
        )
        if not placed and any(isinstance(n, ast.Call) and _called(n) in NEW_TENSORS and _torch_call(n) for n in nodes):
            return True
    return False


def _torch_call(node: ast.Call) -> bool:
    """``torch.ones(...)`` (not ``x.new_ones`` or ``np.ones``)."""
    func = node.func
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "torch"


# --- facts about what a hook's code does to the graph ---------------------------------------------

_CUTS = frozenset({"detach", "detach_", "numpy", "no_grad", "inference_mode", "tensor", "as_tensor", "from_numpy"})


def cuts_graph(code: Node | None) -> bool:
    """The code takes something out of autograd's graph: ``.detach()``, ``.data``, ``torch.no_grad()`` (or inference
    mode), a NumPy round trip, ``torch.tensor(...)`` of a tensor."""
    return any(
        (isinstance(n, ast.Call) and _called(n) in _CUTS) or (isinstance(n, ast.Attribute) and n.attr == "data")
        for n in _walk(code)
    )


def calls(code: Node | None, name: str) -> bool:
    """The code calls a function or method ``name`` (``torch.bmm``, ``x.bmm``, ``bmm``)."""
    return any(isinstance(n, ast.Call) and _called(n) == name for n in _walk(code))


def calls_where(code: Node | None) -> bool:
    """The code picks values with ``torch.where`` (or ``Tensor.where``)."""
    return calls(code, "where")


def freezes(code: Node | None) -> bool:
    """The code turns a parameter's gradient off: ``requires_grad=False``, ``.requires_grad_(False)`` or
    ``p.requires_grad = False``."""
    def false(value: ast.expr) -> bool:
        return isinstance(value, ast.Constant) and value.value is False

    for n in _walk(code):
        if isinstance(n, ast.keyword) and n.arg == "requires_grad" and false(n.value):
            return True
        if isinstance(n, ast.Call) and _called(n) == "requires_grad_" and n.args and false(n.args[0]):
            return True
        if isinstance(n, ast.Assign) and false(n.value):
            if any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in n.targets):
                return True
    return False


def updates_in_place(code: Node | None) -> bool:
    """The code calls an in-place tensor method (``sub_``, ``exp_``, ``masked_fill_`` ...) or augments a tensor
    (``x -= m``)."""
    return any(
        (isinstance(n, ast.Call) and _called(n).endswith("_") and not _called(n).startswith("_"))
        or isinstance(n, ast.AugAssign)
        for n in _walk(code)
    )


# --- structure: what a module holds, as its own lines say (issue 25) -----------------------------------------------


def holds_module_list(code: Node | None) -> bool:
    """The class keeps modules in a list (``nn.ModuleList([...])``): one attention module per head, the chapter's
    ``MultiHeadAttentionWrapper``."""
    return any(isinstance(n, ast.Call) and _called(n) == "ModuleList" for n in _walk(code))


def fused_projection(code: Node | None) -> bool:
    """An ``nn.Linear`` whose size is three times something (``nn.Linear(d, 3 * d)``): one projection for the
    queries, keys and values together."""
    return any(
        isinstance(n, ast.Call) and _called(n) == "Linear"
        and any(isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mult)
                and any(isinstance(s, ast.Constant) and s.value == 3 for s in (b.left, b.right))
                for arg in [*n.args, *(k.value for k in n.keywords)] for b in ast.walk(arg))
        for n in _walk(code)
    )  # fmt: skip


def registered_buffers(code: Node | None) -> set[str]:
    """The names the class registers buffers under (``self.register_buffer("tril", ...)``), where written as text."""
    return {
        n.args[0].value
        for n in _walk(code)
        if isinstance(n, ast.Call) and _called(n) == "register_buffer" and n.args
        and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)
    }  # fmt: skip


def triangle_buffer(code: Node | None, name: str) -> bool:
    """The buffer ``name`` is registered from a ``tril`` or ``triu`` (a causal mask under another name)."""
    return any(
        isinstance(n, ast.Call) and _called(n) == "register_buffer" and len(n.args) > 1
        and isinstance(n.args[0], ast.Constant) and n.args[0].value == name
        and any(isinstance(c, ast.Call) and _called(c) in ("tril", "triu") for c in ast.walk(n.args[1]))
        for n in _walk(code)
    )  # fmt: skip


def linear_attributes(code: Node | None) -> set[str]:
    """The attributes the class assigns an ``nn.Linear`` to (``self.W_query = nn.Linear(...)``)."""
    return {
        t.attr
        for n in _walk(code)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and _called(n.value) == "Linear"
        for t in n.targets
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }


# --- facts about a mask built with NumPy (issue 25) ----------------------------------------------------------------

_NUMPY = frozenset({"np", "numpy"})
_NEGATES = frozenset({"logical_not", "invert", "bitwise_not", "logical_xor", "where", "flip", "fliplr", "flipud", "T"})


def numpy_triangle(code: Node | None) -> tuple[str, int] | None:
    """``("triu" | "tril", k)`` of the one NumPy triangle of ones the code builds (``np.triu(np.ones((T, T)), k=1)``),
    where nothing else in the code can change which entries it holds (no ``~``, ``not``, comparison, subtraction,
    ``logical_not``, flip, transpose, a second triangle); None where that is not so, or ``k`` is no int literal."""
    found = None
    for n in _walk_unguarded(code):
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Invert | ast.Not | ast.USub) and not _int_literal(n):
            return None
        if isinstance(n, ast.Compare | ast.Subscript) or (isinstance(n, ast.BinOp) and not isinstance(n.op, ast.Mult)):
            return None
        if isinstance(n, ast.Attribute) and n.attr in _NEGATES:
            return None
        if isinstance(n, ast.Call) and _called(n) in ("triu", "tril"):
            func = n.func
            numpy = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in _NUMPY
            if found is not None or not numpy or not n.args or not _ones(n.args[0]):
                return None
            k_nodes = [kw.value for kw in n.keywords if kw.arg == "k"] + list(n.args[1:2])
            if len(k_nodes) > 1 or (k_nodes and _int_literal(k_nodes[0]) is None) or len(n.args) > 2:
                return None
            k = _int_literal(k_nodes[0]) if k_nodes else 0
            if k is None:
                return None
            found = (_called(n), k)
    return found


def _ones(node: ast.expr) -> bool:
    """``np.ones((T, T))`` (or ``np.ones_like(...)``, with or without a dtype): a matrix of ones."""
    return isinstance(node, ast.Call) and _called(node) in ("ones", "ones_like")


def _int_literal(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _int_literal(node.operand)
        return None if inner is None else -inner if isinstance(node.op, ast.USub) else inner
    return None


def _walk_unguarded(code: Node | None) -> Iterator[Node]:
    """The code's nodes, but for its argument checks (an ``if`` whose body only raises) and its docstrings."""
    stack = [code] if code is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and all(isinstance(s, ast.Raise) for s in node.body) and not node.orelse:
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def uses_numpy(code: Node | None) -> bool:
    """The code calls NumPy by its usual names (``np.triu``, ``numpy.ones``)."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
        and n.func.value.id in _NUMPY
        for n in _walk(code)
    )  # fmt: skip


# --- facts about where a hook's random numbers come from ------------------------------------------

RANDOM_DRAWS = frozenset({
    "rand", "rand_like", "randn", "randn_like", "randint", "bernoulli", "bernoulli_", "uniform_", "multinomial",
})  # fmt: skip
"""Calls that draw random numbers: from the generator given as ``generator=``, else from the global one."""


def draws_from_global_rng(code: Node | None) -> bool:
    """The code draws random numbers with no ``generator=`` (``torch.rand(X.shape) > p``, ``torch.bernoulli(...)``,
    ``torch.rand_like``): from torch's global generator, whatever generator the hook was given."""
    return any(
        isinstance(n, ast.Call) and _called(n) in RANDOM_DRAWS and not any(kw.arg == "generator" for kw in n.keywords)
        for n in _walk(code)
    )


# --- facts about how a hook merges heads back (issue 25, hidden) ----------------------------------------------------

DIM_SWAPS = TRANSPOSES - {"t"} | {"movedim", "moveaxis", "einsum", "rearrange"}
"""Calls that reorder dimensions by changing strides (a view, no copy): :data:`TRANSPOSES` but the 2-D ``t``,
``movedim``, ``einsum`` written as a pure reordering, einops' ``rearrange``."""


def swaps_dims(code: Node | None) -> bool:
    """The code reorders dimensions (:data:`DIM_SWAPS`, or ``.mT``): what leaves a tensor non-contiguous."""
    return any(
        (isinstance(n, ast.Call) and _called(n) in DIM_SWAPS) or (isinstance(n, ast.Attribute) and n.attr == "mT")
        for n in _walk(code)
    )


def views_swapped(code: Node | None) -> bool:
    """The code reorders dimensions (:func:`swaps_dims`) and calls ``.view(...)``: a view of a transposed tensor
    raises unless its strides happen to allow it."""
    return swaps_dims(code) and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "view" for n in _walk(code)
    )
