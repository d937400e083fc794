"""Graded exercises of chapter 10 — generative models."""

from __future__ import annotations

import math

import numpy as np

from ..generative import (
    Schedule,
    affine_coupling_inverse,
    ar_log_likelihood,
    bernoulli_elbo_estimate,
    ddim_step,
    diag_gauss_kl,
    game_step,
    gaussian_fm_velocity,
    gaussian_mixture,
    mixture_eps,
    noise_schedule,
    ppca_mle,
    q_posterior,
    w1_1d,
)
from .core import Hint, close, grader

# ----------------------------------------------------------------------------- 10.1 linear latent-variable models: PCA, factor analysis, PPCA


def ppca_covariance(X, k):
    """The covariance W_ML W_ML^T + sigma^2_ML I of probabilistic PCA fitted to X (n, d) with k latent dimensions
    (covariance of X with 1/(n - 1), as scikit-learn's PCA.get_covariance)."""
    fit = ppca_mle(X, k)
    return fit.W @ fit.W.T + fit.sigma2 * np.eye(len(fit.mu))


def _ppca_variant(X, k, *, ddof=1, sigma="mean", subtract=True, centre=True, descending=True):
    """ppca_covariance with one typical mistake switched on."""
    X = np.asarray(X, float)
    n, d = X.shape
    Xc = X - X.mean(axis=0) if centre else X
    lam, U = np.linalg.eigh(Xc.T @ Xc / (n - ddof))
    if descending:  # np.linalg.eigh returns the eigenvalues in ascending order
        lam, U = lam[::-1], U[:, ::-1]
    sigma2 = {"mean": lam[k:].mean(), "sum": lam[k:].sum(), "all": lam.mean()}[sigma]
    kept = lam[:k] - sigma2 if subtract else lam[:k]
    return U[:, :k] @ np.diag(np.maximum(kept, 0.0)) @ U[:, :k].T + sigma2 * np.eye(d)


def _ppca_cases(rng):
    fixed = (
        np.array([[2.0, 0.0, 1.0], [0.0, 1.0, -1.0], [-2.0, 1.0, 0.0], [1.0, -1.0, 2.0], [-1.0, -1.0, -2.0]]),
        1,
    )
    return [fixed] + [
        (rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + rng.normal(size=d), k)
        for n, d, k in ((30, 5, 2), (50, 8, 3), (25, 6, 1), (40, 4, 3))
    ]


grade_ppca_covariance = grader(
    "ppca_covariance",
    "X, k",
    ppca_covariance,
    _ppca_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_ppca_variant(*a, sigma="all"), g),
            "sigma^2_ML is the mean of the d - k discarded eigenvalues lambda_{k+1}, ..., lambda_d, not of all d.",
        ),
        Hint(
            lambda a, e, g: close(_ppca_variant(*a, sigma="sum"), g),
            "sigma^2_ML is the mean of the d - k discarded eigenvalues, not their sum: divide by d - k.",
        ),
        Hint(
            lambda a, e, g: close(_ppca_variant(*a, subtract=False), g),
            "W_ML = U_k (Lambda_k - sigma^2 I)^(1/2): subtract sigma^2 from the kept eigenvalues, otherwise the "
            "model's variance along u_i is lambda_i + sigma^2 instead of lambda_i.",
        ),
        Hint(
            lambda a, e, g: close(_ppca_variant(*a, ddof=0), g),
            "use the covariance with 1/(n - 1) (np.cov's and scikit-learn's convention), not 1/n.",
        ),
        Hint(
            lambda a, e, g: close(_ppca_variant(*a, centre=False), g),
            "centre X first: the eigenvalues are those of the covariance of X - mean, not of X^T X / (n - 1).",
        ),
        Hint(
            lambda a, e, g: close(_ppca_variant(*a, descending=False), g),
            "np.linalg.eigh returns the eigenvalues in ascending order: reverse them (and the eigenvectors' "
            "columns) so that W keeps the k largest and sigma^2 averages the d - k smallest.",
        ),
    ),
    mistakes=(
        (lambda X, k: _ppca_variant(X, k, sigma="all"), "not of all d"),
        (lambda X, k: _ppca_variant(X, k, sigma="sum"), "not their sum"),
        (lambda X, k: _ppca_variant(X, k, subtract=False), "subtract sigma^2"),
        (lambda X, k: _ppca_variant(X, k, ddof=0), "1/(n - 1)"),
        (lambda X, k: _ppca_variant(X, k, centre=False), "centre X first"),
        (lambda X, k: _ppca_variant(X, k, descending=False), "ascending order"),
    ),
)


# ----------------------------------------------------------------------------- 10.2 the ELBO, the reparameterisation trick, the Gaussian KL


def _kl_cases(rng):
    chosen = [(np.zeros(3), np.ones(3)), (np.array([1.0, -2.0]), np.array([0.25, 4.0]))]
    return chosen + [(rng.normal(size=k), rng.uniform(0.1, 3.0, size=k)) for k in (1, 4, 8)]


def _kl_with(mu, var, log_term, minus_one=1.0, half=0.5):
    return half * np.sum(var + mu**2 - minus_one - log_term, axis=-1)


grade_diag_gauss_kl = grader(
    "diag_gauss_kl",
    "mu, var",
    diag_gauss_kl,
    _kl_cases,
    hints=(
        Hint(lambda a, e, g: close(2 * e, g), "you forgot the factor 1/2 in front of the sum."),
        Hint(
            lambda a, e, g: close(_kl_with(*a, 0.5 * np.log(a[1])), g),
            "var holds the variances sigma^2: the log term is ln sigma^2 = ln(var), not ln sigma = ln(var) / 2.",
        ),
        Hint(
            lambda a, e, g: close(_kl_with(*a, -np.log(a[1])), g),
            "the sign of the log term: KL = 1/2 sum(sigma^2 + mu^2 - 1 - ln sigma^2), so that it is 0 at "
            "mu = 0, sigma^2 = 1 and grows for small variances.",
        ),
        Hint(
            lambda a, e, g: close(_kl_with(*a, np.log(a[1]), minus_one=0.0), g),
            "the -1 per latent dimension is missing: KL(N(0, I) || N(0, I)) must be 0.",
        ),
        Hint(
            lambda a, e, g: close(0.5 * np.sum((1 + a[0] ** 2) / a[1] - 1 + np.log(a[1])), g),
            "that is the other direction, KL(N(0, I) || N(mu, sigma^2)); the ELBO needs KL(q || p) with q the "
            "encoder's Gaussian N(mu, sigma^2) first.",
        ),
    ),
    mistakes=(
        (lambda mu, var: 2 * diag_gauss_kl(mu, var), "factor 1/2"),
        (lambda mu, var: _kl_with(mu, var, 0.5 * np.log(var)), "ln sigma^2 = ln(var)"),
        (lambda mu, var: _kl_with(mu, var, np.log(var), minus_one=0.0), "-1 per latent dimension"),
        (lambda mu, var: 0.5 * np.sum((1 + mu**2) / var - 1 + np.log(var)), "other direction"),
    ),
)


# ----------------------------------------------------------------------------- 10.2 a VAE on digits, beta-VAE


def _elbo_cases(rng):
    cases = []
    for d, k in ((6, 2), (10, 3), (16, 2), (8, 1)):
        x = (rng.random(d) < 0.4).astype(float)
        cases.append(
            (x, rng.normal(size=k), rng.uniform(0.05, 2.0, size=k), rng.normal(size=k),
             rng.normal(size=(d, k)), rng.normal(size=d))
        )  # fmt: skip
    return cases


def _elbo_parts(x, mu, var, eps, W, b, scale):
    """(log p(x | z), KL) with z = mu + scale * eps."""
    logits = W @ (mu + scale * eps) + b
    log_lik = -np.sum(x * np.logaddexp(0, -logits) + (1 - x) * np.logaddexp(0, logits))
    return log_lik, float(diag_gauss_kl(mu, var))


grade_bernoulli_elbo_estimate = grader(
    "bernoulli_elbo_estimate",
    "x, mu, var, eps, W, b",
    bernoulli_elbo_estimate,
    _elbo_cases,
    hints=(
        Hint(
            lambda a, e, g: close(np.subtract(*_elbo_parts(*a, a[2])), g),
            "the reparameterised sample is z = mu + sigma * eps with sigma = sqrt(var): scale eps by the standard "
            "deviation, not by the variance.",
        ),
        Hint(
            lambda a, e, g: close(_elbo_parts(*a, np.sqrt(a[2]))[0], g),
            "subtract KL(q(z | x) || p(z)) = 1/2 sum(var + mu^2 - 1 - ln var): the ELBO is reconstruction minus KL.",
        ),
        Hint(
            lambda a, e, g: close(sum(_elbo_parts(*a, np.sqrt(a[2]))), g),
            "the KL term enters with a minus sign: ELBO = E_q log p(x | z) - KL(q || p).",
        ),
        Hint(
            lambda a, e, g: close(-_elbo_parts(*a, np.sqrt(a[2]))[0] - _elbo_parts(*a, np.sqrt(a[2]))[1], g),
            "log p(x | z) = sum_j [x_j log sigmoid(l_j) + (1 - x_j) log sigmoid(-l_j)] is minus the binary "
            "cross-entropy (a negative number): check its sign.",
        ),
    ),
    mistakes=(
        (
            lambda x, mu, var, eps, W, b: np.subtract(*_elbo_parts(x, mu, var, eps, W, b, var)),
            "standard deviation",
        ),
        (lambda x, mu, var, eps, W, b: _elbo_parts(x, mu, var, eps, W, b, np.sqrt(var))[0], "subtract KL"),
        (lambda x, mu, var, eps, W, b: sum(_elbo_parts(x, mu, var, eps, W, b, np.sqrt(var))), "minus sign"),
    ),
)


# ----------------------------------------------------------------------------- 10.3 normalising flows


def _coupling_fns(rng, m: int, k: int):
    """A random scale network s and shift network t from (n, m) to (n, k)."""
    W_s, W_t = rng.normal(size=(m, k)), rng.normal(size=(m, k))
    b_s, b_t = rng.normal(size=k), rng.normal(size=k)

    def s(x_a):
        return np.tanh(x_a @ W_s + b_s)

    def t(x_a):
        return np.sin(x_a @ W_t) + b_t

    return s, t


def _coupling_inverse_cases(rng):
    cases = []
    for n, d in [(4, 4), (5, 2), (3, 5), (6, 6)]:
        s, t = _coupling_fns(rng, d // 2, d - d // 2)
        cases.append((rng.normal(size=(n, d)), s, t))
    return cases


def _halves(y):
    y = np.asarray(y, float)
    return y[:, : y.shape[1] // 2], y[:, y.shape[1] // 2 :]


def _part(got, i):
    return got[i] if isinstance(got, tuple | list) and len(got) == 2 else None


def _wrong_order(y, s_fn, t_fn):  # y_b e^{-s} - t
    a, b = _halves(y)
    return np.concatenate([a, b * np.exp(-s_fn(a)) - t_fn(a)], axis=1), -s_fn(a).sum(axis=1)


def _wrong_exponent(y, s_fn, t_fn):  # (y_b - t) e^{+s}
    a, b = _halves(y)
    return np.concatenate([a, (b - t_fn(a)) * np.exp(s_fn(a))], axis=1), -s_fn(a).sum(axis=1)


def _forward_log_det(y, s_fn, t_fn):  # + sum s: the forward layer's log-determinant
    x, log_det = affine_coupling_inverse(y, s_fn, t_fn)
    return x, -log_det


def _exp_log_det(y, s_fn, t_fn):  # - sum exp(s)
    x, _ = affine_coupling_inverse(y, s_fn, t_fn)
    return x, -np.exp(s_fn(_halves(y)[0])).sum(axis=1)


grade_coupling_inverse = grader(
    "coupling_inverse",
    "y, s_fn, t_fn",
    affine_coupling_inverse,
    _coupling_inverse_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_wrong_order(*a)[0], _part(g, 0)),
            "first remove the shift, then the scale: x_b = (y_b - t(y_a)) * exp(-s(y_a)); y_b * exp(-s) - t is "
            "not the inverse of y_b = x_b * exp(s) + t.",
        ),
        Hint(
            lambda a, e, g: close(_wrong_exponent(*a)[0], _part(g, 0)),
            "dividing by exp(s) is multiplying by exp(-s): x_b = (y_b - t(y_a)) * exp(-s(y_a)).",
        ),
        Hint(
            lambda a, e, g: close(-e[1], _part(g, 1)),
            "that is the log-determinant of the forward layer, +sum_j s_j; the inverse map has the inverse "
            "Jacobian, so its log|det| is -sum_j s_j(y_a).",
        ),
        Hint(
            lambda a, e, g: (
                close(_exp_log_det(*a)[1], _part(g, 1)) or close(-_exp_log_det(*a)[1], _part(g, 1))
            ),
            "the Jacobian's diagonal holds exp(-s_j), whose logs are -s_j: the log-determinant is -sum_j s_j, "
            "not a sum of exponentials.",
        ),
        Hint(
            lambda a, e, g: _part(g, 0) is not None and close(e[0], _part(g, 0)),
            "x is right; check the log-determinant: one number per row, -sum_j s_j(y_a), shape (n,).",
        ),
    ),
    mistakes=(
        (_wrong_order, "first remove the shift"),
        (_wrong_exponent, "exp(-s)"),
        (_forward_log_det, "-sum_j s_j(y_a)"),
        (_exp_log_det, "not a sum of exponentials"),
    ),
)


# ----------------------------------------------------------------------------- 10.4 autoregressive models


def _ar_cases(rng):
    fixed = (np.array([0.4, -1.2, 0.7, 2.0, -0.3, 0.9]), np.array([0.5, -0.3]), 0.5)
    cases = [fixed]
    for n, K in [(30, 1), (25, 2), (40, 3)]:
        cases.append((rng.normal(size=n), rng.uniform(-0.6, 0.6, K), float(rng.uniform(0.2, 3.0))))
    return cases


def _ar_residuals(x, theta):
    x, theta = np.asarray(x, float), np.asarray(theta, float)
    K = theta.size
    padded = np.concatenate([np.zeros(K), x])
    predicted = np.array([theta @ padded[i : i + K][::-1] for i in range(x.size)])
    return x - predicted


def _ar_dropped(x, theta, sigma2):  # sums only over i > K
    r = _ar_residuals(x, theta)[np.asarray(theta).size :]
    return float(-0.5 * np.sum(r**2) / sigma2 - 0.5 * r.size * np.log(2 * np.pi * sigma2))


def _ar_std(x, theta, sigma2):  # sigma2 read as the standard deviation
    return ar_log_likelihood(x, theta, sigma2**2)


def _ar_reversed(x, theta, sigma2):  # theta[0] multiplying x_{i-K}
    return ar_log_likelihood(x, np.asarray(theta)[::-1], sigma2)


def _ar_no_constant(x, theta, sigma2):  # the -1/2 log(2 pi sigma^2) terms left out
    return float(-0.5 * np.sum(_ar_residuals(x, theta) ** 2) / sigma2)


grade_ar_log_likelihood = grader(
    "ar_log_likelihood",
    "x, theta, sigma2",
    ar_log_likelihood,
    _ar_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_ar_std(*a), g),
            "sigma2 is the variance sigma^2, not the standard deviation: log N(x; m, sigma^2) = "
            "-(x - m)^2 / (2 sigma^2) - log(2 pi sigma^2) / 2.",
        ),
        Hint(
            lambda a, e, g: close(_ar_dropped(*a), g),
            "with x_{<=0} = 0 the first K values have conditionals too (x_1 ~ N(0, sigma^2), x_2 ~ N(theta_1 x_1, "
            "sigma^2), ...): sum over all n values, not only from K + 1 on.",
        ),
        Hint(
            lambda a, e, g: close(_ar_reversed(*a), g),
            "theta[0] is theta_1 and multiplies the previous value x_{i-1}; theta[K-1] multiplies x_{i-K}.",
        ),
        Hint(
            lambda a, e, g: close(_ar_no_constant(*a), g),
            "each of the n Gaussian terms also contributes -log(2 pi sigma^2) / 2.",
        ),
        Hint(lambda a, e, g: close(e / np.asarray(a[0]).size, g), "return the sum over i, not the mean."),
    ),
    mistakes=(
        (_ar_std, "not the standard deviation"),
        (_ar_dropped, "the first K values have conditionals too"),
        (_ar_reversed, "theta[0] is theta_1"),
        (_ar_no_constant, "-log(2 pi sigma^2) / 2"),
    ),
)


# ----------------------------------------------------------------------------- 10.5 GANs: the game and its optimum


def bilinear_game(theta, phi):
    """l = theta phi: (dl/dtheta, dl/dphi) = (phi, theta)."""
    return phi, theta


def curved_game(theta, phi):
    """l = theta^2/2 + 2 theta phi - phi^2/2 (convex in theta, concave in phi)."""
    return theta + 2 * phi, 2 * theta - phi


def nonlinear_game(theta, phi):
    """l = sin(theta) phi + theta^2/4."""
    return np.cos(theta) * phi + theta / 2, np.sin(theta)


_GAME_MATRIX = np.array([[1.0, -0.5, 0.3], [0.2, 0.8, -1.0]])


def matrix_game(theta, phi):
    """l = theta^T A phi + |theta|^2/2 for theta (2,), phi (3,)."""
    return _GAME_MATRIX @ phi + theta, _GAME_MATRIX.T @ theta


def extragradient_reference(grad, theta, phi, eta):
    """One extragradient step (10.24): both second gradients at the look-ahead point, the step from (theta, phi)."""
    new_theta, new_phi = game_step(grad, theta, phi, eta, "extragradient")
    return new_theta, new_phi


def _extragradient_cases(rng):
    cases = [(curved_game, 1.0, -0.5, 0.1), (bilinear_game, 1.0, 1.0, 0.1), (nonlinear_game, 0.7, 1.3, 0.2)]
    cases += [
        (curved_game, float(rng.normal()), float(rng.normal()), float(rng.uniform(0.05, 0.5)))
        for _ in range(3)
    ]
    cases += [(matrix_game, rng.normal(size=2), rng.normal(size=3), 0.1)]
    return cases


def _mixed_point(grad, theta, phi, eta):
    g_theta, g_phi = grad(theta, phi)
    theta_half, phi_half = theta - eta * g_theta, phi + eta * g_phi
    return theta - eta * grad(theta_half, phi)[0], phi + eta * grad(theta, phi_half)[1]


def _from_look_ahead(grad, theta, phi, eta):
    g_theta, g_phi = grad(theta, phi)
    theta_half, phi_half = theta - eta * g_theta, phi + eta * g_phi
    g_theta, g_phi = grad(theta_half, phi_half)
    return theta_half - eta * g_theta, phi_half + eta * g_phi


def _both_descend(grad, theta, phi, eta):
    g_theta, g_phi = grad(theta, phi)
    theta_half, phi_half = theta - eta * g_theta, phi - eta * g_phi
    g_theta, g_phi = grad(theta_half, phi_half)
    return theta - eta * g_theta, phi - eta * g_phi


grade_extragradient_step = grader(
    "extragradient_step",
    "grad, theta, phi, eta",
    extragradient_reference,
    _extragradient_cases,
    hints=(
        Hint(
            lambda a, e, g: close(game_step(*a, "simultaneous"), g),
            "that is one simultaneous step, the look-ahead only: take a second step from (theta, phi) with the "
            "gradients at the look-ahead point (theta_1/2, phi_1/2).",
        ),
        Hint(
            lambda a, e, g: close(_mixed_point(*a), g),
            "both players' second gradients are taken at the same look-ahead point (theta_1/2, phi_1/2), not at "
            "the mixed points (theta_1/2, phi) and (theta, phi_1/2).",
        ),
        Hint(
            lambda a, e, g: close(_from_look_ahead(*a), g),
            "the second step starts from (theta, phi), not from the look-ahead point: "
            "theta_new = theta - eta grad_theta l(theta_1/2, phi_1/2).",
        ),
        Hint(
            lambda a, e, g: close(_both_descend(*a), g),
            "the discriminator phi maximises l: it ascends, phi + eta grad_phi l, in both the look-ahead and the step.",
        ),
    ),
    mistakes=(
        (
            lambda grad, theta, phi, eta: game_step(grad, theta, phi, eta, "simultaneous"),
            "one simultaneous step",
        ),
        (_mixed_point, "mixed points"),
        (_from_look_ahead, "starts from (theta, phi)"),
        (_both_descend, "it ascends"),
    ),
)


# ----------------------------------------------------------------------------- 10.5 training GANs: mode collapse, Wasserstein, gradient penalty


def _w1_cases(rng):
    cases = [(np.array([0.0, 1.0, 3.0]), np.array([2.0, -1.0, 0.5]))]
    cases += [(rng.normal(size=n), rng.normal(0.5, 2.0, size=n)) for n in (5, 20, 200)]
    cases += [(rng.exponential(size=50), rng.uniform(-1, 1, size=50))]
    return cases


grade_w1_1d = grader(
    "w1_1d",
    "a, b",
    w1_1d,
    _w1_cases,
    hints=(
        Hint(
            lambda a, e, g: close(np.mean(np.abs(a[0] - a[1])), g),
            "sort both samples first: the optimal coupling on the line matches the i-th smallest a with the i-th "
            "smallest b; pairing them in the given order is a coupling, but not the best one.",
        ),
        Hint(
            lambda a, e, g: close(abs(a[0].mean() - a[1].mean()), g),
            "that is the distance between the means, a lower bound on W1: it is blind to a difference in spread. "
            "Average |a_(i) - b_(i)| over the sorted samples.",
        ),
        Hint(
            lambda a, e, g: close(np.sqrt(np.mean((np.sort(a[0]) - np.sort(a[1])) ** 2)), g),
            "that is W2, the root mean squared distance of the sorted samples; W1 averages |a_(i) - b_(i)|.",
        ),
        Hint(
            lambda a, e, g: close(len(a[0]) * e, g),
            "average over the n pairs (each point carries mass 1/n); do not sum.",
        ),
    ),
    mistakes=(
        (lambda a, b: float(np.mean(np.abs(np.asarray(a) - np.asarray(b)))), "sort both samples"),
        (lambda a, b: float(abs(np.mean(a) - np.mean(b))), "distance between the means"),
        (lambda a, b: float(np.sqrt(np.mean((np.sort(a) - np.sort(b)) ** 2))), "that is W2"),
        (lambda a, b: float(np.sum(np.abs(np.sort(a) - np.sort(b)))), "do not sum"),
    ),
)


# ----------------------------------------------------------------------------- 10.6 diffusion: forward process, bound, reverse posterior


def _schedule_from_beta(beta) -> Schedule:
    beta = np.asarray(beta, dtype=float)
    return Schedule(beta, 1 - beta, np.cumprod(1 - beta))


def q_posterior_reference(x0, x_t, t, beta):
    """The mean (d,) and variance of q(x_{t-1} | x_t, x_0) for one example, from the schedule's betas (T + 1,)."""
    post = q_posterior(np.atleast_2d(x0), np.atleast_2d(x_t), int(t), _schedule_from_beta(beta))
    return post.mean[0], post.var


def _q_posterior_with(x0, x_t, t, beta, bar=True, root=True, var_beta=False, prev=True):
    """q_posterior with a typical mistake: bars dropped, square roots dropped, the forward variance, or
    alpha_bar_t where alpha_bar_{t-1} belongs (prev=False)."""
    alpha = 1 - np.asarray(beta, dtype=float)
    a_bar = np.cumprod(alpha) if bar else alpha
    sq = np.sqrt if root else (lambda v: v)
    before = a_bar[t - 1] if prev else a_bar[t]
    mean = (sq(before) * beta[t] * x0 + sq(alpha[t]) * (1 - before) * x_t) / (1 - a_bar[t])
    var = beta[t] if var_beta else (1 - before) / (1 - a_bar[t]) * beta[t]
    return mean, var


def _q_posterior_cases(rng):
    linear, cosine = noise_schedule(50).beta, noise_schedule(40, "cosine").beta
    cases = [(np.array([1.0, -0.5]), np.array([0.3, 0.8]), 1, linear)]
    for beta, t in ((linear, 2), (linear, 30), (linear, 50), (cosine, 20), (cosine, 39)):
        d = int(rng.integers(1, 4))
        cases.append((rng.normal(size=d), rng.normal(size=d), t, beta))
    return cases


grade_q_posterior = grader(
    "q_posterior",
    "x0, x_t, t, beta",
    q_posterior_reference,
    _q_posterior_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_q_posterior_with(*a, bar=False), g),
            "the posterior uses the products alpha_bar_t = alpha_1 ... alpha_t (np.cumprod(1 - beta)) for the "
            "x_0 coefficient and in 1 - alpha_bar; only the x_t coefficient has sqrt(alpha_t) without a bar.",
        ),
        Hint(
            lambda a, e, g: close(_q_posterior_with(*a, prev=False), g),
            "alpha_bar_t appears where alpha_bar_{t-1} belongs: the posterior steps back to t - 1, so the x_0 "
            "coefficient is sqrt(alpha_bar_{t-1}) beta_t / (1 - alpha_bar_t) and the factor 1 - alpha_bar_{t-1} "
            "(in the x_t coefficient and in beta_tilde_t) uses the previous step; only 1 - alpha_bar_t divides.",
        ),
        Hint(
            lambda a, e, g: close(_q_posterior_with(*a, var_beta=True), g),
            "that variance is the forward step's beta_t; the posterior variance is "
            "beta_tilde_t = (1 - alpha_bar_{t-1}) / (1 - alpha_bar_t) beta_t, smaller than beta_t.",
        ),
        Hint(
            lambda a, e, g: close(_q_posterior_with(*a, root=False), g),
            "the coefficients hold square roots: sqrt(alpha_bar_{t-1}) beta_t / (1 - alpha_bar_t) for x_0 and "
            "sqrt(alpha_t) (1 - alpha_bar_{t-1}) / (1 - alpha_bar_t) for x_t.",
        ),
        Hint(
            lambda a, e, g: isinstance(g, tuple | list) and len(g) == 2 and close(e[0], g[0]),
            "the mean is right; check the variance beta_tilde_t (a number, the same for every coordinate).",
        ),
    ),
    mistakes=(
        (lambda x0, x_t, t, beta: _q_posterior_with(x0, x_t, t, beta, bar=False), "np.cumprod(1 - beta)"),
        (lambda x0, x_t, t, beta: _q_posterior_with(x0, x_t, t, beta, var_beta=True), "beta_tilde_t"),
        (lambda x0, x_t, t, beta: _q_posterior_with(x0, x_t, t, beta, root=False), "square roots"),
        (
            lambda x0, x_t, t, beta: _q_posterior_with(x0, x_t, t, beta, prev=False),
            "where alpha_bar_{t-1} belongs",
        ),
    ),
)


# ----------------------------------------------------------------------------- 10.6 sampling: scores, SDEs, guidance, DDIM


def ddim_step_reference(x_t, eps, alpha_bar_t, alpha_bar_s, eta, z):
    """One DDIM step from t to s < t for arrays x_t, eps, z of one shape (10.42)."""
    x_t, eps, z = (np.atleast_2d(np.asarray(v, dtype=float)) for v in (x_t, eps, z))
    schedule = Schedule(np.zeros(3), np.ones(3), np.array([1.0, alpha_bar_s, alpha_bar_t]))
    return ddim_step(x_t, eps, 2, 1, schedule, eta, z)[0]


def _ddim_with(x_t, eps, alpha_bar_t, alpha_bar_s, eta, z, root_t=True, keep_sigma=True, sigma_root=True):
    """A DDIM step with a typical mistake: x0_hat not divided by sqrt(alpha_bar_t), sigma^2 not subtracted
    from the direction term, or sigma without its square root."""
    x0_hat = (x_t - math.sqrt(1 - alpha_bar_t) * eps) / (math.sqrt(alpha_bar_t) if root_t else 1.0)
    var = eta**2 * (1 - alpha_bar_s) / (1 - alpha_bar_t) * (1 - alpha_bar_t / alpha_bar_s)
    sigma = math.sqrt(var) if sigma_root else var
    direction = math.sqrt(max(1 - alpha_bar_s - (sigma**2 if keep_sigma else 0.0), 0.0))
    return math.sqrt(alpha_bar_s) * x0_hat + direction * eps + sigma * z


def _ddim_cases(rng):
    cases = [(np.array([0.5, -1.0]), np.array([0.2, 0.4]), 0.3, 0.6, 0.0, np.zeros(2))]
    for eta in (0.0, 0.5, 1.0, 1.0):
        a_s = float(rng.uniform(0.3, 0.99))
        a_t = float(a_s * rng.uniform(0.2, 0.9))
        d = int(rng.integers(2, 5))
        cases.append((rng.normal(size=d), rng.normal(size=d), a_t, a_s, eta, rng.normal(size=d)))
    return cases


grade_ddim_step = grader(
    "ddim_step",
    "x_t, eps, alpha_bar_t, alpha_bar_s, eta, z",
    ddim_step_reference,
    _ddim_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_ddim_with(*a, root_t=False), g),
            "the predicted x_0 is (x_t - sqrt(1 - alpha_bar_t) eps) / sqrt(alpha_bar_t): divide by "
            "sqrt(alpha_bar_t), since x_t = sqrt(alpha_bar_t) x_0 + sqrt(1 - alpha_bar_t) eps.",
        ),
        Hint(
            lambda a, e, g: close(_ddim_with(*a, keep_sigma=False), g),
            "the noise sigma z adds variance sigma^2: the direction term is "
            "sqrt(1 - alpha_bar_s - sigma^2) eps, so that the total noise variance stays 1 - alpha_bar_s.",
        ),
        Hint(
            lambda a, e, g: close(_ddim_with(*a, sigma_root=False), g),
            "sigma is a standard deviation: eta sqrt((1 - alpha_bar_s) / (1 - alpha_bar_t)) "
            "sqrt(1 - alpha_bar_t / alpha_bar_s), with both square roots.",
        ),
    ),
    mistakes=(
        (lambda *a: _ddim_with(*a, root_t=False), "divide by sqrt(alpha_bar_t)"),
        (lambda *a: _ddim_with(*a, keep_sigma=False), "sqrt(1 - alpha_bar_s - sigma^2)"),
        (lambda *a: _ddim_with(*a, sigma_root=False), "standard deviation"),
    ),
)


# ----------------------------------------------------------------------------- 10.6 training a diffusion model
def gaussian_optimal_eps_reference(x_t, alpha_bar_t, mu, cov):
    """E[eps | x_t] for data N(mu, cov), x_t = sqrt(a) x_0 + sqrt(1 - a) eps: the book's `mixture_eps` with one
    component, at the step t = 1 of a one-step schedule with alpha_bar_1 = a."""
    one_step = Schedule(
        np.array([0.0, 1 - alpha_bar_t]), np.array([1.0, alpha_bar_t]), np.array([1.0, alpha_bar_t])
    )
    return mixture_eps(gaussian_mixture([1.0], [mu], [cov]), x_t, 1, one_step)


def _gaussian_eps_cases(rng):
    x_t = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 1.0]])
    chosen = (x_t, 0.5, np.array([1.0, -1.0]), np.diag([2.0, 0.5]))
    cases = [chosen]
    for d, a in ((2, 0.9), (3, 0.2), (4, 0.6)):
        A = rng.normal(size=(d, d))
        cases.append((rng.normal(size=(5, d)), a, rng.normal(size=d), A @ A.T / d + 0.3 * np.eye(d)))
    return cases


def _gaussian_eps_with(x_t, a, mu, cov, root=True, scale_mean=True, scale_cov=True, noise=True):
    C = (a if scale_cov else 1.0) * cov + ((1 - a) if noise else 0.0) * np.eye(len(mu))
    diff = x_t - (math.sqrt(a) if scale_mean else 1.0) * mu
    return (math.sqrt(1 - a) if root else 1.0) * np.linalg.solve(C, diff.T).T


grade_gaussian_optimal_eps = grader(
    "gaussian_optimal_eps",
    "x_t, alpha_bar_t, mu, cov",
    gaussian_optimal_eps_reference,
    _gaussian_eps_cases,
    hints=(
        Hint(
            lambda a, e, g: close(-e, g),
            "the sign: x_t - sqrt(alpha_bar_t) mu grows with eps, so E[eps | x_t] points along it; minus that "
            "(divided by sqrt(1 - alpha_bar_t)) is the score.",
        ),
        Hint(
            lambda a, e, g: close(_gaussian_eps_with(*a, root=False), g),
            "Cov(eps, x_t) = sqrt(1 - alpha_bar_t) I: multiply C^-1 (x_t - sqrt(alpha_bar_t) mu) by "
            "sqrt(1 - alpha_bar_t).",
        ),
        Hint(
            lambda a, e, g: close(_gaussian_eps_with(*a, scale_mean=False), g),
            "the mean of x_t is sqrt(alpha_bar_t) mu, not mu: subtract sqrt(alpha_bar_t) mu.",
        ),
        Hint(
            lambda a, e, g: close(_gaussian_eps_with(*a, scale_cov=False), g),
            "the covariance of x_t is C = alpha_bar_t Sigma + (1 - alpha_bar_t) I: the data covariance is "
            "scaled by alpha_bar_t too.",
        ),
        Hint(
            lambda a, e, g: close(_gaussian_eps_with(*a, noise=False), g),
            "the noise is part of x_t: its covariance is C = alpha_bar_t Sigma + (1 - alpha_bar_t) I, not "
            "alpha_bar_t Sigma alone (add the (1 - alpha_bar_t) I term).",
        ),
    ),
    mistakes=(
        (lambda *a: -gaussian_optimal_eps_reference(*a), "the sign"),
        (lambda *a: _gaussian_eps_with(*a, root=False), "multiply C^-1"),
        (lambda *a: _gaussian_eps_with(*a, scale_mean=False), "the mean of x_t is sqrt(alpha_bar_t) mu"),
        (lambda *a: _gaussian_eps_with(*a, scale_cov=False), "scaled by alpha_bar_t too"),
        (lambda *a: _gaussian_eps_with(*a, noise=False), "the noise is part of x_t"),
    ),
)


# ----------------------------------------------------------------------------- 10.7 flow matching and Langevin sampling


def _fm_cases(rng):
    chosen = (
        np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 1.0]]),
        0.5,
        np.array([1.0, -1.0]),
        np.diag([2.0, 0.5]),
    )
    cases = [chosen]
    for d, s in ((2, 0.2), (3, 0.7), (4, 0.9)):
        A = rng.normal(size=(d, d))
        cases.append((rng.normal(size=(5, d)), s, rng.normal(size=d), A @ A.T / d + 0.3 * np.eye(d)))
    return cases


def _fm_with(x, s, mu, cov, squares=True, cross_sign=-1.0, centre=True):
    """gaussian_fm_velocity with a typical mistake: C_s without squares, the wrong sign of the noise's part of the
    cross-covariance, or x - mu for x - s mu."""
    d = len(mu)
    C = ((1 - s) ** 2 if squares else 1 - s) * np.eye(d) + (s**2 if squares else s) * cov
    cross = s * cov + cross_sign * (1 - s) * np.eye(d)
    diff = x - (s * mu if centre else mu)
    return mu + np.linalg.solve(C, diff.T).T @ cross.T


grade_fm_velocity = grader(
    "fm_velocity",
    "x, s, mu, cov",
    gaussian_fm_velocity,
    _fm_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_fm_with(*a, squares=False), g),
            "x_s = (1 - s) x_0 + s x_1 has covariance C_s = (1 - s)^2 I + s^2 Sigma: the coefficients are squared.",
        ),
        Hint(
            lambda a, e, g: close(_fm_with(*a, cross_sign=1.0), g),
            "Cov(x_1 - x_0, x_s) = s Sigma - (1 - s) I: the noise x_0 enters the target with a minus sign.",
        ),
        Hint(
            lambda a, e, g: close(_fm_with(*a, centre=False), g),
            "the mean of x_s is s mu, not mu: condition on x - s mu.",
        ),
    ),
    mistakes=(
        (lambda *a: _fm_with(*a, squares=False), "coefficients are squared"),
        (lambda *a: _fm_with(*a, cross_sign=1.0), "minus sign"),
        (lambda *a: _fm_with(*a, centre=False), "the mean of x_s is s mu"),
    ),
)
