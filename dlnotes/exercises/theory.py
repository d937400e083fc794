"""Graded exercises of chapter 09 — theory of deep learning."""

from __future__ import annotations

import math

import numpy as np

from ..theory import (
    bias_variance_terms,
    gp_posterior,
    hoeffding_epsilon,
    importance_weights,
    kernel_alignment,
    kl_diag_gauss,
    magnitude_mask,
    mh_accept_prob,
    ntk_two_layer,
)
from .core import Hint, close, grader

# ----------------------------------------------------------------------------- 9.1 the linearised network and the NTK


def _ntk_two_layer_cases(rng):
    chosen = (
        np.array([[1.0, 0.0], [0.6, 0.8]]),
        np.array([[0.0, 1.0]]),
        np.array([[1.0, 1.0], [-1.0, 2.0], [0.5, -1.0]]),
        np.array([1.0, -2.0, 0.5]),
    )
    cases = [chosen]
    for n1, n2, d, m in [(4, 3, 2, 5), (6, 5, 3, 16), (3, 7, 4, 50)]:
        cases.append(
            (rng.normal(size=(n1, d)), rng.normal(size=(n2, d)), rng.normal(size=(m, d)), rng.normal(size=m))
        )
    return cases


def _ntk_terms(X1, X2, W, v):
    """The parts of the 2-layer ReLU NTK without the 1/m: from v; from W with v_j^2, without it, without x^T x',
    and with v_j in place of v_j^2."""
    Z1, Z2 = X1 @ W.T, X2 @ W.T
    from_v = np.maximum(Z1, 0) @ np.maximum(Z2, 0).T
    D1, D2 = (Z1 > 0).astype(float), (Z2 > 0).astype(float)
    return (
        from_v,
        ((D1 * v**2) @ D2.T) * (X1 @ X2.T),
        (D1 @ D2.T) * (X1 @ X2.T),
        (D1 * v**2) @ D2.T,
        ((D1 * v) @ D2.T) * (X1 @ X2.T),
    )


grade_ntk_two_layer = grader(
    "ntk_two_layer",
    "X1, X2, W, v",
    lambda X1, X2, W, v: ntk_two_layer(X1, X2, W, v),
    _ntk_two_layer_cases,
    hints=(
        Hint(
            lambda a, e, g: close(len(a[3]) * e, g),
            "each gradient carries the factor 1/sqrt(m) of the forward pass, so their inner product carries 1/m: "
            "divide the sum over the units by m.",
        ),
        Hint(
            lambda a, e, g: close(math.sqrt(len(a[3])) * e, g),
            "the kernel is an inner product of two gradients, each with a factor 1/sqrt(m): the product has 1/m, "
            "not 1/sqrt(m).",
        ),
        Hint(
            lambda a, e, g: close(_ntk_terms(*a)[1] / len(a[3]), g),
            "the output weights v are parameters too: d f / d v_j = phi(w_j^T x) / sqrt(m) adds "
            "phi(w_j^T x) phi(w_j^T x') to each unit's term.",
        ),
        Hint(
            lambda a, e, g: close(_ntk_terms(*a)[0] / len(a[3]), g),
            "the hidden weights W are parameters too: d f / d w_j = v_j phi'(w_j^T x) x / sqrt(m) adds "
            "v_j^2 phi'(w_j^T x) phi'(w_j^T x') x^T x'.",
        ),
        Hint(
            lambda a, e, g: close((_ntk_terms(*a)[0] + _ntk_terms(*a)[2]) / len(a[3]), g),
            "d f / d w_j = v_j phi'(w_j^T x) x / sqrt(m) carries the output weight v_j: the second term has v_j^2.",
        ),
        Hint(
            lambda a, e, g: close((_ntk_terms(*a)[0] + _ntk_terms(*a)[3]) / len(a[3]), g),
            "d f / d w_j is a vector, v_j phi'(w_j^T x) x / sqrt(m): the inner product of two of them has the "
            "factor x^T x'.",
        ),
        Hint(
            lambda a, e, g: close((_ntk_terms(*a)[0] + _ntk_terms(*a)[4]) / len(a[3]), g),
            "the gradient d f / d w_j = v_j phi'(w_j^T x) x / sqrt(m) appears twice in the inner product, once "
            "for x and once for x', so its factor v_j appears squared: v_j^2, not v_j.",
        ),
    ),
    mistakes=(
        (lambda X1, X2, W, v: len(v) * ntk_two_layer(X1, X2, W, v), "divide the sum over the units by m"),
        (
            lambda X1, X2, W, v: _ntk_terms(X1, X2, W, v)[1] / len(v),
            "the output weights v are parameters too",
        ),
        (
            lambda X1, X2, W, v: (_ntk_terms(X1, X2, W, v)[0] + _ntk_terms(X1, X2, W, v)[2]) / len(v),
            "the second term has v_j^2",
        ),
        (
            lambda X1, X2, W, v: (_ntk_terms(X1, X2, W, v)[0] + _ntk_terms(X1, X2, W, v)[3]) / len(v),
            "factor x^T x'",
        ),
        (
            lambda X1, X2, W, v: (_ntk_terms(X1, X2, W, v)[0] + _ntk_terms(X1, X2, W, v)[4]) / len(v),
            "v_j^2, not v_j",
        ),
    ),
)


# ----------------------------------------------------------------------------- 9.1 infinite width, lazy and rich training


def _alignment_cases(rng):
    cases = []
    for n in (4, 7, 12):
        A = rng.normal(size=(n, n + 2))
        cases.append((A @ A.T, rng.normal(size=n) * 2))
    X = rng.normal(size=(10, 2))
    cases.append((np.exp(-((X[:, None] - X[None]) ** 2).sum(-1)), np.sign(X[:, 0]) + 0.0))  # labels +-1
    return cases


def _alignment_numerator(K, y):
    return float(y @ K @ y)


grade_kernel_alignment = grader(
    "kernel_alignment",
    "K, y",
    kernel_alignment,
    _alignment_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_alignment_numerator(*a) / (np.linalg.norm(a[0], 2) * (a[1] @ a[1])), g),
            "||K||_F is the Frobenius norm sqrt(sum_ij K_ij^2) (np.linalg.norm(K) of a matrix), not the "
            "spectral norm np.linalg.norm(K, 2).",
        ),
        Hint(
            lambda a, e, g: close(
                _alignment_numerator(*a) / (np.linalg.norm(a[0]) * np.linalg.norm(a[1])), g
            ),
            "divide by ||y||^2 = ||y y^T||_F, not by ||y||: the alignment is the cosine between K and y y^T.",
        ),
        Hint(
            lambda a, e, g: close(_alignment_numerator(*a) / (np.linalg.norm(a[0]) * len(a[1])), g),
            "||y y^T||_F = ||y||^2 equals n only for labels +-1; for real targets divide by y^T y.",
        ),
        Hint(
            lambda a, e, g: close(_alignment_numerator(*a) / (np.trace(a[0]) * (a[1] @ a[1])), g),
            "normalise K by its Frobenius norm sqrt(sum_ij K_ij^2), not by its trace.",
        ),
    ),
    mistakes=(
        (lambda K, y: float(y @ K @ y / (np.linalg.norm(K, 2) * (y @ y))), "spectral"),
        (lambda K, y: float(y @ K @ y / (np.linalg.norm(K) * np.linalg.norm(y))), "divide by ||y||^2"),
        (lambda K, y: float(y @ K @ y / (np.linalg.norm(K) * len(y))), "equals n only for labels +-1"),
    ),
)


# ----------------------------------------------------------------------------- 9.2 Bayesian inference


def _importance_cases(rng):
    cases = []
    for k in (5, 12, 40):
        cases.append((rng.normal(size=k) * 3, rng.normal(size=k) * 2))
    # log densities far from 0: exp() alone under- or overflows
    cases.append((rng.normal(size=8) - 1200.0, rng.normal(size=8)))
    cases.append((rng.normal(size=8) + 900.0, rng.normal(size=8) - 50.0))
    return cases


def _finite_nonzero(got) -> bool:
    got = np.asarray(got, dtype=float)
    return bool(np.isfinite(got).all() and got.sum() > 0)


grade_importance_weights = grader(
    "importance_weights",
    "log_target, log_proposal",
    importance_weights,
    _importance_cases,
    hints=(
        Hint(
            lambda a, e, g: not _finite_nonzero(g),
            "exp() of log densities like -1200 or +900 underflows to 0 or overflows to inf: subtract the largest "
            "log weight before exponentiating (the normalisation cancels it).",
        ),
        Hint(
            lambda a, e, g: close(importance_weights(a[0]), g),
            "divide by the proposal density: w_j is proportional to p~(theta_j) / q(theta_j). With prior draws "
            "and p~ = exp(-E) that leaves the likelihood; exp(-E) alone counts the prior twice.",
        ),
        Hint(
            lambda a, e, g: close(importance_weights(a[1], a[0]), g),
            "the ratio is inverted: target over proposal, p~(theta_j) / q(theta_j), not q / p~.",
        ),
        Hint(
            lambda a, e, g: close(e / e.max(), g) or close(e * np.exp(np.max(a[0] - a[1])), g),
            "normalise the weights: divide by their sum, so that they sum to 1.",
        ),
    ),
    mistakes=(
        (lambda log_target, log_proposal: importance_weights(log_target), "counts the prior twice"),
        (lambda log_target, log_proposal: importance_weights(log_proposal, log_target), "inverted"),
        (
            lambda log_target, log_proposal: (
                np.exp(log_target - log_proposal) / np.exp(log_target - log_proposal).sum()
            ),
            "subtract the largest",
        ),
        (
            lambda log_target, log_proposal: np.exp(
                log_target - log_proposal - np.max(log_target - log_proposal)
            ),
            "normalise the weights",
        ),
    ),
)


# ----------------------------------------------------------------------------- 9.2 sampling the posterior: Metropolis-Hastings, HMC, Langevin


def _accept_cases(rng):
    cases = [
        (np.array([-1.0, -3.0, -0.5]), np.array([-2.0, -1.0, -0.5]), np.zeros(3), np.zeros(3)),
        (np.array([-1.0, -2.0]), np.array([-1.5, -1.0]), np.array([-0.3, -2.0]), np.array([-1.2, -0.1])),
    ]
    for k in (5, 10):
        cases.append(tuple(rng.normal(size=k) * s for s in (2.0, 2.0, 1.0, 1.0)))
    return cases


grade_mh_accept_prob = grader(
    "mh_accept_prob",
    "log_p_new, log_p_old, log_q_forward, log_q_backward",
    mh_accept_prob,
    _accept_cases,
    hints=(
        Hint(
            lambda a, e, g: close(mh_accept_prob(a[1], a[0], a[3], a[2]), g),
            "the ratio is inverted: a move to a more probable theta' must always be accepted, so the new "
            "density p(theta'|S) Pi~(theta|theta') goes on top.",
        ),
        Hint(
            lambda a, e, g: close(np.exp(a[0] - a[1] + a[3] - a[2]), g),
            "an acceptance probability is at most 1: take min{1, ratio} (in logs, min{0, log ratio}).",
        ),
        Hint(
            lambda a, e, g: close(mh_accept_prob(a[0], a[1], a[3], a[2]), g),
            "the Hastings correction is Pi~(theta|theta') / Pi~(theta'|theta): the backward proposal "
            "log_q_backward on top, the forward one below.",
        ),
        Hint(
            lambda a, e, g: close(np.log(e), g),
            "that is log(alpha): exponentiate, alpha = exp(min{0, log ratio}).",
        ),
    ),
    mistakes=(
        (
            lambda log_p_new, log_p_old, log_q_forward, log_q_backward: mh_accept_prob(
                log_p_old, log_p_new, log_q_backward, log_q_forward
            ),
            "inverted",
        ),
        (
            lambda log_p_new, log_p_old, log_q_forward, log_q_backward: np.exp(
                log_p_new - log_p_old + log_q_backward - log_q_forward
            ),
            "at most 1",
        ),
        (
            lambda log_p_new, log_p_old, log_q_forward, log_q_backward: mh_accept_prob(
                log_p_new, log_p_old, log_q_backward, log_q_forward
            ),
            "Hastings correction",
        ),
        (
            lambda log_p_new, log_p_old, log_q_forward, log_q_backward: np.minimum(
                0.0, log_p_new - log_p_old + log_q_backward - log_q_forward
            ),
            "exponentiate",
        ),
    ),
)


# ----------------------------------------------------------------------------- 9.3 Gaussian processes and infinitely wide networks


def gp_posterior_mean_var_reference(K, K_star, k_star_star, y, noise_var):
    """The posterior mean and variance of the latent f at the test inputs (`gp_posterior`)."""
    return tuple(gp_posterior(K, K_star, k_star_star, y, noise_var))


def _gp_variant(K, K_star, k_star_star, y, noise_var, *, solve_noise=True, sign=-1.0, var_noise=0.0):
    """GP regression written with one typical mistake: no noise in the solve, the wrong sign of the variance
    correction, the noise variance added to the variance of the latent f."""
    A = K + (noise_var if solve_noise else 0.0) * np.eye(len(K))
    mean = K_star @ np.linalg.solve(A, y)
    var = k_star_star + sign * np.einsum("ij,ji->i", K_star, np.linalg.solve(A, K_star.T)) + var_noise
    return mean, var


def _rbf_1d(a, b):
    return np.exp(-((a[:, None] - b[None, :]) ** 2) / 2)


def _gp_cases(rng):
    x, x_star = np.array([-2.0, -0.7, 0.0, 0.4, 1.5, 2.5]), np.array([-1.0, 0.2, 2.0, 4.0])
    cases = [(_rbf_1d(x, x), _rbf_1d(x_star, x), np.ones(4), np.sin(x), 0.1)]
    for n, n_star in [(5, 3), (8, 4), (12, 6)]:
        A = rng.normal(size=(n + n_star, n + n_star + 2))
        C = A @ A.T / (n + n_star) + 0.1 * np.eye(n + n_star)
        noise_var = float(rng.uniform(0.1, 1.0))
        cases.append((C[:n, :n], C[n:, :n], np.diag(C[n:, n:]).copy(), rng.normal(size=n), noise_var))
    return cases


grade_gp_posterior_mean_var = grader(
    "gp_posterior_mean_var",
    "K, K_star, k_star_star, y, noise_var",
    gp_posterior_mean_var_reference,
    _gp_cases,
    hints=(
        Hint(
            lambda a, e, g: np.shape(g[1]) == (len(a[1]), len(a[1])),
            "return the variances of the test points, the diagonal k(x*_i, x*_i) - k_i^T (K + sigma^2 I)^-1 k_i "
            "(n_*,), not the whole posterior covariance matrix.",
        ),
        Hint(
            lambda a, e, g: close(_gp_variant(*a, solve_noise=False)[0], g[0]),
            "the targets are noisy: solve with K + sigma^2 I, not K (without the noise the mean interpolates "
            "the noisy targets).",
        ),
        Hint(
            lambda a, e, g: close(e[0], g[0]) and close(e[1] + a[4], g[1]),
            "that is the variance of a new noisy target y_*; the latent f(x_*) asked for has no noise: "
            "k(x_*, x_*) - k_*^T (K + sigma^2 I)^-1 k_*, without + sigma^2.",
        ),
        Hint(
            lambda a, e, g: close(e[0], g[0]) and close(np.sqrt(e[1]), g[1]),
            "that is the standard deviation: return the variance (no square root).",
        ),
        Hint(
            lambda a, e, g: close(e[0], g[0]) and close(_gp_variant(*a, sign=1.0)[1], g[1]),
            "the data reduce the uncertainty: subtract k_*^T (K + sigma^2 I)^-1 k_* from the prior variance.",
        ),
    ),
    mistakes=(
        (lambda *a: _gp_variant(*a, solve_noise=False), "not K"),
        (lambda *a: _gp_variant(*a, var_noise=a[4]), "new noisy target"),
        (lambda *a: (gp_posterior(*a).mean, np.sqrt(gp_posterior(*a).var)), "standard deviation"),
        (lambda *a: _gp_variant(*a, sign=1.0), "reduce the uncertainty"),
        (
            lambda K, K_star, kss, y, s2: (
                gp_posterior(K, K_star, kss, y, s2).mean,
                np.diag(kss) - K_star @ np.linalg.solve(K + s2 * np.eye(len(K)), K_star.T),
            ),
            "not the whole posterior covariance",
        ),
    ),
)


# ----------------------------------------------------------------------------- 9.4 statistical learning theory: PAC, VC, Rademacher


def _hoeffding_cases(rng):
    chosen = [(100, 0.05), (1000, 0.01), (20, 0.1), (50, 0.5)]
    return chosen + [(int(rng.integers(5, 5000)), float(rng.uniform(0.001, 0.3))) for _ in range(4)]


def _hoeffding_variant(n, delta, numerator, denominator=2.0):
    with np.errstate(invalid="ignore"):
        return float(np.sqrt(numerator / (denominator * n)))


grade_hoeffding_epsilon = grader(
    "hoeffding_epsilon",
    "n, delta",
    hoeffding_epsilon,
    _hoeffding_cases,
    hints=(
        Hint(
            lambda a, e, g: np.isnan(float(g)) or close(_hoeffding_variant(a[0], a[1], -np.log(1 / a[1])), g),
            "ln(delta) is negative (delta < 1), so its square root is not a number: the numerator is "
            "ln(1/delta) = -ln(delta) > 0.",
        ),
        Hint(
            lambda a, e, g: close(_hoeffding_variant(a[0], a[1], np.log(1 / a[1]), 1.0), g),
            "Hoeffding's exponent is 2 n eps^2 for a loss in [0, 1]: solve exp(-2 n eps^2) = delta, which puts "
            "the 2 in the denominator, eps = sqrt(ln(1/delta) / (2n)).",
        ),
        Hint(
            lambda a, e, g: close(_hoeffding_variant(a[0], a[1], np.log(2 / a[1])), g),
            "ln(2/delta) is the two-sided bound, for |R - R_hat| <= eps; the one-sided statement R - R_hat <= eps "
            "needs only ln(1/delta).",
        ),
        Hint(
            lambda a, e, g: close(e**2, g),
            "that is eps^2: take the square root, eps = sqrt(ln(1/delta) / (2n)).",
        ),
        Hint(
            lambda a, e, g: close(_hoeffding_variant(a[0], a[1], np.log10(1 / a[1])), g),
            "the logarithm is the natural one: ln(1/delta) (math.log, np.log), not log10; it comes from solving "
            "exp(-2 n eps^2) = delta.",
        ),
        Hint(
            lambda a, e, g: close(e / 2, g) or close(e / math.sqrt(2), g),
            "a stray factor 1/2: exp(-2 n eps^2) = delta gives eps^2 = ln(1/delta) / (2n) exactly, so "
            "eps = sqrt(ln(1/delta) / (2n)), with no further 1/2 inside or outside the root.",
        ),
    ),
    mistakes=(
        (lambda n, delta: math.sqrt(math.log(1 / delta) / n), "the 2 in the denominator"),
        (lambda n, delta: math.sqrt(math.log(2 / delta) / (2 * n)), "two-sided"),
        (lambda n, delta: _hoeffding_variant(n, delta, math.log(delta)), "ln(1/delta)"),
        (lambda n, delta: math.log(1 / delta) / (2 * n), "take the square root"),
        (lambda n, delta: math.sqrt(math.log10(1 / delta) / (2 * n)), "not log10"),
        (lambda n, delta: math.sqrt(math.log(1 / delta) / (4 * n)), "a stray factor 1/2"),
        (lambda n, delta: 0.5 * math.sqrt(math.log(1 / delta) / (2 * n)), "a stray factor 1/2"),
    ),
)


# ----------------------------------------------------------------------------- 9.4 bias, variance, double descent, implicit bias


def _bias_variance_cases(rng):
    x, x_test = np.linspace(-1, 1, 12), np.linspace(-1, 1, 7)
    cases = [(np.vander(x, 3), np.sin(np.pi * x), np.vander(x_test, 3), np.sin(np.pi * x_test), 0.25)]
    for n, p, m in [(10, 3, 5), (20, 6, 8), (8, 8, 4)]:
        cases.append(
            (
                rng.normal(size=(n, p)),
                rng.normal(size=n),
                rng.normal(size=(m, p)),
                rng.normal(size=m),
                float(rng.uniform(0.1, 2.0)),
            )
        )
    return cases


def _hat(Phi, Phi_test):
    return Phi_test @ np.linalg.pinv(Phi)


grade_bias_variance_terms = grader(
    "bias_variance_terms",
    "Phi, f_star, Phi_test, f_star_test, noise_var",
    lambda *args: tuple(bias_variance_terms(*args)),
    _bias_variance_cases,
    hints=(
        Hint(
            lambda a, e, g: close(-e[0], g[0]),
            "the bias is E_S f_S(x) - f*(x) = h(x)^T f* - f*(x): the average fit minus the truth, not the "
            "other way round.",
        ),
        Hint(
            lambda a, e, g: close(e[1] / a[4], g[1]),
            "the variance of h(x)^T y with y = f* + noise, noise ~ N(0, sigma^2 I), is sigma^2 ||h(x)||^2: "
            "multiply by noise_var.",
        ),
        Hint(
            lambda a, e, g: (
                close(np.sqrt(a[4] * np.sum(_hat(a[0], a[2]) ** 2, axis=1)), g[1])
                or close(a[4] * np.sqrt(np.sum(_hat(a[0], a[2]) ** 2, axis=1)), g[1])
            ),
            "return the variance sigma^2 ||h(x)||^2 (the squared norm, times the variance), not a standard "
            "deviation or ||h(x)|| itself.",
        ),
        Hint(
            lambda a, e, g: close(e[0] ** 2, g[0]),
            "return the bias itself, h(x)^T f* - f*(x), with its sign; bias^2 is its square.",
        ),
        Hint(
            lambda a, e, g: close(_hat(a[2], a[2]) @ a[3] - a[3], g[0]),
            "the fit sees f* only through the training targets: the bias is h(x)^T f* with f* at the "
            "training inputs (f_star), minus f*(x) at the test input.",
        ),
    ),
    mistakes=(
        (
            lambda Phi, f_star, Phi_test, f_star_test, noise_var: (
                f_star_test - _hat(Phi, Phi_test) @ f_star,
                noise_var * np.sum(_hat(Phi, Phi_test) ** 2, axis=1),
            ),
            "not the other way round",
        ),
        (
            lambda Phi, f_star, Phi_test, f_star_test, noise_var: (
                _hat(Phi, Phi_test) @ f_star - f_star_test,
                np.sum(_hat(Phi, Phi_test) ** 2, axis=1),
            ),
            "multiply by noise_var",
        ),
        (
            lambda Phi, f_star, Phi_test, f_star_test, noise_var: (
                _hat(Phi, Phi_test) @ f_star - f_star_test,
                noise_var * np.linalg.norm(_hat(Phi, Phi_test), axis=1),
            ),
            "the squared norm",
        ),
        (
            lambda Phi, f_star, Phi_test, f_star_test, noise_var: (
                _hat(Phi_test, Phi_test) @ f_star_test - f_star_test,
                noise_var * np.sum(_hat(Phi, Phi_test) ** 2, axis=1),
            ),
            "only through the training targets",
        ),
    ),
)


# ----------------------------------------------------------------------------- 9.4 PAC-Bayes and flat minima


def _kl_cases(rng):
    chosen = (np.array([0.0, 1.0]), np.array([1.0, 0.5]), np.array([0.0, 0.0]), np.array([1.0, 2.0]))
    cases = [chosen]
    for d in (1, 3, 5, 8):
        cases.append(
            (rng.normal(size=d), rng.uniform(0.2, 3.0, d), rng.normal(size=d), rng.uniform(0.2, 3.0, d))
        )
    return cases


grade_kl_diag_gauss = grader(
    "kl_diag_gauss",
    "mu_q, var_q, mu_p, var_p",
    kl_diag_gauss,
    _kl_cases,
    hints=(
        Hint(
            lambda a, e, g: close(2 * e, g),
            "that is twice the KL: each of the three terms carries a factor 1/2, "
            "KL = sum_i [ln(v_P/v_Q)/2 + (v_Q + (mu_Q - mu_P)^2)/(2 v_P) - 1/2].",
        ),
        Hint(
            lambda a, e, g: close(kl_diag_gauss(a[2], a[3], a[0], a[1]), g),
            "that is KL(P||Q), the arguments reversed. KL(Q||P) is the expectation under Q of ln(q/p): the "
            "variance of Q and the distance of the means are divided by the variance of P.",
        ),
        Hint(
            lambda a, e, g: (
                close(kl_diag_gauss(a[0], a[1] ** 2, a[2], a[3] ** 2), g)
                or close(kl_diag_gauss(a[0], np.sqrt(a[1]), a[2], np.sqrt(a[3])), g)
            ),
            "var_q and var_p are variances sigma^2, not standard deviations: with variances the formula has "
            "ln(v_P/v_Q)/2 and (v_Q + (mu_Q - mu_P)^2)/(2 v_P), with no further squares or roots.",
        ),
        Hint(
            lambda a, e, g: close(e + 0.5 * len(a[0]), g),
            "KL(Q||Q) must be 0: you left out the -1/2 of every coordinate.",
        ),
        Hint(
            lambda a, e, g: close(e / len(a[0]), g),
            "sum the terms over the coordinates (independent coordinates add their KL), do not average them.",
        ),
    ),
    mistakes=(
        (lambda mu_q, var_q, mu_p, var_p: 2 * kl_diag_gauss(mu_q, var_q, mu_p, var_p), "factor 1/2"),
        (lambda mu_q, var_q, mu_p, var_p: kl_diag_gauss(mu_p, var_p, mu_q, var_q), "KL(P||Q)"),
        (
            lambda mu_q, var_q, mu_p, var_p: kl_diag_gauss(mu_q, var_q**2, mu_p, var_p**2),
            "not standard deviations",
        ),
        (
            lambda mu_q, var_q, mu_p, var_p: kl_diag_gauss(mu_q, var_q, mu_p, var_p) + 0.5 * len(mu_q),
            "KL(Q||Q) must be 0",
        ),
    ),
)


# ----------------------------------------------------------------------------- 9.5 the loss landscape


def _mask_cases(rng):
    chosen = (np.array([[0.5, -3.0, 0.1], [-0.2, 2.0, -1.0]]), 1 / 3)
    cases = [chosen]
    for shape, frac in (((5, 4), 0.8), ((10, 3), 0.25), ((8,), 0.375), ((6, 7), 0.95), ((4, 4), 0.0)):
        cases.append((rng.normal(size=shape), frac))
    return cases


def _zero_where(w, order, frac):
    """The mask that sets to 0 the first round(frac * w.size) entries of w in the given order of flat indices."""
    mask = np.ones(np.size(w))
    mask[order[: round(frac * np.size(w))]] = 0.0
    return mask.reshape(np.shape(w))


def _prune_largest(w, frac):
    return _zero_where(w, np.argsort(-np.abs(w).ravel(), kind="stable"), frac)


def _prune_most_negative(w, frac):
    return _zero_where(w, np.argsort(np.ravel(w), kind="stable"), frac)


def _quantile_mask(w, frac):
    return (np.abs(w) > np.quantile(np.abs(w), frac)).astype(float)


grade_magnitude_mask = grader(
    "magnitude_mask",
    "w, frac",
    magnitude_mask,
    _mask_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_prune_largest(*a), g),
            "you removed the largest weights: magnitude pruning keeps the large |w| and sets the smallest to 0.",
        ),
        Hint(
            lambda a, e, g: close(magnitude_mask(a[0], 1 - a[1]), g),
            "frac is the fraction pruned (set to 0), not the fraction kept: round(frac * w.size) entries are 0.",
        ),
        Hint(
            lambda a, e, g: close(_prune_most_negative(*a), g),
            "rank the weights by their magnitude |w|, not by their signed value: a weight of -3 is large.",
        ),
        Hint(
            lambda a, e, g: close(1 - e, g),
            "the mask is 1 where a weight is kept and 0 where it is pruned; yours is the other way round.",
        ),
        Hint(
            lambda a, e, g: close(_quantile_mask(*a), g),
            "a threshold at np.quantile(np.abs(w), frac) prunes the wrong number of weights even without ties: "
            "np.quantile interpolates between sorted values (on a 6x7 matrix at 95 % it prunes 39, not "
            "round(0.95 * 42) = 40). Sort the magnitudes and zero exactly the first round(frac * w.size).",
        ),
    ),
    mistakes=(
        (_prune_largest, "removed the largest"),
        (lambda w, frac: magnitude_mask(w, 1 - frac), "fraction pruned"),
        (_prune_most_negative, "magnitude |w|"),
        (lambda w, frac: 1 - magnitude_mask(w, frac), "other way round"),
        (_quantile_mask, "np.quantile interpolates"),
    ),
)


# ----------------------------------------------------------------------------- 9.5 (continued) permutation symmetry


def permute_one_hidden_reference(W1, b1, W2, perm):
    """Reorder the hidden units of a one-hidden-layer network, f(x) = W2 phi(W1 x + b1) + b2, by perm (unit i of
    the result is unit perm[i]): the rows of W1 (h, d), the entries of b1 (h,) and the columns of W2 (k, h)."""
    perm = np.asarray(perm)
    return np.asarray(W1)[perm], np.asarray(b1)[perm], np.asarray(W2)[:, perm]


def _permute_cases(rng):
    chosen = (
        np.arange(6.0).reshape(3, 2),
        np.array([0.1, 0.2, 0.3]),
        np.arange(6.0).reshape(2, 3) + 10,
        [2, 0, 1],
    )
    cases = [chosen]
    for d, h, k in ((2, 5, 1), (4, 8, 3), (3, 16, 10)):
        cases.append(
            (rng.normal(size=(h, d)), rng.normal(size=h), rng.normal(size=(k, h)), rng.permutation(h))
        )
    return cases


def _columns_forgotten(W1, b1, W2, perm):
    W1p, b1p, _ = permute_one_hidden_reference(W1, b1, W2, perm)
    return W1p, b1p, np.asarray(W2)


def _bias_forgotten(W1, b1, W2, perm):
    W1p, _, W2p = permute_one_hidden_reference(W1, b1, W2, perm)
    return W1p, np.asarray(b1), W2p


def _inverse_permutation(W1, b1, W2, perm):
    return permute_one_hidden_reference(W1, b1, W2, np.argsort(perm))


grade_permute_hidden = grader(
    "permute_hidden",
    "W1, b1, W2, perm",
    permute_one_hidden_reference,
    _permute_cases,
    hints=(
        Hint(
            lambda a, e, g: close(_columns_forgotten(*a), g),
            "W1 and b1 are right, but W2 still reads the units in the old order: permute the columns of W2 by the "
            "same perm (W2[:, perm]), otherwise the network computes a different function.",
        ),
        Hint(
            lambda a, e, g: close(_bias_forgotten(*a), g),
            "the bias b1 belongs to the hidden units: reorder it with the rows of W1 (b1[perm]).",
        ),
        Hint(
            lambda a, e, g: close(_inverse_permutation(*a), g),
            "you applied the inverse permutation: unit i of the result is unit perm[i] of the network, i.e. "
            "W1[perm], not W1[np.argsort(perm)]. (Both keep the function; only one is the permutation asked for.)",
        ),
    ),
    mistakes=(
        (_columns_forgotten, "permute the columns of W2"),
        (_bias_forgotten, "the bias b1 belongs"),
        (_inverse_permutation, "inverse permutation"),
    ),
)
