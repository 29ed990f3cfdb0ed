"""Dataset rows: read from local files (JSONL, JSON, Parquet, CSV), the hub or the gym, then
filtered, split into training and held-out rows, and shaped for the trainer."""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from posttrain.core.errors import ConfigError, NotFoundError
from posttrain.core.paths import expand
from posttrain.data.toolcalls import (
    as_text,
    call_parts,
    call_text,
    canonical_messages,
    canonical_tools,
    loads_json,
)

# A spec's `dataset:` section (posttrain.spec.schema.DatasetSpec). Not imported, even for the
# type checker: the spec is built over the algorithms, which shape rows here, so an import
# would close a circle (tests/test_import_cycles.py).
DatasetSpec = Any

# What an algorithm trains on, as this module shapes rows (posttrain.algorithms names each
# algorithm's): a prompt (the reward reads the other columns), a prompt and its target answer
# or chat, a prompt with a chosen and a rejected answer, a prompt with one answer and whether
# it is good (the algorithm shapes those itself).
RowShape = Literal["prompts", "targets", "pairs", "labelled"]

FORMATS = (".jsonl", ".json", ".parquet", ".csv")


def read_rows(path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of a local dataset file as dicts; errors name the file, the line and the fix."""
    path = expand(path)
    if not path.is_file():
        raise NotFoundError(f"dataset file {path} does not exist; give a path to a {FORMATS} file")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = []
        with path.open(encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ConfigError(
                        f"dataset file {path} line {number}: not valid JSON ({exc.msg}); "
                        f"each line must be one JSON object"
                    ) from None
                if not isinstance(row, dict):
                    raise ConfigError(
                        f"dataset file {path} line {number}: a {type(row).__name__}, "
                        f"not a JSON object"
                    )
                rows.append(row)
                if limit is not None and len(rows) >= limit:
                    break
        return rows
    if suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"dataset file {path}: not valid JSON ({exc})") from None
        if isinstance(data, dict):  # {"rows": [...]} or {"data": [...]}
            data = data.get("rows", data.get("data"))
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise ConfigError(f"dataset file {path}: expected a JSON list of objects")
        return data[:limit] if limit is not None else data
    if suffix == ".parquet":
        import pyarrow.parquet

        try:
            rows = pyarrow.parquet.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise ConfigError(f"dataset file {path}: not a readable Parquet file ({exc})") from None
        return rows[:limit] if limit is not None else rows
    if suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as f:
            rows = list(itertools.islice(csv.DictReader(f), limit))
        return rows
    raise ConfigError(f"dataset file {path}: unknown format '{suffix}'; use one of {FORMATS}")


# --- From a spec to training rows -------------------------------------------------------

GYM_ROWS = 2000  # the rhyme gym's size when the spec gives no n_rows


@dataclass
class Prepared:
    """Rows ready for a trainer, and the held-out rows kept away from it."""

    train: list[dict[str, Any]]
    holdout: list[dict[str, Any]]
    dropped_by_filters: int
    columns: list[str]


def chat_columns(rows: list[dict[str, Any]]) -> tuple[str, str | None] | None:
    """A file of chats: the column whose values are conversations (lists of {"role", ...})
    and the column of tool schemas beside it (lists, or JSON text of lists, of {"type":
    "function", ...} or {"name", "parameters"}), or None when the rows are not chats."""

    def parsed(value: Any) -> Any:  # tools are often stored as a JSON string
        if isinstance(value, str) and value.lstrip().startswith("["):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                return value
        return value

    def all_are(column: str, test: Any, empty_ok: bool = False) -> bool:
        values = [parsed(r.get(column)) for r in rows]
        return any(values) and all(
            isinstance(v, list)
            and (bool(v) or empty_ok)
            and all(isinstance(x, dict) and test(x) for x in v)
            for v in values
        )

    columns = list(dict.fromkeys(k for r in rows for k in r))
    chats = [c for c in columns if all_are(c, lambda m: "role" in m)]
    if not chats:
        return None

    def schema(t: dict[str, Any]) -> bool:
        return t.get("type") == "function" or {"name", "parameters"} <= set(t)

    tools = [c for c in columns if all_are(c, schema, empty_ok=True)]  # a row may have none
    return chats[0], tools[0] if tools else None


def source_rows(ds: DatasetSpec) -> list[dict[str, Any]]:
    """The raw rows a dataset spec names (before filters, n_rows and the holdout split)."""
    if ds.builtin == "rhyme-gym":
        from posttrain.data import gym

        return gym.rows(ds.n_rows or GYM_ROWS)
    if ds.path:
        return read_rows(ds.path)
    try:
        import datasets

        table = datasets.load_dataset(ds.hf_repo, split=ds.hf_split)
    except Exception as exc:  # the hub raises many types; all mean "not reachable or absent"
        raise ConfigError(
            f"dataset.hf_repo '{ds.hf_repo}' (split '{ds.hf_split}') could not be loaded: "
            f"{type(exc).__name__}: {exc}. Without hub access, export it to a local .jsonl or "
            f".parquet file and set dataset.path"
        ) from None
    return [dict(r) for r in table]


def row_id(row: dict[str, Any], prompt: str) -> str:
    if row.get("id") is not None:
        return str(row["id"])
    return hashlib.sha1(prompt.encode()).hexdigest()[:12]


def in_holdout(key: str, share: float, seed: int) -> bool:
    """Stable membership: the same row lands on the same side whatever the order or size."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def render_prompt(row: dict[str, Any], ds: DatasetSpec) -> str:
    try:
        return ds.template.format_map(row)
    except KeyError as exc:
        raise ConfigError(
            f"dataset.prompt_template uses column {exc} which the rows lack; columns: "
            f"{sorted(row)}; fix prompt_template or dataset.prompt_column"
        ) from None


def prompt_messages(text: str, ds: DatasetSpec) -> list[dict[str, str]]:
    system = [{"role": "system", "content": ds.system_prompt}] if ds.system_prompt else []
    return [*system, {"role": "user", "content": text}]


def check_columns(
    ds: DatasetSpec, rows: list[dict[str, Any]], shape: RowShape, extra: tuple[str, ...] = ()
) -> list[str]:
    """The rows' columns, after checking every column the spec (and reward) uses is there.
    `shape`: what the algorithm trains on (posttrain.algorithms.algorithm.RowShape)."""
    columns = sorted({k for r in rows[:100] for k in r})
    needed = ds.columns_used() + list(extra)
    if shape == "targets" and not ds.messages_column and ds.target_column:
        needed.append(ds.target_column)
    if shape == "pairs":  # the answers first: without them, nothing says where the prompt is
        if rows and implicit_prompt(rows[0], ds):  # the prompt opens both conversations
            needed = [c for c in needed if c != ds.prompt_column]
        needed = [*ds.pair_columns, *needed]
    for column in dict.fromkeys(needed):
        if column not in columns:
            raise ConfigError(
                f"dataset column '{column}' is missing (the rows have: {columns}); point the "
                f"spec at columns the data has (dataset.prompt_template, reference_column, "
                f"response_column, chosen_column, rejected_column) or fix the data"
            )
    return columns


def peek_rows(ds: DatasetSpec, n: int = 5) -> list[dict[str, Any]] | None:
    """A few raw rows, read cheaply on the launching machine; None for hub datasets (they are
    read where the trainer runs)."""
    if ds.builtin == "rhyme-gym":
        from posttrain.data import gym

        return gym.rows(n)
    if ds.path:
        return read_rows(ds.path, limit=n)
    return None


def prepare(
    ds: DatasetSpec,
    shape: RowShape,
    shape_row: Callable[..., dict[str, Any]] | None = None,
    row_columns: Callable[..., list[str]] | None = None,
) -> Prepared:
    """Filter, cap, split and shape rows: prompts ("prompt" as messages, columns kept for the
    reward), targets (conversational prompt/completion, tools kept), pairs (a prompt, a chosen
    and a rejected answer) or labelled answers (a prompt, its answer and whether it is good).
    `shape_row(row, ds)`: an algorithm's own shaping of a row (posttrain.algorithms), which
    this module does not know, and `row_columns(ds, rows)` its check of the columns that
    shaping reads."""
    rows = source_rows(ds)
    if not rows:
        raise ConfigError("the dataset has no rows")
    columns = check_columns(ds, rows, shape)
    if row_columns is not None:
        row_columns(ds, rows)
    kept = [r for r in rows if all(f.keep(r) for f in ds.filters)]
    dropped = len(rows) - len(kept)
    if not kept:
        raise ConfigError(f"dataset.filters dropped all {len(rows)} rows; loosen them")
    if ds.n_rows and not ds.builtin:
        kept = kept[: ds.n_rows]
    train, holdout = [], []
    for row in kept:
        one = shaped(row, ds, shape, shape_row)
        key = one["id"]
        (holdout if in_holdout(key, ds.holdout_share, ds.holdout_seed) else train).append(one)
    if not train:
        raise ConfigError("no training rows left after the holdout split; lower holdout_share")
    return Prepared(train, holdout, dropped, columns)


def shaped(
    row: dict[str, Any],
    ds: DatasetSpec,
    shape: RowShape,
    shape_row: Callable[..., dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One raw row shaped as `prepare` shapes it (a training row, a held-out one, or a row of
    a held-out file of the user's own, which evaluate reads through the same columns)."""
    if shape_row is not None:
        return shape_row(row, ds)
    if shape == "pairs":
        return _pair(row, ds)
    text = render_prompt(row, ds) if not ds.messages_column else ""
    return _shape(row, text, ds, shape)


def chat_prompt(row: dict[str, Any], ds: DatasetSpec) -> list[dict[str, Any]] | None:
    """The prompt column's value when it is already a conversation (TRL's conversational
    preference form), with no template of the user's own to render it; else None."""
    if ds.prompt_template or ds.messages_column:
        return None
    value = messages_in(row.get(ds.prompt_column))
    return None if value is None else canonical_messages(value, f"column '{ds.prompt_column}'")


def messages_in(value: Any) -> list[dict[str, Any]] | None:
    """The messages a value holds (a list of them, one message, or either as a JSON string),
    else None: an answer "1e3", "true" or "[3, 4]" is text, never parsed into 1000.0, True or
    a list."""
    parsed = loads_json(value)
    if isinstance(parsed, dict) and "role" in parsed:
        return [parsed]
    if isinstance(parsed, list) and parsed and all(isinstance(m, dict) for m in parsed):
        return parsed
    return None


def answer_turn(value: Any, column: str, where: str) -> list[dict[str, Any]]:
    given = messages_in(value)
    if given is not None:
        messages = canonical_messages(given, f"{where}: column '{column}'")
        if not messages or any(m["role"] != "assistant" for m in messages):
            raise ConfigError(
                f"{where}: column '{column}' must hold the assistant's answer (text, or "
                f"assistant messages); it holds {[m['role'] for m in messages]}. The prompt goes "
                f"in dataset.prompt_column, or, with no prompt column, at the start of both "
                f"conversations (TRL's implicit-prompt form)"
            )
        return messages
    if value is None or value == []:
        return [{"role": "assistant", "content": ""}]  # empty: `data check` flags it
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return [{"role": "assistant", "content": text}]


def implicit_prompt(row: dict[str, Any], ds: DatasetSpec) -> bool:
    """TRL's implicit-prompt form: no prompt column (and no template of the user's own), the
    chosen and the rejected conversation each starting with the prompt's turns."""
    if ds.prompt_template or row.get(ds.prompt_column) is not None:
        return False
    values = [messages_in(row.get(c)) for c in ds.pair_columns]
    return all(v is not None and any(m.get("role") != "assistant" for m in v) for v in values)


def _split_implicit(row: dict[str, Any], ds: DatasetSpec, where: str) -> tuple[list, Any, Any]:
    """The prompt as the conversations' common start, and each answer after it (as TRL's
    extract_prompt splits them)."""
    chosen, rejected = ds.pair_columns
    a = canonical_messages(messages_in(row[chosen]), f"{where}: column '{chosen}'")
    b = canonical_messages(messages_in(row[rejected]), f"{where}: column '{rejected}'")
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    while n and a[n - 1]["role"] == "assistant":  # the answers start with the assistant
        n -= 1
    if not n:
        raise ConfigError(
            f"{where}: columns '{chosen}' and '{rejected}' share no opening turns, and the rows "
            f"have no '{ds.prompt_column}' column: give the prompt a column "
            f"(dataset.prompt_column), or start both conversations with it"
        )
    return a[:n], a[n:], b[n:]


def _pair(row: dict[str, Any], ds: DatasetSpec) -> dict[str, Any]:
    """A preference row as TRL's DPOTrainer reads it: the prompt as messages (a conversation
    the row carries, the conversations' common start in TRL's implicit-prompt form, else the
    template rendered as the user's turn after the system prompt), the chosen and the
    rejected answer as assistant turns; tools kept."""
    chosen, rejected = ds.pair_columns
    if ds.messages_column:
        raise ConfigError(
            "dataset.messages_column is for SFT chats; a DPO row has a prompt and two answers: "
            "set dataset.prompt_column (text or messages), chosen_column and rejected_column"
        )
    answers = row.get(chosen), row.get(rejected)
    implicit = implicit_prompt(row, ds)
    if implicit:
        conversation, *answers = _split_implicit(row, ds, "a row")  # type: ignore[assignment]
    else:
        conversation = chat_prompt(row, ds)
        _no_conversation_in_template(row, ds)
    text = render_prompt(row, ds) if conversation is None else ""
    prompt = conversation if conversation is not None else prompt_messages(text, ds)
    if conversation is not None:
        text = next((m["content"] for m in reversed(prompt) if m["role"] == "user"), "") or ""
    key = text if conversation is None else json.dumps(prompt, default=str)
    base = {k: v for k, v in row.items() if k not in ("prompt", "chosen", "rejected")}
    base["id"] = row_id(row, key + json.dumps([row.get(chosen), row.get(rejected)], default=str))
    where = f"row {base['id']!r}"
    shaped = {
        **base,
        "prompt_text": text,
        "prompt": prompt,
        "chosen": answer_turn(answers[0], chosen, where),
        "rejected": answer_turn(answers[1], rejected, where),
    }
    shaped["reference"] = as_text(shaped["chosen"][-1]["content"]) or ""
    if ds.tools_column:
        shaped["tools"] = canonical_tools(
            row.get(ds.tools_column), f"{where}: column '{ds.tools_column}'"
        )
    return shaped


def _no_conversation_in_template(row: dict[str, Any], ds: DatasetSpec) -> None:
    """A template of the user's own that would paste a conversation in as its Python text."""
    if not ds.prompt_template:
        return
    # the template was validated with the spec: plain {column} fields only
    for column in [f for _, f, _, _ in string.Formatter().parse(ds.prompt_template) if f]:
        if messages_in(row.get(column)) is not None:
            raise ConfigError(
                f"dataset.prompt_template uses column '{column}', which holds a conversation: "
                f"it would be pasted in as text. Drop prompt_template to use the conversation "
                f"as the prompt (dataset.prompt_column: {column})"
            )


def _shape(row: dict[str, Any], text: str, ds: DatasetSpec, shape: RowShape) -> dict[str, Any]:
    base = {k: v for k, v in row.items() if k not in ("prompt", "completion", "messages")}
    base["id"] = row_id(row, text or json.dumps(row.get(ds.messages_column or ""), default=str))
    base["prompt_text"] = text
    if ds.reference_column and ds.reference_column != "reference":
        base.setdefault("reference", row.get(ds.reference_column))
    if ds.messages_column:
        column = f"row {base['id']!r}: column '{ds.messages_column}'"
        messages = canonical_messages(row[ds.messages_column], column)
        turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        if not turns:
            raise ConfigError(
                f"{column} has no assistant turn to train on; drop the row or add the answer"
            )
        last = turns[-1]
        prompt, completion = messages[:last], messages[last:]
        if base.get("reference") is None:  # no reference column: the last answer is it
            answer = messages[last]
            calls = [call_parts(c) for c in answer.get("tool_calls", [])]
            base["reference"] = answer["content"] or call_text([c for c in calls if c])
        base["prompt_text"] = next(
            (m["content"] for m in reversed(prompt) if m.get("role") == "user"), ""
        )
    else:
        prompt = prompt_messages(text, ds)
        target = row.get(ds.target_column) if ds.target_column else None
        completion = [{"role": "assistant", "content": "" if target is None else str(target)}]
    shaped = {**base, "prompt": prompt}
    if shape == "targets":
        shaped["completion"] = completion
    if ds.tools_column:
        where = f"row {base['id']!r}: column '{ds.tools_column}'"
        shaped["tools"] = canonical_tools(row.get(ds.tools_column), where)
    return shaped
