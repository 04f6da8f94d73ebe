import math


def scaled_dot_product_scores(queries, keys):
    return queries @ keys.transpose(-2, -1) / math.sqrt(keys.shape[-1])


def context_vectors(weights, values):
    # z_i = sum_j a_ij v_j
    return weights.transpose(-2, -1) @ values
