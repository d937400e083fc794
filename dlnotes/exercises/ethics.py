"""Graded exercises of chapter 11 — ethics: robustness, interpretability, fairness."""

from __future__ import annotations


# ----------------------------------------------------------------------------- 11.1 threat model and norms


# ----------------------------------------------------------------------------- 11.2 linear classifiers


# ----------------------------------------------------------------------------- 11.3 attacks on networks


# ----------------------------------------------------------------------------- 11.4 robust training and distributional robustness


# ----------------------------------------------------------------------------- 11.5 certified robustness


# ----------------------------------------------------------------------------- 11.6 local explanations: profiles and saliency


# ----------------------------------------------------------------------------- 11.6 attribution by removal: Shapley values, SHAP and SAGE


# ----------------------------------------------------------------------------- 11.7 fairness
