"""Sections 6.3 (encoder-decoder transformer) and 6.4 (vision transformer): the translation task, the decoder
block against ``nn.TransformerDecoderLayer``, causality and greedy decoding of `Seq2SeqTransformer`, `patchify`
against ``nn.Conv2d``, and the `ViT`."""

import numpy as np
import torch

from dlnotes import transformers as tf

from conftest import bad_input_test

rng = np.random.default_rng(6)


# ----------------------------------------------------------------------------- 6.3 encoder-decoder transformers


def test_translation_task_reverses_and_spells_the_digits():
    task = tf.make_translation_task(50, 4, rng=1)
    assert task.X.shape == task.Y.shape == (50, 4)
    assert list(task.target_vocab) == sorted(tf.NUMBER_WORDS) and task.source_vocab == tuple("0123456789")
    for x, y in zip(task.X, task.Y, strict=True):
        words = tf.decode_words(y, task.target_vocab).split()
        assert words == [tf.NUMBER_WORDS[digit] for digit in x[::-1]]
    assert tf.decode_words([1, 4], task.target_vocab) == "five one"  # ids into the alphabetical vocabulary
    held_out = tf.make_translation_task(200, 2, rng=2, exclude=task.X[:, :2])
    assert not {r.tobytes() for r in held_out.X} & {r.tobytes() for r in task.X[:, :2].copy()}


def test_decoder_block_equals_torch_transformer_decoder_layer():
    d, h, d_ff, n, m = 8, 2, 16, 5, 7
    torch.manual_seed(0)
    ours = tf.DecoderBlock(d, h, d_ff).double()
    ref = torch.nn.TransformerDecoderLayer(
        d, h, d_ff, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
    ).double()
    ours.self_attn.load_torch_mha(ref.self_attn)
    ours.cross_attn.load_torch_mha(ref.multihead_attn)
    with torch.no_grad():
        for a, b in ((ours.norm1, ref.norm1), (ours.norm2, ref.norm2), (ours.norm3, ref.norm3)):
            a.weight.copy_(torch.randn(d)), a.bias.copy_(torch.randn(d))
            b.weight.copy_(a.weight), b.bias.copy_(a.bias)
        for a, b in ((ours.mlp[0], ref.linear1), (ours.mlp[2], ref.linear2)):
            a.weight.copy_(b.weight), a.bias.copy_(b.bias)
    y, memory = torch.randn(3, n, d, dtype=torch.float64), torch.randn(3, m, d, dtype=torch.float64)
    out, weights = ours(y, memory)
    expected = ref(y, memory, tgt_mask=torch.as_tensor(~tf.causal_mask(n)))  # torch: True = masked out
    assert torch.allclose(out, expected, atol=1e-10)
    assert weights.shape == (3, h, n, m) and torch.allclose(
        weights.sum(-1), torch.ones(3, h, n, dtype=torch.float64)
    )


def test_seq2seq_transformer_is_causal_in_the_target_and_greedy_matches_the_parallel_pass():
    torch.manual_seed(1)
    model = tf.Seq2SeqTransformer(10, d=16, h=2, d_ff=32, n_layers=2).double().eval()
    x, y = rng.integers(10, size=(4, 6)), rng.integers(10, size=(4, 5))
    logits = model(x, y)
    assert logits.shape == (4, 5, 10)
    y2 = y.copy()
    y2[:, 2] = (y2[:, 2] + 1) % 10  # y_3 is the decoder's input at steps 4 and 5 only
    changed = (model(x, y2) - logits).abs().amax(dim=(0, 2))
    assert torch.all(changed[:3] < 1e-12) and torch.all(changed[3:] > 1e-6)
    x2 = x.copy()
    x2[:, -1] = (x2[:, -1] + 1) % 10  # the source reaches every output position
    assert torch.all((model(x2, y) - logits).abs().amax(dim=(0, 2)) > 1e-6)
    decoded = model.greedy_decode(x, 5)
    assert decoded.tokens.shape == (4, 5) and decoded.attention.shape == (4, 5, 6)
    assert torch.equal(model(x, decoded.tokens).argmax(-1), decoded.tokens)  # the teacher-forced pass agrees
    assert torch.allclose(decoded.attention.sum(-1), torch.ones(4, 5, dtype=torch.float64))


# ----------------------------------------------------------------------------- 6.4 vision transformer


def test_patchify_equals_conv2d_with_three_channels():
    c, H, W, p, n = 3, 6, 9, 3, 5
    img = rng.normal(size=(c, H, W))
    E = rng.normal(size=(n, c * p * p))
    conv = torch.nn.Conv2d(c, n, kernel_size=p, stride=p, bias=False).double()
    with torch.no_grad():
        conv.weight.copy_(torch.tensor(E.reshape(n, c, p, p)))
    feature_maps = conv(torch.tensor(img)[None])[0].detach().numpy()  # (n, H/p, W/p)
    tokens = tf.patchify(img, p) @ E.T  # (T, n)
    assert tokens.shape == ((H // p) * (W // p), n)
    assert np.allclose(tokens, feature_maps.reshape(n, -1).T, atol=1e-12)  # row-major output positions
    batched = tf.patchify(torch.tensor(np.stack([img, 2 * img])), p)
    assert np.allclose(batched[1].numpy(), 2 * tf.patchify(img, p))
    assert np.allclose(tf.patchify(img[0], p), tf.patchify(img[:1], p))  # (H, W) is one channel
    assert np.array_equal(tf.patchify(img, p)[1], img[:, 0:3, 3:6].ravel())  # patch (0, 1), (k, r, s) order


def test_vit_shapes_embedding_and_cls_attention():
    torch.manual_seed(2)
    vit = tf.ViT(image_size=4, p=2, c=3, d=8, h=2, d_ff=16, n_layers=2, n_classes=5).double().eval()
    x = torch.randn(6, 3, 4, 4, dtype=torch.float64)
    logits = vit(x)
    assert logits.shape == (6, 5) and torch.allclose(vit(x.reshape(6, -1)), logits)
    conv = torch.nn.Conv2d(3, 8, 2, stride=2).double()
    with torch.no_grad():
        conv.weight.copy_(vit.embed.weight.reshape(8, 3, 2, 2))
        conv.bias.copy_(vit.embed.bias)
    tokens = vit._tokens(x)
    expected = conv(x).flatten(2).transpose(1, 2) + vit.pos[:, 1:]
    assert tokens.shape == (6, 5, 8) and torch.allclose(tokens[:, 1:], expected, atol=1e-12)
    a = vit.cls_attention(x)
    assert a.shape == (6, 4) and torch.all(a >= 0) and torch.all(a.sum(-1) < 1)


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: tf.make_translation_task(0, 3), ValueError, "n must"),
    (lambda: tf.make_translation_task(5, 1, exclude=np.arange(10)[:, None]), ValueError, "nothing is left"),
    (
        lambda: tf.make_translation_task(5, 2, exclude=np.zeros((3, 4), int)),
        ValueError,
        "exclude must have shape",
    ),
    (lambda: tf.decode_words([0, 10], tf.NUMBER_WORDS), ValueError, "ids must lie in 0..9"),
    (lambda: tf.Seq2SeqTransformer(10, d=6, h=4), ValueError, "divisible by h"),
    (
        lambda: tf.Seq2SeqTransformer(10, d=8, h=2)(np.zeros((2, 3)), np.zeros((2, 3), int)),
        TypeError,
        "integer",
    ),
    (lambda: tf.Seq2SeqTransformer(10, d=8, h=2)([[1, 12]], [[1, 2]]), ValueError, "ids in 0..9"),
    (lambda: tf.Seq2SeqTransformer(10, d=8, h=2)([[1, 2]], [[1, 2], [3, 4]]), ValueError, "same number"),
    (lambda: tf.Seq2SeqTransformer(10, d=8, h=2).greedy_decode([[1, 2]], 0), ValueError, "n must"),
    (
        lambda: tf.DecoderBlock(8, 2, 16)(torch.ones(2, 3, 8), torch.ones(2, 4, 6)),
        ValueError,
        "memory must be",
    ),
    (lambda: tf.DecoderBlock(8, 2, 16)(torch.ones(3, 8), torch.ones(4, 8)), ValueError, "y must be a tensor"),
    (lambda: tf.patchify(np.ones((3, 8, 8)), 3), ValueError, "p must divide"),
    (lambda: tf.patchify(np.ones(8), 2), ValueError, r"img must have shape (c, H, W)"),
    (lambda: tf.patchify(torch.ones(3, 8, 8), 2), ValueError, r"tensor (B, c, H, W)"),
    (lambda: tf.patchify(np.ones((8, 8)), 0), ValueError, "p must"),
    (lambda: tf.ViT(image_size=8, p=3), ValueError, "p must divide"),
    (lambda: tf.ViT()(torch.ones(2, 63)), ValueError, r"x must be a tensor (B, 1, 8, 8)"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
