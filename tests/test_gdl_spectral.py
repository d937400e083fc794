"""Section 7.5: graph Laplacians, the graph Fourier transform, spectral, polynomial and Chebyshev filters, and
the graph drawing helpers, against networkx, dense eigendecompositions and brute force."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from dlnotes.gdl.spectral import (  # noqa: E402
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
from dlnotes.plotting import draw_graph_signal, graph_layout  # noqa: E402

from conftest import bad_input_test

rng = np.random.default_rng(7)
KARATE = nx.karate_club_graph()
A_KARATE = nx.to_numpy_array(KARATE, weight=None)


def random_graph(M=12, p=0.3, seed=3, weighted=False):
    A = np.triu((np.random.default_rng(seed).random((M, M)) < p).astype(float), 1)
    if weighted:
        A = A * np.random.default_rng(seed + 1).uniform(0.5, 2.0, (M, M))
    return A + A.T


@pytest.mark.parametrize("weighted", [False, True])
def test_laplacian_matches_networkx(weighted):
    A = random_graph(weighted=weighted)
    G = nx.from_numpy_array(A)
    assert np.allclose(laplacian(A), nx.laplacian_matrix(G, weight="weight").toarray())
    assert np.allclose(
        laplacian(A, normalized=True), nx.normalized_laplacian_matrix(G, weight="weight").toarray()
    )


def test_laplacian_quadratic_form_is_the_sum_over_edges():
    A = random_graph(weighted=True)
    x = rng.normal(size=len(A))
    edges = sum(A[m, n] * (x[m] - x[n]) ** 2 for m in range(len(A)) for n in range(m + 1, len(A)))
    assert np.isclose(x @ laplacian(A) @ x, edges)


def test_normalized_laplacian_of_an_isolated_node_is_a_zero_row_as_in_networkx():
    G = nx.Graph([(0, 1)])
    G.add_node(2)  # one edge and one isolated node
    Ln = laplacian(nx.to_numpy_array(G, weight=None), normalized=True)
    assert np.array_equal(Ln[2], [0, 0, 0]) and np.allclose(Ln[:2, :2], [[1, -1], [-1, 1]])
    assert np.allclose(Ln, nx.normalized_laplacian_matrix(G, weight=None).toarray(), rtol=0, atol=1e-15)
    assert np.sum(np.abs(np.linalg.eigvalsh(Ln)) < 1e-12) == 2  # one zero eigenvalue per component


def test_graph_fourier_diagonalises_and_is_ascending():
    L = laplacian(A_KARATE)
    lam, U = graph_fourier(L)
    assert np.all(np.diff(lam) >= 0)
    assert np.allclose(U.T @ U, np.eye(len(L)))
    assert np.allclose(U @ np.diag(lam) @ U.T, L)
    assert np.allclose(lam, np.sort(np.linalg.eigvalsh(L)))
    assert np.all(U[np.abs(U).argmax(axis=0), np.arange(len(L))] > 0)  # sign convention


def test_graph_fourier_of_a_cycle_has_the_cosine_frequencies():
    M = 10
    lam, _ = graph_fourier(laplacian(nx.to_numpy_array(nx.cycle_graph(M))))
    assert np.allclose(lam, np.sort(2 - 2 * np.cos(2 * np.pi * np.arange(M) / M)))


def test_graph_layout_is_deterministic_and_covers_every_node():
    pos = graph_layout(KARATE)
    assert set(pos) == set(KARATE.nodes)
    assert pos == graph_layout(nx.karate_club_graph())
    expected = nx.kamada_kawai_layout(KARATE)
    assert all(np.allclose(pos[v], expected[v]) for v in KARATE.nodes)


def test_draw_graph_signal_colours_nodes_by_the_signal():
    x = np.linspace(-1, 2, KARATE.number_of_nodes())
    ax = draw_graph_signal(KARATE, x, label="signal $x$", title="test")
    dots = ax.collections[-1]
    assert np.allclose(dots.get_array(), x)
    assert dots.get_clim() == (-2.0, 2.0)  # symmetric about zero for a signal with both signs
    assert len(ax.collections[0].get_segments()) == KARATE.number_of_edges()
    assert ax.figure.axes[-1].get_ylabel() == "signal $x$"
    plt.close(ax.figure)


def test_spectral_filter_matches_expm_and_a_linear_solve():
    import scipy.linalg

    L = laplacian(A_KARATE, normalized=True)
    heat = spectral_filter(L, lambda lam: filter_response(lam, "heat kernel", 1.5))
    assert np.allclose(heat, scipy.linalg.expm(-1.5 * L))
    low = spectral_filter(L, lambda lam: filter_response(lam, "low-pass", 2.0))
    assert np.allclose(low, np.linalg.inv(np.eye(34) + 2.0 * L))
    high = spectral_filter(L, lambda lam: filter_response(lam, "high-pass", 2.0))
    assert np.allclose(low + high, np.eye(34))


def test_spectral_filter_does_not_depend_on_the_eigenvector_signs():
    L = laplacian(nx.to_numpy_array(nx.cycle_graph(8)))
    lam, U = graph_fourier(L)
    flipped = U * np.where(np.arange(8) % 3 == 0, -1.0, 1.0)
    g = np.exp(-lam) + lam**2
    assert np.allclose(spectral_filter(L, lambda x: np.exp(-x) + x**2), (flipped * g) @ flipped.T)


def test_poly_filter_equals_the_spectral_form_and_is_localised():
    L = laplacian(A_KARATE)
    alphas = rng.normal(size=4)
    lam, U = graph_fourier(L)
    spectral = (U * np.polyval(alphas[::-1], lam)) @ U.T
    poly = poly_filter(L, alphas)
    assert np.allclose(poly, spectral, atol=1e-8 * np.abs(poly).max())
    dist = np.array([[nx.shortest_path_length(KARATE, i, j) for j in range(34)] for i in range(34)])
    assert np.all(poly[dist > 3] == 0) and np.all(np.abs(poly[dist <= 3]) > 1e-12)


def test_poly_conv_sums_one_polynomial_per_pair_of_channels():
    A = random_graph(9, 0.4)
    L = laplacian(A)
    X, alphas, b = rng.normal(size=(9, 3)), rng.normal(size=(3, 3, 2)), rng.normal(size=2)
    expected = np.stack(
        [sum(poly_filter(L, alphas[:, j, i]) @ X[:, j] for j in range(3)) + b[i] for i in range(2)],
        axis=1,
    )
    assert np.allclose(poly_conv(X, L, alphas, b), expected)


def test_chebyshev_polynomials_are_cosines_of_multiple_angles():
    L_hat = rescaled_laplacian(laplacian(A_KARATE, normalized=True))
    lam, U = graph_fourier(L_hat)
    assert lam.min() >= -1 - 1e-12 and np.isclose(lam.max(), 1)
    angles = np.arccos(np.clip(lam, -1, 1))
    for k, T_k in enumerate(chebyshev_polynomials(L_hat, 5)):
        assert np.allclose(T_k, (U * np.cos(k * angles)) @ U.T)


def test_chebyshev_filter_matches_numpy_chebval_and_the_k1_identity():
    L = laplacian(A_KARATE, normalized=True)
    thetas = rng.normal(size=4)
    lam, U = graph_fourier(L)
    expected = (U * np.polynomial.chebyshev.chebval(2 * lam / 2.0 - 1, thetas)) @ U.T
    assert np.allclose(chebyshev_filter(L, thetas, lam_max=2.0), expected)
    d = A_KARATE.sum(1)
    assert np.allclose(
        chebyshev_filter(L, [0.7, -0.7], lam_max=2.0),
        0.7 * (np.eye(34) + A_KARATE / np.sqrt(np.outer(d, d))),
    )


BAD_INPUT = [
    (lambda: laplacian(np.ones((3, 4))), ValueError, "square"),
    (lambda: laplacian(np.triu(np.ones((3, 3)), 1)), ValueError, "symmetric"),
    (lambda: laplacian(np.ones((3, 3))), ValueError, "zero diagonal"),
    (lambda: laplacian(-random_graph()), ValueError, "non-negative"),
    (lambda: laplacian(random_graph(), normalized="yes"), TypeError, "normalized must be a bool"),
    (lambda: graph_fourier(np.ones(3)), ValueError, "L must have shape"),
    (lambda: graph_fourier(np.triu(np.ones((3, 3)))), ValueError, "L must be symmetric"),
    (lambda: spectral_filter(np.eye(3), "exp"), TypeError, "g must be callable"),
    (
        lambda: spectral_filter(np.eye(3), lambda lam: lam[:2]),
        ValueError,
        r"g(lam) must have shape (3,)",
    ),
    (lambda: filter_response(np.ones(3), "band-pass"), ValueError, "kind must be one of"),
    (lambda: filter_response(np.ones(3), "low-pass", -1.0), ValueError, "s must be"),
    (lambda: poly_filter(np.eye(3), np.ones((2, 2))), ValueError, "alphas must have shape"),
    (
        lambda: poly_conv(np.ones((4, 2)), np.eye(3), np.ones((2, 2, 1))),
        ValueError,
        r"L must have shape (4, 4)",
    ),
    (
        lambda: poly_conv(np.ones((3, 2)), np.eye(3), np.ones((2, 3, 1))),
        ValueError,
        "alphas must have shape",
    ),
    (
        lambda: poly_conv(np.ones((3, 2)), np.eye(3), np.ones((2, 2, 1)), b=np.ones(2)),
        ValueError,
        "b must have shape",
    ),
    (lambda: rescaled_laplacian(np.eye(3), lam_max=0.0), ValueError, "lam_max"),
    (lambda: rescaled_laplacian(np.zeros((3, 3))), ValueError, "positive largest eigenvalue"),
    (lambda: chebyshev_polynomials(np.eye(3), -1), ValueError, "K must be"),
    (lambda: chebyshev_filter(np.eye(3), [[1.0]]), ValueError, "thetas must have shape"),
    (lambda: graph_layout(A_KARATE), TypeError, "networkx graph"),
    (lambda: graph_layout(nx.Graph()), ValueError, "at least one node"),
    (lambda: draw_graph_signal(KARATE, np.ones(5)), ValueError, r"x must have shape (34,)"),
    (lambda: draw_graph_signal(KARATE, np.ones(34), pos={0: (0, 0)}), ValueError, "position"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
