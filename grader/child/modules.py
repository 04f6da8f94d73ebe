"""A learner's ``nn.Module`` given the reference's weights: by name, or by the role a name says, or by
creation order and shape; then run on the call's forwards.
"""

from __future__ import annotations

from gc import disable as _stop_collecting  # bound before any learner code runs
from typing import Any

from .gradients import module_vjp
from .load import _torch, build

_ROLE_WORDS = {
    "query": ("q", "query", "queries"),
    "key": ("k", "key", "keys"),
    "value": ("v", "value", "values"),
    "out": ("o", "out", "output"),
}
_ROLE_AFFIXES = ("", "w", "proj", "projection", "to", "linear", "lin", "layer", "fc", "weight", "weights")


def _role_of(name):
    """``("query" | "key" | "value" | "out" | None, "weight" | "bias")`` read from a parameter's name.

    ``W_query.weight``, ``w_q.weight``, ``Wq``, ``q_proj.weight``, ``proj_k.bias``, ``to_v.weight``,
    ``out_proj.weight``, ``W_o`` all name their role; anything else (``qkv.weight``, ``last_layer.weight``,
    ``lin1.weight``) names none.  Only the words the chapter and its learners use, so it never guesses.
    """
    parts = name.split(".")
    kind = "bias" if parts[-1] == "bias" else "weight"
    stem = parts[-2] if parts[-1] in ("weight", "bias") and len(parts) > 1 else parts[-1]
    word = "".join(ch for ch in stem.lower() if ch.isalpha())
    for role, words in _ROLE_WORDS.items():
        for core in words:
            for before in _ROLE_AFFIXES:
                for after in _ROLE_AFFIXES:
                    if word == before + core + after and not (before and after):
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
    learner's, of a shape that fits.  The learner's other parameters are extras, left as the module makes them."""
    roles: dict = {}
    for name, shape in learner:
        roles.setdefault(_role_of(name), []).append((name, shape))
    pairs = []
    for theirs, shape in contract:
        found = roles.get(_role_of(theirs), [])
        layout = _fits(found[0][1], shape) if len(found) == 1 else None
        if layout is None:
            return None
        pairs.append((found[0][0], theirs, layout))
    return pairs


def _by_order(learner, contract):
    """The mapping by creation order and shape, weights and biases each in their own order.

    A learner's parameter takes the next contract parameter of its kind (2-D weights, 1-D biases) of the same
    shape, or the non-square one transposed; or, where its first dimension is the sum of the next few of the
    same kind (``nn.Linear(d_in, 3 * d_out)`` for query, key and value at once), those few stacked by rows.
    """
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

    ``learner`` and ``contract`` are ``(name, shape)`` in creation order, as ``named_parameters()`` lists them (own
    parameters first, then submodules' as assigned).  A ``layout`` is ``""`` (as it is), ``"transposed"`` or
    ``"rows a:b"`` (one block of a stacked parameter).  Other parameters of the learner's are left as they are.

    - ``"name"``: every one of the contract's parameters is the learner's module's by name and shape.
    - ``"role"``: every parameter on both sides names its role in a word learners use (``Wq``, ``w_key``,
      ``value_proj``, ``W_o``), one of the learner's per role and kind, and the shapes fit: each takes its role's.
    - ``"order"``: otherwise, in creation order (the chapter's: ``W_query``, ``W_key``, ``W_value``, ``out_proj``),
      weights and biases each in their order, where the shapes fit.  A 2-D parameter of the contract's non-square
      shape transposed (``x @ W``, the chapter's ``SelfAttention_v1``) gets the weight transposed (a square one never
      is: the mapping is never a guess); one whose rows are the next few stacked (``nn.Linear(d_in, 3 * d_out)``)
      gets them stacked.
    - ``"none"``: neither (another count of parameters, or a shape that fits no way); nothing is loaded.

    Pure data in, data out: the trusted side calls it too, on what a child reported, to write its messages.
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
    """Load the reference's parameters (``state``: contract name -> tensor key) as :func:`map_parameters` says.

    Only parameters: the learner's buffers (the mask) are the learner's own work.  Returns the mapping's pairs, or
    None where no mapping exists (nothing is loaded).  What ``load_state_dict`` did not take raises, naming every key.
    """
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
    if device != "meta":
        now = dict(module.named_parameters())
        refused += [
            name
            for name, value in values.items()
            if name not in refused and (name not in now or not torch.equal(now[name].detach(), value))
        ]
    if refused:
        raise RuntimeError(
            "load_state_dict did not load the reference's weights into "
            + ", ".join(refused)
            + " (does your module change state_dict or load_state_dict?)"
        )
    return pairs


def _run_module(fn, args, spec, tensors, device, cotangent=None):
    """Build a learner's module, load the reference's parameters into it, run forwards; return outputs, facts
    (:class:`grader.child.wire.ModuleFacts`), the forwards' inputs and, given a ``cotangent``, the gradient pass
    (:func:`grader.child.gradients.module_vjp`) of the first forward, else None.  Where the parameters cannot be
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
    inputs = []
    for key in spec.get("forwards", []):
        x = tensors[key]
        inputs.append(torch.empty(x.shape, dtype=x.dtype, device="meta") if device == "meta" else x.to(device))
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
