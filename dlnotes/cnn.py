"""Chapter 04 — convolutional networks: convolution four ways, layer arithmetic, receptive fields, pooling,
classic image kernels and torch modules (locally connected, causal, LeNet). The word embeddings of section 4.8
are shared with later chapters: ``dlnotes.text`` and ``dlnotes.embeddings``.

Conventions: a true convolution flips the kernel, ``(f * h)[u] = sum_t f[t] h[u - t]``; what deep-learning
libraries call convolution is cross-correlation, ``(h ⋆ f)[u] = sum_t h[t] f[u + t]``. Images are
``x`` (C_in, H, W), kernels ``w`` (C_out, C_in, k_h, k_w), as in ``torch.nn.functional.conv2d``.
"""

from __future__ import annotations

import copy
import itertools

import numpy as np
import scipy.fft
import torch
import torch.nn.functional as F
from torch import nn

from .training import to_numpy
from .validation import check_array, check_choice, check_int, check_rng, check_vector

# ----------------------------------------------------------------------------- validation


def _image_and_kernel(x, w) -> tuple[np.ndarray, np.ndarray]:
    x = check_array(x, "x", ndim=3)
    return x, check_array(w, "w", (None, x.shape[0], None, None))


def _add_bias(y: np.ndarray, b) -> np.ndarray:
    return y if b is None else y + check_vector(b, "b", len(y))[:, None, None]


def _mode(mode: str) -> str:
    return check_choice(mode, "mode", ("full", "valid"))


# ----------------------------------------------------------------------------- 1-D


def conv1d_direct(f, h, mode: str = "full") -> np.ndarray:
    """True convolution ``(f * h)[u] = sum_t f[t] h[u - t]`` by a double loop; 'full' has n + m - 1 outputs,
    'valid' the n - m + 1 positions where h lies inside f."""
    f, h, mode = check_vector(f, "f"), check_vector(h, "h"), _mode(mode)
    n, m = len(f), len(h)
    full = np.zeros(n + m - 1)
    for u in range(n + m - 1):
        for t in range(max(0, u - m + 1), min(n, u + 1)):
            full[u] += f[t] * h[u - t]
    return full if mode == "full" else full[m - 1 : n]


def xcorr1d(f, h, mode: str = "valid") -> np.ndarray:
    """Cross-correlation ``(h ⋆ f)[u] = sum_t h[t] f[u + t]`` = convolution with the flipped kernel."""
    return conv1d_direct(f, check_vector(h, "h")[::-1], mode)


def conv_fft(f, h) -> np.ndarray:
    """Full convolution through the convolution theorem: zero-pad to at least n + m - 1 (to the next length
    with small prime factors, where FFTs are fast), multiply the FFTs, invert, keep the first n + m - 1."""
    f, h = check_vector(f, "f"), check_vector(h, "h")
    size = len(f) + len(h) - 1
    length = scipy.fft.next_fast_len(size, real=True)
    return np.fft.irfft(np.fft.rfft(f, length) * np.fft.rfft(h, length), length)[:size]


def toeplitz_conv_matrix(h, n: int, mode: str = "full") -> np.ndarray:
    """The banded matrix H with ``H f = f * h`` for signals f of length n: ``H[i, j] = h[i - j]``
    ('full', (n + m - 1) x n) or its rows m-1..n-1 ('valid', (n - m + 1) x n)."""
    h, mode, n = check_vector(h, "h"), _mode(mode), check_int(n, "n", 1)
    m = len(h)
    H = np.zeros((n + m - 1, n))
    for j in range(n):
        H[j : j + m, j] = h
    return H if mode == "full" else H[m - 1 : n]


# ----------------------------------------------------------------------------- 2-D layers


def conv_output_size(n: int, k: int, p: int = 0, s: int = 1, d: int = 1) -> int:
    """Output length ``floor((n + 2p - d (k - 1) - 1) / s) + 1`` of a convolution layer."""
    n, k, p, s, d = (
        check_int(v, name, low)
        for v, name, low in ((n, "n", 1), (k, "k", 1), (p, "p", 0), (s, "s", 1), (d, "d", 1))
    )
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
    return _add_bias(y, b)


def conv2d_im2col(x, w, b=None, stride: int = 1, padding: int = 0, dilation: int = 1) -> np.ndarray:
    """The same layer as one matrix product: windows unrolled into columns (im2col) times the kernels as rows."""
    x, w = _image_and_kernel(x, w)
    C_out, C_in, k_h, k_w = w.shape
    cols = _windows(x, k_h, k_w, stride, padding, dilation)
    H_out, W_out = cols.shape[-2:]
    y = (w.reshape(C_out, -1) @ cols.reshape(C_in * k_h * k_w, -1)).reshape(C_out, H_out, W_out)
    return _add_bias(y, b)


def dilate_kernel(w, dilation: int) -> np.ndarray:
    """Insert ``dilation - 1`` zeros between the taps of the last two axes: a dilated kernel as a plain one."""
    w = check_array(w, "w")
    if w.ndim < 2:
        raise ValueError(f"w must have at least two axes (..., k_h, k_w), got shape {w.shape}")
    dilation = check_int(dilation, "dilation", 1)
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
    return _add_bias(y, b)


def conv2d_matrix(w, input_shape, stride: int = 1, padding: int = 0, dilation: int = 1) -> np.ndarray:
    """The (doubly block-Toeplitz) matrix M with ``M vec(x) = vec(conv2d(x, w))`` for images of `input_shape`
    (C_in, H, W): the layer as a fully connected layer with tied, sparse weights.

    Built from the index formula: output pixel (a, b) reads input pixel (a s + i d - p, b s + j d - p) with
    weight w[:, :, i, j]; taps that land in the zero padding have no column.
    """
    C_in, H, W = (check_int(n, "input_shape entries", 1) for n in input_shape)
    w = check_array(w, "w", (None, C_in, None, None))
    C_out, _, k_h, k_w = w.shape
    stride, padding = check_int(stride, "stride", 1), check_int(padding, "padding", 0)
    dilation = check_int(dilation, "dilation", 1)
    H_out = conv_output_size(H, k_h, padding, stride, dilation)
    W_out = conv_output_size(W, k_w, padding, stride, dilation)
    M = np.zeros((C_out, H_out, W_out, C_in, H, W))
    for a, b, i, j in itertools.product(range(H_out), range(W_out), range(k_h), range(k_w)):
        row, col = a * stride + i * dilation - padding, b * stride + j * dilation - padding
        if 0 <= row < H and 0 <= col < W:
            M[:, a, b, :, row, col] = w[:, :, i, j]
    return M.reshape(C_out * H_out * W_out, C_in * H * W)


def conv2d_backward(x, w, grad_y) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of a stride-1, unpadded cross-correlation layer ``y = w ⋆ x`` given ``grad_y = dR/dy``:
    ``dR/dw = grad_y ⋆ x`` (a cross-correlation of the input with the error) and ``dR/dx = grad_y * w``
    (a full convolution of the error with the kernel)."""
    x, w = _image_and_kernel(x, w)
    C_out, _, k_h, k_w = w.shape
    grad_y = check_array(grad_y, "grad_y", (C_out, x.shape[1] - k_h + 1, x.shape[2] - k_w + 1))
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
        k, s, d = check_int(k, "k", 1), check_int(s, "s", 1), check_int(d, "d", 1)
        r += d * (k - 1) * jump
        jump *= s
    return r


def _layer_sizes(m: int, n: int, c: int, k_h: int, k_w: int, K: int) -> tuple[int, ...]:
    sizes = tuple(
        check_int(v, name, 1)
        for v, name in ((m, "m"), (n, "n"), (c, "c"), (k_h, "k_h"), (k_w, "k_w"), (K, "K"))
    )
    if k_h > m or k_w > n:
        raise ValueError(f"the kernel k_h x k_w = {k_h} x {k_w} must fit in the image m x n = {m} x {n}")
    return sizes


def param_count_conv(m: int, n: int, c: int, k_h: int, k_w: int, K: int) -> int:
    """K kernels k_h x k_w over c channels of an m x n image: ``K (k_h k_w c + 1)`` (independent of the image size)."""
    m, n, c, k_h, k_w, K = _layer_sizes(m, n, c, k_h, k_w, K)
    return K * (k_h * k_w * c + 1)


def param_count_fc(m: int, n: int, c: int, k_h: int, k_w: int, K: int) -> int:
    """A fully connected layer with the conv layer's outputs: ``(m n c + 1)(m - k_h + 1)(n - k_w + 1) K``."""
    m, n, c, k_h, k_w, K = _layer_sizes(m, n, c, k_h, k_w, K)
    return (m * n * c + 1) * (m - k_h + 1) * (n - k_w + 1) * K


def param_count_lc(m: int, n: int, c: int, k_h: int, k_w: int, K: int) -> int:
    """Locally connected (the conv wiring without weight sharing): ``(k_h k_w c + 1)(m - k_h + 1)(n - k_w + 1) K``."""
    m, n, c, k_h, k_w, K = _layer_sizes(m, n, c, k_h, k_w, K)
    return (k_h * k_w * c + 1) * (m - k_h + 1) * (n - k_w + 1) * K


def maxpool2d(x, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Max pooling of x (C, H, W) over r x r windows with stride r; returns the pooled map and a 0/1 mask of
    the argmax positions (the gradient of the pooled sum with respect to x)."""
    x = check_array(x, "x", ndim=3)
    r = check_int(r, "r", 1)
    if x.shape[1] < r or x.shape[2] < r:
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


def receptive_field_mask(model, input_shape, position=None, n_samples: int = 8, rng=None) -> np.ndarray:
    """Which inputs the outputs at one spatial `position` of `model` depend on: the nonzero pattern of
    ``d sum_r y[r, position] / d x`` (autograd, float64, model in eval mode), united over `n_samples` random inputs
    and the input channels, so that a ReLU switched off for one input cannot hide a pixel. `input_shape` is
    (C, L) or (C, H, W) without the batch axis; `position` defaults to the centre of the output. Returns a bool
    array of shape (L,) or (H, W)."""
    input_shape = tuple(input_shape)
    if len(input_shape) not in (2, 3):
        raise ValueError(f"input_shape must be (C, L) or (C, H, W), got {input_shape}")
    input_shape = tuple(check_int(n, "input_shape entries", 1) for n in input_shape)
    generator = torch.Generator().manual_seed(int(check_rng(rng).integers(2**31)))
    shape = (check_int(n_samples, "n_samples", 1), *input_shape)
    model = copy.deepcopy(model).double().eval().cpu()  # the caller's model keeps its dtype, mode and device
    x = torch.randn(shape, dtype=torch.float64, generator=generator, requires_grad=True)
    y = model(x)  # the caller's model keeps its dtype and mode
    spatial = y.shape[2:]
    position = tuple(n // 2 for n in spatial) if position is None else tuple(np.atleast_1d(position))
    if len(position) != len(spatial) or not all(0 <= i < n for i, n in zip(position, spatial, strict=True)):
        raise ValueError(f"position must index the output's spatial shape {tuple(spatial)}, got {position}")
    (grad,) = torch.autograd.grad(y[(slice(None), slice(None), *position)].sum(), x)
    return to_numpy(grad.abs().sum(dim=(0, 1))) > 0


def mask_extent(mask) -> tuple[int, ...]:
    """Extent (last - first + 1) of the True entries of `mask` along each axis: the size of a receptive field
    including any holes a dilated stack leaves inside it."""
    mask = np.asarray(mask)
    if mask.dtype != bool or not mask.any():
        raise ValueError(f"mask must be a bool array with a True entry, got dtype {mask.dtype}")
    return tuple(
        int(np.ptp(np.flatnonzero(mask.any(axis=tuple(a for a in range(mask.ndim) if a != axis))))) + 1
        for axis in range(mask.ndim)
    )


# ----------------------------------------------------------------------------- classic image kernels

KERNELS = {  # 3 x 3 kernels for cross-correlation (conv2d), as named in image processing
    "identity": np.array([[0, 0, 0], [0, 1, 0], [0, 0, 0]]),
    "box blur": np.full((3, 3), 1 / 9),
    "Gaussian blur": np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]]) / 16,
    "sharpen": np.array([[0, -1, 0], [-1, 5, -1], [0, -1, 0]]),
    "Sobel x (vertical edges)": np.array([[1, 0, -1], [2, 0, -2], [1, 0, -1]]),
    "Sobel y (horizontal edges)": np.array([[1, 2, 1], [0, 0, 0], [-1, -2, -1]]),
    "Laplacian": np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]]),
    "emboss": np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]]),
}


# ----------------------------------------------------------------------------- torch modules


class LocallyConnected2d(nn.Module):
    """The wiring of a valid, stride-1 convolution without weight sharing: every output position (s, t) has its
    own kernel ``w[s, t]`` (C_out, C_in, k, k) and bias, ``y[r, s, t] = sum_{u,i,j} w[s,t][r,u,i,j] x[u, s+i, t+j]
    + b[r, s, t]``; built on ``F.unfold`` (im2col)."""

    def __init__(self, in_channels: int, out_channels: int, input_size, kernel_size: int):
        super().__init__()
        H, W = (check_int(n, "input_size entries", 1) for n in input_size)
        self.kernel_size = check_int(kernel_size, "kernel_size", 1)
        self.out_size = (conv_output_size(H, kernel_size), conv_output_size(W, kernel_size))
        self.in_channels = check_int(in_channels, "in_channels", 1)
        n_positions, fan_in = self.out_size[0] * self.out_size[1], in_channels * kernel_size**2
        bound = 1 / np.sqrt(fan_in)  # the uniform initialisation of nn.Conv2d
        self.weight = nn.Parameter(
            torch.empty(n_positions, check_int(out_channels, "out_channels", 1), fan_in).uniform_(
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
        left = check_int(dilation, "dilation", 1) * (check_int(kernel_size, "kernel_size", 1) - 1)
        super().__init__(in_channels, out_channels, kernel_size, dilation=dilation)
        self.left = left

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
