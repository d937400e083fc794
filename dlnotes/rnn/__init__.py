"""Chapter 05 — recurrent networks, one module per section, in the order of the chapter:

- `simple` (5.1, 5.2): the Elman RNN and backpropagation through time, deep and bidirectional RNNs; the
  Jacobian product bound, the spectral norm by power iteration and gradient clipping;
- `gated` (5.3): LSTM and GRU cells from the lecture's formulas, the adding problem;
- `linear` (5.4): linear recurrences and their parallel scans, state-space models, the LRU, the recall task;
- `seq2seq` (5.5): encoder–decoder models with attention, trained by teacher forcing, on string reversal;
- `language` (5.5 continued): a character-level LSTM language model, bits per character, generation;
- `ctc` (5.5 continued): connectionist temporal classification and a synthetic unsegmented task.

Conventions: a sequence is an array (T, n) with time first (a batch of them (B, T, n)); states z_t (m,),
z_0 = 0. The NumPy cells hold weights named as in the lecture, load the weights of the corresponding
``torch.nn`` module, and run on torch tensors too, so that autograd goes through the same formulas. Every
public name of the sections is re-exported here (``from dlnotes.rnn import Seq2Seq``); notebooks import from
the section module that defines it.
"""

from .ctc import (
    CTCTask,
    ctc_alpha,
    ctc_best_path,
    ctc_bruteforce,
    ctc_collapse,
    ctc_forward,
    ctc_log_forward,
    make_ctc_task,
)
from .gated import AddingTask, GRUCell, LSTMCell, LSTMRun, make_adding_task
from .language import (
    CharLSTM,
    Generation,
    bits_per_character,
    char_vocabulary,
    conditional_entropy,
    decode_chars,
    encode_chars,
    generate,
    sample,
    train_char_lm,
)
from .linear import (
    LRULayer,
    LRUParams,
    RecallTask,
    ScanResult,
    linear_gru,
    linear_recurrence_loop,
    linear_recurrence_scan,
    linear_recurrence_scan_work_efficient,
    linear_ssm,
    lru_lambda,
    lru_nu,
    lru_params,
    make_recall_task,
    scan_combine,
    ssm_kernel,
)
from .seq2seq import (
    Attention,
    Decoded,
    ReverseTask,
    Seq2Seq,
    Seq2SeqScore,
    attention_context,
    evaluate_seq2seq,
    make_reverse_task,
    train_seq2seq,
)
from .simple import (
    GAMMA,
    BiRNNRun,
    BPTTResult,
    PowerIteration,
    RNNRun,
    bidirectional_rnn,
    bptt,
    clip_by_norm,
    deep_rnn,
    elman_rnn,
    jacobian_norms,
    spectral_norm,
    torch_rnn_weights,
)

__all__ = [
    "GAMMA",
    "BiRNNRun",
    "BPTTResult",
    "PowerIteration",
    "RNNRun",
    "bidirectional_rnn",
    "bptt",
    "clip_by_norm",
    "deep_rnn",
    "elman_rnn",
    "jacobian_norms",
    "spectral_norm",
    "torch_rnn_weights",
    "AddingTask",
    "GRUCell",
    "LSTMCell",
    "LSTMRun",
    "make_adding_task",
    "LRULayer",
    "LRUParams",
    "RecallTask",
    "ScanResult",
    "linear_gru",
    "linear_recurrence_loop",
    "linear_recurrence_scan",
    "linear_recurrence_scan_work_efficient",
    "linear_ssm",
    "lru_lambda",
    "lru_nu",
    "lru_params",
    "make_recall_task",
    "scan_combine",
    "ssm_kernel",
    "Attention",
    "Decoded",
    "ReverseTask",
    "Seq2Seq",
    "Seq2SeqScore",
    "attention_context",
    "evaluate_seq2seq",
    "make_reverse_task",
    "train_seq2seq",
    "CharLSTM",
    "Generation",
    "bits_per_character",
    "char_vocabulary",
    "conditional_entropy",
    "decode_chars",
    "encode_chars",
    "generate",
    "sample",
    "train_char_lm",
    "CTCTask",
    "ctc_alpha",
    "ctc_best_path",
    "ctc_bruteforce",
    "ctc_collapse",
    "ctc_forward",
    "ctc_log_forward",
    "make_ctc_task",
]
