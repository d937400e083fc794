"""Embeddings of words and of graph nodes, shared by the chapters on convolutions (word2vec), recurrent networks,
transformers and graphs: skip-gram with negative sampling, DeepWalk's random walks, cosine neighbours and a
principal-component projection for pictures of embeddings."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from .training import progress_bar, to_numpy, train_steps
from .validation import check_array, check_int, check_labels, check_positive, check_rng


def skipgram_pairs(ids, window: int) -> np.ndarray:
    """All (centre, context) pairs of a sequence of word ids within `window` positions, both ways: (P, 2)."""
    ids = check_labels(ids, "ids")
    window = check_int(window, "window", 1)
    pairs = [np.stack([ids[:-k], ids[k:]], axis=1) for k in range(1, window + 1) if k < len(ids)]
    pairs = np.concatenate(pairs) if pairs else np.empty((0, 2), dtype=np.int64)
    return np.concatenate([pairs, pairs[:, ::-1]])


class SkipGram(NamedTuple):
    X: np.ndarray  # input (centre) embeddings, (n_words, dim): the word vectors
    Y: np.ndarray  # output (context) embeddings, (n_words, dim)


class _Embeddings(torch.nn.Module):
    """The two embedding tables of skip-gram: X (n_words, dim) uniform in [-1/(2 dim), 1/(2 dim)], Y zero."""

    def __init__(self, n_words: int, dim: int, generator: torch.Generator):
        super().__init__()
        self.X = torch.nn.Parameter((torch.rand(n_words, dim, generator=generator) - 0.5) / dim)
        self.Y = torch.nn.Parameter(torch.zeros(n_words, dim))


def skipgram_neg_sampling(
    pairs,
    n_words: int,
    dim: int = 32,
    n_neg: int = 5,
    epochs: int = 5,
    lr: float = 0.01,
    batch_size: int = 1024,
    counts=None,
    rng=None,
    progress: bool = False,
) -> SkipGram:
    """Skip-gram with negative sampling: for each observed (centre w, context v) minimise
    ``-log sigma(x_w^T y_v) - sum_{k=1}^{n_neg} log sigma(-x_w^T y_{mu_k})`` with mu_k drawn from the noise
    distribution ``counts^{3/4}`` (uniform without counts); ``torch.optim.Adam`` (learning rate `lr`) on
    mini-batches. Returns the embeddings X and Y (with ``epochs=0``: their random initialisation)."""
    n_words = check_int(n_words, "n_words", 1)
    pairs = check_array(pairs, "pairs", (None, 2), dtype=np.int64)
    if pairs.min() < 0 or pairs.max() >= n_words:
        raise ValueError(f"pairs must hold word ids in 0..{n_words - 1}, got {pairs.min()}..{pairs.max()}")
    dim, n_neg = check_int(dim, "dim", 1), check_int(n_neg, "n_neg", 1)
    epochs, batch_size = check_int(epochs, "epochs", 0), check_int(batch_size, "batch_size", 1)
    noise = np.ones(n_words) if counts is None else check_array(counts, "counts", (n_words,)) ** 0.75
    generator = torch.Generator().manual_seed(int(check_rng(rng).integers(2**31)))
    noise = torch.tensor(noise / noise.sum())
    model = _Embeddings(n_words, dim, generator)
    optimizer = torch.optim.Adam(model.parameters(), lr=check_positive(lr, "lr"))
    pairs = torch.from_numpy(pairs)

    def loss(model, idx):
        centre, context = pairs[idx, 0], pairs[idx, 1]
        negatives = torch.multinomial(noise, len(idx) * n_neg, replacement=True, generator=generator)
        x = model.X[centre]
        positive_score = (x * model.Y[context]).sum(dim=1)
        negative_score = (x[:, None, :] * model.Y[negatives].view(len(idx), n_neg, dim)).sum(dim=-1)
        return -(F.logsigmoid(positive_score).mean() + F.logsigmoid(-negative_score).sum(dim=1).mean())

    for _ in progress_bar(range(epochs), desc="epochs", enabled=progress):
        batches = torch.randperm(len(pairs), generator=generator).split(batch_size)
        train_steps(model, loss, optimizer, batches, progress=False)
    X, Y = model.X, model.Y
    return SkipGram(to_numpy(X).astype(np.float64), to_numpy(Y).astype(np.float64))


def _unit_rows(X) -> np.ndarray:
    return X / np.linalg.norm(X, axis=1, keepdims=True).clip(1e-12)


def nearest_neighbours(X, index: int, k: int = 5) -> np.ndarray:
    """Indices of the k rows of X (N, dim) with the largest cosine similarity to row `index` (itself excluded)."""
    X = check_array(X, "X", ndim=2)
    index = check_int(index, "index", 0, len(X) - 1)
    k = check_int(k, "k", 1, len(X) - 1)
    unit = _unit_rows(X)
    similarity = unit @ unit[index]
    similarity[index] = -np.inf
    return np.argsort(-similarity)[:k]


def within_across_cosine(X, labels) -> tuple[float, float]:
    """Mean cosine similarity of the rows of X over pairs with the same label and over pairs with different
    labels (pairs of distinct rows): a measure of how well embeddings separate groups."""
    X = check_array(X, "X", ndim=2)
    labels = check_labels(labels, "labels", len(X))
    unit = _unit_rows(X)
    similarity = unit @ unit.T
    same = labels[:, None] == labels[None, :]
    distinct = ~np.eye(len(X), dtype=bool)
    if not (same & distinct).any() or same.all():
        raise ValueError("labels must have at least two groups and a group with two members")
    return float(similarity[same & distinct].mean()), float(similarity[~same].mean())


def principal_components(X, k: int = 2) -> np.ndarray:
    """The rows of X (N, dim), centred, projected on their k leading principal directions: (N, k)."""
    X = check_array(X, "X", ndim=2)
    k = check_int(k, "k", 1, min(X.shape))
    centred = X - X.mean(axis=0)
    return centred @ np.linalg.svd(centred, full_matrices=False)[2][:k].T


def random_walks(G, n_walks: int, length: int, rng=None) -> list[np.ndarray]:
    """DeepWalk's sentences: `n_walks` uniform random walks of `length` nodes from every node of the graph G
    (nodes labelled 0..N-1), the start nodes in a new random order for each round."""
    n_walks, length = check_int(n_walks, "n_walks", 1), check_int(length, "length", 1)
    rng = check_rng(rng)
    neighbours = [np.array(sorted(G.neighbors(v))) for v in range(G.number_of_nodes())]
    walks = []
    for _ in range(n_walks):
        for start in rng.permutation(G.number_of_nodes()):
            walk = [start]
            for _ in range(length - 1):
                walk.append(rng.choice(neighbours[walk[-1]]))
            walks.append(np.array(walk))
    return walks
