import numpy as np
import torch
import torch.nn.functional as F

from dlnotes.rnn import decoding
from dlnotes.rnn.decoding import EOS, PAD, SOURCE, TARGET

from conftest import bad_input_test


def small_model(seed=0, hidden=6):
    torch.manual_seed(seed)
    return decoding.EncoderDecoder(hidden, 4)


def test_run_length_targets_decode_their_sources():
    task = decoding.make_run_length_task(200, max_runs=3, rng=0)
    for source, target in zip(task.sources, task.targets, strict=True):
        pairs = [(int(source[i]), source[i + 1]) for i in range(0, len(source), 2)]
        assert target == "".join(count * letter for count, letter in pairs)
        assert all(a[1] != b[1] for a, b in zip(pairs, pairs[1:], strict=False))  # neighbouring runs differ
    assert {len(s) for s in task.sources} == {2, 4, 6}


def test_pad_batch_pads_at_the_end_and_adds_the_special_tokens():
    padded = decoding.pad_batch(["ab", "d"], TARGET, bos=True, eos=True)
    assert padded.lengths.tolist() == [4, 3]
    assert padded.ids.tolist() == [[1, 3, 4, EOS], [1, 6, EOS, PAD]]


def test_masked_loss_is_the_mean_over_real_tokens_whatever_the_padding():
    logits = torch.randn(3, 5, len(TARGET), generator=torch.Generator().manual_seed(0))
    targets = torch.tensor([[3, 4, EOS, PAD, PAD], [5, EOS, PAD, PAD, PAD], [3, 3, 3, 4, EOS]])
    per_sequence = [
        F.cross_entropy(logits[i, :n], targets[i, :n], reduction="sum") for i, n in enumerate([3, 2, 5])
    ]
    assert torch.isclose(decoding.masked_cross_entropy(logits, targets), sum(per_sequence) / 10)
    longer = torch.cat([logits, torch.randn(3, 4, len(TARGET))], dim=1)  # more padding changes nothing
    assert torch.isclose(
        decoding.masked_cross_entropy(longer, F.pad(targets, (0, 4), value=PAD)),
        decoding.masked_cross_entropy(logits, targets),
    )


def test_the_encoder_ignores_the_padding():
    model = small_model()
    alone = model.encode(decoding.pad_batch(["1a"], SOURCE))
    batched = model.encode(decoding.pad_batch(["1a", "2b3c1d"], SOURCE))
    assert torch.allclose(alone[:, 0], batched[:, 0], atol=1e-6)


def test_beam_width_one_is_greedy_and_a_full_beam_is_exhaustive():
    model = small_model(1)
    sources = ["2a1b", "3c", "1d2a3b"]
    greedy = decoding.greedy_decode(model, sources, max_len=4)
    for source, text in zip(sources, greedy, strict=True):
        assert decoding.beam_search(model, source, 1, max_len=4).text == text
        best = decoding.exhaustive_search(model, source, 3)
        full = decoding.beam_search(model, source, 5**3, max_len=3)
        assert full.text == best.text and np.isclose(full.log_p, best.log_p, atol=1e-5)


def test_teacher_forced_logits_equal_the_decoder_steps():
    model = small_model(2)
    source = decoding.pad_batch(["2a1b"], SOURCE)
    target = decoding.pad_batch(["aab"], TARGET, bos=True, eos=True)
    logits = model(source, target.ids[:, :-1])
    h = model.encode(source)
    for t in range(target.ids.shape[1] - 1):
        log_p, h = model.step(target.ids[:, t], h)
        assert torch.allclose(log_p, F.log_softmax(logits[:, t], dim=-1), atol=1e-6)


BAD_INPUT = [  # (call, error, message)
    (lambda: decoding.make_run_length_task(0), ValueError, "n must be"),
    (lambda: decoding.pad_batch("ab", TARGET), TypeError, "list of str"),
    (lambda: decoding.pad_batch(["ax"], TARGET), ValueError, "strings must use the symbols"),
    (lambda: decoding.pad_batch(["1a"], SOURCE, eos=True), ValueError, "target alphabet"),
    (
        lambda: decoding.masked_cross_entropy(torch.zeros(2, 3), torch.zeros(2, 3)),
        ValueError,
        "logits must be",
    ),
    (lambda: decoding.beam_search(small_model(), "1a", 0), ValueError, "beam_width"),
    (lambda: decoding.exhaustive_search(small_model(), "1a", 9), ValueError, "max_len"),
    (lambda: decoding.greedy_decode(small_model(), ["1a"], max_len=0), ValueError, "max_len"),
]

test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
