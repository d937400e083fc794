"""Section 5.5 (CTC): the collapse map, the forward recursion (plain and in log space) against brute force over
all paths and torch's F.ctc_loss, best-path decoding, and the synthetic unsegmented task."""

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlnotes.rnn import ctc

from conftest import bad_input_test

rng = np.random.default_rng(57)


def test_ctc_collapse_merges_repeats_then_deletes_blanks():
    assert ctc.ctc_collapse("aa-ab") == "aab" and ctc.ctc_collapse("-a--a-") == "aa"
    assert ctc.ctc_collapse("ab-ba") == "abba" and ctc.ctc_collapse("---") == ""


def torch_log_p(Y, label, alphabet):
    target = torch.tensor([[alphabet.index(c) for c in label]], dtype=torch.long).reshape(1, len(label))
    loss = F.ctc_loss(
        torch.log(torch.as_tensor(Y))[:, None],
        target,
        torch.tensor([len(Y)]),
        torch.tensor([len(label)]),
        reduction="sum",
    )
    return -loss.item()


@pytest.mark.parametrize("label", ["", "a", "ab", "aa", "aba", "abb", "bab"])
def test_ctc_alpha_recursion_equals_brute_force_and_torch(label):
    Y = rng.dirichlet(np.ones(3), size=6)
    brute = ctc.ctc_bruteforce(Y, label)
    alpha = ctc.ctc_alpha(Y, label)
    assert alpha.shape == (6, 2 * len(label) + 1)
    assert np.isclose(ctc.ctc_forward(Y, label), brute, rtol=1e-12, atol=1e-15)
    assert np.isclose(np.log(brute), torch_log_p(Y, label, "-ab"), atol=1e-10)
    assert np.isclose(ctc.ctc_log_forward(np.log(Y), label), np.log(brute), atol=1e-10)


def test_dropping_the_repeat_rule_is_wrong_only_for_repeats():
    Y = rng.dirichlet(np.ones(3), size=5)
    assert not np.isclose(ctc.ctc_forward(Y, "aa", repeat_rule=False), ctc.ctc_bruteforce(Y, "aa"))
    assert np.isclose(ctc.ctc_forward(Y, "ab", repeat_rule=False), ctc.ctc_bruteforce(Y, "ab"))


def test_log_space_recursion_survives_where_the_plain_one_underflows():
    alphabet = "-abcd"
    Y = rng.dirichlet(np.ones(5), size=800)
    label = "".join(rng.choice(list("abcd"), size=15))
    assert ctc.ctc_forward(Y, label, alphabet) == 0.0
    log_p = ctc.ctc_log_forward(np.log(Y), label, alphabet)
    assert np.isclose(log_p, torch_log_p(Y, label, alphabet), rtol=1e-12)


def test_best_path_is_the_collapse_of_the_most_probable_path():
    for _ in range(5):
        Y = rng.dirichlet(np.ones(3), size=5)
        best = max(itertools.product(range(3), repeat=5), key=lambda p: np.prod(Y[np.arange(5), list(p)]))
        assert ctc.ctc_best_path(Y) == ctc.ctc_collapse("".join("-ab"[k] for k in best))


def test_ctc_task_without_noise_decodes_to_its_labels():
    task = ctc.make_ctc_task(200, vocab=3, noise=0.0, rng=0)
    assert task.X.shape[0] == 200 and task.X.shape[2] == 4 and task.input_lengths.max() == task.X.shape[1]
    assert (task.X[np.arange(200)[:, None], np.arange(task.X.shape[1])] >= 0).all()
    for i in range(200):
        frames = task.X[i, : task.input_lengths[i]].argmax(axis=1)
        label = task.targets[i, : task.target_lengths[i]]
        assert ctc.ctc_collapse("".join("-abc"[k] for k in frames)) == "".join("-abc"[k] for k in label)
        assert (task.X[i, task.input_lengths[i] :] == 0).all() and (label >= 1).all()
        assert task.input_lengths[i] >= task.target_lengths[i] + np.sum(label[1:] == label[:-1])


# ----------------------------------------------------------------------------- bad input

Y5 = np.full((5, 3), 1 / 3)
BAD_INPUT = [  # (call, error, message)
    (lambda: ctc.ctc_forward(Y5, "abc"), ValueError, "label"),
    (lambda: ctc.ctc_forward(Y5[:, :2], "ab"), ValueError, "probabilities"),
    (lambda: ctc.ctc_alpha(Y5, "abc"), ValueError, "label"),
    (lambda: ctc.ctc_log_forward(Y5, "ab"), ValueError, "log-probabilities"),
    (lambda: ctc.ctc_best_path(Y5[:, :2]), ValueError, "probabilities"),
    (lambda: ctc.make_ctc_task(0), ValueError, "n must be"),
    (lambda: ctc.make_ctc_task(5, noise=-0.1), ValueError, "noise"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
