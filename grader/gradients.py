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
        first = (str(error.get("message", "")).splitlines() or [""])[0].split(" Hint: enable anomaly detection")[0]
        text = f"{error.get('type', 'an exception')}: {first}"
        where, called = error.get("where"), facts.get("stage") == "call"
        kind = "grad.call_raised" if called else "grad.raised"  # the hook itself, on inputs that require grad
        return say(f"{kind}_at", error=text, where=str(where)) if where else say(kind, error=text)
    where = {"where": str(facts["cut_at"])} if facts.get("cut_at") else {}
    at = "_at" if where else ""  # with the learner's line where the child found the cut
    if facts.get("requires_grad") is False:
        return say(f"grad.cut{at}", inputs=ticked(wanted), **where)
    if facts.get("frozen"):
        return say("grad.frozen", names=ticked(facts["frozen"]))
    if facts.get("unreached"):
        return say(f"grad.unreached{at}", inputs=ticked(facts["unreached"]), **where)
    for name in wanted:
        grad = grads.get(name)
        if isinstance(grad, torch.Tensor) and grad.is_floating_point() and not bool(torch.isfinite(grad).all()):
            bad = ~torch.isfinite(grad)
            index = tuple(int(i) for i in bad.nonzero()[0].tolist())
            value = "NaN" if bool(torch.isnan(grad[index])) else "inf"
            return say("grad.not_finite", input=ticked([name])[0], index=str(index), value=value)
    return None


def local_problem(hook: str, call: Any, arguments: dict[str, Any], result: Any, generators: dict) -> str | None:
    """The gradient rule in the local check: ``call(**arguments)`` once more on inputs that require grad (each
    generator argument restored to ``generators``, its state before the first call), then backward for a cotangent
    of the local check's own; the global random state is left as it was.  None where the hook declares no
    gradients, or nothing here can carry one."""
    import torch

    from grader.child.gradients import function_vjp
    from grader.hook_table import row

    wanted = [n for n in row(hook).gradients if isinstance(arguments.get(n), torch.Tensor)]
    wanted = [n for n in wanted if arguments[n].is_floating_point()]
    if not wanted or not isinstance(result, torch.Tensor) or not result.is_floating_point() or result.is_meta:
        return None
    fresh = dict(arguments)
    for name, state in generators.items():
        fresh[name] = torch.Generator(device=arguments[name].device)
        fresh[name].set_state(state)
    cotangent = torch.randn(result.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    with torch.random.fork_rng(devices=[]), torch.enable_grad():  # a test may call the hook under no_grad
        facts, grads = function_vjp(call, fresh, wanted, cotangent.to(result.device))
    if facts.get("requires_grad") is False and not result.any():  # a constant 0 (dropout with p=1): nothing to
        return None  # train through, and the grader, whose reference's gradient is 0 there too, judges no pass
    return gradient_problem(facts, grads, wanted)


def local_module_problem(module: Any, x: Any, out: Any) -> str | None:
    """The gradient rule on one forward of a learner's module in the local check: its input and every parameter."""
    import torch

    from grader.child.gradients import module_vjp

    if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.is_meta or not x.is_floating_point():
        return None
    pairs = [(name, name, "") for name, _ in module.named_parameters()]
    cotangent = torch.randn(out.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    with torch.random.fork_rng(devices=[]), torch.enable_grad():
        facts, grads = module_vjp(module, x, pairs, cotangent.to(out.device), module.training)
    return gradient_problem(facts, grads, ["x", *(f"state.{name}" for name, _, _ in pairs)])
