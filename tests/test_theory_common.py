"""The tools of dlnotes.theory that several sections of chapter 09 use: the network as a function of one flat
parameter vector against the module itself, Hessian-vector products against the full Hessian, power iteration
against numpy's eigenvalues, the ReLU Gaussian moments against Monte Carlo and quadrature, the Bayesian
linear-regression posterior against the conditioning of the joint Gaussian."""

import numpy as np
import torch
from scipy import integrate, stats
from torch import nn

from dlnotes import theory

from conftest import bad_input_test

rng = np.random.default_rng(9)


def small_mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)).double()


def test_flat_function_reproduces_the_model_and_its_gradient():
    model = small_mlp()
    X = torch.tensor(rng.normal(size=(7, 3)))
    f, theta0 = theory.flat_function(model)
    assert theta0.shape == (sum(p.numel() for p in model.parameters()),)
    assert torch.allclose(f(theta0, X), model(X), atol=1e-15)
    # the gradient in theta, laid out like torch.nn.utils.parameters_to_vector of the module's gradients
    model(X).sum().backward()
    grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    theta = theta0.clone().requires_grad_(True)
    f(theta, X).sum().backward()
    assert torch.allclose(theta.grad, grads, atol=1e-14)
    # another theta changes the output and leaves the module alone
    shifted = f(theta0 + 0.1, X)
    assert (shifted - model(X)).abs().max() > 1e-3
    assert torch.equal(torch.nn.utils.parameters_to_vector(model.parameters()).detach(), theta0)


def test_hvp_and_hessian_matrix_agree_and_match_a_quadratic():
    A = torch.tensor(rng.normal(size=(6, 6)))
    A = A + A.T
    b = torch.tensor(rng.normal(size=6))

    def quadratic(theta):
        return 0.5 * theta @ A @ theta + b @ theta + torch.sin(theta).sum()

    theta, v = torch.tensor(rng.normal(size=6)), torch.tensor(rng.normal(size=6))
    H = theory.hessian_matrix(quadratic, theta)
    assert torch.allclose(H, A - torch.diag(torch.sin(theta)), atol=1e-12)
    assert torch.allclose(theory.hvp(quadratic, theta, v), H @ v, atol=1e-12)
    assert torch.equal(theory.hvp(lambda t: (b * t).sum(), theta, v), torch.zeros(6, dtype=torch.float64))


def test_power_iteration_finds_the_largest_absolute_eigenvalue():
    Q = np.linalg.qr(rng.normal(size=(8, 8)))[0]
    lams = np.array([5.0, -3.0, 2.0, 1.0, 0.5, -0.2, 0.1, 0.0])
    A = Q @ np.diag(lams) @ Q.T
    result = theory.power_iteration(lambda v: A @ v, 8, iters=200, rng=0)
    assert abs(result.norm - 5.0) < 1e-10 and abs(result.rayleigh - 5.0) < 1e-10
    assert abs(abs(result.vector @ Q[:, 0]) - 1) < 1e-8
    # an indefinite matrix with the pair +-4 on top: the norm still converges, the vector does not
    pair = Q @ np.diag([4.0, -4.0, 1.0, 0.5, 0.2, 0.1, 0.0, 0.0]) @ Q.T
    paired = theory.power_iteration(lambda v: pair @ v, 8, iters=100, rng=1)
    assert abs(paired.norm - 4.0) < 1e-10 and len(paired.history) == 100
    assert abs(paired.norm - np.abs(np.linalg.eigvalsh(pair)).max()) < 1e-10


def test_relu_gaussian_moments_match_quadrature_and_monte_carlo():
    k11, k22, k12 = 2.0, 0.5, -0.6

    def expectation(g):  # E g(u, u') by quadrature over the 2-D Gaussian
        cov = np.array([[k11, k12], [k12, k22]])
        density = stats.multivariate_normal(np.zeros(2), cov).pdf
        return integrate.dblquad(lambda b, a: g(a, b) * density([a, b]), 0, 12, 0, 12)[0]

    value, derivative = theory.relu_gaussian_moments(k11, k12, k22)
    assert abs(value - expectation(lambda a, b: a * b)) < 1e-6
    assert abs(derivative - expectation(lambda a, b: 1.0)) < 1e-6
    # w ~ N(0, I): u = w.x, u' = w.x'; arrays work elementwise
    X = rng.normal(size=(4, 3))
    G = X @ X.T
    sq = np.diag(G)
    values, derivatives = theory.relu_gaussian_moments(sq[:, None], G, sq[None, :])
    W = rng.normal(size=(3, 400_000))
    U = X @ W
    assert np.abs(values - np.maximum(U, 0) @ np.maximum(U, 0).T / W.shape[1]).max() < 0.02 * values.max()
    assert np.abs(derivatives - (U > 0) @ (U > 0).T.astype(float) / W.shape[1]).max() < 5e-3
    assert np.allclose(np.diag(values), sq / 2) and np.allclose(np.diag(derivatives), 0.5)


def test_bayes_linreg_equals_gaussian_conditioning():
    X, y = rng.normal(size=(12, 4)), rng.normal(size=12)
    L = rng.normal(size=(4, 4))
    prior = L @ L.T + 0.5 * np.eye(4)
    noise = 0.3
    posterior = theory.bayes_linreg(X, y, noise, prior)
    # condition the joint Gaussian of (w, y): cov(w, y) = prior X^T, cov(y) = X prior X^T + noise I
    gain = prior @ X.T @ np.linalg.inv(X @ prior @ X.T + noise * np.eye(12))
    assert np.allclose(posterior.mean, gain @ y, atol=1e-12)
    assert np.allclose(posterior.cov, prior - gain @ X @ prior, atol=1e-12)
    ridge = np.linalg.solve(
        X.T @ X + noise * np.eye(4), X.T @ y
    )  # the identity prior: ridge with lambda = noise
    assert np.allclose(theory.bayes_linreg(X, y, noise).mean, ridge, atol=1e-12)


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: theory.flat_function(lambda x: x), TypeError, "model must be a torch.nn.Module"),
    (lambda: theory.flat_function(small_mlp()).f(torch.zeros(3), torch.zeros(1, 3)), ValueError, "theta must have shape"),
    (lambda: theory.hvp(3, torch.zeros(2), torch.zeros(2)), TypeError, "loss must be callable"),
    (lambda: theory.hvp(torch.sum, np.zeros(2), torch.zeros(2)), TypeError, "theta must be a non-empty 1-D torch tensor"),
    (lambda: theory.hvp(torch.sum, torch.zeros(2), torch.zeros(3)), ValueError, "v must have the shape of theta"),
    (lambda: theory.hessian_matrix(torch.sum, torch.zeros(2, 2)), TypeError, "theta must be a non-empty 1-D"),
    (lambda: theory.power_iteration(lambda v: v, 0), ValueError, "dim must be an int in [1, inf)"),
    (lambda: theory.power_iteration(lambda v: v[:2], 3), ValueError, "matvec must return a vector of shape (3,)"),
    (lambda: theory.power_iteration(lambda v: v, 3, iters=2.5), TypeError, "iters must be an int"),
    (lambda: theory.relu_gaussian_moments(0.0, 0.0, 1.0), ValueError, "k11 must hold variances > 0"),
    (lambda: theory.relu_gaussian_moments(1.0, 2.0, 1.0), ValueError, "|k12| <= sqrt(k11 k22)"),
    (lambda: theory.bayes_linreg(np.ones((3, 2)), np.ones(4), 1.0), ValueError, "y must have shape (3,)"),
    (lambda: theory.bayes_linreg(np.ones((3, 2)), np.ones(3), 0.0), ValueError, "noise_var must be a finite number"),
    (lambda: theory.bayes_linreg(np.ones((3, 2)), np.ones(3), 1.0, -np.eye(2)), ValueError, "prior_cov must be symmetric positive definite"),
    (lambda: theory.bayes_linreg(np.ones((3, 2)), np.ones(3), 1.0, np.eye(3)), ValueError, "prior_cov must have shape (2, 2)"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
