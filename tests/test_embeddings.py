import numpy as np
from sklearn.decomposition import PCA

from dlnotes.data import load_karate_club
from dlnotes.embeddings import (
    nearest_neighbours,
    principal_components,
    random_walks,
    skipgram_neg_sampling,
    skipgram_pairs,
    within_across_cosine,
)
from dlnotes.text import build_vocab, tokenize

from conftest import bad_input_test

rng = np.random.default_rng(11)


def test_tokens_vocabulary_and_pairs():
    tokens = tokenize("It is a truth universally acknowledged, that a single man -- Mr. Darcy's -- IS")
    assert tokens[:3] == ["it", "is", "a"] and "darcy's" in tokens
    words, counts = build_vocab(tokens, min_count=2)
    assert words == ["a", "is"] and counts.tolist() == [2, 2]
    ids = np.array([0, 1, 2, 3])
    pairs = {tuple(p) for p in skipgram_pairs(ids, 2).tolist()}
    expected = {(i, j) for i in range(4) for j in range(4) if 0 < abs(i - j) <= 2}
    assert pairs == expected


def test_skipgram_embeddings_separate_the_karate_club_factions():
    G, y = load_karate_club()
    walks = random_walks(G, n_walks=10, length=20, rng=0)
    assert len(walks) == 340 and all(
        G.has_edge(a, b) for walk in walks[:20] for a, b in zip(walk, walk[1:], strict=False)
    )
    pairs = np.concatenate([skipgram_pairs(walk, 3) for walk in walks])
    X = skipgram_neg_sampling(pairs, 34, dim=16, epochs=5, lr=0.02, batch_size=256, rng=0).X
    within, across = within_across_cosine(X, y)
    assert within - across >= 0.1
    assert y[nearest_neighbours(X, 0, 3)].tolist().count(y[0]) >= 2
    X0, _ = skipgram_neg_sampling(pairs, 34, dim=16, epochs=0, rng=0)
    X0_again, _ = skipgram_neg_sampling(pairs[:5], 34, dim=16, epochs=0, rng=0)
    assert np.array_equal(X0, X0_again) and np.abs(X0).max() <= 0.5 / 16


def test_within_across_cosine_against_a_double_loop():
    X, labels = rng.normal(size=(9, 4)), np.array([0, 1, 2, 0, 1, 2, 0, 0, 1])
    cos = lambda a, b: a @ b / np.linalg.norm(a) / np.linalg.norm(b)  # noqa: E731
    pairs = [(i, j) for i in range(9) for j in range(9) if i != j]
    within = np.mean([cos(X[i], X[j]) for i, j in pairs if labels[i] == labels[j]])
    across = np.mean([cos(X[i], X[j]) for i, j in pairs if labels[i] != labels[j]])
    assert np.allclose(within_across_cosine(X, labels), (within, across))


def test_principal_components_match_sklearn_up_to_sign():
    X = rng.normal(size=(30, 6)) @ rng.normal(size=(6, 6))
    Z, reference = principal_components(X, 3), PCA(3).fit_transform(X)
    assert np.allclose(np.abs(Z), np.abs(reference), atol=1e-10)
    assert np.allclose(Z * np.sign(Z[0]), reference * np.sign(reference[0]), atol=1e-10)


def test_nearest_neighbours_by_cosine():
    X = np.array([[1.0, 0.0], [10.0, 1.0], [0.0, 1.0], [-1.0, 0.0]])
    assert nearest_neighbours(X, 0, 3).tolist() == [1, 2, 3]


BAD_INPUT = [  # (call, error, message)
    (lambda: tokenize(3), TypeError, "text must be a str"),
    (lambda: build_vocab(["a"], min_count=0), ValueError, "min_count"),
    (lambda: skipgram_pairs(np.array([0.5, 1.0]), 2), ValueError, "ids must hold whole numbers"),
    (lambda: skipgram_pairs(np.arange(4), 0), ValueError, "window"),
    (
        lambda: skipgram_neg_sampling(np.array([[0, 40]]), 34),
        ValueError,
        r"pairs must hold word ids in 0..33",
    ),
    (lambda: skipgram_neg_sampling(np.array([0, 1]), 34), ValueError, r"pairs must have shape (any, 2)"),
    (lambda: skipgram_neg_sampling(np.array([[0, 1]]), 34, epochs=-1), ValueError, "epochs"),
    (
        lambda: skipgram_neg_sampling(np.array([[0, 1]]), 34, counts=np.ones(3)),
        ValueError,
        r"counts must have shape (34,)",
    ),
    (lambda: nearest_neighbours(np.ones((3, 2)), 3), ValueError, r"index must be an int in [0, 2]"),
    (lambda: nearest_neighbours(np.ones((3, 2)), 0, k=3), ValueError, r"k must be an int in [1, 2]"),
    (
        lambda: within_across_cosine(np.ones((9, 2)), np.zeros(5)),
        ValueError,
        "labels must be a non-empty 1-D array of 9",
    ),
    (lambda: within_across_cosine(np.ones((9, 2)), np.zeros(9)), ValueError, "two groups"),
    (lambda: principal_components(np.ones((2, 6)), 3), ValueError, r"k must be an int in [1, 2]"),
    (lambda: random_walks(load_karate_club()[0], 0, 5), ValueError, "n_walks"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
