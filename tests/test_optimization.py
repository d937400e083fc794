import numpy as np
import pytest
import torch
from sklearn.datasets import make_moons

from dlnotes import optimization as opt
from dlnotes.checks import check_grad

from conftest import bad_input_test

rng = np.random.default_rng(7)


def quadratic_problem(d=6, seed=0):
    A = np.random.default_rng(seed).normal(size=(d, d))
    Q = A @ A.T + np.eye(d)
    return Q, (lambda x: 0.5 * x @ Q @ x), (lambda x: Q @ x)


# ----------------------------------------------------------------------------- gradients


def test_hand_written_backprop_matches_autograd_and_finite_differences():
    X, y = make_moons(64, noise=0.1, random_state=0)
    sizes = [2, 8, 8, 2]
    params = [
        (rng.normal(size=(m, n)) / np.sqrt(n), rng.normal(size=m) * 0.1)
        for n, m in zip(sizes, sizes[1:], strict=False)
    ]
    loss, grads = opt.mlp_forward_backward(X, y, params)
    tensors = [(torch.tensor(W, requires_grad=True), torch.tensor(b, requires_grad=True)) for W, b in params]
    h = torch.tensor(X)
    for l, (W, b) in enumerate(tensors):
        h = h @ W.T + b
        h = h if l == len(tensors) - 1 else torch.tanh(h)
    torch_loss = torch.nn.functional.cross_entropy(h, torch.tensor(y))
    torch_loss.backward()
    assert np.isclose(loss, torch_loss.item(), rtol=1e-12)
    for (dW, db), (W, b) in zip(grads, tensors, strict=True):
        assert np.allclose(dW, W.grad.numpy(), atol=1e-12) and np.allclose(db, b.grad.numpy(), atol=1e-12)

    def loss_of_first_weight(W1):
        return opt.mlp_forward_backward(X, y, [(W1, params[0][1]), *params[1:]]).loss

    assert check_grad(loss_of_first_weight, grads[0][0], params[0][0]) < 1e-6


# ----------------------------------------------------------------------------- methods vs torch.optim


def run_torch(optimizer_class, grad, x0, steps, **hyper):
    return opt.torch_path(lambda params: optimizer_class(params, **hyper), grad, x0, steps)


def test_iterations_to():
    xs = np.array([[1.0, 0.0], [0.1, 0.0], [1e-9, 0.0]])
    assert opt.iterations_to(xs) == 2 and opt.iterations_to(xs[:2]) == np.inf
    assert opt.iterations_to(np.array([[1.0, 0.0], [np.inf, np.nan]])) == np.inf  # a diverged run


def test_gd_and_heavy_ball_match_torch_sgd():
    _, _, grad = quadratic_problem()
    x0 = rng.normal(size=6)
    assert np.allclose(
        opt.gd(grad, x0, 0.01, 50), run_torch(torch.optim.SGD, grad, x0, 50, lr=0.01), atol=1e-10
    )
    ours = opt.heavy_ball(grad, x0, 0.01, 0.9, 50)
    assert np.allclose(ours, run_torch(torch.optim.SGD, grad, x0, 50, lr=0.01, momentum=0.9), atol=1e-10)


def test_nesterov_look_ahead_points_are_torch_nesterov_iterates():
    _, _, grad = quadratic_problem()
    x0 = rng.normal(size=6)
    xs = opt.nesterov(grad, x0, 0.01, 0.9, 50)
    look_ahead = xs[1:] + 0.9 * (xs[1:] - xs[:-1])
    torch_xs = run_torch(torch.optim.SGD, grad, x0, 50, lr=0.01, momentum=0.9, nesterov=True)
    assert np.allclose(look_ahead[:-1], torch_xs[1:-1], atol=1e-10)


def test_nesterov_with_a_schedule_of_momenta():
    """beta_t = (t - 1)/(t + 2) on a convex quadratic: the O(1/t^2) bound 2 L ||x0 - x*||^2 / (t + 1)^2 holds."""
    q = np.logspace(0, -6, 50)
    x0 = rng.normal(size=50)
    xs = opt.nesterov(lambda x: q * x, x0, 1.0, lambda t: (t - 1) / (t + 2), 500)
    gaps = 0.5 * np.sum(q * xs**2, axis=1)
    assert (gaps[1:] <= 2 * np.sum(x0**2) / (np.arange(1, 501) + 1) ** 2).all()
    assert np.allclose(
        opt.nesterov(lambda x: q * x, x0, 0.5, lambda t: 0.3, 20),
        opt.nesterov(lambda x: q * x, x0, 0.5, 0.3, 20),
    )


@pytest.mark.parametrize(
    ("step", "optimizer_class", "ours", "theirs"),
    [
        (opt.adagrad_step, torch.optim.Adagrad, {"eta": 0.1}, {"lr": 0.1}),
        (opt.rmsprop_step, torch.optim.RMSprop, {"eta": 0.001, "beta": 0.9}, {"lr": 0.001, "alpha": 0.9}),
        (
            opt.adam_step,
            torch.optim.Adam,
            {"eta": 0.01, "beta1": 0.8, "beta2": 0.99},
            {"lr": 0.01, "betas": (0.8, 0.99)},
        ),
    ],
)
def test_adaptive_methods_match_torch_step_for_step(step, optimizer_class, ours, theirs):
    _, _, grad = quadratic_problem()
    x0 = rng.normal(size=6)
    mine = opt.run_optimizer(step, grad, x0, 100, **ours)
    assert np.allclose(mine, run_torch(optimizer_class, grad, x0, 100, **theirs), atol=1e-10)


def test_every_step_can_be_driven_by_run_optimizer():
    """One signature for all: sign SGD moves every coordinate by eta; Muon orthogonalises the momentum."""
    xs = opt.run_optimizer(opt.sign_sgd_step, lambda x: x, np.array([3.0, -2.0]), 2, eta=0.5)
    assert np.allclose(xs, [[3.0, -2.0], [2.5, -1.5], [2.0, -1.0]])
    W0, G = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    W1 = opt.run_optimizer(opt.muon_step, lambda W: G, W0, 1, eta=0.1, beta=0.9)[-1]
    assert np.allclose(W1, W0 - 0.1 * np.sqrt(4 / 3) * opt.orthogonalize(G))


def test_orthogonalize_and_newton_schulz():
    G = rng.normal(size=(20, 50))
    P = opt.orthogonalize(G)
    assert np.allclose(np.linalg.svd(P, compute_uv=False), 1)
    assert np.isclose(np.sum(G * P), np.linalg.svd(G, compute_uv=False).sum())
    assert np.allclose(opt.orthogonalize(G, "newton_schulz", steps=30), P, atol=1e-8)


def test_muon_matches_torch_muon_with_exact_orthogonalization():
    """torch orthogonalises with 5 quintic Newton–Schulz steps in bfloat16 (singular values only roughly 1);
    with the exact polar factor on both sides, every other part of the update must agree. torch keeps an
    exponential average (1 - beta) M of the gradients instead of M: the same direction once orthogonalised."""
    W0, grads = rng.normal(size=(8, 4)), rng.normal(size=(5, 8, 4))
    W_t = torch.tensor(W0, requires_grad=True)
    muon = torch.optim.Muon([W_t], lr=0.02, momentum=0.9, nesterov=False, weight_decay=0.0)
    W, state = W0, {}
    with opt.torch_muon_with_exact_polar_factor():
        for G in grads:
            W, state = opt.muon_step(W, G, state, eta=0.02, beta=0.9)
            W_t.grad = torch.tensor(G)
            muon.step()
    assert np.allclose(W, W_t.detach().numpy(), atol=1e-10)
    original = torch.optim._muon._zeropower_via_newtonschulz
    assert original.__name__ != "exact_polar"  # restored after the block


def test_torch_newton_schulz_is_only_roughly_orthogonal():
    sv = np.linalg.svd(opt.torch_newton_schulz(rng.normal(size=(64, 32))), compute_uv=False)
    assert 0.5 < sv.min() and sv.max() < 1.5 and np.abs(sv - 1).max() > 0.05


def test_sgd_and_polyak_averaging():
    X = rng.normal(size=(200, 3))
    w_true = rng.normal(size=3)
    y = X @ w_true

    def grad_i(w, idx):
        return X[idx].T @ (X[idx] @ w - y[idx]) / len(idx)

    xs = opt.sgd(grad_i, 200, np.zeros(3), lambda t: 0.05, 3000, batch_size=4, rng=0)
    assert xs.shape == (3001, 3) and np.linalg.norm(xs[-1] - w_true) < 1e-6
    averages = opt.polyak_average(xs)
    assert np.allclose(averages[-1], xs.mean(axis=0))
    assert np.allclose(opt.polyak_average(xs, beta=1.0), xs)


def test_test_problems():
    problem = opt.quadratic(100.0, dim=5)
    x = rng.normal(size=5)
    assert problem.L == 100 and problem.mu == 1 and check_grad(problem.f, problem.grad, x) < 1e-8
    assert np.allclose(opt.newton(problem.grad, problem.hess, x, 1)[-1], 0)
    pl = opt.pl_example()
    grid = np.linspace(-50, 50, 20001)
    assert (0.5 * pl.grad(grid) ** 2 >= pl.mu * (grid**2 + 3 * np.sin(grid) ** 2) - 1e-12).all()
    x = rng.normal(size=3)
    assert (
        check_grad(pl.f, pl.grad, x) < 1e-8 and check_grad(lambda x: pl.grad(x)[1], pl.hess(x)[1], x) < 1e-7
    )
    assert check_grad(opt.rosenbrock, opt.rosenbrock_grad, np.array([-1.2, 1.0])) < 1e-7


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (
        lambda: opt.mlp_forward_backward(np.ones((4, 2)), np.zeros(4, int), [(np.ones((3, 3)), np.ones(3))]),
        ValueError,
        r"W of layer 1 must have shape (any, 2)",
    ),
    (
        lambda: opt.mlp_forward_backward(np.ones((4, 2)), np.zeros(4, int), [(np.ones((3, 2)), np.ones(2))]),
        ValueError,
        r"b of layer 1 must have shape (3,)",
    ),
    (
        lambda: opt.mlp_forward_backward(np.ones((4, 2)), np.full(4, 3), [(np.ones((3, 2)), np.ones(3))]),
        ValueError,
        r"y must hold labels in 0..2",
    ),
    (
        lambda: opt.mlp_forward_backward(np.ones((4, 2)), np.zeros(4, int), []),
        ValueError,
        "at least one layer",
    ),
    (lambda: opt.gd(lambda x: x, np.ones(2), 0.1, 0), ValueError, "steps"),
    (lambda: opt.gd(lambda x: x, np.ones(2), -0.1, 5), ValueError, "eta"),
    (
        lambda: opt.heavy_ball(lambda x: x, np.ones(2), 0.1, 1.0, 5),
        ValueError,
        r"beta must be a finite number in [0, 1)",
    ),
    (
        lambda: opt.nesterov(lambda x: x, np.ones(2), 0.1, lambda t: 1.0, 5),
        ValueError,
        r"beta(t) must be a finite",
    ),
    (lambda: opt.quadratic(0.5), ValueError, "kappa"),
    (lambda: opt.quadratic(10, dim=1), ValueError, "dim"),
    (lambda: opt.adam_step(np.zeros(3), np.zeros(2), {}, eta=0.1), ValueError, r"g must have shape (3,)"),
    (lambda: opt.adam_step(np.zeros(3), np.zeros(3), {}, eta=0.1, beta1=1.5), ValueError, "beta1"),
    (lambda: opt.sign_sgd_step(np.zeros(3), np.zeros(3), {}, eta=0), ValueError, "eta"),
    (lambda: opt.run_optimizer("adam", lambda x: x, np.ones(2), 5), TypeError, "step must be callable"),
    (lambda: opt.orthogonalize(np.ones((2, 2)), "qr"), ValueError, "method must be one of"),
    (lambda: opt.orthogonalize(np.ones(3)), ValueError, "G must have shape"),
    (lambda: opt.muon_step(np.ones(3), np.ones(3), {}, eta=0.1), ValueError, "W must be a matrix"),
    (
        lambda: opt.sgd(lambda x, i: x, 0, np.ones(2), lambda t: 0.1, 5),
        ValueError,
        r"n must be an int in [1, inf)",
    ),
    (lambda: opt.sgd(lambda x, i: x, 2.5, np.ones(2), lambda t: 0.1, 5), TypeError, "n must be an int"),
    (
        lambda: opt.sgd(lambda x, i: x, 10, np.ones(2), lambda t: 0.1, 5, batch_size=0),
        ValueError,
        "batch_size",
    ),
    (lambda: opt.sgd(lambda x, i: x, 10, np.ones(2), 0.1, 5), TypeError, "schedule must be callable"),
    (lambda: opt.polyak_average(np.ones((3, 2)), beta=0), ValueError, "beta"),
    (lambda: opt.rosenbrock(np.ones(3)), ValueError, r"x must have shape (2,)"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
