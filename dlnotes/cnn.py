"""Chapter 04 — convolutional networks: convolution four ways, layer arithmetic, receptive fields, pooling,
torch modules (locally connected, causal, LeNet) and word embeddings (skip-gram with negative sampling).

Conventions: a true convolution flips the kernel, ``(f * h)[u] = sum_t f[t] h[u - t]``; what deep-learning
libraries call convolution is cross-correlation, ``(h ⋆ f)[u] = sum_t h[t] f[u + t]``. Images are
``x`` (C_in, H, W), kernels ``w`` (C_out, C_in, k_h, k_w), as in ``torch.nn.functional.conv2d``.
"""

from __future__ import annotations

import copy
import re
from collections import Counter

import numpy as np
import scipy.fft
import torch
import torch.nn.functional as F
from torch import nn

from .validation import positive_int

# ----------------------------------------------------------------------------- validation


def _signal(f, name: str) -> np.ndarray:
    f = np.asarray(f, dtype=np.float64)
    if f.ndim != 1 or f.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {f.shape}")
    return f


def _image_and_kernel(x, w) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.asarray(x, dtype=np.float64), np.asarray(w, dtype=np.float64)
    if x.ndim != 3 or w.ndim != 4 or w.shape[1] != x.shape[0]:
        raise ValueError(
            f"x must be (C_in, H, W) and w (C_out, C_in, k_h, k_w) with matching C_in, got {x.shape} and {w.shape}"
        )
    return x, w


def _mode(mode: str) -> str:
    if mode not in ("full", "valid"):
        raise ValueError(f"mode must be 'full' or 'valid', got {mode!r}")
    return mode


# ----------------------------------------------------------------------------- 1-D


def conv1d_direct(f, h, mode: str = "full") -> np.ndarray:
    """True convolution ``(f * h)[u] = sum_t f[t] h[u - t]`` by a double loop; 'full' has n + m - 1 outputs,
    'valid' the n - m + 1 positions where h lies inside f."""
    f, h, mode = _signal(f, "f"), _signal(h, "h"), _mode(mode)
    n, m = len(f), len(h)
    full = np.zeros(n + m - 1)
    for u in range(n + m - 1):
        for t in range(max(0, u - m + 1), min(n, u + 1)):
            full[u] += f[t] * h[u - t]
    return full if mode == "full" else full[m - 1 : n]


def xcorr1d(f, h, mode: str = "valid") -> np.ndarray:
    """Cross-correlation ``(h ⋆ f)[u] = sum_t h[t] f[u + t]`` = convolution with the flipped kernel."""
    return conv1d_direct(f, _signal(h, "h")[::-1], mode)


def conv_fft(f, h) -> np.ndarray:
    """Full convolution through the convolution theorem: zero-pad to at least n + m - 1 (to the next length
    with small prime factors, where FFTs are fast), multiply the FFTs, invert, keep the first n + m - 1."""
    f, h = _signal(f, "f"), _signal(h, "h")
    size = len(f) + len(h) - 1
    length = scipy.fft.next_fast_len(size, real=True)
    return np.fft.irfft(np.fft.rfft(f, length) * np.fft.rfft(h, length), length)[:size]


def toeplitz_conv_matrix(h, n: int, mode: str = "full") -> np.ndarray:
    """The banded matrix H with ``H f = f * h`` for signals f of length n: ``H[i, j] = h[i - j]``
    ('full', (n + m - 1) x n) or its rows m-1..n-1 ('valid', (n - m + 1) x n)."""
    h, mode, n = _signal(h, "h"), _mode(mode), positive_int(n, "n")
    m = len(h)
    H = np.zeros((n + m - 1, n))
    for j in range(n):
        H[j : j + m, j] = h
    return H if mode == "full" else H[m - 1 : n]


# ----------------------------------------------------------------------------- 2-D layers


def conv_output_size(n: int, k: int, p: int = 0, s: int = 1, d: int = 1) -> int:
    """Output length ``floor((n + 2p - d (k - 1) - 1) / s) + 1`` of a convolution layer."""
    for name, v, low in (("n", n, 1), ("k", k, 1), ("p", p, 0), ("s", s, 1), ("d", d, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
            raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
    size = (n + 2 * p - d * (k - 1) - 1) // s + 1
    if size < 1:
        raise ValueError(
            f"the dilated kernel ({d * (k - 1) + 1}) is larger than the padded input ({n + 2 * p})"
        )
    return size


def _windows(x, k_h: int, k_w: int, stride: int, padding: int, dilation: int) -> np.ndarray:
    """All input windows, (C_in, k_h, k_w, H_out, W_out): the im2col view of a zero-padded image."""
    x = np.pad(x, ((0, 0), (padding, padding), (padding, padding)))
    H_out = conv_output_size(x.shape[1], k_h, 0, stride, dilation)
    W_out = conv_output_size(x.shape[2], k_w, 0, stride, dilation)
    i = (np.arange(k_h) * dilation)[:, None, None, None] + (np.arange(H_out) * stride)[None, None, :, None]
    j = (np.arange(k_w) * dilation)[None, :, None, None] + (np.arange(W_out) * stride)[None, None, None, :]
    return x[:, i, j]


def conv2d_direct(x, w, b=None, stride: int = 1, padding: int = 0, dilation: int = 1) -> np.ndarray:
    """Multi-channel cross-correlation ``y[r, s, t] = sum_{u, i, j} w[r, u, i, j] x[u, s*stride + i*dilation, ...]``
    with loops over output positions (the definition, slow)."""
    x, w = _image_and_kernel(x, w)
    C_out, _, k_h, k_w = w.shape
    xp = np.pad(x, ((0, 0), (padding, padding), (padding, padding)))
    H_out = conv_output_size(x.shape[1], k_h, padding, stride, dilation)
    W_out = conv_output_size(x.shape[2], k_w, padding, stride, dilation)
    y = np.zeros((C_out, H_out, W_out))
    for s in range(H_out):
        for t in range(W_out):
            rows = s * stride + dilation * np.arange(k_h)
            cols = t * stride + dilation * np.arange(k_w)
            y[:, s, t] = np.einsum("ruij,uij->r", w, xp[:, rows][:, :, cols])
    return y if b is None else y + np.asarray(b, dtype=np.float64)[:, None, None]


def conv2d_im2col(x, w, b=None, stride: int = 1, padding: int = 0, dilation: int = 1) -> np.ndarray:
    """The same layer as one matrix product: windows unrolled into columns (im2col) times the kernels as rows."""
    x, w = _image_and_kernel(x, w)
    C_out, C_in, k_h, k_w = w.shape
    cols = _windows(x, k_h, k_w, stride, padding, dilation)
    H_out, W_out = cols.shape[-2:]
    y = (w.reshape(C_out, -1) @ cols.reshape(C_in * k_h * k_w, -1)).reshape(C_out, H_out, W_out)
    return y if b is None else y + np.asarray(b, dtype=np.float64)[:, None, None]


def dilate_kernel(w, dilation: int) -> np.ndarray:
    """Insert ``dilation - 1`` zeros between the taps of the last two axes: a dilated kernel as a plain one."""
    w = np.asarray(w, dtype=np.float64)
    dilation = positive_int(dilation, "dilation")
    k_h, k_w = w.shape[-2:]
    out = np.zeros((*w.shape[:-2], dilation * (k_h - 1) + 1, dilation * (k_w - 1) + 1))
    out[..., ::dilation, ::dilation] = w
    return out


def conv2d_fft(x, w, b=None, stride: int = 1, padding: int = 0, dilation: int = 1) -> np.ndarray:
    """The same layer through the convolution theorem: cross-correlation is convolution with the flipped
    kernel, computed with zero-padded 2-D FFTs, then cropped to the valid part and sub-sampled by the stride."""
    x, w = _image_and_kernel(x, w)
    w = dilate_kernel(w, dilation)
    xp = np.pad(x, ((0, 0), (padding, padding), (padding, padding)))
    (H, W), (k_h, k_w) = xp.shape[1:], w.shape[2:]
    shape = (H + k_h - 1, W + k_w - 1)
    spectrum = np.fft.rfft2(xp, shape)[None] * np.fft.rfft2(w[..., ::-1, ::-1], shape)
    full = np.fft.irfft2(spectrum.sum(axis=1), shape)  # sum over input channels
    y = full[:, k_h - 1 : H, k_w - 1 : W][:, ::stride, ::stride]
    return y if b is None else y + np.asarray(b, dtype=np.float64)[:, None, None]


def conv2d_matrix(w, input_shape, stride: int = 1, padding: int = 0, dilation: int = 1) -> np.ndarray:
    """The (doubly block-Toeplitz) matrix M with ``M vec(x) = vec(conv2d(x, w))`` for images of `input_shape`
    (C_in, H, W): the layer as a fully connected layer with tied, sparse weights."""
    C_in, H, W = input_shape
    w = np.asarray(w, dtype=np.float64)
    basis = np.eye(C_in * H * W).reshape(-1, C_in, H, W)
    return np.stack([conv2d_im2col(e, w, None, stride, padding, dilation).ravel() for e in basis], axis=1)


def conv2d_backward(x, w, grad_y) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of a stride-1, unpadded cross-correlation layer ``y = w ⋆ x`` given ``grad_y = dR/dy``:
    ``dR/dw = grad_y ⋆ x`` (a cross-correlation of the input with the error) and ``dR/dx = grad_y * w``
    (a full convolution of the error with the kernel)."""
    x, w = _image_and_kernel(x, w)
    grad_y = np.asarray(grad_y, dtype=np.float64)
    C_out, _, k_h, k_w = w.shape
    expected = (C_out, x.shape[1] - k_h + 1, x.shape[2] - k_w + 1)
    if grad_y.shape != expected:
        raise ValueError(f"grad_y must have the output's shape {expected}, got {grad_y.shape}")
    windows = _windows(x, grad_y.shape[1], grad_y.shape[2], 1, 0, 1)  # (C_in, H_out, W_out, k_h, k_w)
    grad_w = np.einsum("rab,uabij->ruij", grad_y, windows)
    padded = np.pad(grad_y, ((0, 0), (k_h - 1, k_h - 1), (k_w - 1, k_w - 1)))
    grad_x = conv2d_im2col(padded, w[..., ::-1, ::-1].transpose(1, 0, 2, 3))
    return grad_x, grad_w


# ----------------------------------------------------------------------------- arithmetic of layers


def receptive_field(layers) -> int:
    """Receptive field ``r_L = 1 + sum_l d_l (k_l - 1) prod_{j<l} s_j`` of a stack of (k, s, d) layers."""
    r, jump = 1, 1
    for k, s, d in layers:
        for name, v in (("k", k), ("s", s), ("d", d)):
            positive_int(v, name)
        r += d * (k - 1) * jump
        jump *= s
    return r


def param_count_conv(m: int, n: int, c: int, p: int, q: int, K: int) -> int:
    """K kernels p x q over c channels: ``K (p q c + 1)`` (independent of the image size m x n)."""
    return K * (p * q * c + 1)


def param_count_fc(m: int, n: int, c: int, p: int, q: int, K: int) -> int:
    """A fully connected layer with the conv layer's outputs: ``(m n c + 1)(m - p + 1)(n - q + 1) K``."""
    return (m * n * c + 1) * (m - p + 1) * (n - q + 1) * K


def param_count_lc(m: int, n: int, c: int, p: int, q: int, K: int) -> int:
    """Locally connected (the conv wiring without weight sharing): ``(p q c + 1)(m - p + 1)(n - q + 1) K``."""
    return (p * q * c + 1) * (m - p + 1) * (n - q + 1) * K


def maxpool2d(x, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Max pooling of x (C, H, W) over r x r windows with stride r; returns the pooled map and a 0/1 mask of
    the argmax positions (the gradient of the pooled sum with respect to x)."""
    x = np.asarray(x, dtype=np.float64)
    r = positive_int(r, "r")
    if x.ndim != 3 or x.shape[1] < r or x.shape[2] < r:
        raise ValueError(f"x must be (C, H, W) with H, W >= r = {r}, got {x.shape}")
    C, H, W = x.shape
    blocks = x[:, : H // r * r, : W // r * r].reshape(C, H // r, r, W // r, r).transpose(0, 1, 3, 2, 4)
    flat = blocks.reshape(C, H // r, W // r, r * r)
    mask_blocks = np.zeros_like(flat)
    np.put_along_axis(mask_blocks, flat.argmax(axis=-1)[..., None], 1.0, axis=-1)
    mask = np.zeros_like(x)
    mask[:, : H // r * r, : W // r * r] = (
        mask_blocks.reshape(C, H // r, W // r, r, r)
        .transpose(0, 1, 3, 2, 4)
        .reshape(C, H // r * r, W // r * r)
    )
    return flat.max(axis=-1), mask


def receptive_field_mask(model, input_shape, position=None, n_samples: int = 8) -> np.ndarray:
    """Which inputs the outputs at one spatial `position` of `model` depend on: the nonzero pattern of
    ``d sum_r y[r, position] / d x`` (autograd, float64, model in eval mode), united over `n_samples` random inputs
    and the input channels, so that a ReLU switched off for one input cannot hide a pixel. `input_shape` is
    (C, L) or (C, H, W) without the batch axis; `position` defaults to the centre of the output. Returns a bool
    array of shape (L,) or (H, W)."""
    input_shape = tuple(input_shape)
    if len(input_shape) not in (2, 3):
        raise ValueError(f"input_shape must be (C, L) or (C, H, W), got {input_shape}")
    for n in input_shape:
        positive_int(n, "input_shape entries")
    generator = torch.Generator().manual_seed(0)
    shape = (positive_int(n_samples, "n_samples"), *input_shape)
    x = torch.randn(shape, dtype=torch.float64, generator=generator, requires_grad=True)
    y = copy.deepcopy(model).double().eval()(x)  # the caller's model keeps its dtype and mode
    spatial = y.shape[2:]
    position = tuple(n // 2 for n in spatial) if position is None else tuple(np.atleast_1d(position))
    if len(position) != len(spatial) or not all(0 <= i < n for i, n in zip(position, spatial, strict=True)):
        raise ValueError(f"position must index the output's spatial shape {tuple(spatial)}, got {position}")
    (grad,) = torch.autograd.grad(y[(slice(None), slice(None), *position)].sum(), x)
    return grad.abs().sum(dim=(0, 1)).numpy() > 0


def mask_extent(mask) -> tuple[int, ...]:
    """Extent (last - first + 1) of the True entries of `mask` along each axis: the size of a receptive field
    including any holes a dilated stack leaves inside it."""
    mask = np.asarray(mask, dtype=bool)
    if not mask.any():
        raise ValueError("mask has no True entry")
    return tuple(
        int(np.ptp(np.flatnonzero(mask.any(axis=tuple(a for a in range(mask.ndim) if a != axis))))) + 1
        for axis in range(mask.ndim)
    )


# ----------------------------------------------------------------------------- torch modules


class LocallyConnected2d(nn.Module):
    """The wiring of a valid, stride-1 convolution without weight sharing: every output position (s, t) has its
    own kernel ``w[s, t]`` (C_out, C_in, k, k) and bias, ``y[r, s, t] = sum_{u,i,j} w[s,t][r,u,i,j] x[u, s+i, t+j]
    + b[r, s, t]``; built on ``F.unfold`` (im2col)."""

    def __init__(self, in_channels: int, out_channels: int, input_size, kernel_size: int):
        super().__init__()
        H, W = (positive_int(n, "input_size") for n in input_size)
        self.kernel_size = positive_int(kernel_size, "kernel_size")
        self.out_size = (conv_output_size(H, kernel_size), conv_output_size(W, kernel_size))
        self.in_channels = positive_int(in_channels, "in_channels")
        n_positions, fan_in = self.out_size[0] * self.out_size[1], in_channels * kernel_size**2
        bound = 1 / np.sqrt(fan_in)  # the uniform initialisation of nn.Conv2d
        self.weight = nn.Parameter(
            torch.empty(n_positions, positive_int(out_channels, "out_channels"), fan_in).uniform_(
                -bound, bound
            )
        )
        self.bias = nn.Parameter(torch.empty(out_channels, *self.out_size).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"x must be (batch, {self.in_channels}, H, W), got {tuple(x.shape)}")
        columns = F.unfold(x, self.kernel_size)  # (batch, C_in k k, positions)
        y = torch.einsum("pri,bip->brp", self.weight, columns)
        return y.reshape(len(x), -1, *self.out_size) + self.bias


class CausalConv1d(nn.Conv1d):
    """A 1-D convolution whose output y_t depends only on x_{<=t}: left zero padding d (k - 1), no right padding,
    so the output has the input's length."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1):
        super().__init__(in_channels, out_channels, kernel_size, dilation=dilation)
        self.left = positive_int(dilation, "dilation") * (positive_int(kernel_size, "kernel_size") - 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, (self.left, 0)))


class LeNetDigits(nn.Module):
    """A LeNet-style network for the 1 x 8 x 8 digits: two blocks of 3 x 3 convolution (padding 1), tanh and 2 x 2
    average pooling (8x8x1 -> 4x4x6 -> 2x2x16), then three fully connected layers 64 -> 120 -> 84 -> 10."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 3, padding=1),
            nn.Tanh(),
            nn.AvgPool2d(2),
            nn.Conv2d(6, 16, 3, padding=1),
            nn.Tanh(),
            nn.AvgPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64, 120), nn.Tanh(), nn.Linear(120, 84), nn.Tanh(), nn.Linear(84, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim == 3:
            x = x[:, None]  # (batch, 8, 8) -> (batch, 1, 8, 8)
        if x.shape[-3:] != (1, 8, 8):
            raise ValueError(f"x must be (batch, 8, 8) or (batch, 1, 8, 8) digits, got {tuple(x.shape)}")
        return self.classifier(self.features(x))


# ----------------------------------------------------------------------------- 4.8 word embeddings


def tokenize(text: str) -> list[str]:
    """Lower-case words (letters, with inner apostrophes) of a text."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower())


def build_vocab(tokens, min_count: int = 5) -> tuple[list[str], np.ndarray]:
    """Words occurring at least `min_count` times, most frequent first, and their counts."""
    counts = Counter(tokens)
    words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    return words, np.array([counts[w] for w in words])


def skipgram_pairs(ids, window: int) -> np.ndarray:
    """All (centre, context) pairs of a sequence of word ids within `window` positions: (P, 2)."""
    ids = np.asarray(ids)
    window = positive_int(window, "window")
    pairs = [np.stack([ids[:-k], ids[k:]], axis=1) for k in range(1, window + 1) if k < len(ids)]
    pairs = np.concatenate(pairs) if pairs else np.empty((0, 2), dtype=ids.dtype)
    return np.concatenate([pairs, pairs[:, ::-1]])


def skipgram_neg_sampling(
    pairs,
    n_words: int,
    dim: int = 32,
    n_neg: int = 5,
    epochs: int = 5,
    lr: float = 0.01,
    batch: int = 1024,
    counts=None,
    rng=None,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Skip-gram with negative sampling: for each observed (centre w, context v) minimise
    ``-log sigma(x_w^T y_v) - sum_{k=1}^{n_neg} log sigma(-x_w^T y_{mu_k})`` with mu_k drawn from the noise
    distribution ``counts^{3/4}`` (uniform without counts); Adam on mini-batches. Returns the input embeddings
    X (n_words, dim) and the output embeddings Y (with ``epochs=0``: their random initialisation)."""
    from tqdm.auto import tqdm

    pairs = np.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.min() < 0 or pairs.max() >= n_words:
        raise ValueError(f"pairs must be (P, 2) word ids in 0..{n_words - 1}, got shape {pairs.shape}")
    rng = np.random.default_rng(rng)
    generator = torch.Generator().manual_seed(int(rng.integers(2**31)))
    noise = np.ones(n_words) if counts is None else np.asarray(counts, dtype=np.float64) ** 0.75
    noise = torch.tensor(noise / noise.sum())
    X = torch.nn.Parameter((torch.rand(n_words, dim, generator=generator) - 0.5) / dim)
    Y = torch.nn.Parameter(torch.zeros(n_words, dim))
    optimizer = torch.optim.Adam([X, Y], lr=lr)
    pairs_t = torch.tensor(pairs)
    if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 0:
        raise ValueError(f"epochs must be an int >= 0 (0: the initial embeddings), got {epochs!r}")
    for _ in tqdm(range(epochs), desc="epochs", disable=not progress):
        for idx in torch.randperm(len(pairs_t), generator=generator).split(batch):
            centre, context = pairs_t[idx, 0], pairs_t[idx, 1]
            negatives = torch.multinomial(noise, len(idx) * n_neg, replacement=True, generator=generator)
            x = X[centre]
            positive_score = (x * Y[context]).sum(dim=1)
            negative_score = (x[:, None, :] * Y[negatives].view(len(idx), n_neg, dim)).sum(dim=-1)
            loss = -(F.logsigmoid(positive_score).mean() + F.logsigmoid(-negative_score).sum(dim=1).mean())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return X.detach().numpy().astype(np.float64), Y.detach().numpy().astype(np.float64)


def nearest_neighbours(X, index: int, k: int = 5) -> np.ndarray:
    """Indices of the k rows of X with the largest cosine similarity to row `index` (itself excluded)."""
    X = np.asarray(X, dtype=np.float64)
    unit = X / np.linalg.norm(X, axis=1, keepdims=True).clip(1e-12)
    similarity = unit @ unit[index]
    similarity[index] = -np.inf
    return np.argsort(-similarity)[: positive_int(k, "k")]


def within_across_cosine(X, labels) -> tuple[float, float]:
    """Mean cosine similarity of the rows of X over pairs with the same label and over pairs with different
    labels (pairs of distinct rows): a measure of how well embeddings separate groups."""
    X, labels = np.asarray(X, dtype=np.float64), np.asarray(labels)
    if X.ndim != 2 or labels.shape != (len(X),):
        raise ValueError(f"X must be (N, dim) and labels (N,), got {X.shape} and {labels.shape}")
    unit = X / np.linalg.norm(X, axis=1, keepdims=True).clip(1e-12)
    similarity = unit @ unit.T
    same = labels[:, None] == labels[None, :]
    distinct = ~np.eye(len(X), dtype=bool)
    if not (same & distinct).any() or same.all():
        raise ValueError("labels must have at least two groups and a group with two members")
    return float(similarity[same & distinct].mean()), float(similarity[~same].mean())


def principal_components(X, k: int = 2) -> np.ndarray:
    """The rows of X (N, dim), centred, projected on their k leading principal directions: (N, k)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or not 1 <= positive_int(k, "k") <= min(X.shape):
        raise ValueError(f"X must be (N, dim) with k <= min(N, dim), got shape {X.shape} and k = {k}")
    centred = X - X.mean(axis=0)
    return centred @ np.linalg.svd(centred, full_matrices=False)[2][:k].T


def random_walks(G, n_walks: int, length: int, rng=None) -> list[np.ndarray]:
    """DeepWalk's sentences: `n_walks` uniform random walks of `length` nodes from every node of the graph G
    (nodes labelled 0..N-1)."""
    rng = np.random.default_rng(rng)
    neighbours = [np.array(sorted(G.neighbors(v))) for v in range(G.number_of_nodes())]
    walks = []
    for _ in range(positive_int(n_walks, "n_walks")):
        for start in rng.permutation(G.number_of_nodes()):
            walk = [start]
            for _ in range(positive_int(length, "length") - 1):
                walk.append(rng.choice(neighbours[walk[-1]]))
            walks.append(np.array(walk))
    return walks
