"""Packed sequences with per-document attention (``--pack``): the rows the data makes (every
example once, intact, its positions from 0, its first token no label; a text window's positions
restarting at each document), and for every row of the architecture matrix that uses rotary
positions, the loss and every gradient of a packed batch through our export (FlashAttentionScore
in TND over the documents' lengths) equal to PyTorch's over the documents run one by one, on the
native and the portable path; rows whose attention cannot take boundaries refused naming why."""

import numpy as np
import pytest
from model_oracles import relative_error

from ort_ascend_ops import make_session
from ort_ascend_ops.examples import architectures
from ort_ascend_ops.examples.hf_models import SEQUENCE
from ort_ascend_ops.trainer.chat_data import _packed
from ort_ascend_ops.trainer.data import IGNORED, Corpus, Rows

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ort_ascend_ops.export import export_torch  # noqa: E402
from ort_ascend_ops.export.packed_attention import (  # noqa: E402
    PackingError,
    check_packable,
    dynamic_shapes,
    packed,
    sample,
)
from ort_ascend_ops.training import build_training_model  # noqa: E402

TOLERANCE = 1e-5  # as the matrix's (tests/test_architectures.py)
# Why a row's attention cannot take per-document boundaries.
REFUSED = {
    "gemma2": "a soft cap",
    "gpt_oss": "attention sinks",
    "cohere2": "sliding window",
    "gemma3": "sliding window",
    "mistral": "sliding window",
    "ministral": "sliding window",
    "olmo3": "sliding window",
    "exaone4": "sliding window",
    "starcoder2": "sliding window",
    "stablelm": "does not pass the model's keyword arguments",
    "nemotron": "does not pass the model's keyword arguments",
    "falcon": "does not pass the model's keyword arguments",
    "minimax": "linear_attention layers mix tokens across documents",
}
# Rows whose loss is not the documents' alone: a router's load-balancing loss over the batch.
BATCH_LOSSES = {"qwen3_moe-batched-aux-loss"}
# Kept in CI: the plain row, a bias and an interleaved rotation, MLA with experts, a refusal.
FAST = {"llama", "qwen2", "glm4", "deepseek_v3", "gemma2"}
ROWS = [
    pytest.param(a, id=a.name, marks=[] if a.name in FAST else [pytest.mark.slow])
    for a in architectures.ARCHITECTURES
    if a.rope_mode is not None and not a.fails and not a.dynamic and a.name not in BATCH_LOSSES
]
DOCUMENTS = [[3, 5], [2, 4, 2]]  # each row's documents' lengths, SEQUENCE tokens a row


def packed_batch(arch) -> tuple[Rows, list[list[np.ndarray]]]:
    """Two rows of the row's batch packed as DOCUMENTS says, and each document's tokens."""
    ids = architectures.batch(arch)["input_ids"]
    positions = np.array([np.concatenate([np.arange(n) for n in row]) for row in DOCUMENTS])
    documents = [np.split(ids[r], np.cumsum(row)[:-1]) for r, row in enumerate(DOCUMENTS)]
    return Rows(ids, np.where(positions == 0, IGNORED, ids), positions), documents


def one_by_one(model, documents) -> dict:
    """torch's loss over the documents run one at a time (the mean over every predicted token)
    and each parameter's gradient."""
    model.zero_grad()
    counted = sum(len(d) - 1 for row in documents for d in row)
    total = 0
    for row in documents:
        for document in row:
            tokens = torch.from_numpy(document)[None]
            total = total + model(input_ids=tokens, labels=tokens).loss * (len(document) - 1)
    loss = total / counted
    loss.backward()
    return {"loss": loss.detach().numpy()} | {
        f"{n}_grad": p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None
    }


@pytest.mark.parametrize("arch", ROWS)
def test_a_packed_batch_gives_the_documents_one_by_one(arch):
    assert sum(DOCUMENTS[0]) == sum(DOCUMENTS[1]) == SEQUENCE
    model = architectures.language_model(arch)
    inputs = sample(2, SEQUENCE)
    if arch.name in REFUSED:
        with pytest.raises(PackingError, match=REFUSED[arch.name]):
            check_packable(model, SEQUENCE)
        return
    with packed(model):
        export = export_torch(model, inputs, dynamic_shapes=dynamic_shapes(inputs))
    training = build_training_model(export, "loss", [n for n, _ in model.named_parameters()])
    attention = [n for n in training.graph.node if n.op_type == "FlashAttentionScoreGrad"]
    assert attention and all(
        a.s == b"TND" for n in attention for a in n.attribute if a.name == "input_layout"
    )
    rows, documents = packed_batch(arch)
    expected = one_by_one(model, documents)
    names = [i.name for i in training.graph.input]
    for native in (True, False):
        got = make_session(training, native=native).run(dict(zip(names, rows.feeds(names), strict=True)))
        results = dict(zip([o.name for o in training.graph.output], got, strict=True))
        worst = max(relative_error(results[name], value) for name, value in expected.items())
        print(f"packing | {arch.name} | native {native} | {worst:.1e}")
        assert worst < TOLERANCE, (native, worst)


def test_packed_rows_hold_every_example_once_from_position_zero():
    rng = np.random.default_rng(0)
    examples = [(t, np.where(rng.random(len(t)) < 0.5, t, IGNORED)) for t in
                (rng.integers(0, 50, n) for n in rng.integers(1, 20, 60))]  # fmt: skip
    rows = _packed(examples, 24, pad=99)
    found = []
    for ids, labels, positions in zip(rows.ids, rows.labels, rows.positions, strict=True):
        starts = list(np.flatnonzero(positions == 0)) + [24]
        for a, b in zip(starts[:-1], starts[1:], strict=True):
            np.testing.assert_array_equal(positions[a:b], np.arange(b - a))
            assert labels[a] == IGNORED
            found.append((ids[a:b].tobytes(), labels[a + 1 : b].tobytes()))
    wanted = [(t.tobytes(), lab[1:].tobytes()) for t, lab in examples]
    padding = [f for f in found if f not in wanted]
    assert sorted(f for f in found if f in wanted) == sorted(wanted)  # each once, intact
    assert all(set(np.frombuffer(i, np.int64)) == {99} for i, _ in padding)
    assert len(rows.ids) <= 1 + sum(len(t) for t, _ in examples) // 24 + 1  # best fit leaves little room
    np.testing.assert_array_equal(rows.boundaries()[[0, -1]], [0, rows.ids.size])


def test_a_packed_text_window_restarts_at_each_document(tmp_path):
    documents = [f"document {i} " * (7 + i % 13) for i in range(400)]
    for i, text in enumerate(documents):
        (tmp_path / f"{i:03}.txt").write_text(text)
    corpus = Corpus.from_paths([tmp_path]).per_document()
    rows = corpus.rows("train", 3, 4, 64, seed=1)
    windows = corpus.batch("train", 3, 4, 64, seed=1)
    np.testing.assert_array_equal(rows.ids, windows)
    separators = (windows[:, :-1] == ord("\n")) & (windows[:, 1:] == ord("\n"))  # each document ends "\n\n"
    starts = np.zeros_like(windows, bool)
    starts[:, 0] = True
    starts[:, 2:] = separators[:, :-1]  # the token after "\n\n"
    np.testing.assert_array_equal(rows.positions == 0, starts)
    np.testing.assert_array_equal(rows.labels == IGNORED, starts)


def test_train_packs_chat_examples_and_refuses_an_attention_without_boundaries(tmp_path, capsys):
    """``train --pack`` end to end (in-process, as the CLI), and a Gemma 2 directory (a soft cap)
    refused with exit code 2, nothing written."""
    import shutil
    import sysconfig
    from pathlib import Path

    import onnx

    from ort_ascend_ops.__main__ import main
    from ort_ascend_ops.examples.chat import write_chat_examples
    from ort_ascend_ops.examples.hf_models import write_model_directory

    texts = [p.read_text() for p in sorted((Path(sysconfig.get_paths()["stdlib"]) / "email").glob("*.py"))]
    llama = tmp_path / "llama"
    write_model_directory(llama, texts, "llama", sizes={"max_position_embeddings": 128})
    data = write_chat_examples(tmp_path / "chat.jsonl", 60)
    out = tmp_path / "run"
    args = ["--data", data, "--steps", 2, "--batch", 2, "--seq", 128, "--pack", "--eval-every", 0]
    assert main(["train", str(llama), *map(str, args), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "(loss on assistant tokens, packed)" in said and "% padding" in said
    training = onnx.load(out / "artifacts" / "training_model.onnx", load_external_data=False)
    assert {i.name for i in training.graph.input} >= {"position_ids", "cu_seq_lens_q"}
    gemma2 = tmp_path / "gemma2"
    architectures.language_model(
        next(a for a in architectures.ARCHITECTURES if a.name == "gemma2")
    ).save_pretrained(gemma2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(llama / name, gemma2 / name)
    refused = tmp_path / "refused"
    short = [*map(str, args), "--seq", "32"]  # within its positions
    assert main(["train", str(gemma2), *short, "--out", str(refused)]) == 2
    err = capsys.readouterr().err
    assert "--pack: " in err and "a soft cap" in err
    assert not refused.exists()
