"""Fine-tuning data as TRL's ``SFTTrainer`` takes it: ``.jsonl`` lines of ``messages`` (role and
content, rendered by the tokenizer's chat template) or of ``prompt`` and ``completion`` (strings,
or lists of messages), each an example of its own row: ``[--seq]`` token ids, right-padded, and
labels that are -100 off the loss (every token but the assistant's, or the completion's, with
``--loss-on assistant``; padding always).

Which tokens are the assistant's is read from the rendered text, not from template markers: the
assistant message ``i`` spans from the end of ``messages[:i]`` rendered with the generation prompt
to the end of ``messages[:i + 1]`` rendered, and a token is the assistant's when it starts inside
that span (the fast tokenizer's offsets). That holds for every template that renders a
conversation's prefix as a prefix of its text, which is checked; the end-of-turn token is part of
the span, so the model learns to stop.

An example longer than ``--seq`` keeps its first ``--seq`` tokens (TRL's default) and is counted as
truncated; one left with no token on the loss is dropped and counted."""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from .data import IGNORED, SPLITS, DataError, Rows, expand

LOSS_ON = ("assistant", "all")
ROLES_KEY, PROMPT, COMPLETION = "messages", "prompt", "completion"


def is_examples(paths: Iterable[str]) -> bool:
    """Whether ``paths`` hold examples (``messages`` or ``prompt``/``completion`` lines) rather
    than text: the first record of each ``.jsonl`` file says; a mix of both is a ``DataError``."""
    kinds = {}
    for path in expand(paths):
        if path.suffix != ".jsonl":
            kinds[path] = False
            continue
        record = next((r for _, r in _records(path)), None)
        kinds[path] = isinstance(record, dict) and (ROLES_KEY in record or PROMPT in record)
    if len(set(kinds.values())) > 1:
        chat = next(p for p, k in kinds.items() if k)
        text = next(p for p, k in kinds.items() if not k)
        raise DataError(f"{text}: text, where {chat} holds chat examples: --data takes one kind or the other")
    return any(kinds.values())


@dataclasses.dataclass(frozen=True, eq=False)
class Examples:
    """Each split's rows, ``Rows`` of ``[rows, seq]``: one example a row, right-padded, or with
    ``pack`` as many as fit, each attending to itself alone (``Rows.positions``). Example ``i`` (in
    file and line order) is held out when ``i % held_out_every == held_out_every - 1``."""

    split_rows: dict[str, Rows]
    description: str
    documents: int
    truncated: int
    dropped: int
    kept: dict[str, int]  # examples
    tokens: dict[str, int]  # their tokens

    @classmethod
    def from_paths(
        cls,
        paths: Iterable[str],
        tokenizer,
        seq: int,
        loss_on: str = "assistant",
        *,
        pack: bool = False,
        held_out_every: int = 20,
    ) -> Examples:
        if loss_on not in LOSS_ON:
            raise ValueError(f"loss_on must be one of {LOSS_ON}, not {loss_on!r}")
        if tokenizer is None:
            raise DataError(
                f"{', '.join(paths)}: chat examples need the model's tokenizer (this model has none)"
            )
        if not getattr(tokenizer, "is_fast", False):
            raise DataError("chat examples need a fast tokenizer (its offsets say which tokens are whose)")
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        examples: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {split: [] for split in SPLITS}
        count = truncated = dropped = 0
        files = expand(paths)
        for path in files:
            for number, record in _records(path):
                tokens, on_loss = _tokens(tokenizer, record, f"{path}:{number}", loss_on)
                truncated += len(tokens) > seq
                tokens, on_loss = tokens[:seq], on_loss[:seq]
                if not on_loss.any():
                    dropped += 1
                    continue
                examples[SPLITS[count % held_out_every == held_out_every - 1]].append(
                    (tokens, np.where(on_loss, tokens, IGNORED))
                )
                count += 1
        for split, taken in examples.items():
            if not taken:
                raise DataError(
                    f"{', '.join(map(str, files))}: too few examples ({count} kept, {dropped} dropped): none is "
                    f"{split} (every {held_out_every}th example is held out)"
                )
        arrange = _packed if pack else _padded
        split_rows = {split: arrange(taken, seq, pad) for split, taken in examples.items()}
        said = (
            ", ".join(map(str, files)) if len(files) <= 3 else f"{files[0]} and {len(files) - 1} more files"
        )
        kept = {split: len(taken) for split, taken in examples.items()}
        sizes = {split: sum(len(t) for t, _ in taken) for split, taken in examples.items()}
        described = f"{said} (loss on {loss_on} tokens{', packed' if pack else ''})"
        return cls(split_rows, described, count + dropped, truncated, dropped, kept, sizes)

    def rows(self, split: str, index: int, batch: int, seq: int, seed: int = 0) -> Rows:
        """``batch`` rows: all of them in a shuffled order, a new one each epoch, that depends
        only on the arguments (so a resumed run takes an uninterrupted one's)."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
        rows = self.split_rows[split]
        if rows.ids.shape[1] != seq:
            raise ValueError(f"the examples were cut at {rows.ids.shape[1]} tokens, not --seq {seq}")
        n = len(rows.ids)
        places = index * batch + np.arange(batch)
        epochs = places // n
        chosen = np.empty(batch, np.int64)
        for epoch in np.unique(epochs):
            order = np.random.default_rng([seed, int(epoch), SPLITS.index(split)]).permutation(n)
            chosen[epochs == epoch] = order[places[epochs == epoch] % n]
        return rows.take(chosen)

    def check_window(self, seq: int) -> None:
        """The rows were cut at ``--seq`` when read: nothing left to check."""

    def vocabulary_needed(self) -> int:
        return int(max(r.ids.max(initial=0) for r in self.split_rows.values())) + 1

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for split in SPLITS:
            rows = self.split_rows[split]
            digest.update(rows.ids.tobytes() + rows.labels.tobytes())
        return digest.hexdigest()[:16]

    def padding(self) -> float:
        """The share of the training rows' tokens that are padding."""
        rows = self.split_rows["train"]
        return 1.0 - self.tokens["train"] / rows.ids.size

    def describe(self) -> str:
        width = self.split_rows["train"].ids.shape[1]
        return (
            f"{self.description}: {self.documents:,} examples, {self.kept['train']:,} train, "
            f"{self.kept['held_out']:,} held out; {self.truncated:,} truncated to --seq {width}, "
            f"{self.dropped:,} dropped (no token on the loss); {len(self.split_rows['train'].ids):,} training rows, "
            f"{self.padding():.0%} padding"
        )


def _padded(examples, seq: int, pad: int) -> Rows:
    """One example a row, right-padded with ``pad`` (causal attention never reads the padding)."""
    ids = np.full((len(examples), seq), pad, np.int64)
    labels = np.full((len(examples), seq), IGNORED, np.int64)
    for row, (tokens, targets) in enumerate(examples):
        ids[row, : len(tokens)], labels[row, : len(tokens)] = tokens, targets
    return Rows(ids, labels)


def _packed(examples, seq: int, pad: int) -> Rows:
    """The examples packed into rows of ``seq`` by best fit, longest first (as TRL's "bfd"),
    each example's positions from 0 and its first token no label; the padding that is left at
    a row's end is a document of its own."""
    order = sorted(range(len(examples)), key=lambda i: (-len(examples[i][0]), i))
    spaces: list[tuple[int, int]] = []  # (room left, row), sorted
    members: list[list[int]] = []
    for i in order:
        size = len(examples[i][0])
        at = bisect.bisect_left(spaces, (size, -1))
        if at == len(spaces):
            members.append([i])
            bisect.insort(spaces, (seq - size, len(members) - 1))
        else:
            room, row = spaces.pop(at)
            members[row].append(i)
            bisect.insort(spaces, (room - size, row))
    ids = np.full((len(members), seq), pad, np.int64)
    labels = np.full((len(members), seq), IGNORED, np.int64)
    positions = np.zeros((len(members), seq), np.int64)
    for row, taken in enumerate(members):
        at = 0
        for i in sorted(taken):
            tokens, targets = examples[i]
            end = at + len(tokens)
            ids[row, at:end], labels[row, at:end] = tokens, targets
            labels[row, at] = IGNORED
            positions[row, at:end] = np.arange(len(tokens))
            at = end
        positions[row, at:] = np.arange(seq - at)
    return Rows(ids, labels, positions)


def _records(path: Path) -> Iterator[tuple[int, object]]:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DataError(f"{path}: cannot be read ({error.strerror or error})") from None
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise DataError(f"{path}:{number}: not a JSON line ({e})") from None


def _messages(value, where: str, field: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise DataError(f"{where}: '{field}' must be a non-empty list of messages")
    for k, message in enumerate(value):
        if (
            not isinstance(message, dict)
            or not isinstance(message.get("role"), str)
            or not isinstance(message.get("content"), str)
        ):
            raise DataError(f"{where}: {field}[{k}] must be an object with string 'role' and 'content'")
    return value


def _tokens(tokenizer, record, where: str, loss_on: str) -> tuple[np.ndarray, np.ndarray]:
    """The example's token ids and which of them are on the loss."""
    if not isinstance(record, dict) or not (ROLES_KEY in record or PROMPT in record):
        raise DataError(f"{where}: a chat example needs 'messages', or 'prompt' and 'completion'")
    if ROLES_KEY in record:
        messages = _messages(record[ROLES_KEY], where, ROLES_KEY)
        return _conversation(
            tokenizer, messages, [m["role"] == "assistant" for m in messages], where, loss_on
        )
    prompt, completion = record.get(PROMPT), record.get(COMPLETION)
    if isinstance(prompt, str) and isinstance(completion, str):
        text = prompt + completion + (tokenizer.eos_token or "")
        return _spans(tokenizer, text, [(len(prompt), len(text))], loss_on)
    if isinstance(prompt, list) and isinstance(completion, list):
        prompt, completion = _messages(prompt, where, PROMPT), _messages(completion, where, COMPLETION)
        learnt = [False] * len(prompt) + [True] * len(completion)
        return _conversation(tokenizer, [*prompt, *completion], learnt, where, loss_on)
    raise DataError(f"{where}: 'prompt' and 'completion' must both be strings or both lists of messages")


def _conversation(tokenizer, messages, learnt: list[bool], where: str, loss_on: str):
    if not getattr(tokenizer, "chat_template", None):
        raise DataError(
            f"{where}: chat messages, and the model's tokenizer has no chat template to render them "
            "(give one in tokenizer_config.json, or use 'text' or prompt/completion strings)"
        )

    def render(part, prompt: bool) -> str:
        try:
            return tokenizer.apply_chat_template(part, tokenize=False, add_generation_prompt=prompt)
        except Exception as e:  # jinja's TemplateError, or what the template raises itself
            raise DataError(f"{where}: the tokenizer's chat template rejects the messages: {e}") from None

    text = render(messages, False)
    spans = []
    for i, on in enumerate(learnt):
        if on:
            start, end = render(messages[:i], True) if i else "", render(messages[: i + 1], False)
            if not (text.startswith(end) and end.startswith(start)):
                raise DataError(
                    f"{where}: the chat template does not render the conversation's first {i + 1} messages as "
                    "the start of its text, which finding the assistant's tokens needs"
                )
            spans.append((len(start), len(end)))
    return _spans(tokenizer, text, spans, loss_on)


def _spans(tokenizer, text: str, spans: list[tuple[int, int]], loss_on: str):
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = np.asarray(encoded["input_ids"], np.int64)
    starts = np.asarray([s for s, _ in encoded["offset_mapping"]], np.int64)
    if loss_on == "all":
        return ids, np.ones(len(ids), bool)
    on_loss = np.zeros(len(ids), bool)
    for start, end in spans:
        on_loss |= (starts >= start) & (starts < end)
    return ids, on_loss
