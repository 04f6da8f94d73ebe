"""Tries to import the reference and the hidden cases with importlib: plain imports, then with the kit
root (from /proc/self/cmdline) put back on sys.path, then ``spec_from_file_location`` on the kit's
reference.py, then by reinstalling the editable-install finder from site-packages.

softmax_weights returns the reference's answer if any import worked, and otherwise fails saying why each
way failed.
"""

import importlib
import importlib.util
import json
import os
import sys
import sysconfig

_NAMES = ("solutions.reference", "solutions", "grader.instructor.cases", "grader.instructor.hidden", "grader")


def _kit_root():
    with open("/proc/self/cmdline", "rb") as fh:
        argv = fh.read().decode(errors="replace").split("\0")
    return next((a for a in reversed(argv) if a.startswith("/")), "")


def _try_imports(tag, errors):
    for name in _NAMES:
        try:
            module = importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - a learner's hunt swallows everything
            errors.append(f"{tag} {name}: {type(exc).__name__}")
            continue
        fn = getattr(module, "softmax_weights", None)
        if callable(fn):
            return fn
    return None


def _hunt():
    errors = []
    root = _kit_root()
    fn = _try_imports("plain", errors)
    if fn is None and root:
        sys.path.insert(0, root)
        importlib.invalidate_caches()
        fn = _try_imports("sys.path", errors)
    if fn is None and root:
        path = os.path.join(root, "solutions", "reference.py")
        try:
            spec = importlib.util.spec_from_file_location("stolen_reference", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            fn = module.softmax_weights
        except BaseException as exc:  # noqa: BLE001
            errors.append(f"spec_from_file_location: {type(exc).__name__}")
    if fn is None:
        site = sysconfig.get_paths()["purelib"]
        for entry in ("__editable___attnkit_0_1_0_finder",):
            try:
                finder = importlib.import_module(entry)
                finder.install()
                fn = _try_imports("editable", errors)
            except BaseException as exc:  # noqa: BLE001
                errors.append(f"{entry} in {site}: {type(exc).__name__}")
    return fn, {"kit_root": root, "errors": errors}


_FOUND = None


def softmax_weights(scores, dim=-1):
    global _FOUND
    if _FOUND is None:
        _FOUND = _hunt()
    fn, facts = _FOUND
    if fn is not None:
        return fn(scores, dim=dim)
    raise RuntimeError("HOSTILE-REPORT " + json.dumps(facts, sort_keys=True, separators=(",", ":")))
