import torch


def plot_attention(weights, tokens=None):
    import matplotlib.pyplot as plt

    if weights.ndim != 2:
        raise ValueError("plot one (Tq, Tk) matrix at a time")
    n_q, n_k = weights.shape
    fig, ax = plt.subplots(figsize=(5, 5))
    img = ax.imshow(weights.detach().cpu().float().numpy(), cmap="viridis")
    fig.colorbar(img, ax=ax)
    if tokens is None:
        ax.set_xlabel("Key positions")
        ax.set_ylabel("Query positions")
        return fig
    if len(tokens) == 2 and not isinstance(tokens[0], str):
        if len(tokens[0]) != n_q or len(tokens[1]) != n_k:
            raise ValueError("tokens do not match the weights")
        key_tokens, query_tokens = tokens
    else:
        if n_q != n_k or len(tokens) != n_q:
            raise ValueError("a single token list needs square weights of its length")
        key_tokens = query_tokens = tokens
    ax.set_xticks(range(len(key_tokens)), labels=list(key_tokens), rotation=45)
    ax.set_yticks(range(len(query_tokens)), labels=list(query_tokens))
    return fig


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).triu(1)
