"""Bounds on what a spec may be, checked before it is built: a small input must not take
unbounded memory or CPU (issue 15).

- The text of a spec file or JSON string: at most MAX_SPEC_CHARS; YAML aliases refused (a
  few hundred bytes of nested aliases expand to gigabytes).
- The parsed data: at most MAX_DEPTH levels, MAX_NODES values, MAX_STRING_CHARS per string.
- `dataset.prompt_template`: plain `{column}` fields only (no format spec, conversion,
  attribute or index: `{prompt:>200000000}` would build a 200 MB string per row).
- `model.chat_template_kwargs`: scalar values under names that are not apply_chat_template's
  own arguments (`chat_template` would let an agent run its own Jinja; `tools`, `tokenize`
  collide with the arguments posttrain passes).
"""

from __future__ import annotations

import json
import string
from typing import Any

from posttrain.core.errors import ConfigError

MAX_SPEC_CHARS = 1_000_000  # a real spec is a few kB
MAX_SEED = 2**32 - 1  # numpy's range; torch and random take it too
MAX_DEPTH = 32  # the spec model itself is 4 levels deep; params and kwargs add a few
MAX_NODES = 20_000  # values of every kind, counted over the whole spec
MAX_STRING_CHARS = 100_000  # a system prompt or template; longer text belongs in the data
MAX_KWARG_CHARS = 1_000
MAX_KWARGS = 32
# apply_chat_template's own arguments: set by posttrain, never by the spec
CHAT_TEMPLATE_ARGS = frozenset(
    {
        "conversation",
        "tools",
        "documents",
        "chat_template",
        "add_generation_prompt",
        "continue_final_message",
        "tokenize",
        "padding",
        "truncation",
        "max_length",
        "return_tensors",
        "return_dict",
        "return_assistant_tokens_mask",
        "tokenizer_kwargs",
    }
)


def check_text(text: str, what: str) -> None:
    if len(text) > MAX_SPEC_CHARS:
        raise ConfigError(
            f"{what} is {len(text):,} characters; a spec may have at most {MAX_SPEC_CHARS:,} "
            f"(keep data in dataset.path, not in the spec)"
        )


def load_yaml(text: str) -> Any:
    """YAML without aliases: `*name` is refused with the line it is on."""
    import yaml

    class NoAliases(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise ConfigError(
                    f"spec line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) "
                    f"are not allowed in a spec; write the value out in full"
                )
            return super().compose_node(parent, index)

    return yaml.load(text, Loader=NoAliases)  # a SafeLoader subclass: no Python objects


def check_data(data: Any) -> None:
    """Depth, count and string length of a parsed spec, walked without recursion."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    nodes = 0
    while stack:
        value, where, depth = stack.pop()
        nodes += 1
        field = where or "spec"
        if nodes > MAX_NODES:
            raise ConfigError(
                f"the spec has more than {MAX_NODES:,} values; a spec is a few dozen fields "
                f"(keep data in dataset.path, not in the spec)"
            )
        if depth > MAX_DEPTH:
            raise ConfigError(
                f"spec field '{field}' is nested more than {MAX_DEPTH} levels deep; no spec "
                f"field needs that, remove the nesting"
            )
        if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
            raise ConfigError(
                f"spec field '{field}' is {len(value):,} characters; at most "
                f"{MAX_STRING_CHARS:,} (put long text in the data)"
            )
        if isinstance(value, dict):
            for key, item in value.items():
                name = str(key)
                if len(name) > 256:
                    raise ConfigError(
                        f"spec field '{field}' has a key of {len(name):,} characters; spec "
                        f"keys are short names"
                    )
                stack.append((item, f"{where}.{name}" if where else name, depth + 1))
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                stack.append((item, f"{field}.{i}", depth + 1))


def template_columns(template: str) -> list[str]:
    """The columns a prompt template names; ValueError (naming the field and the fix) for
    anything but plain `{column}` fields and doubled braces."""
    fix = "only plain {column} fields are allowed (write {{ and }} for literal braces)"
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:  # unbalanced braces
        raise ValueError(
            f"dataset.prompt_template is not a valid template ({exc}); {fix}"
        ) from None
    columns = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        shown = "{" + name + ("!" + conversion if conversion else "") + (":" + spec if spec else "")
        shown = (shown if len(shown) <= 60 else shown[:60] + "...") + "}"
        if conversion:
            raise ValueError(
                f"dataset.prompt_template field {shown} has a conversion (!{conversion}); {fix}"
            )
        if spec:
            raise ValueError(
                f"dataset.prompt_template field {shown} has a format spec; {fix}: write "
                f"{{{name}}} and put any padding in the text itself"
            )
        if not name or name.isdigit():
            raise ValueError(
                f"dataset.prompt_template field {shown} is positional; {fix}: name a column, "
                f"e.g. {{prompt}}"
            )
        if "." in name or "[" in name:
            raise ValueError(
                f"dataset.prompt_template field {shown} reaches into a value (attribute or "
                f"index); {fix}: add the part you need to the data as its own column"
            )
        columns.append(name)
    return columns


def check_template_kwargs(kwargs: dict[str, Any] | None) -> dict[str, Any] | None:
    """model.chat_template_kwargs: a few scalar values, none of apply_chat_template's own."""
    if kwargs is None:
        return None
    if len(kwargs) > MAX_KWARGS:
        raise ValueError(f"model.chat_template_kwargs has {len(kwargs)} keys; at most {MAX_KWARGS}")
    for key, value in kwargs.items():
        if key in CHAT_TEMPLATE_ARGS:
            why = (
                "a chat template of your own is not accepted: the model's is used"
                if key == "chat_template"
                else "posttrain sets it itself"
            )
            raise ValueError(
                f"model.chat_template_kwargs.{key} is an argument of apply_chat_template "
                f"({why}); remove it, and pass only the template's own variables, e.g. "
                f"enable_thinking"
            )
        if not (value is None or isinstance(value, bool | int | float | str)):
            raise ValueError(
                f"model.chat_template_kwargs.{key} is a {type(value).__name__}; values must be "
                f"true/false, a number, a string or null"
            )
        if isinstance(value, str) and len(value) > MAX_KWARG_CHARS:
            raise ValueError(
                f"model.chat_template_kwargs.{key} is {len(value):,} characters; at most "
                f"{MAX_KWARG_CHARS:,}"
            )
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**63:
            raise ValueError(f"model.chat_template_kwargs.{key} is too large a number")
    return kwargs


def read_source(source: Any) -> Any:
    """The parsed data of a spec given as a file path or a JSON string (a dict passes
    through), within the text bounds; a clear error for what cannot be read."""
    from pathlib import Path

    from posttrain.core.paths import expand, is_file

    data: Any = source
    if isinstance(source, Path) or (
        isinstance(source, str) and not source.lstrip().startswith("{")
    ):
        if "\x00" in str(source):
            raise ConfigError("spec file path contains a NUL byte; give a real file path")
        path = expand(source)
        if not is_file(path):
            raise ConfigError(f"spec file {path} does not exist; give a .yaml or .json spec file")
        if path.stat().st_size > 4 * MAX_SPEC_CHARS:  # not read at all
            raise ConfigError(
                f"spec file {path} is {path.stat().st_size:,} bytes; a spec is a few kB (keep "
                f"data in dataset.path, not in the spec)"
            )
        text = path.read_text(encoding="utf-8", errors="replace")
        check_text(text, f"spec file {path}")
        try:
            is_yaml = path.suffix.lower() in (".yaml", ".yml")
            data = load_yaml(text) if is_yaml else json.loads(text)
        except ConfigError:
            raise
        except RecursionError:
            raise ConfigError(f"spec file {path} is nested too deeply; a spec is flat") from None
        except Exception as exc:  # yaml and json raise different types for the same problem
            raise ConfigError(f"spec file {path} is not valid {path.suffix[1:]}: {exc}") from None
    elif isinstance(source, str):
        check_text(source, "the spec")
        try:
            data = json.loads(source)
        except RecursionError:
            raise ConfigError("spec is nested too deeply; a spec is flat") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"spec is not valid JSON: {exc}") from None
        except ValueError:  # Python refuses to read an integer of thousands of digits
            raise ConfigError(
                "spec has a number of more than 4,300 digits; no field takes one (seeds are "
                f"0..{MAX_SEED})"
            ) from None
    return data
