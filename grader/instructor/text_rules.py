"""The mistakes the learner's own text must show, or alone tells apart: the failing line of an error, the hook's
code (one predicate of :mod:`grader.instructor.learner_source` each), a ``masked_fill`` whose result is thrown away,
a mask returned as a NumPy array.  No output decides these; each rule reads the text with ``ast``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grader.instructor import learner_source as src
from grader.instructor.module_trial_model import DOWNSTREAM
from grader.instructor.observations import HookRow

__all__ = ["CODE_RULES", "NUMPY_TRIANGLES", "code_rule", "container_rule", "line_rule", "refined"]


def line_rule(mistake: str, line: Any, code: Any) -> bool | None:
    """Whether the learner's failing line shows ``mistake`` (None: no rule for it)."""
    if mistake.endswith(DOWNSTREAM):  # the line multiplies the grown weights; the code must show the mask's size
        mistake = mistake[: -len(DOWNSTREAM)]
        grown = {"mask-not-sliced": True, "mask-of-size-6": src.fixed_six(code)}.get(mistake)
        return None if grown is None else bool(grown) and src.multiplies(line) and not src.uses_dot_t(line)
    if mistake in ("mask-not-sliced", "mask-of-size-6"):  # the mask's line; of size 6 where the code says so
        sized = mistake == "mask-not-sliced" or src.fixed_six(code)
        return src.uses_mask(line) and not src.uses_dot_t(line) and sized
    if mistake == "weights-transposed":  # the line multiplies the weights transposed
        return src.multiplies_transposed_left(line)
    if mistake in ("scores-bmm-3d-only", "context-bmm-3d-only"):  # its errors name sizes: the code must call bmm
        return src.calls(code, "bmm")
    return src.uses_dot_t(line) if mistake == "q-at-k-t-batched" else None


def code_rule(mistake: str, code: Any, facts: Sequence[Mapping[str, Any]]) -> bool | None:
    """Whether the hook's code shows ``mistake`` (None: no rule for it, any code will do)."""
    buffers = {b for f in facts for b in f.get("buffers", [])}
    if mistake == "mask-plain-attribute":
        return src.mask_attribute(code) and "mask" not in buffers and bool(facts)
    if mistake == "mask-made-in-forward-on-cpu":
        return src.builds_off_device(code, "forward") and "mask" not in buffers and bool(facts)
    return CODE_RULES[mistake](code) if mistake in CODE_RULES else None


CODE_RULES: dict[str, Callable[[Any], bool]] = {
    # the gradient mistakes (solutions.gradient_mistakes): the break itself -- a cut, a torch.where, a frozen
    # parameter, an in-place update (others break the same way, and get no hint)
    **dict.fromkeys(("softmax-detached", "context-detaches-weights", "dropout-scale-on-data", "split-heads-no-grad",
                     "causal-forward-no-grad"), src.cuts_graph),
    "softmax-where-nan-grad": src.calls_where,
    "frozen-parameters": src.freezes,
    "chunked-in-place-after-amax": src.updates_in_place,
    # the rest: what no output tells apart from another mistake, or from a right answer on the CPU
    "mask-built-on-cpu": src.builds_off_device,
    "causal-mask-ignores-device": src.builds_off_device,
    "mask-of-size-6": src.fixed_six,  # another mask that fails where T != 6 (or on meta) is no mask of size 6
    "dropout-global-rng-cpu-mask": src.draws_from_global_rng,  # draws without the generator
    "dropout-zeroes-input-in-place": src.updates_in_place,  # writes into a tensor
    "merge-view-after-transpose": src.views_swapped,  # views a tensor it transposed
    "merge-not-contiguous": src.swaps_dims,  # reorders dimensions itself
}
"""The mistakes named only where the hook's code shows them (one predicate of
:mod:`grader.instructor.learner_source` each)."""


def refined(ids: frozenset[str], code: Any) -> frozenset[str]:
    """Ids told apart by the text: a mask never applied because ``masked_fill``'s result was thrown away."""
    discarded = "mask-not-applied" in ids and src.discards_masked_fill(code)
    return (ids - {"mask-not-applied"}) | {"mask-result-discarded"} if discarded else ids


# --- issue 25 (hidden): a mask whose container hides its values -----------------------------------------------------

NUMPY_TRIANGLES: Mapping[tuple[str, int], frozenset[str]] = {
    ("triu", 1): frozenset(),
    ("triu", 0): frozenset({"triu-diagonal-0"}),
    **{("tril", k): frozenset({"tril-instead-of-triu"}) for k in (-1, 0, 1)},
}
"""What the one NumPy triangle of ones a ``causal_mask`` builds says of its values (``k``: the diagonal)."""


def container_rule(
    hook: str, aspect: str, rows: Sequence[HookRow], failing: list[int], passing: list[int], code: Any
) -> frozenset[str]:
    """A ``causal_mask`` that returns a NumPy array: the reply carries no values (only tensors come back), so what
    the mask holds is read off the learner's own lines (:func:`~grader.instructor.learner_source.numpy_triangle`):
    a known wrong triangle is named with the type, right or unreadable values leave the type alone.  Named only
    where the code calls NumPy, every failing case of the values says "not a tensor, a numpy.ndarray" and none
    passes."""
    if hook != "causal_mask" or aspect != "values" or passing:
        return frozenset()
    for i in failing:
        message = rows[i].seen.message
        if getattr(message, "id", "") != "not_a_tensor" or str(getattr(message, "params", {}).get("kind")) != (
            "numpy.ndarray"
        ):
            return frozenset()
    if not src.uses_numpy(code):
        return frozenset()
    return NUMPY_TRIANGLES.get(src.numpy_triangle(code) or ("", 0), frozenset()) | {"causal-mask-numpy"}
