"""Chat-format SFT data (``trainer.chat_data``) token by token against references written here
with the tokenizer alone: transformers' ``return_assistant_tokens_mask`` (the template's
``{% generation %}`` markers, which our reading of the rendered text does not use) for
``messages``, and TRL's prompt-then-completion tokenization for ``prompt``/``completion``; then
truncation, dropping and every malformed line refused naming its file and line."""

import json
import sysconfig
from pathlib import Path

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")

from ort_ascend_ops.examples.chat import conversation  # noqa: E402
from ort_ascend_ops.examples.hf_models import write_model_directory  # noqa: E402
from ort_ascend_ops.trainer import DataError  # noqa: E402
from ort_ascend_ops.trainer.chat_data import IGNORED, Examples, is_examples  # noqa: E402

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SEQ = 128


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    texts = [p.read_text() for p in sorted((STDLIB / "email").glob("*.py"))]
    found = {}
    for chat in (True, False):
        path = tmp_path_factory.mktemp(f"chat{chat}")
        _, found[chat] = write_model_directory(path, texts, chat=chat, sizes={"max_position_embeddings": SEQ})
    return found


def write(path: Path, records) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return str(path)


def all_rows(examples: Examples):
    """Every kept example's row, in file order (held-out ones are every 20th)."""
    train, held = (examples.split_rows[split] for split in ("train", "held_out"))
    train = list(zip(train.ids, train.labels, strict=True))
    held = list(zip(held.ids, held.labels, strict=True))
    rows = []
    while train or held:
        rows += train[:19]
        train = train[19:]
        rows += held[:1]
        held = held[1:]
    return rows


def padded(ids, labels, pad):
    row, lab = np.full(SEQ, pad), np.full(SEQ, IGNORED)
    row[: len(ids)], lab[: len(ids)] = ids, labels
    return row[:SEQ], lab[:SEQ]


@pytest.mark.parametrize("loss_on", ["assistant", "all"])
def test_messages_are_the_templates_tokens_and_the_loss_the_assistants(tokenizers, loss_on, tmp_path):
    tokenizer = tokenizers[True]
    rng = np.random.default_rng(3)
    conversations = [conversation(rng) for _ in range(45)]
    path = write(tmp_path / "chat.jsonl", [{"messages": m} for m in conversations])
    assert is_examples([path])
    examples = Examples.from_paths([path], tokenizer, SEQ, loss_on)
    assert examples.dropped == examples.truncated == 0
    rows = all_rows(examples)
    assert len(rows) == len(conversations)
    for messages, (ids, labels) in zip(conversations, rows, strict=True):
        reference = tokenizer.apply_chat_template(
            messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        mask = np.asarray(reference["assistant_masks"], bool) if loss_on == "assistant" else True
        expected = np.where(mask, reference["input_ids"], IGNORED)
        want_ids, want_labels = padded(reference["input_ids"], expected, tokenizer.eos_token_id)
        np.testing.assert_array_equal(ids, want_ids)
        np.testing.assert_array_equal(labels, want_labels)
        assert (labels != IGNORED).sum() > 0


def test_prompt_completion_strings_and_messages(tokenizers, tmp_path):
    tokenizer = tokenizers[True]
    rng = np.random.default_rng(4)
    records = []
    for i in range(40):
        a, b = (int(x) for x in rng.integers(0, 99, 2))
        if i % 2:
            records.append({"prompt": f"Q: {a} + {b}?", "completion": f" A: {a + b}"})
        else:
            records.append(
                {
                    "prompt": [{"role": "user", "content": f"{a} + {b}?"}],
                    "completion": [{"role": "assistant", "content": f"{a + b}"}],
                }
            )
    path = write(tmp_path / "pc.jsonl", records)
    rows = all_rows(Examples.from_paths([path], tokenizer, SEQ))
    for record, (ids, labels) in zip(records, rows, strict=True):
        if isinstance(record["prompt"], str):  # TRL: the prompt's tokens, then the completion's and EOS
            prompt = tokenizer(record["prompt"], add_special_tokens=False)["input_ids"]
            full = tokenizer(
                record["prompt"] + record["completion"] + tokenizer.eos_token, add_special_tokens=False
            )
            full = full["input_ids"]
            assert full[: len(prompt)] == prompt
            expected = [IGNORED] * len(prompt) + full[len(prompt) :]
        else:
            conv = record["prompt"] + record["completion"]
            reference = tokenizer.apply_chat_template(
                conv, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
            )
            full = reference["input_ids"]
            expected = np.where(reference["assistant_masks"], full, IGNORED)
        want_ids, want_labels = padded(full, expected, tokenizer.eos_token_id)
        np.testing.assert_array_equal(ids, want_ids)
        np.testing.assert_array_equal(labels, want_labels)


def test_long_examples_are_truncated_and_those_left_without_loss_dropped(tokenizers, tmp_path):
    tokenizer = tokenizers[True]
    long_prompt = [{"role": "user", "content": "x " * 200}, {"role": "assistant", "content": "ok"}]
    long_answer = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "y " * 200}]
    short = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    records = [{"messages": m} for m in [long_prompt, long_answer] + [short] * 38]
    examples = Examples.from_paths([write(tmp_path / "long.jsonl", records)], tokenizer, SEQ)
    assert (examples.truncated, examples.dropped, examples.documents) == (2, 1, 40)
    assert "2 truncated to --seq 128, 1 dropped" in examples.describe()
    first = examples.split_rows["train"].ids[0]
    reference = tokenizer.apply_chat_template(long_answer, tokenize=True, return_dict=True)["input_ids"]
    np.testing.assert_array_equal(first, reference[:SEQ])  # the first SEQ tokens kept


def test_batches_are_reproducible_and_cover_every_example_each_epoch(tokenizers, tmp_path):
    rng = np.random.default_rng(5)
    path = write(tmp_path / "c.jsonl", [{"messages": conversation(rng)} for _ in range(40)])
    examples = Examples.from_paths([path], tokenizers[True], SEQ)
    train = examples.split_rows["train"].ids
    seen = np.concatenate([examples.rows("train", i, 2, SEQ, 7).ids for i in range(len(train) // 2)])
    assert len({r.tobytes() for r in seen}) == len({r.tobytes() for r in train})
    a, b = examples.rows("train", 3, 4, SEQ, 7), examples.rows("train", 3, 4, SEQ, 7)
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_array_equal(a.labels, b.labels)


def _bad(rule: str) -> tuple[list, str]:
    good = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}
    cases = {
        "not json": (["{nope"], "not a JSON line"),
        "messages not a list": ([{"messages": "hi"}], "'messages' must be a non-empty list"),
        "message without content": (
            [{"messages": [{"role": "user"}]}],
            "messages[0] must be an object with string 'role' and 'content'",
        ),
        "role the template rejects": (
            [{"messages": [{"role": "wizard", "content": "a"}]}],
            "the tokenizer's chat template rejects the messages: unknown role wizard",
        ),
        "prompt without completion": ([{"prompt": "a"}], "'prompt' and 'completion' must both be strings"),
        "neither": ([{"other": 1}], "needs 'messages', or 'prompt' and 'completion'"),
    }
    records, said = cases[rule]
    return [good, good, *records], said


@pytest.mark.parametrize(
    "rule",
    ["not json", "messages not a list", "message without content", "role the template rejects",
     "prompt without completion", "neither"],
)  # fmt: skip
def test_a_malformed_line_is_refused_naming_file_line_and_rule(tokenizers, rule, tmp_path):
    records, said = _bad(rule)
    path = write(tmp_path / "bad.jsonl", records)
    with pytest.raises(DataError) as error:
        Examples.from_paths([path], tokenizers[True], SEQ)
    assert f"{path}:3: " in str(error.value) and said in str(error.value)


def test_messages_without_a_chat_template_and_mixed_data_are_refused(tokenizers, tmp_path):
    rng = np.random.default_rng(6)
    path = write(tmp_path / "c.jsonl", [{"messages": conversation(rng)} for _ in range(40)])
    with pytest.raises(
        DataError, match=r"c.jsonl:1: chat messages, and the model's tokenizer has no chat template"
    ):
        Examples.from_paths([path], tokenizers[False], SEQ)
    text = tmp_path / "notes.txt"
    text.write_text("some text")
    with pytest.raises(DataError, match="notes.txt: text, where .*c.jsonl holds chat examples"):
        is_examples([path, str(text)])
