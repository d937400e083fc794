"""Chapter 08 — tricks of the trade: what makes a network that is right on paper train and generalise. One module
per section, in the order of the chapter:

- `init` (8.1, notebook 01): initialisation schemes and the forward and backward variance through depth.
- `weight_decay` (8.2–8.3, notebook 02): weight decay (also with Adam and AdamW), shrinkage along the Hessian's
  eigenvectors, L1 against L2, early stopping and its patience rule.
- `dropout` (8.4, notebook 03): dropout in both scalings, its ensemble of sub-networks, bagging, the Brier
  decomposition.
- `normalisation` (8.5, notebook 04): batch, layer, group, RMS and weight normalisation.
- `augmentation` (8.6, 8.8, notebook 05): mixup, label smoothing, the tempered cross-entropy of distillation.
- `residual_reparam` (8.7, 8.9, notebook 06): scaled residual stacks, the reparameterisation trick against the
  score function.
- `compared` (8.10, notebook 07): ensemble probabilities, mean and spread over runs, paired differences, the
  paired t-test and Holm's correction.
- `toolkit` (8.11, notebook 08): the learning-rate range test, temperature scaling, loss scaling of float16
  gradients, averaged weights.
- `common`: what several sections share: the dropout layer and the digits MLP, its one trainer
  `train_digits_classifier` (every trick a keyword), predictions, digit augmentation, the tempered softmax and
  the soft cross-entropy.

Conventions: a weight matrix W is (m, n) = (fan-out, fan-in), as in ``torch.nn.Linear``; a batch of features is
an array (B, d), one example per row. Every name is re-exported here (``from dlnotes.tricks import
batch_norm``); notebooks import each from its section module.
"""

from .augmentation import (
    Distill,
    Mixed,
    distill_loss,
    mixup,
    smooth_labels,
    smoothed_logit_gap,
)
from .common import (
    Dropout,
    TrainedClassifier,
    augment_digits,
    dropout_mlp,
    predict_logits,
    soft_cross_entropy,
    tempered_softmax,
    train_digits_classifier,
    transform_digits,
)
from .compared import (
    PairedTest,
    Spread,
    ensemble_probabilities,
    holm_adjusted,
    mean_spread,
    paired_difference,
    paired_t_test,
)
from .dropout import (
    Bagged,
    Brier,
    Dropped,
    MaskMixture,
    MonteCarlo,
    Scores,
    all_masks,
    bagging,
    bootstrap_indices,
    brier_decomposition,
    classifier_scores,
    dropout,
    dropout_all_masks,
    dropout_monte_carlo,
    mask_probabilities,
    train_dropout_mlp,
    weighted_geometric_mean,
)
from .init import (
    DEPTH_ACTIVATIONS,
    INIT_DISTS,
    INIT_SCHEMES,
    DepthStats,
    fixed_init,
    haar_orthogonal,
    init_std,
    init_weights,
    propagate_stats,
)
from .normalisation import (
    BatchNorm,
    BatchNormResult,
    WeightNormGrads,
    batch_norm,
    group_norm,
    rms_norm,
    weight_norm,
    weight_norm_grads,
)
from .residual_reparam import (
    GradEstimate,
    pathwise_grad,
    residual_stack_norms,
    score_function_grad,
)
from .toolkit import (
    Autocast,
    RangeTest,
    ScaledGradient,
    averaged_model,
    fit_temperature,
    half_precision_gradients,
    lr_range_test,
    tempered_nll,
)
from .weight_decay import (
    EarlyStop,
    Shrinkage,
    adamw_step,
    early_stopping_factors,
    l1_minimiser,
    l2_minimiser,
    patience_stop,
    ridge_risk,
    soft_threshold,
    weight_decay_minimiser,
    weight_decay_step,
)

__all__ = [
    "Bagged",
    "BatchNorm",
    "BatchNormResult",
    "Brier",
    "DEPTH_ACTIVATIONS",
    "DepthStats",
    "Distill",
    "Dropout",
    "Dropped",
    "EarlyStop",
    "GradEstimate",
    "INIT_DISTS",
    "INIT_SCHEMES",
    "MaskMixture",
    "Mixed",
    "MonteCarlo",
    "Scores",
    "Shrinkage",
    "Spread",
    "TrainedClassifier",
    "WeightNormGrads",
    "adamw_step",
    "all_masks",
    "augment_digits",
    "bagging",
    "batch_norm",
    "bootstrap_indices",
    "brier_decomposition",
    "classifier_scores",
    "distill_loss",
    "dropout",
    "dropout_all_masks",
    "dropout_mlp",
    "dropout_monte_carlo",
    "early_stopping_factors",
    "ensemble_probabilities",
    "fixed_init",
    "group_norm",
    "haar_orthogonal",
    "init_std",
    "init_weights",
    "l1_minimiser",
    "l2_minimiser",
    "mask_probabilities",
    "mean_spread",
    "mixup",
    "paired_difference",
    "paired_t_test",
    "holm_adjusted",
    "PairedTest",
    "pathwise_grad",
    "patience_stop",
    "predict_logits",
    "propagate_stats",
    "residual_stack_norms",
    "ridge_risk",
    "rms_norm",
    "score_function_grad",
    "smooth_labels",
    "smoothed_logit_gap",
    "soft_cross_entropy",
    "soft_threshold",
    "tempered_softmax",
    "train_digits_classifier",
    "train_dropout_mlp",
    "transform_digits",
    "weight_decay_minimiser",
    "weight_decay_step",
    "weight_norm",
    "weight_norm_grads",
    "weighted_geometric_mean",
    "Autocast",
    "RangeTest",
    "ScaledGradient",
    "averaged_model",
    "fit_temperature",
    "half_precision_gradients",
    "lr_range_test",
    "tempered_nll",
]
