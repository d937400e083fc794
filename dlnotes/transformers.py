"""Chapter 06 — attention and transformers, in the order of the chapter's notebooks: 6.1 attention (01_attention),
6.2 positions, blocks and cost (02_positions_blocks), 6.3 encoder–decoder transformers (03_translation), 6.3
pre-training: ELMo and BERT (04_pretraining), 6.3 GPT (06_gpt), 6.4 the vision transformer
(05_vision_transformer). The training loops are `training.train_steps`: chapter 05's `rnn.seq2seq.train_seq2seq`
trains this chapter's translator, `train_mlm` the masked-token model and `train_lm` any language model on a long
text (the GPT and chapter 05's LSTM alike).

Conventions: rows are tokens, a sequence is an array (T, d) (a batch (B, T, d)); attention weights A (T_q, T_k)
with rows that sum to 1.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .activations import softmax
from .text import LMOutput, check_tokens, next_token_loss, random_strings, random_windows
from .training import model_device, to_numpy, train_steps
from .validation import (
    check_array,
    check_callable,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)

# ----------------------------------------------------------------------------- 6.1 attention


def causal_mask(T: int) -> np.ndarray:
    """The causal mask of a sequence of length T: a bool array (T, T) with ``mask[i, j] = (j <= i)``.

    **True = may attend** (query i sees keys 0..i, itself included), the convention of
    ``torch.nn.functional.scaled_dot_product_attention`` (``attn_mask``). ``torch.nn.MultiheadAttention`` and
    ``nn.Transformer`` use the opposite one (True = masked out): pass ``~causal_mask(T)`` there.
    """
    T = check_int(T, "T", 1)
    return np.tril(np.ones((T, T), dtype=bool))


def _check_mask(mask, T_q: int, T_k: int) -> np.ndarray:
    m = np.asarray(mask)
    if m.dtype != bool:
        raise TypeError(f"mask must be a bool array (True = may attend), got dtype {m.dtype}")
    if m.shape != (T_q, T_k):
        raise ValueError(f"mask must have shape ({T_q}, {T_k}) (queries, keys), got shape {m.shape}")
    if not m.any(axis=1).all():
        raise ValueError("mask must let every query attend to at least one key (a row of mask is all False)")
    return m


class Attention(NamedTuple):
    out: np.ndarray  # the mixed values, (T_q, d_v)
    A: np.ndarray  # the attention weights, (T_q, T_k) (per head (h, T_q, T_k)); rows sum to 1


def attention(Q, K, V, mask=None, beta=None) -> Attention:
    """Scaled dot-product attention in NumPy: ``A = softmax_row(beta Q K^T)``, ``out = A V``.

    Q (T_q, q), K (T_k, q), V (T_k, d_v); rows are tokens, the softmax runs over the keys (each row of A sums to
    1). beta is the inverse temperature, 1/sqrt(q) by default. mask (T_q, T_k) bool, **True = may attend**
    (as `causal_mask`); masked scores are set to -inf, so their weights are exactly 0.
    """
    Q = check_matrix(Q, "Q")
    K = check_matrix(K, "K", None, Q.shape[1])
    V = check_matrix(V, "V", K.shape[0])
    beta = 1 / np.sqrt(Q.shape[1]) if beta is None else check_positive(beta, "beta")
    S = beta * (Q @ K.T)
    if mask is not None:
        S = np.where(_check_mask(mask, len(Q), len(K)), S, -np.inf)
    A = softmax(S, axis=1)
    return Attention(A @ V, A)


def tiled_attention(Q, K, V, block: int = 64, beta=None) -> np.ndarray:
    """Attention computed FlashAttention's way: for each block of queries, run over the keys and values in blocks
    of `block`, keeping per query the running maximum m, the running sum l = sum_j exp(s_j - m) and the
    running numerator acc = sum_j exp(s_j - m) v_j; a block that raises the maximum rescales l and acc by
    exp(m_old - m_new). out = acc / l, exactly softmax attention, but no row of T_k scores is ever stored."""
    Q = check_matrix(Q, "Q")
    K = check_matrix(K, "K", None, Q.shape[1])
    V = check_matrix(V, "V", K.shape[0])
    block = check_int(block, "block", 1)
    beta = 1 / np.sqrt(Q.shape[1]) if beta is None else check_positive(beta, "beta")
    out = np.empty((len(Q), V.shape[1]))
    for i in range(0, len(Q), block):
        q = Q[i : i + block]
        m, l, acc = np.full(len(q), -np.inf), np.zeros(len(q)), np.zeros((len(q), V.shape[1]))
        for j in range(0, len(K), block):
            S = beta * q @ K[j : j + block].T  # one tile of scores, (block, block)
            m_new = np.maximum(m, S.max(axis=1))
            rescale, E = np.exp(m - m_new), np.exp(S - m_new[:, None])
            l, acc, m = rescale * l + E.sum(axis=1), rescale[:, None] * acc + E @ V[j : j + block], m_new
        out[i : i + block] = acc / l[:, None]
    return out


def padding_mask(lengths, T: int) -> torch.Tensor:
    """The key-padding mask of a batch of sequences of the given lengths, padded to T: a bool tensor
    (B, 1, 1, T), True = a real token that may be attended to (the convention of `causal_mask`); it broadcasts
    over heads and queries in `MultiHeadAttention` and combines with a causal mask by ``&``."""
    T = check_int(T, "T", 1)
    lengths = check_array(lengths, "lengths", (None,), dtype=np.int64)
    if lengths.min() < 1 or lengths.max() > T:
        raise ValueError(f"lengths must lie in 1..T = {T}, got {lengths.min()}..{lengths.max()}")
    return torch.as_tensor(np.arange(T)[None, :] < lengths[:, None])[:, None, None, :]


def row_entropy(A) -> np.ndarray:
    """The entropy ``H_i = -sum_j a_ij log a_ij`` (nats; 0 log 0 = 0) of each row of attention weights A (T_q, T_k):
    0 for a hard lookup, log T_k for uniform weights."""
    A = check_matrix(A, "A")
    if (A < 0).any() or not np.allclose(A.sum(axis=1), 1):
        raise ValueError("A must have non-negative rows that sum to 1")
    return -np.sum(np.where(A > 0, A * np.log(np.where(A > 0, A, 1)), 0), axis=1)


def multi_head_attention(X_q, X_kv, W_Q, W_K, W_V, W_O, h: int, mask=None, biases=None) -> Attention:
    """Multi-head attention in NumPy (row form): ``MHA = [head_1, ..., head_h] W_O + b_O`` with
    ``head_j = softmax_row(Q_j K_j^T / sqrt(d_k)) V_j``, Q = X_q W_Q + b_Q, K = X_kv W_K + b_K, V = X_kv W_V + b_V,
    and Q_j, K_j, V_j the columns ``j d_k .. (j+1) d_k - 1`` (d_k = columns / h). Each head scales by
    1/sqrt(d_k), not 1/sqrt(d).

    X_q (T_q, d_q), X_kv (T_k, d_kv) (pass X twice for self-attention), W_Q (d_q, D), W_K (d_kv, D),
    W_V (d_kv, D_v), W_O (D_v, d_out); mask (T_q, T_k) bool, True = may attend; biases None or a dict with any of
    ``b_Q, b_K, b_V, b_O``. Returns out (T_q, d_out) and the weights of every head A (h, T_q, T_k).
    ``multi_head_attention(X, X, **weights_from_torch_mha(mha), h=h)`` reproduces ``nn.MultiheadAttention``.
    """
    X_q = check_matrix(X_q, "X_q")
    X_kv = check_matrix(X_kv, "X_kv")
    W_Q = check_matrix(W_Q, "W_Q", X_q.shape[1])
    W_K = check_matrix(W_K, "W_K", X_kv.shape[1], W_Q.shape[1])
    W_V = check_matrix(W_V, "W_V", X_kv.shape[1])
    W_O = check_matrix(W_O, "W_O", W_V.shape[1])
    h = check_int(h, "h", 1)
    if W_Q.shape[1] % h or W_V.shape[1] % h:
        raise ValueError(
            f"h must divide the columns of W_Q ({W_Q.shape[1]}) and W_V ({W_V.shape[1]}), got h = {h}"
        )
    biases = {} if biases is None else dict(biases)
    unknown = set(biases) - {"b_Q", "b_K", "b_V", "b_O"}
    if unknown:
        raise ValueError(f"biases may hold only b_Q, b_K, b_V, b_O, got {sorted(unknown)}")
    cols = {"b_Q": W_Q.shape[1], "b_K": W_K.shape[1], "b_V": W_V.shape[1], "b_O": W_O.shape[1]}
    b = {k: np.zeros(n) if biases.get(k) is None else check_vector(biases[k], k, n) for k, n in cols.items()}
    Q, K, V = X_q @ W_Q + b["b_Q"], X_kv @ W_K + b["b_K"], X_kv @ W_V + b["b_V"]
    d_k, d_v = Q.shape[1] // h, V.shape[1] // h
    heads = [
        attention(
            Q[:, j * d_k : (j + 1) * d_k], K[:, j * d_k : (j + 1) * d_k], V[:, j * d_v : (j + 1) * d_v], mask
        )
        for j in range(h)
    ]
    out = np.hstack([head.out for head in heads]) @ W_O + b["b_O"]
    return Attention(out, np.stack([head.A for head in heads]))


def weights_from_torch_mha(mha) -> dict:
    """The weights of a ``torch.nn.MultiheadAttention`` (same embedding size for queries, keys and values) in the
    book's row form: torch computes ``x W^T``, so ``W_Q = in_proj_weight[:d].T``, ``W_K = in_proj_weight[d:2d].T``,
    ``W_V = in_proj_weight[2d:].T``, ``W_O = out_proj.weight.T``; biases = dict(b_Q, b_K, b_V, b_O) (None when
    built with ``bias=False``). Float64 NumPy arrays; pass with ``**`` to `multi_head_attention`."""
    if not isinstance(mha, nn.MultiheadAttention):
        raise TypeError(f"mha must be a torch.nn.MultiheadAttention, got {type(mha).__name__}")
    if mha.in_proj_weight is None:
        raise ValueError("mha must have kdim = vdim = embed_dim (one in_proj_weight)")
    d = mha.embed_dim
    W = to_numpy(mha.in_proj_weight).astype(np.float64)
    biases = None
    if mha.in_proj_bias is not None:
        b_in = to_numpy(mha.in_proj_bias).astype(np.float64)
        biases = {"b_Q": b_in[:d], "b_K": b_in[d : 2 * d], "b_V": b_in[2 * d :]}
        biases["b_O"] = to_numpy(mha.out_proj.bias).astype(np.float64)
    return {
        "W_Q": W[:d].T.copy(),
        "W_K": W[d : 2 * d].T.copy(),
        "W_V": W[2 * d :].T.copy(),
        "W_O": to_numpy(mha.out_proj.weight).astype(np.float64).T.copy(),
        "biases": biases,
    }


class MultiHeadAttention(nn.Module):
    """Multi-head attention as a torch module, with its own ``W_Q, W_K, W_V, W_O`` (``nn.Linear(d, d)`` each; the
    row form ``Q = x_q W_Q`` is ``self.W_Q(x_q)``, since ``nn.Linear`` stores ``W_Q^T``).

    ``forward(x_q, x_kv=None, mask=None)``: x_q (B, T_q, d) or (T_q, d), x_kv likewise (None: self-attention,
    x_kv = x_q); mask bool (T_q, T_k) or broadcastable to (B, h, T_q, T_k), **True = may attend** (as
    `causal_mask` and ``F.scaled_dot_product_attention``; the opposite of ``nn.MultiheadAttention``). Head j
    uses the columns ``j d_k .. (j+1) d_k - 1`` (d_k = d / h) and scales its scores by 1/sqrt(d_k).
    Returns out (like x_q) and the weights per head A (B, h, T_q, T_k) (or (h, T_q, T_k) unbatched).
    """

    def __init__(self, d: int, h: int, bias: bool = True, rope: bool = False):
        super().__init__()
        self.d, self.h = check_int(d, "d", 1), check_int(h, "h", 1)
        if d % h or (rope and (d // h) % 2):
            raise ValueError(f"h must divide d = {d} (into even d_k with rope), got h = {h}")
        self.d_k, self.rope = d // h, bool(rope)
        self.W_Q, self.W_K, self.W_V, self.W_O = (nn.Linear(d, d, bias=bias) for _ in range(4))

    def load_torch_mha(self, mha) -> MultiHeadAttention:
        """Copy the weights of an ``nn.MultiheadAttention`` (same d, h and bias) into this module; returns self."""
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(f"mha must be a torch.nn.MultiheadAttention, got {type(mha).__name__}")
        if (mha.embed_dim, mha.num_heads) != (self.d, self.h) or mha.in_proj_weight is None:
            raise ValueError(f"mha must have embed_dim = {self.d}, num_heads = {self.h} and kdim = vdim = d")
        if (mha.in_proj_bias is None) != (self.W_Q.bias is None):
            raise ValueError("mha and this module must both have biases or both have none")
        d = self.d
        with torch.no_grad():
            for k, lin in enumerate((self.W_Q, self.W_K, self.W_V)):
                lin.weight.copy_(mha.in_proj_weight[k * d : (k + 1) * d])
                if lin.bias is not None:
                    lin.bias.copy_(mha.in_proj_bias[k * d : (k + 1) * d])
            self.W_O.weight.copy_(mha.out_proj.weight)
            if self.W_O.bias is not None:
                self.W_O.bias.copy_(mha.out_proj.bias)
        return self

    def forward(self, x_q, x_kv=None, mask=None, cache: dict | None = None):
        """cache (self-attention only): a dict that keeps the keys and values of the earlier positions ("K",
        "V", (B, h, t, d_k)); x_q holds the next positions t, t+1, ..., its keys and values are appended."""
        if not isinstance(x_q, torch.Tensor) or x_q.dim() not in (2, 3) or x_q.shape[-1] != self.d:
            raise ValueError(f"x_q must be a tensor (B, T_q, {self.d}) or (T_q, {self.d})")
        x_kv = x_q if x_kv is None else x_kv
        if not isinstance(x_kv, torch.Tensor) or x_kv.dim() != x_q.dim() or x_kv.shape[-1] != self.d:
            raise ValueError(f"x_kv must be a tensor like x_q, (B, T_k, {self.d}) or (T_k, {self.d})")
        unbatched = x_q.dim() == 2
        if unbatched:
            x_q, x_kv = x_q[None], x_kv[None]
        B, T_q = x_q.shape[0], x_q.shape[1]

        def split(y):  # (B, T, d) -> (B, h, T, d_k): head j = columns j d_k .. (j+1) d_k - 1
            return y.view(B, -1, self.h, self.d_k).transpose(1, 2)

        Q, K, V = split(self.W_Q(x_q)), split(self.W_K(x_kv)), split(self.W_V(x_kv))
        start = 0 if not cache else cache["K"].shape[2]  # the position of the first query
        if self.rope:  # rotate queries and keys by their positions: the scores depend on j - t only
            Q, K = rope(Q, start), rope(K, start)
        if cache is not None:
            if cache:
                K, V = torch.cat([cache["K"], K], dim=2), torch.cat([cache["V"], V], dim=2)
            cache["K"], cache["V"] = K, V
        S = Q @ K.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, h, T_q, T_k)
        if mask is not None:
            mask = torch.as_tensor(mask, device=S.device)
            if mask.dtype != torch.bool:
                raise TypeError(f"mask must be a bool tensor or array (True = may attend), got {mask.dtype}")
            try:
                mask = torch.broadcast_to(mask, S.shape)
            except RuntimeError:
                raise ValueError(
                    f"mask must broadcast to {tuple(S.shape)}, got {tuple(mask.shape)}"
                ) from None
            S = S.masked_fill(~mask, float("-inf"))
        A = torch.softmax(S, dim=-1)
        out = self.W_O((A @ V).transpose(1, 2).reshape(B, T_q, self.d))
        return (out[0], A[0]) if unbatched else (out, A)


# ----------------------------------------------------------------------------- 6.2 positions, blocks, cost


def sinusoidal_pe(T: int, d: int, C: float = 1e4) -> np.ndarray:
    """Sinusoidal positional encodings P (T, d), one row per position t = 0..T-1:
    ``p_{t,2i} = sin(t w_i)``, ``p_{t,2i+1} = cos(t w_i)`` with ``w_i = C^(-2i/d)``, i = 0..d/2-1 (d even).
    The frequencies fall geometrically from w_0 = 1 to w_{d/2-1} = C^(-(d-2)/d); the input is X + P."""
    T = check_int(T, "T", 1)
    d = check_int(d, "d", 2)
    if d % 2:
        raise ValueError(f"d must be even (sin and cos come in pairs), got {d}")
    C = check_number(C, "C", 1, low_open=True)
    omega = C ** (-np.arange(0, d, 2) / d)  # (d/2,)
    angles = np.arange(T)[:, None] * omega  # (T, d/2)
    P = np.empty((T, d))
    P[:, 0::2] = np.sin(angles)
    P[:, 1::2] = np.cos(angles)
    return P


def pe_rotation(delta: float, d: int, C: float = 1e4) -> np.ndarray:
    """The block-diagonal rotation R_delta (d, d) that shifts sinusoidal encodings by delta positions:
    ``p_{t+delta} = R_delta p_t`` for every t, with p_t as a column; with the rows of P (the book's form)
    ``P[t + delta] = P[t] @ R_delta.T``. Block i acts on (sin, cos) of frequency ``w_i = C^(-2i/d)``:
    ``[[cos(delta w_i), sin(delta w_i)], [-sin(delta w_i), cos(delta w_i)]]`` (the addition theorems).
    R_delta depends on delta only, not on t."""
    delta = check_number(delta, "delta")
    d = check_int(d, "d", 2)
    if d % 2:
        raise ValueError(f"d must be even (sin and cos come in pairs), got {d}")
    C = check_number(C, "C", 1, low_open=True)
    R = np.zeros((d, d))
    for i, w in enumerate(C ** (-np.arange(0, d, 2) / d)):
        c, s = np.cos(delta * w), np.sin(delta * w)
        R[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, s], [-s, c]]
    return R


def rope(X: torch.Tensor, start: int = 0, C: float = 1e4) -> torch.Tensor:
    """Rotary position embedding of queries or keys X (..., T, d_k), d_k even: the pair of columns (2i, 2i+1) of
    the row at position t = start, start+1, ... is rotated by the angle ``t w_i``, ``w_i = C^(-2i/d_k)``, with
    `pe_rotation`'s block ``[[cos, sin], [-sin, cos]]`` (x_t -> R_t x_t). Since ``R_t^T R_j = R_(j-t)``, the
    score of rotated q_t and k_j is ``q_t^T R_(j-t) k_j``: it depends on the positions through j - t only."""
    if not torch.is_tensor(X) or X.ndim < 2 or X.shape[-1] % 2:
        raise ValueError(f"X must be a tensor (..., T, d_k) with even d_k, got {getattr(X, 'shape', X)!r}")
    start, C = check_int(start, "start", 0), check_number(C, "C", 1, low_open=True)
    d_k, T = X.shape[-1], X.shape[-2]
    omega = C ** (-torch.arange(0, d_k, 2, dtype=torch.float64, device=X.device) / d_k)
    angles = torch.arange(start, start + T, dtype=torch.float64, device=X.device)[:, None] * omega
    c, s = torch.cos(angles).to(X.dtype), torch.sin(angles).to(X.dtype)
    x0, x1 = X[..., 0::2], X[..., 1::2]
    return torch.stack([c * x0 + s * x1, c * x1 - s * x0], dim=-1).flatten(-2)


def layer_norm(X, g, b, eps: float = 1e-5) -> np.ndarray:
    """Layer normalisation of every token (row) of X (..., d) over its d features:
    ``LN(x) = g * (x - mu) / sqrt(sigma^2 + eps) + b`` with ``mu = mean_k x_k`` and the *biased* variance
    ``sigma^2 = mean_k (x_k - mu)^2`` (divided by d, as ``nn.LayerNorm``; ``torch.var`` divides by d - 1)."""
    X = check_array(X, "X")
    if X.ndim < 1:
        raise ValueError(f"X must have at least 1 axis (..., d), got shape {X.shape}")
    d = X.shape[-1]
    g = check_vector(g, "g", d)
    b = check_vector(b, "b", d)
    eps = check_positive(eps, "eps")
    mu = X.mean(axis=-1, keepdims=True)
    var = ((X - mu) ** 2).mean(axis=-1, keepdims=True)
    return g * (X - mu) / np.sqrt(var + eps) + b


class TransformerBlock(nn.Module):
    """One transformer encoder block on x (B, T, d): multi-head self-attention and a position-wise MLP
    (``Linear(d, d_ff)`` -> exact GELU -> ``Linear(d_ff, d)``), each wrapped in a residual connection and a
    LayerNorm (eps 1e-5).

    norm_first=True (pre-LN): ``H = X + MHA(LN_1(X))``, ``Y = H + MLP(LN_2(H))``; a stack of pre-LN blocks
    needs one final LayerNorm before the output head. norm_first=False (post-LN, the original transformer):
    ``H = LN_1(X + MHA(X))``, ``Y = LN_2(H + MLP(H))``. ``forward(x, mask=None)``: x (B, T, d) or one sequence (T, d),
    mask a bool (T, T) with True = may attend (the convention of ``F.scaled_dot_product_attention``). Same computation as
    ``nn.TransformerEncoderLayer(d, h, d_ff, dropout=0, activation="gelu", batch_first=True,
    norm_first=...)``."""

    def __init__(self, d: int, h: int, d_ff: int, norm_first: bool = True, rope: bool = False):
        super().__init__()
        d = check_int(d, "d", 1)
        h = check_int(h, "h", 1)
        if d % h:
            raise ValueError(f"h must divide d (d_k = d/h), got d={d}, h={h}")
        d_ff = check_int(d_ff, "d_ff", 1)
        if not isinstance(norm_first, (bool, np.bool_)):
            raise TypeError(f"norm_first must be True or False, got {norm_first!r}")
        self.norm_first = bool(norm_first)
        self.attn = MultiHeadAttention(d, h, rope=rope)
        self.norm1 = nn.LayerNorm(d, eps=1e-5)
        self.norm2 = nn.LayerNorm(d, eps=1e-5)
        self.mlp = nn.Sequential(nn.Linear(d, d_ff), nn.GELU(), nn.Linear(d_ff, d))

    def load_torch_layer(self, layer) -> TransformerBlock:
        """Copy every weight and bias of an ``nn.TransformerEncoderLayer`` (same d, h, d_ff) into this block:
        ``self_attn`` -> attention, ``linear1``/``linear2`` -> MLP, ``norm1``/``norm2``; returns self. A layer
        that computes something else (another ``norm_first``, an activation other than the exact GELU, another
        LayerNorm eps) is refused with a ValueError."""
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(f"layer must be a torch.nn.TransformerEncoderLayer, got {type(layer).__name__}")
        if (layer.linear1.in_features, layer.linear1.out_features) != (
            self.mlp[0].in_features,
            self.mlp[0].out_features,
        ):
            raise ValueError(
                f"layer must have d_model = {self.mlp[0].in_features} and dim_feedforward = "
                f"{self.mlp[0].out_features}, got {layer.linear1.in_features} and {layer.linear1.out_features}"
            )
        if bool(layer.norm_first) != self.norm_first:
            raise ValueError(
                f"layer must have norm_first = {self.norm_first} like this block, got {layer.norm_first}"
            )
        exact_gelu = layer.activation is F.gelu or (
            isinstance(layer.activation, nn.GELU) and layer.activation.approximate == "none"
        )
        if not exact_gelu:
            raise ValueError(f"layer must use the exact GELU (activation='gelu'), got {layer.activation}")
        eps = (layer.norm1.eps, layer.norm2.eps)
        if eps != (self.norm1.eps, self.norm2.eps):
            raise ValueError(
                f"layer's LayerNorms must have eps = {self.norm1.eps} like this block, got {eps}"
            )
        self.attn.load_torch_mha(layer.self_attn)
        with torch.no_grad():
            for mine, theirs in (
                (self.mlp[0], layer.linear1),
                (self.mlp[2], layer.linear2),
                (self.norm1, layer.norm1),
                (self.norm2, layer.norm2),
            ):
                mine.weight.copy_(theirs.weight)
                mine.bias.copy_(theirs.bias)
        return self

    def forward(self, x: torch.Tensor, mask=None, cache: dict | None = None) -> torch.Tensor:
        d = self.norm1.normalized_shape[0]
        if not torch.is_tensor(x) or x.ndim not in (2, 3) or x.shape[-1] != d:
            got = tuple(x.shape) if torch.is_tensor(x) else type(x).__name__
            raise ValueError(f"x must be a tensor (B, T, {d}) or (T, {d}), got {got}")
        if x.ndim == 2:  # one unbatched sequence (T, d), as MultiHeadAttention takes it
            return self(x[None], mask, cache)[0]
        if self.norm_first:
            x = x + self.attn(self.norm1(x), mask=mask, cache=cache)[0]
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x, mask=mask, cache=cache)[0])
        return self.norm2(x + self.mlp(x))


def elu_plus_one(x):
    """The feature map ``phi(x) = elu(x) + 1`` of linear attention (x + 1 for x > 0, exp(x) otherwise): > 0."""
    x = check_array(x, "x")
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(Q, K, V, phi=elu_plus_one, mode: str = "parallel") -> np.ndarray:
    """Causal linear attention: ``exp(q^T k)`` replaced by ``phi(q)^T phi(k)``, Q, K (T, d_k), V (T, d_v) -> Y (T, d_v).

    mode="parallel": ``y_t = sum_{j<=t} (phi(q_t)^T phi(k_j)) v_j / sum_{j<=t} phi(q_t)^T phi(k_j)`` (a masked
    T x T matrix, O(T^2)). mode="recurrent": ``S_t = S_{t-1} + phi(k_t) v_t^T``, ``s_t = s_{t-1} + phi(k_t)``,
    ``y_t = phi(q_t)^T S_t / phi(q_t)^T s_t`` (S_0 = 0, s_0 = 0): constant work and memory per new token.
    phi must map (T, d_k) to positive features (T, r)."""
    Q = check_matrix(Q, "Q")
    K = check_matrix(K, "K", Q.shape[0], Q.shape[1])
    V = check_matrix(V, "V", Q.shape[0])
    phi = check_callable(phi, "phi")
    mode = check_choice(mode, "mode", ("parallel", "recurrent"))
    Fq, Fk = np.asarray(phi(Q), dtype=np.float64), np.asarray(phi(K), dtype=np.float64)
    if Fq.ndim != 2 or Fq.shape != Fk.shape or len(Fq) != len(Q):
        raise ValueError(f"phi must map (T, d_k) to features (T, r), got {Fq.shape} and {Fk.shape}")
    if mode == "parallel":
        A = np.tril(Fq @ Fk.T)  # j <= t, diagonal included
        return (A @ V) / A.sum(axis=1, keepdims=True)
    S = np.zeros((Fk.shape[1], V.shape[1]))
    s = np.zeros(Fk.shape[1])
    Y = np.empty((len(Q), V.shape[1]))
    for t in range(len(Q)):
        S += np.outer(Fk[t], V[t])
        s += Fk[t]
        Y[t] = Fq[t] @ S / (Fq[t] @ s)
    return Y


# ----------------------------------------------------------------------------- 6.3 encoder-decoder transformers


NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


class TranslationTask(NamedTuple):
    X: np.ndarray  # source token ids (n, length): the digits 0..9, "3 1 4" -> [3, 1, 4]
    Y: np.ndarray  # target token ids (n, length): the words of the reversed number, ids into `target_vocab`
    source_vocab: tuple[str, ...]  # the source symbols, "0".."9"
    target_vocab: tuple[str, ...]  # the target words in alphabetical order, "eight", "five", ..., "zero"


def make_translation_task(n: int, length: int, rng=None, exclude=None) -> TranslationTask:
    """A synthetic word-level "translation": `n` random digit strings of `length` digits and the number words
    of their reversal, ``"3 1 4" -> "four one three"``, i.e. ``y_i = word(x_{m+1-i})``.

    The target vocabulary is the ten number words in alphabetical order (as a tokenizer would sort it), so a
    target id is not the digit it stands for: the model has to learn the word of each digit *and* where to
    look. `exclude` (an array (N', length) of source ids) lists strings that must not be drawn, e.g. the
    training strings when a held-out set is made."""
    target_vocab = tuple(sorted(NUMBER_WORDS))
    word_id = np.array([target_vocab.index(w) for w in NUMBER_WORDS])  # digit -> id of its word
    X = random_strings(n, length, 10, rng, exclude)
    return TranslationTask(X, word_id[X[:, ::-1]], tuple("0123456789"), target_vocab)


def decode_words(ids, vocab) -> str:
    """The tokens `ids` (a 1-D sequence of ids into `vocab`) as one string of words separated by spaces."""
    ids = check_array(ids, "ids", (None,), dtype=np.int64)
    if ids.min() < 0 or ids.max() >= len(vocab):
        raise ValueError(f"ids must lie in 0..{len(vocab) - 1}, got {ids.min()}..{ids.max()}")
    return " ".join(vocab[i] for i in ids)


class DecoderBlock(nn.Module):
    """One pre-LN transformer decoder block on the target prefix y (B, n, d) and the encoded source
    memory (B, m, d):

    ``H = Y + MHA_self(LN_1(Y), mask=causal)``, ``G = H + MHA_cross(LN_2(H), memory)``, ``Z = G + MLP(LN_3(G))``

    with the causal mask (True = may attend, `causal_mask`) in the self-attention, so that position i (i = 1..n),
    which predicts y_i, sees the decoder inputs y_0..y_{i-1} only (the start symbol and the words before y_i),
    and cross-attention whose queries come from the decoder and whose keys and values
    are the encoder's outputs. ``forward(y, memory)`` returns (Z, the cross-attention weights per head
    (B, h, n, m))."""

    def __init__(self, d: int, h: int, d_ff: int):
        super().__init__()
        d, h, d_ff = check_int(d, "d", 1), check_int(h, "h", 1), check_int(d_ff, "d_ff", 1)
        self.self_attn, self.cross_attn = MultiHeadAttention(d, h), MultiHeadAttention(d, h)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, d_ff), nn.GELU(), nn.Linear(d_ff, d))

    def forward(self, y: torch.Tensor, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d = self.norm1.normalized_shape[0]
        for name, t in (("y", y), ("memory", memory)):
            if not torch.is_tensor(t) or t.ndim != 3 or t.shape[-1] != d or len(t) != len(y):
                shape = tuple(t.shape) if torch.is_tensor(t) else type(t).__name__
                raise ValueError(
                    f"{name} must be a tensor (B, length, {d}) with the batch size of y, got {shape}"
                )
        mask = torch.as_tensor(causal_mask(y.shape[1]), device=y.device)
        y = y + self.self_attn(self.norm1(y), mask=mask)[0]
        context, weights = self.cross_attn(self.norm2(y), memory)
        y = y + context
        return y + self.mlp(self.norm3(y)), weights


class TransformerDecoded(NamedTuple):
    tokens: torch.Tensor  # the greedy output (batch, n)
    # cross-attention weights of the last decoder block, mean over heads (batch, n, m)
    attention: torch.Tensor


class Seq2SeqTransformer(nn.Module):
    """An encoder–decoder transformer (pre-LN) for token sequences, ``p(y_{1:n} | x_{1:m}) = prod_i
    p(y_i | y_{<i}, x_{1:m})``.

    Encoder: token embeddings of x plus sinusoidal positions (`sinusoidal_pe`), `n_layers` `TransformerBlock`
    (bidirectional self-attention), a final LayerNorm. Decoder: embeddings of the shifted target
    ``y_0 (start, id vocab), y_1, ..., y_{n-1}`` plus positions, `n_layers` `DecoderBlock` (masked
    self-attention, cross-attention to the encoded source, MLP), a final LayerNorm and a linear layer to the
    logits of the `vocab` target words. Source and target have `vocab` symbols each (ids 0..vocab-1).

    The interface is that of chapter 5's ``Seq2Seq``: ``model(x, y)`` gives the teacher-forced logits
    (batch, n, vocab) in one parallel pass, ``greedy_decode(x, n)`` feeds back the most probable word and
    returns the tokens and the cross-attention weights of the last decoder block, averaged over the heads."""

    def __init__(
        self, vocab: int, d: int = 64, h: int = 4, d_ff: int = 128, n_layers: int = 2, max_len: int = 64
    ):
        super().__init__()
        self.vocab, self.d = check_int(vocab, "vocab", 2), check_int(d, "d", 2)
        h, d_ff = check_int(h, "h", 1), check_int(d_ff, "d_ff", 1)
        n_layers = check_int(n_layers, "n_layers", 1)
        self.max_len = check_int(max_len, "max_len", 1)
        if d % 2 or d % h:
            raise ValueError(f"d must be even and divisible by h = {h}, got d = {d}")
        self.source_embedding = nn.Embedding(vocab, d)
        self.target_embedding = nn.Embedding(vocab + 1, d)  # + the start symbol, id `vocab`
        self.register_buffer("P", torch.tensor(sinusoidal_pe(max_len, d), dtype=torch.float32))
        self.encoder = nn.ModuleList(TransformerBlock(d, h, d_ff) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderBlock(d, h, d_ff) for _ in range(n_layers))
        self.encoder_norm, self.decoder_norm = nn.LayerNorm(d), nn.LayerNorm(d)
        self.output = nn.Linear(d, vocab)

    def _tokens(self, x, name: str) -> torch.Tensor:
        return check_tokens(x, name, self.vocab, max_length=self.max_len).to(self.output.weight.device)

    def encode(self, x) -> torch.Tensor:
        """The encoded source (batch, m, d): embeddings + positions, the encoder blocks, the final LayerNorm."""
        x = self._tokens(x, "x")
        z = self.source_embedding(x) + self.P[: x.shape[1]]
        for block in self.encoder:
            z = block(z)
        return self.encoder_norm(z)

    def decode(self, y_prev: torch.Tensor, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The logits (batch, n, vocab) of y_1..y_n from the decoder inputs y_0..y_{n-1} (batch, n) and the
        cross-attention weights of the last block (batch, h, n, m)."""
        z = self.target_embedding(y_prev) + self.P[: y_prev.shape[1]]
        for block in self.decoder:
            z, weights = block(z, memory)
        return self.output(self.decoder_norm(z)), weights

    def forward(self, x, y) -> torch.Tensor:
        """Teacher forcing: the logits (batch, n, vocab) of p(y_i | y_{<i}, x) for i = 1..n from one parallel
        pass, the decoder being fed the true previous words y_0 (start), y_1, ..., y_{n-1}."""
        memory, y = self.encode(x), self._tokens(y, "y")
        if len(y) != len(memory):
            raise ValueError(f"x and y must hold the same number of strings, got {len(memory)} and {len(y)}")
        y_prev = torch.cat([torch.full_like(y[:, :1], self.vocab), y[:, :-1]], dim=1)
        return self.decode(y_prev, memory)[0]

    @torch.no_grad()
    def greedy_decode(self, x, n: int) -> TransformerDecoded:
        """Greedy decoding of `n` words, ``y_i = argmax p(y_i | y_{<i}, x)``, each fed back as the next input
        (the decoder is rerun on the whole prefix at every step). Returns the tokens (batch, n) and the
        cross-attention weights of the last decoder block averaged over the heads (batch, n, m): row i is where
        the decoder looked while it wrote y_i."""
        n = check_int(n, "n", 1, self.max_len)
        memory = self.encode(x)
        y_prev = torch.full((len(memory), 1), self.vocab, dtype=torch.long, device=memory.device)
        for _ in range(n):
            logits, weights = self.decode(y_prev, memory)
            y_prev = torch.cat([y_prev, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
        return TransformerDecoded(y_prev[:, 1:], weights.mean(dim=1))


# ----------------------------------------------------------------------------- 6.3 pre-training: ELMo, BERT, GPT


class ELMoOutput(NamedTuple):
    layers: torch.Tensor  # h_{k,j} (B, L+1, T, 2m): j = 0 is [x_k; x_k], j >= 1 is [fwd_{k,j}; bwd_{k,j}]
    s: torch.Tensor  # the mixing weights softmax(w), (L+1,)
    elmo: torch.Tensor  # ELMo_k = gamma sum_j s_j h_{k,j}, (B, T, 2m)
    logits_next: torch.Tensor  # the forward language model's logits of y_{k+1}, (B, T, vocab)
    logits_prev: torch.Tensor  # the backward language model's logits of y_{k-1}, (B, T, vocab)


class ELMo(nn.Module):
    """ELMo's encoder: a forward language model (a stack of `n_layers` unidirectional LSTMs reading
    x_1..x_T) and a backward one (a second stack reading x_T..x_1, its outputs flipped back), sharing only
    the token embedding and the output (softmax) layer. All widths are m, so every
    ``h_{k,j} = [fwd h_{k,j}; bwd h_{k,j}]`` has width 2m, and ``h_{k,0} = [x_k; x_k]``. The task-specific
    mix is ``ELMo_k = gamma sum_j s_j h_{k,j}`` with ``s = softmax(w)`` (parameters ``w`` (L+1,) and
    ``gamma``). The forward state of token k never depends on tokens after k, the backward one never on
    tokens before k (two stacked ``nn.LSTM(bidirectional=True)`` would break this from layer 2 on)."""

    def __init__(self, vocab_size: int, m: int = 16, n_layers: int = 2):
        super().__init__()
        self.vocab_size = check_int(vocab_size, "vocab_size", 2)
        m, n_layers = check_int(m, "m", 1), check_int(n_layers, "n_layers", 1)
        self.embed = nn.Embedding(vocab_size, m)
        self.forward_lstms = nn.ModuleList(nn.LSTM(m, m, batch_first=True) for _ in range(n_layers))
        self.backward_lstms = nn.ModuleList(nn.LSTM(m, m, batch_first=True) for _ in range(n_layers))
        self.head = nn.Linear(m, vocab_size)  # shared by both language models
        self.w = nn.Parameter(torch.zeros(n_layers + 1))
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, ids: torch.Tensor) -> ELMoOutput:
        """ids (B, T) -> the 2L + 1 representations of every token, their mix and both LMs' logits."""
        ids = _check_token_tensor(ids, self.vocab_size, "ids")
        x = self.embed(ids)  # (B, T, m)
        fwd, bwd = x, x.flip(1)  # the backward stack reads the sequence from the end
        layers = [torch.cat([x, x], dim=-1)]
        for forward_lstm, backward_lstm in zip(self.forward_lstms, self.backward_lstms, strict=True):
            fwd, bwd = forward_lstm(fwd)[0], backward_lstm(bwd)[0]
            layers.append(torch.cat([fwd, bwd.flip(1)], dim=-1))
        H = torch.stack(layers, dim=1)  # (B, L+1, T, 2m)
        s = torch.softmax(self.w, dim=0)
        elmo = self.gamma * torch.einsum("j,bjtm->btm", s, H)
        return ELMoOutput(H, s, elmo, self.head(fwd), self.head(bwd.flip(1)))


def elmo_mix(H, s, gamma: float = 1.0) -> np.ndarray:
    """``gamma sum_j s_j h_j`` of the layer representations H (J, ..., m) with the weights s (J,) as given
    (ELMo uses ``s = softmax(w)``; a one-hot s picks one layer)."""
    H = check_array(H, "H")
    if H.ndim < 2:
        raise ValueError(f"H must have shape (J, ..., m) with one slice per layer, got shape {H.shape}")
    s = check_vector(s, "s", H.shape[0])
    gamma = check_number(gamma, "gamma")
    return gamma * np.tensordot(s, H, axes=1)


def _check_token_tensor(ids, vocab_size: int, name: str) -> torch.Tensor:
    if not torch.is_tensor(ids) or ids.dim() != 2 or ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{name} must be an integer tensor (B, T), got {ids!r}"[:200])
    if ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(f"{name} must hold token ids in 0..{vocab_size - 1}, got {ids.min()}..{ids.max()}")
    return ids


def encode_words(tokens, vocabulary, unk: str = "[UNK]") -> np.ndarray:
    """The ids (len(tokens),) of the words in `vocabulary`; a word outside it gets the id of `unk`."""
    index = {w: k for k, w in enumerate(vocabulary)}
    if unk not in index:
        raise ValueError(f"vocabulary must contain the unknown-word token {unk!r}")
    return np.fromiter((index.get(w, index[unk]) for w in tokens), dtype=np.int64, count=len(tokens))


class MaskedTokens(NamedTuple):
    inputs: np.ndarray  # the corrupted ids fed to the model, like ids
    targets: np.ndarray  # the original id where selected, -100 (ignored by F.cross_entropy) elsewhere
    masked: np.ndarray  # bool: selected and replaced by [MASK]
    randomised: np.ndarray  # bool: selected and replaced by a random token
    kept: np.ndarray  # bool: selected and left unchanged


def mask_tokens(ids, mask_id: int, vocab_size: int, *, rate: float = 0.15, n_special: int = 0, rng=None):
    """BERT's corruption for the masked-token objective: every token that is not special (id >= n_special) is
    *selected* independently with probability `rate`; of the selected ones 80 % are replaced by `mask_id`,
    10 % by a token drawn uniformly from the ordinary ids ``n_special..vocab_size-1``, 10 % stay unchanged.
    The loss is computed at all selected positions. ids: int array of any shape. Returns `MaskedTokens`."""
    vocab_size = check_int(vocab_size, "vocab_size", 2)
    n_special = check_int(n_special, "n_special", 0, vocab_size - 1)
    mask_id = check_int(mask_id, "mask_id", 0, vocab_size - 1)
    rate = check_number(rate, "rate", 0, 1)
    rng = check_rng(rng)
    ids = np.asarray(ids)
    if not np.issubdtype(ids.dtype, np.integer) or ids.size == 0:
        raise TypeError(f"ids must be a non-empty integer array, got dtype {ids.dtype} and shape {ids.shape}")
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"ids must lie in 0..{vocab_size - 1}, got {ids.min()}..{ids.max()}")
    ids = ids.astype(np.int64)
    selected = (ids >= n_special) & (rng.random(ids.shape) < rate)
    u = rng.random(ids.shape)
    masked, randomised = selected & (u < 0.8), selected & (u >= 0.8) & (u < 0.9)
    kept = selected & (u >= 0.9)
    inputs = ids.copy()
    inputs[masked] = mask_id
    inputs[randomised] = rng.integers(n_special, vocab_size, randomised.sum())
    targets = np.where(selected, ids, -100)
    return MaskedTokens(inputs, targets, masked, randomised, kept)


class TinyTransformerLM(nn.Module):
    """A small transformer over token ids: a token embedding, positions (below), `n_layers`
    pre-LN `TransformerBlock`s (d_ff = 4d), a final LayerNorm and a linear output layer (its weight tied to the
    embedding if `tie_weights`, the shared matrix then drawn from N(0, 1/d)). positions: "learned", "sinusoidal"
    (added to the input) or "rope" (rotary embeddings of the queries and keys in every block, nothing added).
    causal=True: each position sees only itself and earlier ones (`causal_mask`), a GPT-style decoder;
    causal=False: every position sees the whole window, a BERT-style encoder.
    ``forward(ids (B, t))`` with t <= T returns `LMOutput` with logits (B, t, vocab)."""

    def __init__(
        self,
        vocab_size: int,
        d: int,
        h: int,
        n_layers: int,
        T: int,
        *,
        causal: bool = True,
        tie_weights: bool = False,
        positions: str = "learned",
    ):
        super().__init__()
        self.vocab_size = check_int(vocab_size, "vocab_size", 2)
        positions = check_choice(positions, "positions", ("learned", "sinusoidal", "rope"))
        d, n_layers, self.T = check_int(d, "d", 1), check_int(n_layers, "n_layers", 1), check_int(T, "T", 1)
        self.causal = bool(causal)
        self.embed = nn.Embedding(vocab_size, d)
        if positions == "learned":
            self.P = nn.Parameter(0.02 * torch.randn(T, d))
        else:  # fixed sinusoidal encodings (6.2), or none added to the input with rotary embeddings
            P = sinusoidal_pe(T, d) if positions == "sinusoidal" else np.zeros((T, d))
            self.register_buffer("P", torch.as_tensor(P, dtype=torch.float32))
        rotary = positions == "rope"
        self.blocks = nn.ModuleList(TransformerBlock(d, h, 4 * d, rope=rotary) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_size)
        if tie_weights:  # one matrix for both: drawn at the output layer's scale, so that the first logits
            # have about unit size (nn.Embedding's N(0, 1) would give logits of size sqrt(d) and a slow start)
            nn.init.normal_(self.embed.weight, std=d**-0.5)
            self.head.weight = self.embed.weight
        self.register_buffer("mask", torch.as_tensor(causal_mask(T)), persistent=False)

    def encode(self, ids: torch.Tensor, cache: list | None = None) -> torch.Tensor:
        """The final hidden states LN(x_t) (B, t, d) of ids (B, t), t <= T: what the output layer reads.
        cache (causal models): a list of one dict per block (`new_cache`) holding the keys and values of the
        positions seen so far; ids are then the next positions, and their keys and values are added (KV cache)."""
        ids = _check_token_tensor(ids, self.vocab_size, "ids")
        if cache is not None and (not self.causal or len(cache) != len(self.blocks)):
            raise ValueError("cache must be new_cache() of a causal model (one dict per block)")
        start = cache[0]["K"].shape[2] if cache and cache[0] else 0
        t = ids.shape[1]
        if start + t > self.T:
            raise ValueError(f"ids may hold at most T = {self.T} positions, got {start} + {t}")
        x = self.embed(ids) + self.P[start : start + t]
        mask = self.mask[start : start + t, : start + t] if self.causal else None
        for k, block in enumerate(self.blocks):
            x = block(x, mask, None if cache is None else cache[k])
        return self.norm(x)

    def new_cache(self) -> list:
        """An empty KV cache for `encode`/`forward`: one dict per block."""
        return [{} for _ in self.blocks]

    def forward(self, ids: torch.Tensor, cache: list | None = None) -> LMOutput:
        return LMOutput(self.head(self.encode(ids, cache)))


class TinyGPT(TinyTransformerLM):
    """`TinyTransformerLM` with the causal mask: a decoder-only language model, logits[:, t] predict y_{t+1}."""

    def __init__(self, vocab_size: int, d: int, h: int, n_layers: int, T: int, **kwargs):
        super().__init__(vocab_size, d, h, n_layers, T, causal=True, **kwargs)


class TinyBERT(TinyTransformerLM):
    """`TinyTransformerLM` without a mask: an encoder-only model, logits[:, t] predict the token at t."""

    def __init__(self, vocab_size: int, d: int, h: int, n_layers: int, T: int, **kwargs):
        super().__init__(vocab_size, d, h, n_layers, T, causal=False, **kwargs)


def train_mlm(
    model: TinyTransformerLM,
    ids,
    steps: int,
    *,
    mask_id: int,
    n_special: int = 0,
    rate: float = 0.15,
    seq_len: int | None = None,
    batch_size: int = 32,
    lr: float = 3e-3,
    clip_grad_norm: float | None = 1.0,
    rng=None,
    progress: bool = True,
) -> np.ndarray:
    """The masked-token objective by `training.train_steps`: `steps` Adam updates, each on `batch_size` random
    windows of `ids` (seq_len tokens, default the model's T) corrupted by `mask_tokens`; the loss is the mean
    cross-entropy ``-mean log p(x_t | corrupted window)`` over the selected positions t, the gradient norm
    clipped to `clip_grad_norm` (None: not clipped). Returns the training loss of every step, in nats; the
    model is left in the mode it came in."""
    ids = check_labels(ids, "ids", n_classes=model.vocab_size)
    steps, batch_size = check_int(steps, "steps", 1), check_int(batch_size, "batch_size", 1)
    seq_len = check_int(model.T if seq_len is None else seq_len, "seq_len", 1, model.T)
    lr, rng = check_positive(lr, "lr"), check_rng(rng)
    if len(ids) < seq_len:
        raise ValueError(f"ids must hold at least seq_len = {seq_len} tokens, got {len(ids)}")

    def corrupted_windows():  # (inputs, targets), each (batch_size, seq_len), per step
        while True:
            starts = rng.integers(0, len(ids) - seq_len + 1, batch_size)
            window = ids[starts[:, None] + np.arange(seq_len)]
            corrupted = mask_tokens(
                window, mask_id, model.vocab_size, rate=rate, n_special=n_special, rng=rng
            )
            yield torch.as_tensor(corrupted.inputs), torch.as_tensor(corrupted.targets)

    def loss(model, batch):
        inputs, targets = batch
        selected = targets >= 0
        # the output layer only at the selected positions: the others carry no loss
        return F.cross_entropy(model.head(model.encode(inputs)[selected]), targets[selected])

    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    return train_steps(
        model,
        loss,
        optimizer,
        corrupted_windows(),
        steps,
        clip_grad_norm=clip_grad_norm,
        progress=progress,
        desc="training",
    )


class MLMScore(NamedTuple):
    predicted: np.ndarray  # the model's most probable token at every position, (n_windows, T)
    corrupted: MaskedTokens  # the corruption of the windows that was scored


def mlm_predict(
    model: TinyTransformerLM,
    ids,
    *,
    mask_id: int,
    n_special: int = 0,
    rate: float = 0.15,
    repeats: int = 1,
    rng=None,
) -> MLMScore:
    """Cut `ids` into non-overlapping windows of the model's length T, repeat them `repeats` times, corrupt
    every copy independently with `mask_tokens`, and return the model's argmax prediction at every position
    (n_windows * repeats, T) with the corruption (to score the positions replaced by [MASK] separately from the
    random and unchanged ones)."""
    ids = check_labels(ids, "ids", n_classes=model.vocab_size)
    repeats = check_int(repeats, "repeats", 1)
    T = model.T
    if len(ids) < T:
        raise ValueError(f"ids must hold at least T = {T} tokens, got {len(ids)}")
    windows = np.tile(ids[: len(ids) // T * T].reshape(-1, T), (repeats, 1))
    corrupted = mask_tokens(windows, mask_id, model.vocab_size, rate=rate, n_special=n_special, rng=rng)
    dev = model_device(model)
    with torch.no_grad():
        logits = model(torch.as_tensor(corrupted.inputs, device=dev)).logits
    return MLMScore(to_numpy(logits.argmax(dim=-1)), corrupted)


def windowed_cross_entropy(model: nn.Module, ids, T: int) -> float:
    """Teacher-forced cross-entropy in nats per token of a language model on `ids`, cut into non-overlapping
    windows of T + 1 tokens: the first T are the inputs, the last T the targets (each window starts without
    context, the same for every model). The model maps ids (B, T) to logits (B, T, vocab) (or an object with
    ``.logits``)."""
    vocab_size = check_int(getattr(model, "vocab_size", None), "model.vocab_size", 2)
    ids = check_labels(ids, "ids", n_classes=vocab_size)
    T = check_int(T, "T", 1)
    if len(ids) < T + 1:
        raise ValueError(f"ids must hold at least T + 1 = {T + 1} tokens, got {len(ids)}")
    windows = torch.as_tensor(ids[: len(ids) // (T + 1) * (T + 1)].reshape(-1, T + 1))
    dev = model_device(model)
    total = 0.0
    with torch.no_grad():
        for chunk in windows.to(dev).split(256):
            out = model(chunk[:, :-1])
            logits = getattr(out, "logits", out)
            total += F.cross_entropy(
                logits.reshape(-1, vocab_size).double(), chunk[:, 1:].reshape(-1), reduction="sum"
            ).item()
    return total / (len(windows) * T)


class NgramBaselines(NamedTuple):
    unigram: float  # held-out cross-entropy of the add-alpha unigram model, nats per token
    bigram: float  # held-out cross-entropy of the interpolated bigram model, nats per token


def ngram_baselines(train_ids, test_ids, vocab_size: int, *, lam: float = 0.95, alpha: float = 0.5):
    """Two count models fitted on `train_ids`, scored on the tokens ``test_ids[1:]``:
    unigram ``p(y) = (n_y + alpha) / (N + alpha K)``; interpolated bigram
    ``p(y | c) = lam n_{cy} / n_c + (1 - lam) p(y)`` (just p(y) where n_c = 0). Returns nats per token."""
    K = check_int(vocab_size, "vocab_size", 2)
    train_ids = check_labels(train_ids, "train_ids", n_classes=K)
    test_ids = check_labels(test_ids, "test_ids", n_classes=K)
    if len(test_ids) < 2:
        raise ValueError(f"test_ids must hold at least 2 tokens, got {len(test_ids)}")
    lam, alpha = check_number(lam, "lam", 0, 1), check_positive(alpha, "alpha")
    p_uni = (np.bincount(train_ids, minlength=K) + alpha) / (len(train_ids) + alpha * K)
    pairs = np.zeros((K, K))
    np.add.at(pairs, (train_ids[:-1], train_ids[1:]), 1)
    n_c = pairs.sum(axis=1, keepdims=True)
    p_bi = np.where(n_c > 0, lam * pairs / np.maximum(n_c, 1) + (1 - lam) * p_uni, p_uni)
    c, y = test_ids[:-1], test_ids[1:]
    return NgramBaselines(float(-np.log(p_uni[y]).mean()), float(-np.log(p_bi[c, y]).mean()))


def warmup_cosine(optimizer: torch.optim.Optimizer, steps: int, warmup: int, floor: float = 0.1):
    """A learning-rate schedule (call ``step()`` after every update): the rate rises linearly from lr/warmup to
    the optimizer's lr over the first `warmup` steps, then falls along a half cosine to ``floor * lr`` at step
    `steps`. warmup=0: no warm-up, the cosine from the first step."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch optimizer, got {type(optimizer).__name__}")
    steps = check_int(steps, "steps", 1)
    warmup = check_int(warmup, "warmup", 0, steps)
    floor = check_number(floor, "floor", 0, 1)

    def factor(step: int) -> float:  # step = number of updates done so far
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(steps - warmup, 1)
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def train_lm(
    model: nn.Module,
    ids,
    steps: int,
    *,
    seq_len: int = 64,
    batch_size: int = 32,
    lr: float = 3e-3,
    warmup: int = 0,
    clip_grad_norm: float | None = 1.0,
    rng=None,
    progress: bool = True,
) -> np.ndarray:
    """Next-token training by `training.train_steps` for any language model that maps ids (B, T) to an `LMOutput`
    (the GPT and chapter 5's LSTM alike): `steps` AdamW updates (no weight decay) on `batch_size` random windows
    of ``seq_len + 1`` tokens of `ids`, inputs y_0..y_{T-1} and targets y_1..y_T, loss
    ``-mean_t log p(y_t | y_<t)``, the learning rate by `warmup_cosine` (peak `lr`, `warmup` steps of warm-up),
    the gradient norm clipped to `clip_grad_norm`. Returns the training loss of every step in bits per token; the
    model is left in the mode it came in."""
    vocab_size = check_int(getattr(model, "vocab_size", None), "model.vocab_size", 2)
    ids = check_labels(ids, "ids", n_classes=vocab_size)
    steps, lr = check_int(steps, "steps", 1), check_positive(lr, "lr")
    windows = random_windows(torch.as_tensor(ids, device=model_device(model)), seq_len, batch_size, rng)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    nats = train_steps(
        model,
        next_token_loss,
        optimizer,
        windows,
        steps,
        scheduler=warmup_cosine(optimizer, steps, warmup),
        clip_grad_norm=clip_grad_norm,
        progress=progress,
        desc="training",
    )
    return nats / np.log(2)


def top_k_filter(logits, k: int) -> np.ndarray:
    """Keep the k largest logits of the last axis and set the others to -inf (ties at the k-th value are kept),
    so that softmax samples only among the k most probable tokens."""
    logits = check_array(logits, "logits")
    if logits.ndim < 1:
        raise ValueError(f"logits must have at least one axis, got shape {logits.shape}")
    k = check_int(k, "k", 1, logits.shape[-1])
    kth = np.sort(logits, axis=-1)[..., -k, None]
    return np.where(logits >= kth, logits, -np.inf)


def top_p_filter(logits, p: float) -> np.ndarray:
    """Nucleus (top-p) filtering of the last axis: keep the most probable tokens, in order, until their total
    probability reaches p (always at least one), and set the other logits to -inf."""
    logits = check_array(logits, "logits")
    if logits.ndim < 1:
        raise ValueError(f"logits must have at least one axis, got shape {logits.shape}")
    p = check_number(p, "p", 0, 1, low_open=True)
    order = np.argsort(-logits, axis=-1)
    probs = np.take_along_axis(softmax(logits, axis=-1), order, axis=-1)
    keep_sorted = np.cumsum(probs, axis=-1) - probs < p  # the mass before a token is still below p
    keep = np.empty_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
    return np.where(keep, logits, -np.inf)


def generate_text(
    model: TinyTransformerLM,
    prompt,
    n: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    cache: bool = False,
    rng=None,
) -> np.ndarray:
    """Sample n tokens after the ids `prompt` (P,) from a causal model, feeding each back:
    ``y ~ softmax(filter(logits / temperature))`` with `top_k_filter` and/or `top_p_filter` (None: not applied;
    temperature 0: the most probable token, greedy). cache=False: the model rereads the last T tokens for every
    new one; cache=True: a KV cache (`new_cache`), so each step feeds only the new token (P + n <= T). Returns
    the n new ids."""
    if not isinstance(model, TinyTransformerLM) or not model.causal:
        raise TypeError(f"model must be a causal TinyTransformerLM (a TinyGPT), got {type(model).__name__}")
    prompt = check_labels(prompt, "prompt", n_classes=model.vocab_size)
    n, rng = check_int(n, "n", 1), check_rng(rng)
    temperature = check_number(temperature, "temperature", 0)
    top_k = None if top_k is None else check_int(top_k, "top_k", 1, model.vocab_size)
    top_p = None if top_p is None else check_number(top_p, "top_p", 0, 1, low_open=True)
    if cache and len(prompt) + n > model.T:
        raise ValueError(f"with cache=True the prompt and n may hold at most T = {model.T} tokens together")
    ids, kv = list(prompt), model.new_cache() if cache else None
    dev = model_device(model)
    with torch.no_grad():
        for k in range(n):
            context = ids[-model.T :] if kv is None else (ids if k == 0 else ids[-1:])
            z = to_numpy(model(torch.as_tensor(context, device=dev)[None], kv).logits[0, -1]).astype(
                np.float64
            )
            if temperature == 0:
                ids.append(int(np.argmax(z)))
                continue
            z = z / temperature
            z = z if top_k is None else top_k_filter(z, top_k)
            z = z if top_p is None else top_p_filter(z, top_p)
            ids.append(int(rng.choice(len(z), p=softmax(z))))
    return np.array(ids[len(prompt) :], dtype=np.int64)


# ----------------------------------------------------------------------------- 6.4 vision transformer


def patchify(img, p: int):
    """Cut an image into non-overlapping p x p patches and flatten each: (c, H, W) -> (T, c p^2), T = (H/p)(W/p).

    A patch is flattened in (channel, row, column) order, ``vec(patch)[k p^2 + r p + s] = img[k, i p + r, j p + s]``
    (the order of ``nn.Conv2d``'s weight (n, c, p, p)), and the tokens are the patches in row-major order
    (patch (i, j) is token ``i W/p + j``), the order of the conv's output positions. The patch embedding is then
    ``X = patchify(img, p) @ E.T`` with ``E (n, c p^2)``, the same as ``nn.Conv2d(c, n, p, stride=p, bias=False)``
    with weight ``E.reshape(n, c, p, p)``. A 2-D image (H, W) counts as one channel. A torch tensor (B, c, H, W)
    gives (B, T, c p^2) (the batched form the `ViT` uses)."""
    p = check_int(p, "p", 1)
    if isinstance(img, torch.Tensor):
        if img.ndim != 4:
            raise ValueError(f"img must be a tensor (B, c, H, W), got shape {tuple(img.shape)}")
        B, c, H, W = img.shape
        if H % p or W % p:
            raise ValueError(f"p must divide the image size {H} x {W}, got p = {p}")
        x = img.reshape(B, c, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5)  # (B, i, j, k, r, s)
        return x.reshape(B, (H // p) * (W // p), c * p * p)
    img = check_array(img, "img")
    if img.ndim not in (2, 3):
        raise ValueError(f"img must have shape (c, H, W) or (H, W), got shape {img.shape}")
    if img.ndim == 2:
        img = img[None]
    c, H, W = img.shape
    if H % p or W % p:
        raise ValueError(f"p must divide the image size {H} x {W}, got p = {p}")
    x = img.reshape(c, H // p, p, W // p, p).transpose(1, 3, 0, 2, 4)  # (i, j, k, r, s)
    return x.reshape((H // p) * (W // p), c * p * p)


class ViT(nn.Module):
    """A vision transformer for small images (B, c, H, W) (or flat rows (B, c H W)):

    tokens ``x_t = E vec(patch_t) + b`` (`patchify`, E (d, c p^2)), a learned [CLS] token prepended, learned
    positional embeddings (T + 1, d) added, `n_layers` pre-LN `TransformerBlock`, a final LayerNorm, and a
    linear head on the [CLS] token's output giving the logits of `n_classes` classes."""

    def __init__(
        self,
        image_size: int = 8,
        p: int = 2,
        c: int = 1,
        d: int = 64,
        h: int = 4,
        d_ff: int = 128,
        n_layers: int = 2,
        n_classes: int = 10,
    ):
        super().__init__()
        self.image_size, self.p = check_int(image_size, "image_size", 1), check_int(p, "p", 1)
        self.c, d = check_int(c, "c", 1), check_int(d, "d", 1)
        h, d_ff = check_int(h, "h", 1), check_int(d_ff, "d_ff", 1)
        n_layers, n_classes = check_int(n_layers, "n_layers", 1), check_int(n_classes, "n_classes", 2)
        if image_size % p:
            raise ValueError(f"p must divide image_size = {image_size}, got p = {p}")
        self.T = (image_size // p) ** 2
        self.embed = nn.Linear(c * p * p, d)  # its weight is E (d, c p^2)
        self.cls = nn.Parameter(0.02 * torch.randn(1, 1, d))
        self.pos = nn.Parameter(0.02 * torch.randn(1, self.T + 1, d))
        self.blocks = nn.ModuleList(TransformerBlock(d, h, d_ff) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, n_classes)

    def _tokens(self, x: torch.Tensor) -> torch.Tensor:
        """Patch embeddings + [CLS] + positions, (B, T + 1, d)."""
        s, c = self.image_size, self.c
        if not isinstance(x, torch.Tensor) or not (x.shape[1:] == (c, s, s) or x.shape[1:] == (c * s * s,)):
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be a tensor (B, {c}, {s}, {s}) or (B, {c * s * s}), got {shape}")
        tokens = self.embed(patchify(x.reshape(len(x), c, s, s), self.p))
        return torch.cat([self.cls.expand(len(x), -1, -1), tokens], dim=1) + self.pos

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The class logits (B, n_classes), read off the [CLS] token."""
        z = self._tokens(x)
        for block in self.blocks:
            z = block(z)
        return self.head(self.norm(z)[:, 0])

    @torch.no_grad()
    def cls_attention(self, x: torch.Tensor) -> torch.Tensor:
        """The attention weights of the [CLS] token on the T patch tokens in the last block, averaged over the
        heads, (B, T) (the weight on [CLS] itself is left out)."""
        z = self._tokens(x)
        for block in self.blocks[:-1]:
            z = block(z)
        last = self.blocks[-1]
        weights = last.attn(last.norm1(z))[1]  # (B, h, T + 1, T + 1)
        return weights[:, :, 0, 1:].mean(dim=1)
