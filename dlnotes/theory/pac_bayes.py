"""Section 9.4 (continued), notebook ``08_pac_bayes``: PAC-Bayes bounds and flat minima.

The KL divergence of diagonal Gaussians, the McAllester-Maurer, PAC-Bayes-kl and Catoni bounds, training a Gaussian posterior
on the PAC-Bayes objective, the Gibbs error of stochastic linear and tanh classifiers (`common.tanh_mlp`), the
loss increase under parameter noise, and the sharpness-aware minimisation step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch

from ..training import (
    to_numpy,
    train_steps,
)
from ..validation import (
    check_callable,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)
from .common import (
    _check_flat,
    _Parameters,
    tanh_mlp,
)


def _diag_kl(mu_q, var_q, mu_p, var_p, log):
    """The sum of the per-coordinate KL terms, for numpy arrays (log = np.log) or torch tensors (torch.log)."""
    return 0.5 * (log(var_p / var_q) + (var_q + (mu_q - mu_p) ** 2) / var_p - 1).sum()


def _vector_or_number(value, name: str, n: int, variance: bool) -> np.ndarray:
    """A vector (n,) or a number repeated n times; variances must be > 0."""
    if np.ndim(value) == 0:
        value = check_positive(value, name) if variance else check_number(value, name)
        return np.full(n, value)
    value = check_vector(value, name, n)
    if variance and (value <= 0).any():
        raise ValueError(f"{name} must hold variances > 0, got minimum {value.min()!r}")
    return value


def kl_diag_gauss(mu_q, var_q, mu_p, var_p) -> float:
    """The Kullback-Leibler divergence KL(Q||P) of two Gaussians with diagonal covariances,
    Q = N(mu_q, diag var_q) and P = N(mu_p, diag var_p):

    .. math:: \\mathrm{KL}(Q\\|P) = \\sum_i\\Big[\\tfrac12\\ln\\frac{v^P_i}{v^Q_i}
              + \\frac{v^Q_i + (\\mu^Q_i-\\mu^P_i)^2}{2v^P_i} - \\tfrac12\\Big].

    mu_q, var_q (P,); mu_p, var_p (P,) or numbers (an isotropic prior such as P = N(0, lambda I)). Variances,
    not standard deviations. For P = N(0, lambda I), Q = N(theta, diag sigma^2) this is the PAC-Bayes KL of
    section 9.4: sum_i [ln(lambda/sigma_i^2)/2 + (sigma_i^2 + theta_i^2)/(2 lambda) - 1/2].
    """
    mu_q = check_vector(mu_q, "mu_q")
    n = len(mu_q)
    var_q = _vector_or_number(var_q, "var_q", n, variance=True)
    mu_p = _vector_or_number(mu_p, "mu_p", n, variance=False)
    var_p = _vector_or_number(var_p, "var_p", n, variance=True)
    return float(_diag_kl(mu_q, var_q, mu_p, var_p, np.log))


def pac_bayes_bound(emp_risk: float, kl: float, n: int, delta: float) -> float:
    """The McAllester-Maurer PAC-Bayes bound on the risk of the stochastic classifier Q: for a prior P fixed
    before the n >= 8 examples are seen and a loss in [0, 1], with probability >= 1 - delta, for every Q,

    .. math:: \\mathbb E_Q R \\le \\mathbb E_Q\\hat R + \\sqrt{\\frac{\\mathrm{KL}(Q\\|P) + \\ln(2\\sqrt n/\\delta)}{2n}} .

    emp_risk = E_Q R_hat in [0, 1], kl = KL(Q||P) >= 0. Returns the right-hand side (> 1 means vacuous).
    Section 9.4.
    """
    emp_risk, kl, n, delta = _check_bound_arguments(emp_risk, kl, n, delta)
    return emp_risk + math.sqrt((kl + math.log(2 * math.sqrt(n) / delta)) / (2 * n))


def binary_kl(q: float, p: float) -> float:
    """The relative entropy of two Bernoulli distributions, kl(q||p) = q ln(q/p) + (1-q) ln((1-q)/(1-p)), with
    0 ln 0 = 0; q, p in [0, 1] (inf when p is 0 or 1 and q is not). Section 9.4.
    """
    q = check_number(q, "q", 0, 1)
    p = check_number(p, "p", 0, 1)
    total = 0.0
    for a, b in ((q, p), (1 - q, 1 - p)):
        if a > 0:
            total += math.inf if b == 0 else a * math.log(a / b)
    return total


def kl_inverse(q: float, c: float, tol: float = 1e-12) -> float:
    """The upper inverse of the binary relative entropy, sup{p in [q, 1] : kl(q||p) <= c}, by bisection: kl(q||p)
    increases in p on [q, 1], so the interval [q, 1] is halved until it is shorter than `tol`; returns its upper
    end (never below the true inverse). q in [0, 1], c >= 0. Section 9.4 (the PAC-Bayes-kl bound).
    """
    q = check_number(q, "q", 0, 1)
    c = check_number(c, "c", 0)
    tol = check_positive(tol, "tol")
    low, high = q, 1.0
    while high - low > tol:
        mid = (low + high) / 2
        low, high = (mid, high) if binary_kl(q, mid) <= c else (low, mid)
    return high


def _check_bound_arguments(emp_risk, kl, n, delta) -> tuple[float, float, int, float]:
    return (
        check_number(emp_risk, "emp_risk", 0, 1),
        check_number(kl, "kl", 0),
        check_int(n, "n", 8),
        check_number(delta, "delta", 0, 1, low_open=True, high_open=True),
    )


def pac_bayes_kl_bound(emp_risk: float, kl: float, n: int, delta: float) -> float:
    """The PAC-Bayes-kl bound (Seeger, 2002; Maurer, 2004): for a prior fixed before the n >= 8 examples and a
    loss in [0, 1], with probability >= 1 - delta, for every Q,

    .. math:: \\mathrm{kl}(\\mathbb E_Q\\hat R\\,\\|\\,\\mathbb E_Q R) \\le \\frac{\\mathrm{KL}(Q\\|P) + \\ln(2\\sqrt n/\\delta)}n,

    so E_Q R <= `kl_inverse`(E_Q R_hat, right-hand side). Pinsker's kl(q||p) >= 2(p - q)^2 turns it into the
    McAllester-Maurer bound `pac_bayes_bound`, which it never exceeds; it is much tighter at small training
    errors. Returns the bound on E_Q R. Section 9.4.
    """
    emp_risk, kl, n, delta = _check_bound_arguments(emp_risk, kl, n, delta)
    return kl_inverse(emp_risk, (kl + math.log(2 * math.sqrt(n) / delta)) / n)


def catoni_bound(emp_risk: float, kl: float, n: int, delta: float, C: float) -> float:
    """Catoni's PAC-Bayes bound (2007) for one constant C > 0 fixed in advance: with probability >= 1 - delta,
    for every Q,

    .. math:: \\mathbb E_Q R \\le \\frac{1 - \\exp\\big(-C\\,\\mathbb E_Q\\hat R - (\\mathrm{KL}(Q\\|P) + \\ln(1/\\delta))/n\\big)}
              {1 - e^{-C}} .

    Several values of C share delta by a union bound. Returns the bound on E_Q R. Section 9.4.
    """
    emp_risk, kl, n, delta = _check_bound_arguments(emp_risk, kl, n, delta)
    C = check_positive(C, "C")
    return -math.expm1(-C * emp_risk - (kl + math.log(1 / delta)) / n) / -math.expm1(-C)


class GaussianPosterior(NamedTuple):
    theta: np.ndarray  # the mean of Q (P,)
    var: np.ndarray  # the variances sigma_i^2 of Q (P,)
    objective: np.ndarray  # the Monte-Carlo estimate of the objective at every step (steps,)


def fit_pac_bayes(
    loss: Callable[[torch.Tensor], torch.Tensor],
    theta0,
    lam: float,
    n: int,
    delta: float,
    *,
    prior_mean=0.0,
    var0: float = 1e-2,
    steps: int = 1000,
    lr: float = 0.02,
    samples: int = 32,
    rng=None,
    progress: bool = True,
) -> GaussianPosterior:
    """Train a Gaussian posterior Q = N(theta, diag sigma^2) by minimising the PAC-Bayes objective for the prior
    P = N(prior_mean, lam I) (prior_mean (P,) or a number, fixed before the data: 0, or a network's random
    initialisation),

    .. math:: \\mathbb E_{\\xi}\\,\\hat L(\\theta + \\sigma\\odot\\xi)
              + \\sqrt{\\frac{\\mathrm{KL}(Q\\|P) + \\ln(2\\sqrt n/\\delta)}{2n}},\\qquad \\xi\\sim\\mathcal N(0, I),

    with Adam on (theta, ln sigma^2) by `training.train_steps`: the expectation is a mean over `samples` draws
    of xi per step (from `rng`), differentiable in (theta, sigma) by the reparameterisation trick.
    ``loss(thetas)`` maps a float64 tensor (samples, P) of parameter vectors to their training losses
    (samples,) (a surrogate of the 0-1 loss, e.g. the cross-entropy). theta starts at theta0 (P,), every
    sigma_i^2 at var0; the step size is lr, then lr/10 for the second half of the steps (so that the Monte-Carlo
    noise averages out). Q is trained in float64 on the CPU, where ``loss`` keeps its data. Returns a
    `GaussianPosterior` (objective: its value at every step). Section 9.4.
    """
    check_callable(loss, "loss")
    theta0 = check_vector(theta0, "theta0")
    lam = check_positive(lam, "lam")
    n = check_int(n, "n", 8)
    delta = check_number(delta, "delta", 0, 1, low_open=True, high_open=True)
    var0 = check_positive(var0, "var0")
    steps = check_int(steps, "steps", 1)
    lr = check_positive(lr, "lr")
    samples = check_int(samples, "samples", 1)
    rng = check_rng(rng)
    dim = len(theta0)
    prior_mean = torch.from_numpy(_vector_or_number(prior_mean, "prior_mean", dim, variance=False))
    q = _Parameters(
        theta=torch.tensor(theta0, dtype=torch.float64),
        log_var=torch.full((dim,), math.log(var0), dtype=torch.float64),
    )
    optimizer = torch.optim.Adam(q.parameters(), lr=lr)
    half = steps // 2
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 if step < half else 0.1)
    confidence = math.log(2 * math.sqrt(n) / delta)

    def draws():  # xi for every step
        while True:
            yield torch.from_numpy(rng.standard_normal((samples, dim)))

    def objective(q: _Parameters, xi: torch.Tensor) -> torch.Tensor:
        var = q.log_var.exp()
        losses = loss(q.theta + var.sqrt() * xi)
        if not isinstance(losses, torch.Tensor) or losses.shape != (samples,):
            got = tuple(losses.shape) if isinstance(losses, torch.Tensor) else type(losses).__name__
            raise ValueError(f"loss must map a tensor ({samples}, {dim}) to a tensor ({samples},), got {got}")
        kl = _diag_kl(q.theta, var, prior_mean, lam, torch.log)
        return losses.mean() + torch.sqrt((kl + confidence) / (2 * n))

    history = train_steps(
        q,
        objective,
        optimizer,
        draws(),
        steps,
        scheduler=scheduler,
        progress=progress,
        desc="PAC-Bayes objective",
    )
    return GaussianPosterior(to_numpy(q.theta), to_numpy(q.log_var.exp()), history)


def linear_gibbs_error(X, y, thetas, chunk: int = 256) -> float:
    """The 0-1 error of the stochastic (Gibbs) linear classifier: draw theta from Q, predict 1[x^T theta > 0],

    .. math:: \\frac1S\\sum_{j=1}^S\\frac1n\\sum_{i=1}^n \\mathbb 1\\{\\mathbb 1[x_i^\\top\\theta_j > 0] \\ne y_i\\},

    the Monte-Carlo estimate of E_Q R_hat over the draws theta_j, the rows of thetas (S, d). X (n, d) (append a
    column of ones for a bias), labels y (n,) in {0, 1}; computed `chunk` draws at a time. Section 9.4.
    """
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(0, 1))
    thetas = check_matrix(thetas, "thetas", None, X.shape[1])
    return _gibbs_error(lambda draws: draws @ X.T > 0, thetas, y, check_int(chunk, "chunk", 1))


def _gibbs_error(
    predict: Callable[[np.ndarray], np.ndarray], thetas: np.ndarray, y: np.ndarray, chunk: int
) -> float:
    """The mean over the rows of thetas of the 0-1 error of predict(rows) (rows, n) against y (n,), `chunk` rows
    at a time."""
    wrong = sum(np.sum(predict(thetas[start : start + chunk]) != y) for start in range(0, len(thetas), chunk))
    return float(wrong / (len(thetas) * len(y)))


def mlp_gibbs_error(X, y, thetas, width: int, chunk: int = 256) -> float:
    """The 0-1 error of the stochastic (Gibbs) tanh network `common.tanh_mlp`: the mean over the draws theta_j,
    the rows of thetas (S, P), of the training error of 1[f(theta_j)(x) > 0] on X (n, d) with labels y (n,) in
    {0, 1}; computed `chunk` draws at a time. Section 9.4.
    """
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(0, 1))
    thetas = check_matrix(thetas, "thetas", None, check_int(width, "width", 1) * (X.shape[1] + 2) + 1)
    X_t = torch.from_numpy(X)

    def predict(draws: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return to_numpy(tanh_mlp(X_t, torch.from_numpy(draws), width) > 0)

    return _gibbs_error(predict, thetas, y, check_int(chunk, "chunk", 1))


class LossIncrease(NamedTuple):
    mean: float  # Monte-Carlo mean of (L(theta + s xi) + L(theta - s xi))/2 - L(theta)
    sem: float  # its standard error


def noisy_loss_increase(
    loss: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor, s: float, pairs: int = 2000, rng=None
) -> LossIncrease:
    """How much Gaussian noise on the parameters raises the loss, E L(theta + s xi) - L(theta), xi ~ N(0, I),
    estimated with antithetic pairs +-xi:

    .. math:: \\frac1N\\sum_{k=1}^N\\frac{L(\\theta+s\\xi_k)+L(\\theta-s\\xi_k)}2 - L(\\theta)
              \\approx \\frac{s^2}2\\,\\mathrm{tr}\\,H \\quad(\\text{at a minimum, small } s).

    The pair cancels the odd terms of the Taylor expansion (the gradient and third-order terms). ``loss`` maps
    a flat vector (P,) to a scalar and must work under ``torch.func.vmap`` (a `flat_function` does); theta (P,).
    Section 9.4 (flat minima).
    """
    check_callable(loss, "loss")
    theta = _check_flat(theta).detach()
    s = check_positive(s, "s")
    pairs = check_int(pairs, "pairs", 2)
    rng = check_rng(rng)
    xi = torch.from_numpy(rng.standard_normal((pairs, theta.numel()))).to(theta.dtype)
    batched = torch.func.vmap(loss)
    with torch.no_grad():
        increase = (batched(theta + s * xi) + batched(theta - s * xi)) / 2 - loss(theta)
    increase = to_numpy(increase)
    return LossIncrease(float(increase.mean()), float(increase.std(ddof=1) / math.sqrt(pairs)))


def sam_update(grad: Callable[[np.ndarray], np.ndarray], theta, eta: float, rho: float) -> np.ndarray:
    """One step of sharpness-aware minimisation (SAM): climb to the (first-order) worst point of the ball of
    radius rho, then descend with the gradient found there,

    .. math:: \\epsilon = \\rho\\,\\frac{\\nabla L(\\theta)}{\\lVert\\nabla L(\\theta)\\rVert},\\qquad
              \\theta \\leftarrow \\theta - \\eta\\,\\nabla L(\\theta + \\epsilon).

    ``grad(theta)`` returns the gradient (P,) of the loss; theta (P,). (epsilon = 0 where the gradient is 0.)
    Section 9.4 (flat minima).
    """
    check_callable(grad, "grad")
    theta = check_vector(theta, "theta")
    eta = check_positive(eta, "eta")
    rho = check_number(rho, "rho", 0)
    g = np.asarray(grad(theta), dtype=float)
    if g.shape != theta.shape:
        raise ValueError(
            f"grad must return a vector of the shape of theta {theta.shape}, got shape {g.shape}"
        )
    norm = np.linalg.norm(g)
    epsilon = rho * g / norm if norm > 0 else np.zeros_like(theta)
    return theta - eta * np.asarray(grad(theta + epsilon), dtype=float)
