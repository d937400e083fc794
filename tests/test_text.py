"""The shared text tools: vocabularies against collections.Counter, token ids, random strings without the
excluded ones, and what a language model returns."""

import re
from collections import Counter
from itertools import pairwise

import numpy as np
import torch

from dlnotes.data import load_novel
from dlnotes.text import (
    BPE,
    LMOutput,
    bpe_decode,
    bpe_encode,
    bpe_pieces,
    build_vocab,
    check_tokens,
    next_token_loss,
    random_strings,
    random_windows,
    tokenize,
    train_bpe,
)

from conftest import bad_input_test

rng = np.random.default_rng(12)


def test_build_vocab_orders_by_count_then_alphabet_and_puts_the_specials_first():
    tokens = tokenize("the cat and the dog and the bird saw a cat")
    counts = Counter(tokens)
    vocab = build_vocab(tokens, min_count=1)
    assert vocab.tokens == sorted(counts, key=lambda w: (-counts[w], w))
    assert vocab.counts.tolist() == [counts[w] for w in vocab.tokens] and vocab.counts.dtype == np.int64
    assert build_vocab(tokens, min_count=2).tokens == ["the", "and", "cat"]
    limited = build_vocab(tokens, min_count=1, size=2, specials=("[UNK]", "[MASK]", "cat"))
    assert limited.tokens == ["[UNK]", "[MASK]", "cat", "the", "and"]  # a special is never counted twice
    assert limited.counts.tolist() == [0, 0, 2, 3, 2]
    assert build_vocab(list("abracadabra"), min_count=1).tokens == ["a", "b", "r", "c", "d"]  # characters too


def test_check_tokens_takes_arrays_and_tensors_of_ids():
    ids = check_tokens(np.array([[0, 3], [2, 1]], dtype=np.int32), "x", vocab=4)
    assert ids.dtype == torch.int64 and ids.tolist() == [[0, 3], [2, 1]]
    assert check_tokens(torch.tensor([[1, 2, 3]]), "x", vocab=4, length=3).shape == (1, 3)
    assert check_tokens([[1, 2, 3]], "x", vocab=4, max_length=3).shape == (1, 3)


def test_random_strings_are_uniform_and_avoid_the_excluded_ones():
    X = random_strings(4000, 3, 5, rng=0)
    assert X.shape == (4000, 3) and X.dtype == np.int64
    assert np.allclose(np.bincount(X.ravel(), minlength=5) / X.size, 0.2, atol=0.02)
    assert np.array_equal(X, np.random.default_rng(0).integers(5, size=(4000, 3)))  # the draws of integers
    train = random_strings(4, 2, 3, rng=1)
    held_out = random_strings(50, 2, 3, rng=2, exclude=train)
    assert len(held_out) == 50 and not {tuple(r) for r in held_out} & {tuple(r) for r in train}
    assert {tuple(r) for r in held_out} == {(a, b) for a in range(3) for b in range(3)} - {
        tuple(r) for r in train
    }


def test_lm_output_needs_the_logits_only():
    logits = torch.zeros(2, 3, 5)
    assert LMOutput(logits).Z is None and LMOutput(logits).state is None
    Z, state = torch.ones(2, 3, 4), (torch.ones(1, 2, 4), torch.ones(1, 2, 4))
    out = LMOutput(logits, Z, state)
    assert out.logits is logits and out.Z is Z and out.state is state


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: build_vocab(["a"], min_count=0), ValueError, "min_count"),
    (lambda: build_vocab(["a"], size=0), ValueError, "size"),
    (lambda: build_vocab(["a"], specials="[UNK]"), TypeError, "specials must be a sequence of str"),
    (lambda: check_tokens(np.array([[0.5, 1.0]]), "x", 4), TypeError, "x must hold integer token ids"),
    (lambda: check_tokens(np.array([0, 1]), "x", 4), ValueError, "x must have shape (batch, length)"),
    (lambda: check_tokens([[0, 1]], "y", 4, length=3), ValueError, "y must have shape (batch, 3)"),
    (lambda: check_tokens([[0, 1, 2]], "x", 4, max_length=2), ValueError, "(batch, length <= 2)"),
    (lambda: check_tokens([[0, 4]], "x", 4), ValueError, "x must hold token ids in 0..3, got 0..4"),
    (lambda: random_strings(0, 3, 5), ValueError, "n must be"),
    (lambda: random_strings(2, 3, 1), ValueError, "vocab must be"),
    (lambda: random_strings(2, 1, 2, exclude=[[0], [1]]), ValueError, "nothing is left"),
    (lambda: random_strings(2, 2, 5, exclude=np.zeros((3, 4), int)), ValueError, "exclude must have shape"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)


def test_random_windows_are_consecutive_tokens_starting_anywhere():
    ids = torch.arange(50)
    batches = random_windows(ids, seq_len=7, batch_size=64, rng=np.random.default_rng(0))
    window = next(batches)
    assert window.shape == (64, 8)
    assert torch.equal(window[:, 1:] - window[:, :-1], torch.ones(64, 7, dtype=ids.dtype))  # consecutive
    starts = torch.cat([next(batches)[:, 0] for _ in range(20)])
    assert (
        starts.min() == 0 and starts.max() == 50 - 8
    )  # every start, the last window ending at the last token


def test_next_token_loss_scores_each_token_given_the_ones_before():
    class Table(torch.nn.Module):  # p(y_t | y_<t) depends on y_{t-1} through a table of logits
        def __init__(self):
            super().__init__()
            self.logits = torch.randn(5, 5, generator=torch.Generator().manual_seed(0))

        def forward(self, x):
            return LMOutput(self.logits[x])

    window = torch.tensor([[0, 3, 1, 4], [2, 2, 0, 1]])
    log_p = torch.log_softmax(Table().logits, dim=1)
    by_hand = -np.mean([log_p[row[t - 1], row[t]].item() for row in window for t in range(1, 4)])
    assert np.isclose(next_token_loss(Table(), window).item(), by_hand)


test_windows_bad_input = bad_input_test(
    [
        (lambda: random_windows([1, 2, 3], 1, 1, 0), TypeError, "ids must be a 1-D tensor"),
        (
            lambda: random_windows(torch.arange(5), 4, 1, 0),
            ValueError,
            "more than seq_len + 1 = 5 tokens",
        ),
        (lambda: random_windows(torch.arange(9), 0, 1, 0), ValueError, "seq_len"),
    ]
)


NOVEL = load_novel()[:60_000]


def brute_force_best_pair(text, merges):
    """The most frequent adjacent pair after `merges`, counted piece by piece over the text (ties: smallest)."""
    counts = Counter()
    for piece in re.findall(r" ?\w+| ?[^\w\s]+|\s+(?!\S)|\s+", text):
        symbols = list(piece)
        for a, b in merges:  # apply the merges one after the other, left to right
            k = 0
            while k < len(symbols) - 1:
                if (symbols[k], symbols[k + 1]) == (a, b):
                    symbols[k : k + 2] = [a + b]
                k += 1
        counts.update(pairwise(symbols))
    return min(counts, key=lambda p: (-counts[p], p))


def test_bpe_merges_the_most_frequent_pair_counted_independently():
    bpe = train_bpe(NOVEL, 8)
    for k in range(8):
        assert bpe.merges[k] == brute_force_best_pair(NOVEL, bpe.merges[:k])
    assert bpe.tokens[: len(bpe.tokens) - 8] == sorted(set(NOVEL)) and bpe.tokens[-8:] == [
        a + b for a, b in bpe.merges
    ]
    assert train_bpe(NOVEL, 60).merges[:8] == bpe.merges  # learning more merges keeps the first ones
    assert train_bpe("aaaa", 5).merges == [("a", "a"), ("aa", "aa")]  # stops when every piece is one symbol
    assert train_bpe("ab ba", 1).merges == [(" ", "b")]  # three pairs once each: the smallest string wins


def test_bpe_decode_inverts_encode_on_the_training_text_and_on_unseen_text():
    bpe = train_bpe(NOVEL, 200)
    unseen = load_novel()[-20_000:] + "  \n\n xyzzy,,  qa\t "
    unseen = "".join(c for c in unseen if c in bpe.tokens[:-200])
    for text in (NOVEL, unseen, "", " ", "\n\n"):
        ids = bpe_encode(text, bpe)
        assert ids.dtype == np.int64 and bpe_decode(ids, bpe) == text
    assert [bpe.tokens[k] for k in bpe_encode(" the", bpe)] == [" the"]  # a frequent word is one token


def test_bpe_encoding_gets_shorter_with_every_merge():
    bpe = train_bpe(NOVEL, 40)
    lengths = [
        len(bpe_encode(NOVEL, BPE(bpe.merges[:k], bpe.tokens[: len(bpe.tokens) - 40 + k]))) for k in range(41)
    ]
    assert lengths[0] == len(NOVEL) and all(b < a for a, b in pairwise(lengths))


BPE_SMALL = train_bpe("the cat sat", 3)
test_bpe_bad_input = bad_input_test(
    [
        (lambda: train_bpe(["the"], 3), TypeError, "text must be a non-empty str"),
        (lambda: train_bpe("", 3), TypeError, "text must be a non-empty str"),
        (lambda: train_bpe("abc", -1), ValueError, "n_merges"),
        (lambda: bpe_encode("the dog", BPE_SMALL), ValueError, "character 'd' (position 4)"),
        (lambda: bpe_encode(b"the", BPE_SMALL), TypeError, "text must be a str"),
        (lambda: bpe_decode([0, 99], BPE_SMALL), ValueError, "ids must be token ids in 0.."),
        (lambda: bpe_decode([0.5], BPE_SMALL), TypeError, "ids must be a 1-D sequence of integer"),
    ]
)


def test_bpe_pieces_are_words_with_their_space_punctuation_and_white_space():
    text = "It is a truth, universally acknowledged...\n\n  Mr. Bennet"
    assert bpe_pieces(text) == [
        "It",
        " is",
        " a",
        " truth",
        ",",
        " universally",
        " acknowledged",
        "...",
        "\n\n ",
        " Mr",
        ".",
        " Bennet",
    ]
    assert "".join(bpe_pieces(text)) == text
