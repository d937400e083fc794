"""Section 11.6 of chapter 11, attribution by removal (notebook 07_shapley): a synthetic data set with an
irrelevant and a duplicated feature, the missing-information attribution, the predictive utility of a feature,
Shapley and Banzhaf values of a game, KernelSHAP, and the SHAP and SAGE values of a model.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import expit, xlogy
from sklearn.linear_model import LogisticRegression

from ..validation import (
    check_callable,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_rng,
    check_vector,
)

REDUNDANT_FEATURES = (
    "x_a",
    "x_c (irrelevant)",
    "x_b",
    "x_b (copy)",
)  # the columns of redundant_logistic_data


class LabelledData(NamedTuple):
    X: np.ndarray  # (n, d) features, one example per row
    y: np.ndarray  # (n,) labels in {0, 1}


def redundant_logistic_data(n: int, rng=None) -> LabelledData:
    """Synthetic logistic data with an irrelevant and a duplicated feature: independent
    :math:`x_a, x_b, x_c \\sim \\mathcal N(0, 1)`, :math:`P(Y=1\\mid x) = \\sigma(2x_a + 2x_b)`, and the columns
    of X (n, 4) are :math:`(x_a, x_c, x_b, x_b)` (`REDUNDANT_FEATURES`); y (n,) in {0, 1} (11.6)."""
    n, rng = check_int(n, "n", 1), check_rng(rng)
    x_a, x_b, x_c = rng.standard_normal((3, n))
    y = (rng.uniform(size=n) < expit(2 * x_a + 2 * x_b)).astype(np.int64)
    return LabelledData(np.column_stack([x_a, x_c, x_b, x_b]), y)


def _model_outputs(f, Z: np.ndarray, name: str = "f") -> np.ndarray:
    """f applied to the rows of Z (N, d), checked to return one finite number per row."""
    out = np.asarray(f(Z), dtype=np.float64)
    if out.shape != (len(Z),):
        raise ValueError(f"{name} must map rows (N, d) to one number per row (N,), got shape {out.shape}")
    if not np.isfinite(out).all():
        raise ValueError(f"{name} returned NaN or infinity")
    return out


def missing_info(f, x, j: int, X_ref) -> float:
    """The missing-information attribution of feature j at x:
    :math:`f(x) - \\mathbb E[f(X)\\mid X_{-j} = x_{-j}]`, with the expectation estimated by putting the
    column j of the sample X_ref (m, d) into x. For independent features X_ref is any sample of X (the
    conditional law of X_j is its marginal); otherwise its column j must be drawn from X_j given
    :math:`X_{-j} = x_{-j}`. f maps rows (N, d) to (N,); x (d,) (11.6)."""
    check_callable(f, "f")
    x = check_vector(x, "x")
    d = len(x)
    j = check_int(j, "j", 0, d - 1)
    X_ref = check_matrix(X_ref, "X_ref", cols=d)
    Z = np.repeat(x[None], len(X_ref), axis=0)
    Z[:, j] = X_ref[:, j]
    return float(_model_outputs(f, x[None])[0] - _model_outputs(f, Z).mean())


class Utility(NamedTuple):
    utility: float  # risk without x_j - risk with x_j, in nats
    risk_with: float  # test log-loss of the model trained on all features
    risk_without: float  # test log-loss of the model retrained without feature j


def logistic_risk(X, y, X_test, y_test, features=None) -> float:
    """The test log-loss (mean cross-entropy in nats) of a logistic regression (scikit-learn, default L2 penalty
    C = 1) trained on the columns `features` of (X (n, d), y (n,)); no feature: the constant prediction
    :math:`\\bar y`. :math:`-\\frac1{n'}\\sum_i [y_i\\log\\hat p_i + (1-y_i)\\log(1-\\hat p_i)]` on
    (X_test (n', d), y_test (n',)) (11.6)."""
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(0, 1))
    X_test = check_matrix(X_test, "X_test", cols=X.shape[1])
    y_test = check_labels(y_test, "y_test", len(X_test), values=(0, 1))
    columns = list(range(X.shape[1])) if features is None else features
    columns = [check_int(c, "features", 0, X.shape[1] - 1) for c in columns]
    if columns:
        model = LogisticRegression().fit(X[:, columns], y)
        p_hat = model.predict_proba(X_test[:, columns])[:, 1]
    else:
        p_hat = np.full(len(X_test), y.mean())
    return _binary_log_loss(p_hat, y_test).mean()


def _binary_log_loss(p_hat, y) -> np.ndarray:
    p_hat = np.clip(p_hat, 1e-15, 1 - 1e-15)
    return -(xlogy(y, p_hat) + xlogy(1 - y, 1 - p_hat))


def predictive_utility(X, y, j: int, X_test, y_test) -> Utility:
    """The predictive utility of feature j: the test log-loss of a logistic regression *retrained* without
    column j minus that of the one trained on all columns,
    :math:`\\mathcal R(f_{-j}) - \\mathcal R(f)`; for a well-specified model and much data it approaches the
    conditional mutual information :math:`I(X_j; Y\\mid X_{-j})`. X (n, d), y (n,) in {0, 1}, test data alike
    (11.6)."""
    X = check_matrix(X, "X")
    j = check_int(j, "j", 0, X.shape[1] - 1)
    risk_with = logistic_risk(X, y, X_test, y_test)
    others = [c for c in range(X.shape[1]) if c != j]
    risk_without = logistic_risk(X, y, X_test, y_test, others)
    return Utility(float(risk_without - risk_with), float(risk_with), float(risk_without))


def _coalition(mask: int, d: int) -> tuple[int, ...]:
    return tuple(k for k in range(d) if mask >> k & 1)


def _game_values(value_fn, d: int) -> np.ndarray:
    """v(S) for all 2^d coalitions, indexed by the bit mask of S."""
    check_callable(value_fn, "value_fn")
    d = check_int(d, "d", 1, 20)
    return np.array([check_number(value_fn(_coalition(m, d)), "value_fn(S)") for m in range(2**d)])


def _semivalue(values: np.ndarray, d: int, weight) -> np.ndarray:
    """:math:`\\phi_j = \\sum_{S \\not\\ni j} w(|S|)[v(S\\cup j) - v(S)]` from the values (2^d, ...) of all
    coalitions (any trailing axes, e.g. one per example)."""
    sizes = np.array([bin(m).count("1") for m in range(2**d)])
    phi = np.zeros((d, *values.shape[1:]))
    for j in range(d):
        without = np.array([m for m in range(2**d) if not m >> j & 1])
        w = np.array([weight(s) for s in sizes[without]]).reshape(-1, *([1] * (values.ndim - 1)))
        phi[j] = (w * (values[without | 1 << j] - values[without])).sum(axis=0)
    return phi


def shapley_weight(s: int, d: int) -> float:
    """The Shapley weight of a coalition of size s among d players, :math:`\\frac{s!\\,(d-s-1)!}{d!}`: the
    probability that, in a random order of the players, exactly the members of S come before j (11.6)."""
    d = check_int(d, "d", 1)
    s = check_int(s, "s", 0, d - 1)
    return math.factorial(s) * math.factorial(d - s - 1) / math.factorial(d)


def shapley_exact(value_fn, d: int) -> np.ndarray:
    """The Shapley values of the game v on the players N = {0, …, d−1}, by enumerating all coalitions,
    :math:`\\phi_j = \\sum_{S\\subseteq N\\setminus\\{j\\}} \\frac{|S|!\\,(d-|S|-1)!}{d!}\\,[v(S\\cup\\{j\\}) - v(S)]`.
    ``value_fn(S)`` takes a sorted tuple of player indices and returns a number; it is called 2^d times.
    Returns φ (d,) (11.6)."""
    values = _game_values(value_fn, d)
    return _semivalue(values, int(d), lambda s: shapley_weight(s, int(d)))


def banzhaf_exact(value_fn, d: int) -> np.ndarray:
    """The Banzhaf values, the same sum with every coalition weighted alike,
    :math:`\\beta_j = \\frac1{2^{d-1}}\\sum_{S\\subseteq N\\setminus\\{j\\}}[v(S\\cup\\{j\\}) - v(S)]`; unlike the
    Shapley value they need not sum to v(N) − v(∅). Returns β (d,) (11.6)."""
    values = _game_values(value_fn, d)
    return _semivalue(values, int(d), lambda s: 0.5 ** (int(d) - 1))


def kernel_shap(value_fn, d: int) -> np.ndarray:
    """The Shapley values as the solution of KernelSHAP's weighted least squares over all coalitions
    (Lundberg & Lee 2017):
    :math:`\\min_\\phi \\sum_{0<|S|<d} \\pi(S)\\,\\big(v(S) - v(\\varnothing) - \\sum_{j\\in S}\\phi_j\\big)^2` with
    :math:`\\pi(S) = \\frac{d-1}{\\binom d{|S|}\\,|S|\\,(d-|S|)}`, subject to
    :math:`\\sum_j\\phi_j = v(N) - v(\\varnothing)`; solved exactly (KKT system). Returns φ (d,) (11.6)."""
    values = _game_values(value_fn, d)
    d = int(d)
    total = values[-1] - values[0]
    if d == 1:
        return np.array([total])
    masks = range(1, 2**d - 1)
    A = np.array([[m >> k & 1 for k in range(d)] for m in masks], dtype=np.float64)
    sizes = A.sum(axis=1)
    pi = (d - 1) / (np.array([math.comb(d, int(s)) for s in sizes]) * sizes * (d - sizes))
    b = values[1:-1] - values[0]
    kkt = np.zeros((d + 1, d + 1))
    kkt[:d, :d] = 2 * A.T @ (pi[:, None] * A)
    kkt[:d, d] = kkt[d, :d] = 1.0
    rhs = np.concatenate([2 * A.T @ (pi * b), [total]])
    return np.linalg.solve(kkt, rhs)[:d]


def interventional_value(f, x, S, X_background) -> float:
    """SHAP's value of a coalition S at x for a fixed model f, the interventional expectation
    :math:`v(S) = \\mathbb E[f(x_S, X_{\\bar S})] \\approx \\frac1m\\sum_b f(x_S, x^{(b)}_{\\bar S})`: the features
    in S keep their values, the others are taken from each row of X_background (m, d). It equals the
    conditional :math:`\\mathbb E[f(X)\\mid X_S = x_S]` only for independent features. f maps (N, d) to (N,);
    x (d,); S an iterable of feature indices (11.6)."""
    x = check_vector(x, "x")
    X_background = check_matrix(X_background, "X_background", cols=len(x))
    S = [check_int(k, "S", 0, len(x) - 1) for k in S]
    Z = X_background.copy()
    Z[:, S] = x[S]
    return float(_model_outputs(check_callable(f, "f"), Z).mean())


def _coalition_means(f, X: np.ndarray, X_background: np.ndarray) -> np.ndarray:
    """For every coalition mask (2^d) and row x_i of X: the mean over the background of f(x_S, x^(b)_S̄), (2^d, n)."""
    n, d = X.shape
    out = np.empty((2**d, n))
    for m in range(2**d):
        keep = np.array([m >> k & 1 for k in range(d)], dtype=bool)
        Z = np.where(keep, X[:, None, :], X_background[None, :, :]).reshape(-1, d)
        out[m] = _model_outputs(f, Z).reshape(n, len(X_background)).mean(axis=1)
    return out


def shap_values(f, X, X_background) -> np.ndarray:
    """The (interventional) SHAP values of the fixed model f at every row of X (n, d): the Shapley values of the
    games :math:`v_x(S) = \\mathbb E[f(x_S, X_{\\bar S})]` over the background sample X_background (m, d),
    exactly by enumeration (2^d · n · m evaluations of f, which maps (N, d) to (N,)). They sum to
    :math:`f(x) - \\frac1m\\sum_b f(x^{(b)})`. Returns φ (n, d) (11.6)."""
    check_callable(f, "f")
    X = check_matrix(X, "X")
    X_background = check_matrix(X_background, "X_background", cols=X.shape[1])
    d = check_int(X.shape[1], "the number of columns of X", 1, 12)
    return _semivalue(_coalition_means(f, X, X_background), d, lambda s: shapley_weight(s, d)).T


def sage_values(f, X, y, X_background) -> np.ndarray:
    """SAGE values (Covert et al. 2020): the Shapley values of the game
    :math:`v(S) = -\\mathbb E\\,L(f_S(X_S), Y)` for the fixed probabilistic classifier f (rows (N, d) ->
    P(Y = 1 | x) (N,)), with :math:`f_S(x_S) = \\mathbb E[f(x_S, X_{\\bar S})]` over X_background (m, d) and L the
    log-loss in nats, averaged over (X (n, d), y (n,) in {0, 1}). They sum to the risk of the constant
    prediction :math:`\\mathbb E f(X)` minus the risk of f. Returns φ (d,) (11.6)."""
    check_callable(f, "f")
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X), values=(0, 1))
    X_background = check_matrix(X_background, "X_background", cols=X.shape[1])
    d = check_int(X.shape[1], "the number of columns of X", 1, 12)
    p_S = _coalition_means(f, X, X_background)
    if ((p_S < 0) | (p_S > 1)).any():
        raise ValueError("f must return probabilities P(Y = 1 | x) in [0, 1]")
    values = -_binary_log_loss(p_S, y[None, :]).mean(axis=1)
    return _semivalue(values, d, lambda s: shapley_weight(s, d))
