"""A toy exercise pack: one group, "toy", with one hook, ``peak_weight``."""
