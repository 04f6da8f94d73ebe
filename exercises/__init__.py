"""attnkit exercises: attention from scratch, one function at a time.

Each module holds the stubs of one part of the chapter; replace every
`raise NotImplementedError(...)` with your code.  The public tests sit beside
them (test_*.py) and name the exercise each one checks:

    scores.py           dot_product_scores, scaled_dot_product_scores, softmax_weights, softmax_with_temperature,
                        context_vectors
    masking.py          causal_mask, apply_causal_mask, renormalize_masked_weights
    dropout.py          dropout_scale, attention_dropout
    heads.py            split_heads, merge_heads
    modules.py          make_self_attention, make_causal_attention, make_multihead_attention
    long_sequences.py   sliding_window_mask, chunked_attention
    plotting.py         plot_attention

Check your work with `pytest exercises --solution exercises` (or `attnkit check`).
The grader finds your functions here, by name, so keep the names and signatures.
"""

import importlib as _importlib
import pkgutil as _pkgutil


def _export_every_stub():
    """Each exercise module's functions and classes, as names of this package (what ``import exercises`` finds)."""
    for info in _pkgutil.iter_modules(__path__):
        if info.name.startswith(("_", "test_")):
            continue
        module = _importlib.import_module(f"{__name__}.{info.name}")
        for name, value in vars(module).items():
            if callable(value) and getattr(value, "__module__", None) == module.__name__ and not name.startswith("_"):
                globals()[name] = value


_export_every_stub()
