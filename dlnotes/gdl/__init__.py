"""Chapter 07 — geometric deep learning: models that respect the symmetries of their data (sets, point clouds,
graphs). One module per section, in the order of the chapter:

- `symmetry` (7.1, notebook 01): permutations, the invariance and equivariance testers, finite groups.
- `sets` (7.2, notebook 02): Deep Sets and the equivariant set layer on sets of digits.
- `pointnet` (7.2, notebook 03): point clouds and PointNet.
- `graphs` (7.3, notebook 04): graph matrices, message passing, the GCN layer and node classifier.
- `depth_wl` (7.3–7.4, notebook 05): receptive fields, oversmoothing, GAT and GIN layers, 1-WL colour
  refinement.
- `spectral` (7.5, notebook 06): graph Laplacians, the graph Fourier transform, spectral, polynomial and
  Chebyshev filters.
- `practice` (7.6, notebook 07): message passing over edge lists, multi-head GAT, mini-batches of graphs,
  a graph classifier, Laplacian positional encodings.
- `common`: what several sections share, the validation of adjacency and symmetric graph matrices.

Conventions: a set or a graph's node features are an array X (M, F), one element / node per row; a graph is a
symmetric adjacency matrix A (M, M) with zero diagonal (float64); a permutation matrix is P = I[pi], so
(P X)[i] = X[pi[i]], and a graph is permuted as (P X, P A P^T). Every name is re-exported here
(``from dlnotes.gdl import gcn_norm_adj``); notebooks import each from its section module.
"""

from .common import check_adjacency, check_nodes, check_symmetric
from .depth_wl import (
    GATLayer,
    GINLayer,
    Oversmoothing,
    node_influence,
    oversmoothing_curve,
    pair_norm,
    wl_colors,
    wl_test,
)
from .graphs import (
    GCN,
    GCNLayer,
    GCNTraining,
    GraphMatrices,
    NodeTask,
    gcn_norm_adj,
    graph_matrices,
    label_propagation,
    make_sbm_task,
    message_passing,
    train_gcn,
)
from .pointnet import (
    POINT_CLOUD_SHAPES,
    MiniPointNet,
    PointClouds,
    PointNetOutput,
    TNet,
    invariant_histograms,
    make_point_clouds,
    orthogonality_penalty,
    random_rotation,
    rotation_about_z,
    sample_surface,
    segmentation_features,
    train_pointnet,
)
from .practice import (
    AGGREGATIONS,
    GraphBatch,
    GraphClassifier,
    MultiHeadGAT,
    batch_graphs,
    edge_list,
    graph_scores,
    laplacian_pe,
    make_degree_graphs,
    readout,
    scatter_aggregate,
    sparse_message_passing,
    train_graph_classifier,
)
from .sets import (
    DeepSets,
    DigitSets,
    EquivariantSetLayer,
    make_digit_sets,
    predict_sets,
    size_mean_baseline,
    train_set_model,
)
from .spectral import (
    FILTERS,
    GraphSpectrum,
    chebyshev_filter,
    chebyshev_polynomials,
    filter_response,
    graph_fourier,
    laplacian,
    poly_conv,
    poly_filter,
    rescaled_laplacian,
    spectral_filter,
)
from .symmetry import (
    GroupAxioms,
    Permutation,
    check_equivariant,
    check_invariant,
    cyclic_shifts,
    group_axioms,
    permutation_group,
    random_permutation,
)

__all__ = [
    # symmetry (7.1)
    "Permutation",
    "random_permutation",
    "check_invariant",
    "check_equivariant",
    "permutation_group",
    "cyclic_shifts",
    "GroupAxioms",
    "group_axioms",
    # sets (7.2)
    "DigitSets",
    "make_digit_sets",
    "DeepSets",
    "EquivariantSetLayer",
    "train_set_model",
    "predict_sets",
    "size_mean_baseline",
    # pointnet (7.2)
    "POINT_CLOUD_SHAPES",
    "random_rotation",
    "rotation_about_z",
    "sample_surface",
    "PointClouds",
    "make_point_clouds",
    "invariant_histograms",
    "orthogonality_penalty",
    "segmentation_features",
    "TNet",
    "PointNetOutput",
    "MiniPointNet",
    "train_pointnet",
    # graphs (7.3)
    "GraphMatrices",
    "graph_matrices",
    "gcn_norm_adj",
    "message_passing",
    "GCNLayer",
    "GCN",
    "GCNTraining",
    "train_gcn",
    "label_propagation",
    "NodeTask",
    "make_sbm_task",
    # depth_wl (7.3-7.4)
    "node_influence",
    "Oversmoothing",
    "oversmoothing_curve",
    "pair_norm",
    "GATLayer",
    "GINLayer",
    "wl_colors",
    "wl_test",
    # spectral (7.5)
    "laplacian",
    "GraphSpectrum",
    "graph_fourier",
    "spectral_filter",
    "FILTERS",
    "filter_response",
    "poly_filter",
    "poly_conv",
    "rescaled_laplacian",
    "chebyshev_polynomials",
    "chebyshev_filter",
    # practice (7.6)
    "AGGREGATIONS",
    "edge_list",
    "scatter_aggregate",
    "sparse_message_passing",
    "MultiHeadGAT",
    "GraphBatch",
    "batch_graphs",
    "readout",
    "GraphClassifier",
    "make_degree_graphs",
    "train_graph_classifier",
    "graph_scores",
    "laplacian_pe",
    # common
    "check_adjacency",
    "check_nodes",
    "check_symmetric",
]
