"""A learner's ``nn.Module`` given the reference's weights: by name, or by the role a name says, or by
creation order and shape; then run on the call's forwards.
"""

from __future__ import annotations

from gc import disable as _stop_collecting  # bound before any learner code runs
from typing import Any

from .gradients import module_vjp
from .load import _torch, build, on_device

_ROLE_WORDS = {"query": ("q", "query", "queries"), "key": ("k", "key", "keys"), "value": ("v", "value", "values")}
_ROLE_WORDS["out"] = ("o", "out", "output")
_ROLE_AFFIXES = ("", "w", "proj", "projection", "to", "linear", "lin", "layer", "fc", "weight", "weights")


def role_of(name):
    """``("query" | "key" | "value" | "out" | None, "weight" | "bias")`` read from a parameter's name: ``W_query``,
    ``w_q``, ``Wq``, ``q_proj``, ``proj_k``, ``to_v``, ``out_proj``, ``W_o`` name their role; ``qkv``, ``lin1`` none
    (only the words the chapter and its learners use, so it never guesses)."""
    parts = name.split(".")
    kind = "bias" if parts[-1] == "bias" else "weight"
    stem = parts[-2] if parts[-1] in ("weight", "bias") and len(parts) > 1 else parts[-1]
    word = "".join(ch for ch in stem.lower() if ch.isalpha())
    for role, words in _ROLE_WORDS.items():
        if any(word in (core + affix, affix + core) for core in words for affix in _ROLE_AFFIXES):  # one side only
            return role, kind
    return None, kind


def _fits(mine, theirs):
    """How a learner's parameter of shape ``mine`` takes the contract's ``theirs``: "", "transposed" or None."""
    if mine == theirs:
        return ""
    if len(theirs) == 2 and theirs[0] != theirs[1] and mine == (theirs[1], theirs[0]):
        return "transposed"
    return None


def _by_role(learner, contract):
    """The mapping by role names (``Wq`` → ``W_query``): each contract parameter's role names exactly one of the
    learner's, of a shape that fits (the learner's others are left as the module makes them)."""
    roles: dict = {}
    for name, shape in learner:
        roles.setdefault(role_of(name), []).append((name, shape))
    pairs = []
    for theirs, shape in contract:
        found = roles.get(role_of(theirs), [])
        layout = _fits(found[0][1], shape) if len(found) == 1 else None
        if layout is None:
            return None
        pairs.append((found[0][0], theirs, layout))
    return pairs


def _by_order(learner, contract):
    """The mapping by creation order and shape, weights and biases each in their own order: a learner's parameter
    takes the next of its kind of the same shape, or the non-square one transposed; or, where its first dimension
    sums the next few (``nn.Linear(d_in, 3 * d_out)``), those stacked by rows."""
    queues: dict[int, list] = {}
    for theirs, shape in contract:
        queues.setdefault(len(shape), []).append((theirs, shape))
    pairs = []
    for mine, my_shape in learner:
        queue = queues.get(len(my_shape), [])
        if not queue:
            return None
        theirs, shape = queue[0]
        layout = _fits(my_shape, shape)
        if layout is not None:
            pairs.append((mine, theirs, layout))
            queue.pop(0)
            continue
        rows, taken = 0, 0
        while taken < len(queue) and rows < my_shape[0] and queue[taken][1][1:] == my_shape[1:]:
            rows += queue[taken][1][0]
            taken += 1
        if taken < 2 or rows != my_shape[0]:
            return None
        start = 0
        for theirs, shape in queue[:taken]:
            pairs.append((mine, theirs, f"rows {start}:{start + shape[0]}"))
            start += shape[0]
        del queue[:taken]
    return pairs if not any(queues.values()) else None


def map_parameters(
    learner: list[tuple[str, tuple[int, ...]]], contract: list[tuple[str, tuple[int, ...]]]
) -> tuple[str, list[tuple[str, str, str]]]:
    """How the reference's parameters go onto a learner's module: ``(how, [(learner's, contract's, layout)])``.

    ``learner`` and ``contract`` are ``(name, shape)`` in ``named_parameters()`` order.  A ``layout`` is ``""``,
    ``"transposed"`` or ``"rows a:b"`` (one block of a stacked parameter).  ``how``: ``"name"`` (every one by name and
    shape), ``"role"`` (:func:`_by_role`), ``"order"`` (:func:`_by_order`; a square weight is never transposed: no
    guess) or ``"none"`` (nothing is loaded).  Pure data: the trusted side calls it too, to write its messages.
    """
    learner = [(name, tuple(shape)) for name, shape in learner]
    contract = [(name, tuple(shape)) for name, shape in contract]
    shapes = dict(learner)
    if all(shapes.get(name) == shape for name, shape in contract):
        return "name", [(name, name, "") for name, _ in contract]
    for how, rule in (("role", _by_role), ("order", _by_order)):
        pairs = rule(learner, contract)
        if pairs is not None:
            return how, pairs
    return "none", []


def _load_parameters(module, state, tensors, device, facts):
    """Load the reference's parameters (``state``: contract name -> tensor key) as :func:`map_parameters` says; only
    parameters (the mask buffer is the learner's own work).  The pairs, or None where no mapping exists; what
    ``load_state_dict`` did not take raises, naming every key."""
    torch = _torch()
    learner = [(name, tuple(p.shape)) for name, p in module.named_parameters()]
    contract = [(name, tuple(tensors[key].shape)) for name, key in state.items()]
    how, pairs = map_parameters(learner, contract)
    facts["loaded_by"] = how
    if how == "none":
        return None
    shapes = dict(learner)
    values: dict[str, Any] = {}
    for mine, theirs, layout in pairs:
        value = tensors[state[theirs]]
        if layout == "transposed":
            value = value.t()
        elif layout.startswith("rows "):
            start, stop = (int(n) for n in layout[5:].split(":"))
            whole = values.get(mine)
            if whole is None:
                whole = values[mine] = torch.empty(shapes[mine], dtype=value.dtype, device=device)
            whole[start:stop] = value.to(device)
            continue
        values[mine] = value.to(device)
    result = module.load_state_dict(values, strict=False)
    refused = [name for name in values if name in set(result.unexpected_keys)]
    now = dict(module.named_parameters())
    for name, value in values.items() if device != "meta" else ():
        if name not in refused and (name not in now or not torch.equal(now[name].detach(), value)):
            refused.append(name)
    if refused:
        why = "(does your module change state_dict or load_state_dict?)"
        raise RuntimeError(f"load_state_dict did not load the reference's weights into {', '.join(refused)} {why}")
    return pairs


def _run_module(fn, args, spec, tensors, device, cotangent=None):
    """Build a learner's module, load the reference's parameters, run forwards; return outputs, facts, the forwards'
    inputs and, given a ``cotangent``, the first forward's gradient pass (else None).  Where the parameters cannot be
    loaded, no forward runs: every behaviour case says why from the facts."""
    torch = _torch()
    dtype = getattr(torch, spec.get("dtype", "float32"))
    if spec.get("init_seed") is not None:
        torch.manual_seed(int(spec["init_seed"]))
    module = build(fn, args, list(spec.get("order", [])))
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"{type(module).__name__} is not an nn.Module")
    facts: dict[str, Any] = {
        "state_dict_keys": list(module.state_dict().keys()),
        "buffers": [name for name, _ in module.named_buffers()],
        "parameters": [{"name": name, "shape": list(p.shape)} for name, p in module.named_parameters()],
    }
    module = module.to(device=device, dtype=dtype)
    mask = dict(module.named_buffers()).get("mask")
    facts["mask_device"] = str(mask.device) if mask is not None else None
    state = spec.get("state")
    pairs = _load_parameters(module, state, tensors, device, facts) if state else []
    if pairs is None:
        return [], facts, [], None
    module.train(bool(spec.get("train", False)))
    inputs = [on_device(tensors[key], device) for key in spec.get("forwards", [])]
    outputs = []
    for x in inputs:
        out = module(x)
        _stop_collecting()  # from its return on, no collection runs learner code (grader.child.call._early_copy)
        outputs.append(out)
    if spec.get("eval_too") and inputs:  # then the first input once more in eval mode: the module's own weights
        module.eval()
        out = module(inputs[0])
        _stop_collecting()
        outputs.append(out)
    gradient = None
    if cotangent is not None and inputs:
        gradient = module_vjp(module, inputs[0], pairs, cotangent, bool(spec.get("train", False)))
    return outputs, facts, inputs, gradient
