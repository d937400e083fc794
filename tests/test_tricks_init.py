"""Section 8.1: initialisation schemes against torch.nn.init (variances, bounds, two-sample tests, orthogonality),
the Haar sign fix, and the forward/backward statistics through depth against torch autograd."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from dlnotes.tricks.init import fixed_init, haar_orthogonal, init_std, init_weights, propagate_stats

from conftest import bad_input_test

N_IN, N_OUT = 2000, 500  # W (m, n) = (500, 2000): 10^6 entries, fan-in != fan-out


def torch_weight(init, **kwargs):
    torch.manual_seed(3)
    w = torch.empty(N_OUT, N_IN, dtype=torch.float64)
    init(w, **kwargs)
    return w.numpy().ravel()


@pytest.mark.parametrize(
    ("scheme", "dist", "init", "kwargs"),
    [
        ("lecun", "normal", torch.nn.init.kaiming_normal_, {"nonlinearity": "linear"}),
        ("he", "normal", torch.nn.init.kaiming_normal_, {"nonlinearity": "relu"}),
        ("he", "uniform", torch.nn.init.kaiming_uniform_, {"nonlinearity": "relu"}),
        ("glorot", "normal", torch.nn.init.xavier_normal_, {}),
        ("glorot", "uniform", torch.nn.init.xavier_uniform_, {}),
    ],
)
def test_schemes_equal_torch_init_in_distribution(scheme, dist, init, kwargs):
    ours = init_weights(N_IN, N_OUT, scheme, dist, rng=0)
    assert ours.shape == (N_OUT, N_IN)
    theirs = torch_weight(init, **kwargs)
    sigma = init_std(N_IN, N_OUT, scheme)
    assert ours.var() == pytest.approx(sigma**2, rel=0.01)
    assert theirs.var() == pytest.approx(sigma**2, rel=0.01)
    assert stats.ks_2samp(ours.ravel(), theirs).pvalue > 1e-4
    if dist == "uniform":
        assert np.abs(ours).max() <= math.sqrt(3) * sigma
        assert np.abs(theirs).max() == pytest.approx(math.sqrt(3) * sigma, rel=1e-3)


def test_a_different_distribution_is_detected():
    """The two-sample test can fail: a normal and a uniform of the same variance differ."""
    ours = init_weights(N_IN, N_OUT, "glorot", "normal", rng=0)
    theirs = torch_weight(torch.nn.init.xavier_uniform_)
    assert stats.ks_2samp(ours.ravel(), theirs).pvalue < 1e-6


def test_glorot_bound_and_torch_default_linear():
    assert init_std(30, 70, "glorot") * math.sqrt(3) == pytest.approx(math.sqrt(6 / 100))
    torch.manual_seed(0)
    layer = torch.nn.Linear(1000, 1000)  # default: U[-1/sqrt(n), 1/sqrt(n)], variance 1/(3n)
    w = layer.weight.detach().numpy().astype(float)
    assert w.var() == pytest.approx(init_std(1000, 1000, "torch_default") ** 2, rel=0.01)
    ours = init_weights(1000, 1000, "torch_default", "uniform", rng=1)
    assert stats.ks_2samp(ours.ravel(), w.ravel()).pvalue > 1e-4


@pytest.mark.parametrize("dist", ["normal", "uniform"])
def test_fixed_init_has_the_variance(dist):
    w = fixed_init((1000, 1000), 0.3, dist, rng=2)
    assert w.var() == pytest.approx(0.09, rel=0.01)
    assert abs(w.mean()) < 4 * 0.3 / 1000


@pytest.mark.parametrize(("n", "m"), [(8, 8), (5, 9), (9, 5)])
def test_orthogonal_like_torch(n, m):
    g = 1.7
    W = init_weights(n, m, "orthogonal", gain=g, rng=4)
    w_torch = torch.empty(m, n, dtype=torch.float64)
    torch.nn.init.orthogonal_(w_torch, gain=g)
    for M in (W, w_torch.numpy()):
        assert M.shape == (m, n)
        small = M.T @ M if m >= n else M @ M.T
        np.testing.assert_allclose(small, g**2 * np.eye(min(n, m)), atol=1e-12)
        np.testing.assert_allclose(np.linalg.svd(M, compute_uv=False), g, atol=1e-12)


def test_haar_sign_fix_removes_the_bias_of_qr():
    """Entries of a Haar orthogonal Q have mean 0; numpy's plain QR makes Q[0, 0] mostly positive or negative."""
    rng = np.random.default_rng(5)
    fixed = np.array([haar_orthogonal(4, rng=rng)[0, 0] for _ in range(4000)])
    plain = np.array([np.linalg.qr(rng.standard_normal((4, 4)))[0][0, 0] for _ in range(4000)])
    se = fixed.std() / math.sqrt(len(fixed))
    assert abs(fixed.mean()) < 4 * se
    assert abs(plain.mean()) > 20 * se
    torch.manual_seed(5)
    theirs = []
    for _ in range(4000):
        w = torch.empty(4, 4, dtype=torch.float64)
        torch.nn.init.orthogonal_(w)
        theirs.append(w[0, 0].item())
    assert stats.ks_2samp(fixed, theirs).pvalue > 1e-4


@pytest.mark.parametrize("activation", ["linear", "tanh", "relu"])
@pytest.mark.parametrize("scheme", ["lecun", "he", "orthogonal"])
def test_propagate_stats_equals_torch_autograd(scheme, activation):
    x = np.random.default_rng(0).standard_normal((16, 12))
    depth = 6
    got = propagate_stats(x, depth, scheme=scheme, activation=activation, rng=7)
    rng = np.random.default_rng(7)  # the same draws: the weights in order, then the output gradient
    weights = [torch.tensor(init_weights(12, 12, scheme, rng=rng)) for _ in range(depth)]
    G = torch.tensor(rng.standard_normal(x.shape))
    phi = {"linear": lambda a: a, "tanh": torch.tanh, "relu": torch.relu}[activation]
    h, pre = torch.tensor(x, requires_grad=True), []
    for W in weights:
        a = h @ W.T
        a.retain_grad()
        pre.append(a)
        h = phi(a)
    (pre[-1] * G).sum().backward()
    rms = lambda t: t.detach().pow(2).mean().sqrt().item()  # noqa: E731
    np.testing.assert_allclose(got.forward, [rms(a) for a in pre], rtol=1e-10)
    np.testing.assert_allclose(got.backward, [rms(a.grad) for a in pre], rtol=1e-10)


def test_propagate_stats_draws_the_distribution_it_is_given():
    """PyTorch's default is uniform: with dist="uniform" the first layer's pre-activations are those of weights
    drawn from U[-1/sqrt(n), 1/sqrt(n)], not from a normal of the same variance."""
    x = np.random.default_rng(2).standard_normal((8, 16))
    got = propagate_stats(x, 1, scheme="torch_default", dist="uniform", rng=3).forward
    W = init_weights(16, 16, "torch_default", "uniform", rng=np.random.default_rng(3))
    assert np.abs(W).max() <= 1 / math.sqrt(16)
    assert got[0] == pytest.approx(np.sqrt(np.mean((x @ W.T) ** 2)), rel=1e-12)
    normal = propagate_stats(x, 1, scheme="torch_default", rng=3).forward
    assert normal[0] != pytest.approx(got[0], rel=1e-3)


def test_depth_regimes():
    x = np.random.default_rng(1).standard_normal((64, 128))
    lecun_relu = propagate_stats(x, 20, scheme="lecun", activation="relu", rng=1).forward
    he_relu = propagate_stats(x, 20, scheme="he", activation="relu", rng=1).forward
    ortho = propagate_stats(x, 20, scheme="orthogonal", activation="linear", rng=1).forward
    # same draws, He = sqrt(2) LeCun in every layer, and ReLU is positively homogeneous
    np.testing.assert_allclose(he_relu / lecun_relu, 2 ** (np.arange(1, 21) / 2), rtol=1e-10)
    geometric = np.exp(
        np.mean(
            [
                np.log(propagate_stats(x, 20, scheme="he", activation="relu", rng=s).forward)
                for s in range(10)
            ],
            axis=0,
        )
    )
    assert geometric[-1] == pytest.approx(math.sqrt(2), rel=0.4)  # 2/n doubles the unit input variance once
    assert ortho[-1] == pytest.approx(np.sqrt(np.mean(x**2)), rel=1e-10)


BAD_INPUT = [
    (lambda: init_std(0, 3), ValueError, "n must be an int in"),
    (lambda: init_std(3, 2.0), TypeError, "m must be an int"),
    (lambda: init_std(3, 3, "kaiming"), ValueError, "scheme must be one of"),
    (lambda: init_std(3, 3, gain=0.0), ValueError, "gain"),
    (lambda: init_weights(3, 3, dist="gaussian"), ValueError, "dist must be one of"),
    (lambda: init_weights(3, 3, rng="seed"), TypeError, "rng must be"),
    (lambda: fixed_init((3, 0), 1.0), ValueError, "shape must be a tuple"),
    (lambda: fixed_init((3, 3), -1.0), ValueError, "sigma"),
    (lambda: haar_orthogonal(-1), ValueError, "n must be an int"),
    (lambda: propagate_stats(np.ones(4), 3), ValueError, "x must have shape"),
    (lambda: propagate_stats(np.ones((2, 4)), 0), ValueError, "depth must be an int"),
    (lambda: propagate_stats(np.ones((2, 4)), 3, dist="beta"), ValueError, "dist must be one of"),
    (
        lambda: propagate_stats(np.ones((2, 4)), 3, activation="sigmoid"),
        ValueError,
        "activation must be",
    ),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
