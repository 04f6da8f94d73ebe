"""The gradient rule: what a hook's backward must do so that a model built on it can train.

A hook whose row declares ``gradients`` (:class:`grader.hook_row.HookRow`) is run once more on inputs that require
grad, and backward runs for a cotangent (:mod:`grader.child.gradients`).  Its gradient must reach every declared
input (no ``.detach()``, ``.data``, ``torch.no_grad()`` on the way), a module's parameters must require grad,
backward must not raise, and every gradient must be finite.  The grader also compares the gradients' values with
the reference's (:mod:`grader.instructor.verdict`); the local check, which has no reference, holds the rest.
Ships in a learner's kit.
"""

from __future__ import annotations

from typing import Any

from grader.rule_words import Say, english


def ticked(names: Any) -> tuple[str, ...]:
    """Names as the messages show them: ```scores```, ```W_query.weight``` (a module's input ``x``, its parameters by
    the learner's own names; a ``state.`` prefix, the contract's, is left out)."""
    return tuple(f"`{str(name).removeprefix('state.')}`" for name in names)


def gradient_problem(facts: dict[str, Any], grads: dict[str, Any], wanted: list[str], say: Say = english) -> str | None:
    """What is wrong with a gradient pass, from its ``facts`` and the gradients received (``{name: tensor}``) for
    the inputs ``wanted``; None when nothing is.  In this order: backward raised, the graph cut (the result does
    not require grad), a frozen parameter, an input no gradient reached, a gradient that is not finite."""
    import torch

    error = facts.get("error")
    if error:
        text = f"{error.get('type', 'an exception')}: {(str(error.get('message', '')).splitlines() or [''])[0]}"
        where = error.get("where")
        return say("grad.raised_at", error=text, where=str(where)) if where else say("grad.raised", error=text)
    if facts.get("requires_grad") is False:
        return say("grad.cut", inputs=ticked(wanted))
    if facts.get("frozen"):
        return say("grad.frozen", names=ticked(facts["frozen"]))
    if facts.get("unreached"):
        return say("grad.unreached", inputs=ticked(facts["unreached"]))
    for name in wanted:
        grad = grads.get(name)
        if isinstance(grad, torch.Tensor) and grad.is_floating_point() and not bool(torch.isfinite(grad).all()):
            bad = ~torch.isfinite(grad)
            index = tuple(int(i) for i in bad.nonzero()[0].tolist())
            value = "NaN" if bool(torch.isnan(grad[index])) else "inf"
            return say("grad.not_finite", input=ticked([name])[0], index=str(index), value=value)
    return None
