"""Graded exercises of chapter 09 — theory of deep learning."""

from __future__ import annotations


# ----------------------------------------------------------------------------- 9.1 the linearised network and the NTK


# ----------------------------------------------------------------------------- 9.1 infinite width, lazy and rich training


# ----------------------------------------------------------------------------- 9.2 Bayesian inference


# ----------------------------------------------------------------------------- 9.2 sampling the posterior: Metropolis-Hastings, HMC, Langevin


# ----------------------------------------------------------------------------- 9.3 Gaussian processes and infinitely wide networks


# ----------------------------------------------------------------------------- 9.4 statistical learning theory: PAC, VC, Rademacher


# ----------------------------------------------------------------------------- 9.4 bias, variance, double descent, implicit bias


# ----------------------------------------------------------------------------- 9.4 PAC-Bayes and flat minima


# ----------------------------------------------------------------------------- 9.5 the loss landscape
