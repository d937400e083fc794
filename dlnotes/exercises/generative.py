"""Graded exercises of chapter 10 — generative models."""

from __future__ import annotations


# ----------------------------------------------------------------------------- 10.1 linear latent-variable models: PCA, factor analysis, PPCA


# ----------------------------------------------------------------------------- 10.2 the ELBO, the reparameterisation trick, the Gaussian KL


# ----------------------------------------------------------------------------- 10.2 a VAE on digits, beta-VAE


# ----------------------------------------------------------------------------- 10.3 normalising flows


# ----------------------------------------------------------------------------- 10.4 autoregressive models


# ----------------------------------------------------------------------------- 10.5 GANs: the game and its optimum


# ----------------------------------------------------------------------------- 10.5 training GANs: mode collapse, Wasserstein, gradient penalty


# ----------------------------------------------------------------------------- 10.6 diffusion: forward process, bound, reverse posterior


# ----------------------------------------------------------------------------- 10.6 sampling: scores, SDEs, guidance, DDIM


# ----------------------------------------------------------------------------- 10.6 training a diffusion model
