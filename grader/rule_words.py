"""The failures of the kit's rules, by id, in English: what the local check says (:func:`english`) and what the
grader says by id (:mod:`grader.instructor.messages` takes their English from here and adds the other languages).

Data and one function, apart from :mod:`grader.rules` so that the registry can say a signature's problems
without importing the rules (which import the registry).  Ships in a learner's kit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grader.hook_table import TABLE

KEY_AXIS_LABEL = "Key positions"
QUERY_AXIS_LABEL = "Query positions"
CPU_BUILT = "a tensor is built on the CPU whatever the input's device"
_ADVICE = "Walk the keys block by block, keeping a running max and sum"
_CUTS = "`.detach()`, `.data`, `torch.no_grad()`, a NumPy round trip or `torch.tensor(...)` of a tensor"
_ALLOCATOR = "torch's allocator gave your call {allocated} bytes at its peak, as many as {held} ({bound} bytes), "

WORDS: dict[str, str] = {
    "in_place": "modified its input in place; return a new tensor and leave the inputs alone",
    "grad.cut": f"the gradient does not reach {{inputs}}: your result does not require grad, so the graph is cut "
    f"({_CUTS}) and a model built on it cannot train",
    "grad.unreached": f"the gradient does not reach {{inputs}}: your result does not depend on it through autograd "
    f"({_CUTS} on its way) and a model built on it cannot train it",
    "grad.cut_at": f"the gradient does not reach {{inputs}}: your result does not require grad, so the graph is cut "
    f"({_CUTS}; the last such step: {{where}}) and a model built on it cannot train",
    "grad.unreached_at": f"the gradient does not reach {{inputs}}: your result does not depend on it through autograd "
    f"({_CUTS} on its way; the last such step: {{where}}) and a model built on it cannot train it",
    "grad.frozen": "frozen parameters (requires_grad=False): {names}; training cannot change them: keep the "
    "requires_grad=True that nn.Parameter and nn.Linear give",
    "raised_in_library": "{kind} was raised inside a library your code called (at {where}), not by a raise of your "
    "own: {text}; where the input is wrong, check it and raise {kind} yourself",
    "grad.raised": "backward through your result raised {error}",
    "grad.raised_at": "backward through your result raised {error} (at {where})",
    "grad.call_raised": "called on inputs that require grad (as a model's are), your code raised {error}",
    "grad.call_raised_at": "called on inputs that require grad (as a model's are), your code raised {error} (at "
    "{where})",
    "grad.not_finite": "the gradient of {input} holds {value}, first at {index}, where it must be finite: a model "
    "built on this stops learning",
    "banned": "uses {calls}: {why}",
    "not_allowed_here": "not allowed here",
    **{f"why_banned.{r.hook}": r.why_banned for r in TABLE if r.why_banned},
    "spawned": "your code started {kinds}: threads and processes are not allowed in graded code, at import or "
    "in a call (the grader sees banned calls and memory in the calling thread only); compute in the calling thread",
    "spawn.thread": "a thread",
    "spawn.thread_running": "a thread (still running)",
    "spawn.process": "a process ({how})",
    "spawn.process_running": "a process (still running)",
    "spawn.process_ended": "a process (already ended)",
    "spawn.program": "another program ({how})",
    "spawn.unknown": "a thread or a process",
    "gpu_error": f"will fail on a GPU: {CPU_BUILT} ({{error}})",
    "gpu_device": "will fail on a GPU: given inputs on the meta device (shapes without data, the grader's stand-in "
    "for a GPU) it returned a tensor on {device}: make new tensors on that device",
    "contiguous": "{hook} must return a contiguous tensor (call .contiguous() before .view)",
    "memory.converted": "your call used {calls}: the grader measures the memory torch's tensors hold, and a "
    "numpy array, a Python list, raw storage or packed weights escape it; compute with torch",
    "memory.held": "your call held at once as many elements as a whole ({tq}, {tk}) matrix of scores of one "
    "batch-head or more: {peak} at its peak (the bound: {bound})",
    "memory.needs": "a chunked version holds about {needed} (blocks {block} and sums {sums})",
    "memory.elements": f"{{held}}; {{needs}}. {_ADVICE}",
    "memory.alone": f"{{held}}; your tensor {{shape}} holds that many alone; {{needs}}. Which step needs all of it "
    f"at once? {_ADVICE}",
    "memory.alone_made": f"{{held}}; your tensor {{shape}}, made by {{op}}, holds that many alone; {{needs}}. Which "
    f"step needs all of it at once? {_ADVICE}",
    "memory.some": f"{{held}}, though none of its tensors is that large (the largest: {{shape}}); {{needs}}. What do "
    f"you still hold from earlier blocks when you make the next one? {_ADVICE}",
    "memory.some_made": f"{{held}}, though none of its tensors is that large (the largest: {{shape}}, made by {{op}}); "
    f"{{needs}}. What do you still hold from earlier blocks when you make the next one? {_ADVICE}",
    "memory.kept": "your call held at once every score a causal call keeps of one batch-head, or more: {peak} at its "
    f"peak (the bound: {{bound}}, the unmasked part of ({{tq}}, {{tk}})); {{needs}}. {_ADVICE}",
    "memory.bytes": "your call held at once as many bytes as {held} in the queries' dtype or more: {peak} at its "
    f"peak (the bound: {{bound}}), in elements wider than the queries'; {{needs}}. {_ADVICE}",
    "memory.matrix": "a whole ({tq}, {tk}) matrix of scores of one batch-head",
    "memory.causal_scores": "every score a causal call keeps of one batch-head",
    "memory.profiler": "torch's profiler, which records what your call allocates, was switched off or restarted "
    "during your call: the grader cannot tell what it held; leave the profiler alone",
    "memory.foreign": "your call used {calls}: a tensor over memory torch did not allocate (a bytearray, an mmap, a "
    "numpy array), or a tensor's memory handed out of torch (a DLPack capsule), escapes what the grader measures; "
    "compute with torch",
    "memory.allocator": _ALLOCATOR + "whatever recording it stepped out of: walk the keys block by block",
    "memory.cuda": "your call allocated {peak} bytes on the GPU at its peak, as much as the full (..., Tq, Tk) "
    "scores ({bound} bytes): walk the keys block by block",
    "dtype": "returned dtype {got}, expected {expected} (keep the input's dtype)",
    "dtype.mask": "returned dtype {got}, expected bool (a mask is torch.bool: True where a query may not look)",
    "subclass": "returned a {kind}, expected exactly a torch.Tensor (not a subclass)",
    "figure.axes": "returned a {kind}, expected its matplotlib Figure (return ax.figure, or the fig of "
    "plt.subplots())",
    "figure.not_a_figure": "returned {kind}, expected a matplotlib Figure (fig, ax = plt.subplots() makes one: draw "
    "on ax, return fig)",
    "figure.no_image": "the figure holds no image: draw the weights with ax.imshow(...)",
    "figure.images": "the figure holds {images} images; draw the weights once, with one imshow",
    "figure.image_count": "the figure draws {images} images; expected {expected}, one per head (one imshow per "
    "head, in the axes' order)",
    "figure.image_count_one": "the figure draws 1 image; expected {expected}, one per head (one imshow per head, in "
    "the axes' order)",
    "figure.image_shapes": "the figure's images have different shapes ({shapes}); expected {expected} images of one "
    "shape: each head's (Tq, Tk) weights as they are",
    "figure.not_numbers": "the image's data cannot be read as numbers ({why})",
    "figure.transposed": "the image is the transpose of the weights: row i of the image must be query i "
    "(imshow the (Tq, Tk) weights as they are)",
    "figure.heads_transposed": "the images are the transposes of the heads' weights: row i of each image must be "
    "query i (imshow each head's (Tq, Tk) weights as they are)",
    "figure.head_transposed": "the image of head {head} is the transpose of its weights: row i of the image must be "
    "query i (imshow weights[{head}] as it is)",
    "figure.head_order": "the heads are out of order: image {image} shows head {head} (both counted from 0, the "
    "images in the axes' order); draw head h as image h",
    "labels.swapped": f'the axis labels are swapped: keys go across ("{KEY_AXIS_LABEL}" on x), queries down (y)',
    "labels.x": f'the x axis is labelled {{label}}, expected "{KEY_AXIS_LABEL}" (ax.set_xlabel)',
    "labels.y": f'the y axis is labelled {{label}}, expected "{QUERY_AXIS_LABEL}" (ax.set_ylabel)',
    "labels.tokens_swapped": "the tokens are on the wrong axes: key tokens label the x ticks, query tokens the y "
    "ticks",
    "labels.x_tick": "x position {position} has {shown}, expected the key token {token} (a tick at every position, "
    "labelled with its token: ax.set_xticks)",
    "labels.y_tick": "y position {position} has {shown}, expected the query token {token} (a tick at every "
    "position, labelled with its token: ax.set_yticks)",
    "labels.no_tick": "no tick",
    "labels.the_tick": "the tick {tick}",
    "labels.colorbar": "the figure has no colorbar for the image: add one (fig.colorbar(image, ax=ax))",
    "signature.positional_only": "positional-only parameter(s) {names}",
    "signature.unknown": "unknown parameter(s) {names}",
    "signature.missing": "missing parameter(s) {names}",
    "and_then": "{first}; {then}",
    "timed_out": "timed out after {seconds} s (an infinite loop, or far too slow)",
    # the module's form, as the grader's cases word it (the public tests say them so too)
    "mask_buffer.missing": "your module has no buffer named `mask`{found}: the contract holds the causal mask with "
    "self.register_buffer('mask', ...), so state_dict saves it and .to(device) moves it. A mask built in forward "
    "on x.device computes the same and loses only this case",
    "mask_buffer.found": " (your module's buffers: {buffers})",
    "mask_buffer.not_saved": "the `mask` buffer is not in state_dict (persistent=False?): register it with "
    "register_buffer('mask', …)",
    "mask_buffer.device": "the `mask` buffer stayed on {where} after .to({device})",
    "prefer": "raising {kind} here is accepted. {why}",
    "prefer.value_error": "Prefer `raise ValueError(...)`: python -O strips assert statements, so the check would "
    "vanish, and a bad argument is the caller's mistake, not a bug in your code (which is what assert is for).",
}
"""Every rule's failure in English, by id, with its ``{parameters}``: the local check says them so
(:func:`english`), the grader says them by id (``grader.instructor.messages``, which takes their English from
here and adds the other languages)."""

Say = Callable[..., str]
"""How a rule's failure is said: ``say(id, **parameters)``; :func:`english` in the kit, by id in the grader."""


def english(key: str, /, **params: Any) -> str:
    """The failure ``key`` of :data:`WORDS` in English (a list or tuple parameter is joined with ``", "``)."""
    shown = {k: ", ".join(str(x) for x in v) if isinstance(v, (list, tuple)) else v for k, v in params.items()}
    return WORDS[key].format(**shown)
