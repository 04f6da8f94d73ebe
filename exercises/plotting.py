"""Plotting: look at the attention weights as a heatmap.

A (Tq, Tk) matrix of weights is hard to read as numbers and easy to read as a
picture: one row per query, one column per key, brighter where a query looks
harder.  The chapter draws it with matplotlib's imshow and a colorbar.  The
grader reads your figure as data (the image's array, the labels, the ticks, the
colorbar), so return the Figure and never show it.

Run `pytest exercises/test_plotting.py` to check your work.
"""


def plot_attention(weights, tokens=None):
    """A matplotlib Figure: the (Tq, Tk) weights as an image, with a colorbar and labelled axes.

    imshow puts row i of its array down the side and column j across, which is
    just how the weights are laid out: query i on the y axis, key j on the x
    axis, so draw the weights as they are, not transposed.  matplotlib reads
    numbers, not tensors: a model's weights require grad and may sit on a GPU,
    so hand it a NumPy array, `weights.detach().cpu().numpy()` (a tensor still
    draws, with a DeprecationWarning).  Label the axes "Key positions" (x)
    and "Query positions" (y); with tokens, put them on the ticks instead:
    one sequence names the T tokens of square (T, T) weights on both axes, a
    pair (query_tokens, key_tokens) names the queries and the keys.  A batch
    (3-D or 4-D weights), or tokens of the wrong lengths, is a ValueError.
    Return the figure; leave plt.show() to whoever calls you.
    Not allowed: plt.show, fig.show.
    """
    # weights: (Tq, Tk)   tokens: None, T strings, or (Tq strings, Tk strings)   ->   a matplotlib Figure
    # import matplotlib.pyplot as plt (here, so the other exercises run without matplotlib)
    # fig, ax = plt.subplots();  image = ax.imshow(...);  fig.colorbar(image, ax=ax)
    raise NotImplementedError(
        "exercise plot_attention: not implemented yet — a heatmap of the (Tq, Tk) weights with a colorbar and "
        "axis labels, returned as its Figure"
    )
