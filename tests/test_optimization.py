import numpy as np
import pytest
import torch
from sklearn.datasets import make_moons

from dlnotes import optimization as opt

rng = np.random.default_rng(7)


def quadratic_problem(d=6, seed=0):
    A = np.random.default_rng(seed).normal(size=(d, d))
    Q = A @ A.T + np.eye(d)
    return Q, (lambda x: 0.5 * x @ Q @ x), (lambda x: Q @ x)


# ----------------------------------------------------------------------------- gradients


def test_check_grad_accepts_right_and_rejects_wrong_gradients():
    Q, f, grad = quadratic_problem()
    x = rng.normal(size=6)
    assert opt.check_grad(f, grad, x) < 1e-8
    assert opt.check_grad(f, lambda x: 1.01 * grad(x), x) > 1e-3
    M = rng.normal(size=(3, 4))
    assert opt.check_grad(lambda X: np.sum(np.sin(X)), np.cos(M), M) < 1e-8  # any shape
    with pytest.raises(ValueError, match="shape of x"):
        opt.check_grad(f, np.ones(5), x)


def test_hand_written_backprop_matches_autograd_and_finite_differences():
    X, y = make_moons(64, noise=0.1, random_state=0)
    sizes = [2, 8, 8, 2]
    params = [
        (rng.normal(size=(m, n)) / np.sqrt(n), rng.normal(size=m) * 0.1)
        for n, m in zip(sizes, sizes[1:], strict=False)
    ]
    loss, grads = opt.mlp_forward_backward(params, X, y)
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
        return opt.mlp_forward_backward([(W1, params[0][1]), *params[1:]], X, y)[0]

    assert opt.check_grad(loss_of_first_weight, grads[0][0], params[0][0]) < 1e-6


# ----------------------------------------------------------------------------- methods vs torch.optim


def run_torch(optimizer_class, grad, x0, steps, **hyper):
    return opt.torch_path(lambda params: optimizer_class(params, **hyper), grad, x0, steps)


def test_iterations_to():
    xs = np.array([[1.0, 0.0], [0.1, 0.0], [1e-9, 0.0]])
    assert opt.iterations_to(xs) == 2 and opt.iterations_to(xs[:2]) == np.inf
    with pytest.raises(ValueError, match="iterates"):
        opt.iterations_to(np.ones(3))


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


@pytest.mark.parametrize(
    ("step", "optimizer_class", "ours", "theirs"),
    [
        (opt.adagrad_step, torch.optim.Adagrad, {"lr": 0.1}, {"lr": 0.1}),
        (opt.rmsprop_step, torch.optim.RMSprop, {"lr": 0.001, "alpha": 0.9}, {"lr": 0.001, "alpha": 0.9}),
        (
            opt.adam_step,
            torch.optim.Adam,
            {"lr": 0.01, "betas": (0.8, 0.99)},
            {"lr": 0.01, "betas": (0.8, 0.99)},
        ),
    ],
)
def test_adaptive_methods_match_torch_step_for_step(step, optimizer_class, ours, theirs):
    _, _, grad = quadratic_problem()
    x0 = rng.normal(size=6)
    mine = opt.run_optimizer(step, grad, x0, 100, **ours)
    assert np.allclose(mine, run_torch(optimizer_class, grad, x0, 100, **theirs), atol=1e-10)


def test_adaptive_steps_reject_mismatched_shapes():
    with pytest.raises(ValueError, match="shape of theta"):
        opt.adam_step(np.zeros(3), np.zeros(2), {}, lr=0.1)
    with pytest.raises(ValueError, match="lr"):
        opt.sign_sgd_step(np.zeros(3), np.zeros(3), lr=0)


def test_orthogonalize_and_newton_schulz():
    G = rng.normal(size=(20, 50))
    P = opt.orthogonalize(G)
    assert np.allclose(np.linalg.svd(P, compute_uv=False), 1)
    assert np.isclose(np.sum(G * P), np.linalg.svd(G, compute_uv=False).sum())
    assert np.allclose(opt.orthogonalize(G, "newton_schulz", steps=30), P, atol=1e-8)
    with pytest.raises(ValueError, match="method"):
        opt.orthogonalize(G, "qr")


def test_muon_matches_torch_muon_with_exact_orthogonalization(monkeypatch):
    """torch orthogonalises with 5 quintic Newton–Schulz steps in bfloat16 (singular values only roughly 1);
    with the exact polar factor on both sides, every other part of the update must agree. torch keeps an
    exponential average (1 - mu) M of the gradients instead of M: the same direction once orthogonalised."""
    import torch.optim._muon

    def exact_polar(G, *_):
        U, _, Vt = torch.linalg.svd(G, full_matrices=False)
        return U @ Vt

    monkeypatch.setattr(torch.optim._muon, "_zeropower_via_newtonschulz", exact_polar)
    W0, grads = rng.normal(size=(8, 4)), rng.normal(size=(5, 8, 4))
    W_t = torch.tensor(W0, requires_grad=True)
    muon = torch.optim.Muon([W_t], lr=0.02, momentum=0.9, nesterov=False, weight_decay=0.0)
    W, M = W0, np.zeros_like(W0)
    for G in grads:
        W, M = opt.muon_step(W, G, M, lr=0.02, mu=0.9)
        W_t.grad = torch.tensor(G)
        muon.step()
    assert np.allclose(W, W_t.detach().numpy(), atol=1e-10)


def test_sgd_and_polyak_averaging():
    X = rng.normal(size=(200, 3))
    w_true = rng.normal(size=3)
    y = X @ w_true

    def grad_i(w, idx):
        return X[idx].T @ (X[idx] @ w - y[idx]) / len(idx)

    xs = opt.sgd(grad_i, 200, np.zeros(3), lambda t: 0.05, 3000, batch=4, rng=0)
    assert xs.shape == (3001, 3) and np.linalg.norm(xs[-1] - w_true) < 1e-6
    averages = opt.polyak_average(xs)
    assert np.allclose(averages[-1], xs.mean(axis=0))
    assert np.allclose(opt.polyak_average(xs, beta=1.0), xs)
    with pytest.raises(ValueError, match="batch"):
        opt.sgd(grad_i, 200, np.zeros(3), lambda t: 0.1, 10, batch=0)


def test_test_problems():
    f, grad, hess, L, mu = opt.quadratic(100.0, dim=5)
    x = rng.normal(size=5)
    assert L == 100 and mu == 1 and opt.check_grad(f, grad, x) < 1e-8
    assert np.allclose(opt.newton(grad, hess, x, 1)[-1], 0)
    f, grad, L, mu = opt.pl_example()
    grid = np.linspace(-50, 50, 20001)
    assert (0.5 * grad(grid) ** 2 >= mu * (grid**2 + 3 * np.sin(grid) ** 2) - 1e-12).all()
    assert opt.check_grad(opt.rosenbrock, opt.rosenbrock_grad, np.array([-1.2, 1.0])) < 1e-7
    with pytest.raises(ValueError, match="kappa"):
        opt.quadratic(0.5)
