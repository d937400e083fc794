"""Section 9.2 (continued), notebook ``04_sampling``: sampling the posterior.

The Metropolis-Hastings acceptance probability and transition kernel, random-walk Metropolis-Hastings, the
leapfrog and explicit Euler integrators of Hamilton's equations, Hamiltonian Monte Carlo, and stochastic-gradient
Langevin dynamics, each for many chains at once. These samplers are from-scratch methods (the point of the
section), not trained with `training.train_steps`. The tanh network they sample the weights of, and its energy
gradient, are `common.tanh_mlp` and `common.tanh_mlp_grad_energy`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..training import (
    progress_bar,
)
from ..validation import (
    check_array,
    check_callable,
    check_int,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)


def mh_accept_prob(log_p_new, log_p_old, log_q_forward=0.0, log_q_backward=0.0) -> np.ndarray:
    """The Metropolis-Hastings acceptance probability of a move from theta to theta' drawn from the proposal
    :math:`\\tilde\\Pi(\\theta'\\mid\\theta)`:

    .. math:: \\alpha = \\min\\Big\\{1, \\frac{p(\\theta'\\mid S)\\,\\tilde\\Pi(\\theta\\mid\\theta')}
              {p(\\theta\\mid S)\\,\\tilde\\Pi(\\theta'\\mid\\theta)}\\Big\\},

    from the logs (arrays of one shape, or broadcastable): ``log_p_new`` = log p(theta'|S), ``log_p_old`` =
    log p(theta|S) (either up to the same constant: p(S) cancels), ``log_q_forward`` = log Pi~(theta'|theta),
    ``log_q_backward`` = log Pi~(theta|theta') (both 0 for a symmetric proposal). ``log_p_new`` may be -inf (a
    move to where the target vanishes: alpha = 0). Returns alpha. Section 9.2.
    """
    arrays = []
    for name, a in (
        ("log_p_new", log_p_new),
        ("log_p_old", log_p_old),
        ("log_q_forward", log_q_forward),
        ("log_q_backward", log_q_backward),
    ):
        a = check_array(a, name, finite=False)
        if np.isnan(a).any() or (name != "log_p_new" and np.isinf(a).any()):
            what = "finite numbers" if name != "log_p_new" else "numbers or -inf"
            raise ValueError(f"{name} must hold {what}, got NaN or infinity")
        arrays.append(a)
    new, old, forward, backward = arrays
    if (new == np.inf).any():
        raise ValueError("log_p_new must hold numbers or -inf, got +inf")
    return np.exp(np.minimum(0.0, new - old + backward - forward))


def mh_transition_matrix(target, proposal) -> np.ndarray:
    """The Metropolis-Hastings kernel on k states: propose j from row i of `proposal` (k, k) (row i is
    :math:`\\tilde\\Pi(\\cdot\\mid i)`), accept with `mh_accept_prob`, otherwise stay:

    .. math:: \\Pi(j\\mid i) = \\tilde\\Pi(j\\mid i)\\min\\Big\\{1,\\frac{q_j\\tilde\\Pi(i\\mid j)}{q_i\\tilde\\Pi(j\\mid i)}\\Big\\}
              \\ (j\\ne i),\\qquad \\Pi(i\\mid i) = 1 - \\sum_{j\\ne i}\\Pi(j\\mid i) .

    `target` (k,) the probabilities q (> 0; normalised or not). The proposal must be symmetric in its support
    (Pi~(j|i) > 0 exactly where Pi~(i|j) > 0). Returns Pi (k, k), rows summing to 1; it satisfies detailed
    balance :math:`q_i\\Pi(j\\mid i) = q_j\\Pi(i\\mid j)`. Section 9.2.
    """
    target = check_vector(target, "target")
    k = len(target)
    if (target <= 0).any():
        raise ValueError(f"target must hold probabilities > 0, got minimum {target.min()!r}")
    proposal = check_matrix(proposal, "proposal", k, k)
    if (proposal < 0).any() or not np.allclose(proposal.sum(axis=1), 1.0):
        raise ValueError("proposal must be a transition matrix: non-negative rows that sum to 1")
    if not np.array_equal(proposal > 0, proposal.T > 0):
        raise ValueError("proposal must allow the move back: Pi~(j|i) > 0 exactly where Pi~(i|j) > 0")
    support = proposal > 0
    log_q = np.log(np.where(support, proposal, 1.0))
    log_target = np.log(target)
    alpha = mh_accept_prob(log_target[None, :], log_target[:, None], log_q, log_q.T)
    kernel = np.where(support, proposal * alpha, 0.0)
    np.fill_diagonal(kernel, 0.0)
    np.fill_diagonal(kernel, 1.0 - kernel.sum(axis=1))
    return kernel


def _check_chains(theta0, name: str = "theta0") -> np.ndarray:
    theta = check_array(theta0, name)
    if theta.ndim != 2:
        raise ValueError(
            f"{name} must have shape (chains, d), one starting point per row, got shape {theta.shape}"
        )
    return theta


def _call_log_p(log_p, theta: np.ndarray) -> np.ndarray:
    value = np.asarray(log_p(theta), dtype=float)
    if value.shape != (len(theta),):
        raise ValueError(
            f"log_p must map parameters (chains, d) to one log density per chain ({len(theta)},), "
            f"got shape {value.shape}"
        )
    return value


class Chain(NamedTuple):
    samples: np.ndarray  # (steps, chains, d): the state of every chain after each step
    accept_rate: np.ndarray  # (chains,): the fraction of accepted proposals of each chain


def metropolis_hastings(
    log_p, theta0, steps: int, step_size: float, rng=None, progress: bool = True
) -> Chain:
    """Random-walk Metropolis-Hastings (Metropolis et al., 1953; Hastings, 1970) for many chains at once:
    propose :math:`\\theta' = \\theta + s\\,\\xi`, :math:`\\xi\\sim\\mathcal N(0, I)`, and accept with probability
    :math:`\\min\\{1, p(\\theta'\\mid S)/p(\\theta\\mid S)\\}` (the proposal is symmetric, so the Hastings terms
    cancel; so does p(S)).

    `log_p` maps (chains, d) to (chains,), any unnormalised log target (e.g. -E); theta0 (chains, d) the
    starting points; `steps` proposals per chain; `step_size` = s, the proposal's standard deviation. Returns a
    `Chain` (samples (steps, chains, d), accept_rate (chains,)). Section 9.2.
    """
    check_callable(log_p, "log_p")
    theta = _check_chains(theta0)
    steps = check_int(steps, "steps", 1)
    step_size = check_positive(step_size, "step_size")
    rng = check_rng(rng)
    lp = _call_log_p(log_p, theta)
    samples = np.empty((steps, *theta.shape))
    accepted = np.zeros(len(theta))
    for t in progress_bar(range(steps), desc="MH steps", enabled=progress):
        proposal = theta + step_size * rng.standard_normal(theta.shape)
        lp_new = _call_log_p(log_p, proposal)
        accept = rng.random(len(theta)) < mh_accept_prob(lp_new, lp)
        theta = np.where(accept[:, None], proposal, theta)
        lp = np.where(accept, lp_new, lp)
        accepted += accept
        samples[t] = theta
    return Chain(samples, accepted / steps)


class PhasePoint(NamedTuple):
    theta: np.ndarray  # position, the shape of the input theta
    v: np.ndarray  # momentum, the same shape


def _phase_arguments(grad_log_p, theta, v, eta, L):
    check_callable(grad_log_p, "grad_log_p")
    theta = check_array(theta, "theta")
    v = check_array(v, "v", theta.shape)
    return theta, v, check_positive(eta, "eta"), check_int(L, "L", 1)


def _grad(grad_log_p, theta: np.ndarray) -> np.ndarray:
    g = np.asarray(grad_log_p(theta), dtype=float)
    if g.shape != theta.shape:
        raise ValueError(f"grad_log_p must return the shape of theta {theta.shape}, got shape {g.shape}")
    return g


def leapfrog(grad_log_p, theta, v, eta: float, L: int) -> PhasePoint:
    """L leapfrog steps of Hamilton's equations :math:`\\dot\\theta = M^{-1}v`, :math:`\\dot v = -\\nabla E`
    for :math:`\\mathcal H(\\theta, v) = E(\\theta) + \\frac12 v^\\top M^{-1}v`, :math:`E = -\\log p`, with M = I:

    .. math:: v \\leftarrow v - \\tfrac\\eta2\\nabla E(\\theta),\\quad \\theta\\leftarrow\\theta + \\eta v,\\quad
              v\\leftarrow v - \\tfrac\\eta2\\nabla E(\\theta) .

    Reversible (flip v, integrate again, flip back: the start) and volume-preserving; the energy error after a
    trajectory of fixed length :math:`L\\eta` is :math:`O(\\eta^2)`. `grad_log_p` maps theta to
    :math:`\\nabla\\log p(\\theta) = -\\nabla E(\\theta)` (same shape); theta and v (d,) or (chains, d). Returns
    the `PhasePoint` after L steps. Section 9.2.
    """
    theta, v, eta, L = _phase_arguments(grad_log_p, theta, v, eta, L)
    v = v + 0.5 * eta * _grad(grad_log_p, theta)
    for step in range(L):
        theta = theta + eta * v
        g = _grad(grad_log_p, theta)
        v = v + (eta if step < L - 1 else 0.5 * eta) * g
    return PhasePoint(theta, v)


def euler_hamiltonian(grad_log_p, theta, v, eta: float, L: int) -> PhasePoint:
    """L explicit Euler steps of Hamilton's equations (M = I), the integrator of one lecture sheet:

    .. math:: \\theta_{t+1} = \\theta_t + \\eta v_t,\\qquad v_{t+1} = v_t - \\eta\\nabla E(\\theta_t) .

    Neither reversible nor volume-preserving: on a quadratic E each step multiplies the phase-space volume by
    :math:`\\det = 1 + \\eta^2\\lambda > 1` per eigenvalue, and the energy error is :math:`O(\\eta)`. Arguments as
    in `leapfrog`; returns the `PhasePoint` after L steps. Section 9.2.
    """
    theta, v, eta, L = _phase_arguments(grad_log_p, theta, v, eta, L)
    for _ in range(L):
        theta, v = theta + eta * v, v + eta * _grad(grad_log_p, theta)
    return PhasePoint(theta, v)


class HMCChain(NamedTuple):
    samples: np.ndarray  # (steps, chains, d): the state of every chain after each step
    accept_rate: np.ndarray  # (chains,): the fraction of accepted trajectories
    delta_H: np.ndarray  # (steps, chains): H(end) - H(start) of every proposed trajectory


def hmc(
    log_p, grad_log_p, theta0, steps: int, eta: float, L: int, rng=None, progress: bool = True
) -> HMCChain:
    """Hamiltonian Monte Carlo (Duane et al., 1987; Neal, 2011) for many chains at once: draw a momentum
    :math:`v\\sim\\mathcal N(0, I)`, run L `leapfrog` steps of size eta from :math:`(\\theta, v)` to
    :math:`(\\theta', v')`, accept with probability :math:`\\min\\{1, e^{-\\Delta\\mathcal H}\\}`,

    .. math:: \\Delta\\mathcal H = \\mathcal H(\\theta', v') - \\mathcal H(\\theta, v),\\qquad
              \\mathcal H(\\theta, v) = -\\log p(\\theta) + \\tfrac12\\lVert v\\rVert^2 .

    `log_p` maps (chains, d) to (chains,); `grad_log_p` maps (chains, d) to its gradient (chains, d); theta0
    (chains, d). A trajectory that diverges (non-finite H) is rejected. Returns an `HMCChain`. Section 9.2.
    """
    check_callable(log_p, "log_p")
    check_callable(grad_log_p, "grad_log_p")
    theta = _check_chains(theta0)
    steps = check_int(steps, "steps", 1)
    eta, L = check_positive(eta, "eta"), check_int(L, "L", 1)
    rng = check_rng(rng)
    lp = _call_log_p(log_p, theta)
    samples = np.empty((steps, *theta.shape))
    delta_H = np.empty((steps, len(theta)))
    accepted = np.zeros(len(theta))
    for t in progress_bar(range(steps), desc="HMC steps", enabled=progress):
        v = rng.standard_normal(theta.shape)
        with np.errstate(all="ignore"):
            end = leapfrog(grad_log_p, theta, v, eta, L)
            lp_new = _call_log_p(log_p, end.theta)
            dH = (-lp_new + 0.5 * np.sum(end.v**2, axis=1)) - (-lp + 0.5 * np.sum(v**2, axis=1))
        dH = np.where(np.isfinite(dH), dH, np.inf)
        accept = rng.random(len(theta)) < np.exp(np.minimum(0.0, -dH))
        theta = np.where(accept[:, None], end.theta, theta)
        lp = np.where(accept, lp_new, lp)
        accepted += accept
        samples[t], delta_H[t] = theta, dH
    return HMCChain(samples, accepted / steps, delta_H)


class LangevinChain(NamedTuple):
    samples: np.ndarray  # (kept, chains, d): the iterates after burn-in, every thin-th
    steps: np.ndarray  # (kept,): the step number (1-based) of each kept iterate


def sgld(
    grad_energy_batch,
    theta0,
    steps: int,
    eta: float,
    batch_size: int,
    n: int,
    *,
    temperature: float = 1.0,
    friction: float | None = None,
    burn_in: int = 0,
    thin: int = 1,
    rng=None,
    progress: bool = True,
) -> LangevinChain:
    """Stochastic-gradient Langevin dynamics (Welling and Teh, 2011) for many chains at once. Overdamped
    (default):

    .. math:: \\theta_{t+1} = \\theta_t - \\eta\\nabla\\hat E(\\theta_t) + \\sqrt{2\\eta T}\\,\\xi_t,\\qquad
              \\hat E(\\theta) = \\frac n{|B|}\\sum_{i\\in B}\\ell_i(\\theta) + \\frac{\\lVert\\theta\\rVert^2}{2\\sigma_p^2},

    :math:`\\xi_t\\sim\\mathcal N(0, I)`, :math:`\\ell_i = (y_i - f(\\theta)(x_i))^2/2\\sigma^2`, an unbiased
    estimate of E from a minibatch B; with `friction` :math:`\\gamma` the underdamped form (v starts at 0)

    .. math:: v_{t+1} = (1 - \\eta\\gamma)v_t - \\eta\\nabla\\hat E(\\theta_t) + \\sqrt{2\\gamma\\eta T}\\,\\xi_t,\\qquad
              \\theta_{t+1} = \\theta_t + \\eta v_{t+1} .

    ``grad_energy_batch(theta, idx)`` returns :math:`\\nabla\\hat E` (chains, d) at theta (chains, d) for the
    minibatches idx (chains, batch_size) (integer indices into the n examples, one minibatch per chain). Each
    chain draws its minibatches without replacement: a fresh random order of the n examples every epoch, cut
    into n // batch_size batches. T = `temperature` (1: the posterior; 0: plain SGD, no noise). The iterates
    after `burn_in` steps are kept, every `thin`-th. Returns a `LangevinChain`. Section 9.2.
    """
    check_callable(grad_energy_batch, "grad_energy_batch")
    theta = _check_chains(theta0)
    steps = check_int(steps, "steps", 1)
    eta = check_positive(eta, "eta")
    n = check_int(n, "n", 1)
    batch_size = check_int(batch_size, "batch_size", 1, n)
    temperature = check_number(temperature, "temperature", 0)
    if friction is not None:
        friction = check_number(friction, "friction", 0, 1 / eta, low_open=True)
    burn_in = check_int(burn_in, "burn_in", 0, steps - 1)
    thin = check_int(thin, "thin", 1)
    rng = check_rng(rng)
    chains = len(theta)
    kept_steps = np.arange(burn_in + 1, steps + 1)[::thin]
    samples = np.empty((len(kept_steps), *theta.shape))
    per_epoch = n // batch_size
    v = np.zeros_like(theta)
    kept = 0
    for t in progress_bar(range(steps), desc="Langevin steps", enabled=progress):
        if t % per_epoch == 0:
            order = np.argsort(rng.random((chains, n)), axis=1)
        b = t % per_epoch
        idx = order[:, b * batch_size : (b + 1) * batch_size]
        g = np.asarray(grad_energy_batch(theta, idx), dtype=float)
        if g.shape != theta.shape:
            raise ValueError(
                f"grad_energy_batch must return the shape of theta {theta.shape}, got shape {g.shape}"
            )
        noise = rng.standard_normal(theta.shape)
        if friction is None:
            theta = theta - eta * g + np.sqrt(2 * eta * temperature) * noise
        else:
            v = (1 - eta * friction) * v - eta * g + np.sqrt(2 * friction * eta * temperature) * noise
            theta = theta + eta * v
        if kept < len(kept_steps) and t + 1 == kept_steps[kept]:
            samples[kept] = theta
            kept += 1
    return LangevinChain(samples, kept_steps)
