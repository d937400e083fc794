import numpy as np
import pytest
import scipy.signal
import torch
import torch.nn.functional as F

from dlnotes import cnn

from conftest import bad_input_test

rng = np.random.default_rng(11)


def test_one_dimensional_convolutions_agree_with_numpy():
    f, h = rng.normal(size=20), rng.normal(size=5)
    for mode in ("full", "valid"):
        assert np.allclose(cnn.conv1d_direct(f, h, mode), np.convolve(f, h, mode))
        assert np.allclose(cnn.toeplitz_conv_matrix(h, 20, mode) @ f, np.convolve(f, h, mode))
    assert np.allclose(cnn.xcorr1d(f, h), np.correlate(f, h, "valid"))
    assert np.allclose(cnn.conv_fft(f, h), np.convolve(f, h))
    torch_xcorr = F.conv1d(torch.tensor(f)[None, None], torch.tensor(h)[None, None]).numpy().ravel()
    assert np.allclose(cnn.xcorr1d(f, h), torch_xcorr)


@pytest.mark.parametrize(("stride", "padding", "dilation"), [(1, 0, 1), (2, 1, 1), (1, 2, 2), (3, 1, 2)])
def test_four_ways_of_convolving_an_image_equal_torch(stride, padding, dilation):
    x, w, b = rng.normal(size=(3, 11, 9)), rng.normal(size=(4, 3, 3, 2)), rng.normal(size=4)
    reference = F.conv2d(torch.tensor(x)[None], torch.tensor(w), torch.tensor(b), stride, padding, dilation)[
        0
    ].numpy()
    for conv in (cnn.conv2d_direct, cnn.conv2d_im2col, cnn.conv2d_fft):
        assert np.allclose(conv(x, w, b, stride, padding, dilation), reference, atol=1e-10), conv.__name__
    M = cnn.conv2d_matrix(w, x.shape, stride, padding, dilation)
    assert np.allclose(M @ x.ravel() + np.repeat(b, reference[0].size), reference.ravel(), atol=1e-10)
    assert reference.shape[1:] == (
        cnn.conv_output_size(11, 3, padding, stride, dilation),
        cnn.conv_output_size(9, 2, padding, stride, dilation),
    )


def test_conv2d_direct_is_scipys_correlation_for_one_channel():
    x, w = rng.normal(size=(1, 8, 8)), rng.normal(size=(1, 1, 3, 3))
    assert np.allclose(cnn.conv2d_direct(x, w)[0], scipy.signal.correlate2d(x[0], w[0, 0], mode="valid"))


def test_translation_equivariance():
    x, w = np.zeros((1, 16, 16)), rng.normal(size=(2, 1, 3, 3))
    x[0, 4:8, 5:9] = rng.normal(size=(4, 4))
    shifted = np.roll(x, (3, 2), axis=(1, 2))
    assert np.allclose(cnn.conv2d_im2col(shifted, w), np.roll(cnn.conv2d_im2col(x, w), (3, 2), axis=(1, 2)))


def test_backward_pass_is_a_pair_of_convolutions():
    x, w, grad_y = rng.normal(size=(2, 7, 6)), rng.normal(size=(3, 2, 3, 2)), rng.normal(size=(3, 5, 5))
    x_t, w_t = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (F.conv2d(x_t[None], w_t)[0] * torch.tensor(grad_y)).sum().backward()
    grad_x, grad_w = cnn.conv2d_backward(x, w, grad_y)
    assert np.allclose(grad_x, x_t.grad.numpy(), atol=1e-12) and np.allclose(
        grad_w, w_t.grad.numpy(), atol=1e-12
    )


def test_output_size_matches_torch_over_a_grid():
    for n, k, p, s, d in [
        (n, k, p, s, d) for n in (5, 8) for k in (1, 3) for p in (0, 1) for s in (1, 2) for d in (1, 2)
    ]:
        layer = torch.nn.Conv1d(1, 1, k, stride=s, padding=p, dilation=d)
        assert layer(torch.zeros(1, 1, n)).shape[-1] == cnn.conv_output_size(n, k, p, s, d)


def test_receptive_field_matches_the_support_of_the_gradient():
    layers = [(3, 1, 1), (3, 2, 1), (2, 1, 2), (3, 1, 1)]
    stack = torch.nn.Sequential(
        *[torch.nn.Conv1d(1, 1, k, stride=s, dilation=d, bias=False) for k, s, d in layers]
    )
    x = torch.randn(1, 1, 101, requires_grad=True)
    y = stack(x)
    y[0, 0, y.shape[-1] // 2].backward()
    support = np.flatnonzero(x.grad.numpy().ravel())
    assert support[-1] - support[0] + 1 == cnn.receptive_field(layers)
    assert cnn.receptive_field([(3, 1, d) for d in (1, 2, 4, 8)]) == 31
    mask = cnn.receptive_field_mask(stack, (1, 101))
    assert np.array_equal(mask, x.grad.numpy().ravel() != 0)
    assert cnn.mask_extent(mask) == (cnn.receptive_field(layers),)
    assert stack[0].weight.dtype == torch.float32  # the caller's model is not converted


def test_receptive_field_mask_in_two_dimensions_and_dilated_holes():
    stack = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, stride=2), torch.nn.Conv2d(3, 1, (3, 5)))
    mask = cnn.receptive_field_mask(stack, (2, 21, 21), position=(0, 0))
    assert mask_box(mask) == ((0, 7), (0, 11))  # top-left output: rows 1 + 2*2, columns 1 + 2 + 4*2
    dilated = torch.nn.Sequential(torch.nn.Conv1d(1, 1, 2, dilation=2), torch.nn.Conv1d(1, 1, 2, dilation=2))
    mask = cnn.receptive_field_mask(dilated, (1, 30))
    assert cnn.mask_extent(mask) == (5,) and mask.sum() == 3  # two k=2, d=2 layers touch 3 of 5 positions


def test_receptive_field_mask_is_not_fooled_by_relus():
    """A ReLU that is off for one random input hides pixels; the union over many inputs finds them all."""
    one_input = []
    for seed in range(3):
        torch.manual_seed(seed)
        linear = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Conv2d(2, 1, 3, dilation=2))
        rectified = torch.nn.Sequential(linear[0], torch.nn.ReLU(), linear[1], torch.nn.ReLU())
        expected = cnn.receptive_field_mask(linear, (1, 15, 15))
        assert cnn.mask_extent(expected) == (7, 7) and expected.sum() == 49
        assert np.array_equal(cnn.receptive_field_mask(rectified, (1, 15, 15), n_samples=64), expected)
        one_input.append(cnn.receptive_field_mask(rectified, (1, 15, 15), n_samples=1).sum())
    assert min(one_input) < 49  # a single input is not enough
    assert rectified.training  # the caller's model keeps its mode


def mask_box(mask):
    rows, cols = np.nonzero(mask)
    return (rows.min(), rows.max() + 1), (cols.min(), cols.max() + 1)


def test_locally_connected_layer_with_tied_weights_is_a_convolution():
    conv = torch.nn.Conv2d(3, 4, 3).double()
    lc = cnn.LocallyConnected2d(3, 4, (7, 6), 3).double()
    n_positions = 5 * 4
    assert lc.weight.shape == (n_positions, 4, 27) and lc.bias.shape == (4, 5, 4)
    with torch.no_grad():
        lc.weight.copy_(conv.weight.reshape(1, 4, 27).expand(n_positions, 4, 27))
        lc.bias.copy_(conv.bias[:, None, None].expand(4, 5, 4))
    x = torch.randn(2, 3, 7, 6, dtype=torch.float64)
    assert torch.allclose(lc(x), conv(x), atol=1e-12)
    # untied: one position's kernel changes only that output position
    with torch.no_grad():
        lc.weight[7] += 1.0
    changed = (lc(x) - conv(x)).abs().sum(dim=(0, 1)) > 1e-9
    assert changed.sum() == 1 and changed.flatten()[7]
    assert sum(t.numel() for t in lc.parameters()) == cnn.param_count_lc(7, 6, 3, 3, 3, 4)


def test_causal_convolution_sees_only_the_past():
    layer = cnn.CausalConv1d(2, 3, kernel_size=3, dilation=2).double()
    x = torch.randn(1, 2, 20, dtype=torch.float64)
    y = layer(x)
    assert y.shape == (1, 3, 20)
    x2 = x.clone()
    x2[..., 12:] += torch.randn(1, 2, 8, dtype=torch.float64)
    assert torch.equal(layer(x2)[..., :12], y[..., :12]) and not torch.allclose(
        layer(x2)[..., 12], y[..., 12]
    )
    reference = F.conv1d(F.pad(x, (4, 0)), layer.weight, layer.bias, dilation=2)
    assert torch.allclose(y, reference)
    wavenet = torch.nn.Sequential(*[cnn.CausalConv1d(1, 1, 2, dilation=2**l) for l in range(5)])
    mask = cnn.receptive_field_mask(wavenet, (1, 64), position=63)
    assert np.array_equal(np.flatnonzero(mask), np.arange(64 - 32, 64))  # 2^5 most recent inputs


def test_lenet_for_digits_shapes():
    net = cnn.LeNetDigits()
    assert net(torch.randn(5, 8, 8)).shape == (5, 10)
    assert net(torch.randn(5, 1, 8, 8)).shape == (5, 10)
    fc = sum(p.numel() for p in net.classifier.parameters())
    conv = sum(p.numel() for p in net.features.parameters())
    assert (conv, fc) == (6 * (9 + 1) + 16 * (54 + 1), 64 * 120 + 120 + 120 * 84 + 84 + 84 * 10 + 10)


def test_parameter_counts_match_torch_modules():
    m, n, c, k_h, k_w, K = 7, 6, 3, 3, 2, 4
    assert sum(t.numel() for t in torch.nn.Conv2d(c, K, (k_h, k_w)).parameters()) == cnn.param_count_conv(
        m, n, c, k_h, k_w, K
    )
    outputs = (m - k_h + 1) * (n - k_w + 1) * K
    assert sum(t.numel() for t in torch.nn.Linear(m * n * c, outputs).parameters()) == cnn.param_count_fc(
        m, n, c, k_h, k_w, K
    )
    assert cnn.param_count_lc(m, n, c, k_h, k_w, K) == (k_h * k_w * c + 1) * outputs


def test_maxpool_matches_torch_and_routes_the_gradient():
    x = rng.normal(size=(2, 6, 7))
    y, mask = cnn.maxpool2d(x, 2)
    x_t = torch.tensor(x, requires_grad=True)
    pooled = F.max_pool2d(x_t[None], 2)[0]
    pooled.sum().backward()
    assert np.allclose(y, pooled.detach().numpy()) and np.array_equal(mask, x_t.grad.numpy())


def test_dilate_kernel_gives_the_dilated_layer():
    x, w = rng.normal(size=(1, 12, 12)), rng.normal(size=(1, 1, 3, 3))
    assert np.allclose(cnn.conv2d_im2col(x, cnn.dilate_kernel(w, 3)), cnn.conv2d_im2col(x, w, dilation=3))


def test_classic_kernels_are_what_their_names_say():
    step = np.tile(np.repeat([0.0, 1.0], 5), (6, 1))[None]  # a vertical edge
    sobel_x = cnn.conv2d_im2col(step, cnn.KERNELS["Sobel x (vertical edges)"][None, None])[0]
    sobel_y = cnn.conv2d_im2col(step, cnn.KERNELS["Sobel y (horizontal edges)"][None, None])[0]
    assert np.abs(sobel_x).max() == 4 and np.abs(sobel_y).max() == 0
    for name in ("box blur", "Gaussian blur", "sharpen", "identity"):
        assert np.isclose(cnn.KERNELS[name].sum(), 1)  # they keep a constant image constant
    assert cnn.KERNELS["Laplacian"].sum() == 0


# ----------------------------------------------------------------------------- bad input

STACK = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, stride=2), torch.nn.Conv2d(3, 1, (3, 5)))
BAD_INPUT = [  # (call, error, message)
    (lambda: cnn.conv1d_direct(np.ones(5), np.ones(2), "same"), ValueError, "mode must be one of"),
    (lambda: cnn.conv1d_direct(np.ones((5, 1)), np.ones(2)), ValueError, r"f must have shape (any,)"),
    (lambda: cnn.toeplitz_conv_matrix(np.ones(2), 0), ValueError, "n must be an int"),
    (
        lambda: cnn.conv2d_direct(np.ones((2, 5, 5)), np.ones((1, 3, 3, 3))),
        ValueError,
        r"w must have shape (any, 2, any, any)",
    ),
    (lambda: cnn.conv2d_im2col(np.ones((5, 5)), np.ones((1, 1, 3, 3))), ValueError, "x must have 3 axes"),
    (
        lambda: cnn.conv2d_fft(np.ones((1, 5, 5)), np.ones((2, 1, 3, 3)), b=np.ones(3)),
        ValueError,
        r"b must have shape (2,)",
    ),
    (
        lambda: cnn.conv2d_backward(np.ones((1, 5, 5)), np.ones((1, 1, 3, 3)), np.ones((1, 2, 3))),
        ValueError,
        r"grad_y must have shape (1, 3, 3)",
    ),
    (lambda: cnn.conv_output_size(3, 3, d=2), ValueError, "larger than the padded input"),
    (lambda: cnn.conv_output_size(3, 0), ValueError, "k must be"),
    (lambda: cnn.conv_output_size(3.0, 3), TypeError, "n must be an int"),
    (lambda: cnn.dilate_kernel(np.ones(3), 2), ValueError, "at least two axes"),
    (lambda: cnn.conv2d_matrix(np.ones((1, 1, 3, 3)), (1, 5, 5), stride=0), ValueError, "stride must be"),
    (lambda: cnn.conv2d_matrix(np.ones((1, 2, 3, 3)), (1, 5, 5)), ValueError, r"w must have shape"),
    (lambda: cnn.receptive_field([(3, 0, 1)]), ValueError, "s must be"),
    (lambda: cnn.param_count_conv(5, 5, 1, 7, 3, 2), ValueError, "must fit in the image"),
    (lambda: cnn.maxpool2d(np.ones((2, 6, 7)), 8), ValueError, "r = 8"),
    (lambda: cnn.receptive_field_mask(STACK, (2, 21, 21), position=(50, 0)), ValueError, "position"),
    (lambda: cnn.receptive_field_mask(STACK, (21, 21, 2, 1)), ValueError, "input_shape"),
    (lambda: cnn.receptive_field_mask(STACK, (2, 21, 21), rng="0"), TypeError, "rng"),
    (lambda: cnn.mask_extent(np.zeros(4, dtype=bool)), ValueError, "a True entry"),
    (lambda: cnn.mask_extent(np.ones(4)), ValueError, "a bool array"),
    (
        lambda: cnn.LocallyConnected2d(3, 4, (7, 6), 3)(torch.randn(2, 2, 7, 6)),
        ValueError,
        r"x must be (batch, 3, H, W)",
    ),
    (lambda: cnn.CausalConv1d(1, 1, 0), ValueError, "kernel_size"),
    (lambda: cnn.LeNetDigits()(torch.randn(5, 28, 28)), ValueError, "digits"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
