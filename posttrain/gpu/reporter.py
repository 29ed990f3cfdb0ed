"""The reporter: what the trainer tells the world, as events in the run directory.

`Reporter` writes stages, logs, heartbeats, checkpoints, results and failures.
`TracingReward` wraps the reward TRL calls, so every scored completion can be kept as a trace
with its components, and each step's component means reach the metrics. The trainer's side,
which needs transformers, is posttrain.gpu.callback.
A SIGTERM asks the run to stop after the current step (cancel), never mid-write.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from posttrain.core.sampling import spread
from posttrain.core.secrets import redact, redact_value
from posttrain.data.toolcalls import as_text
from posttrain.rewards.base import Reward, graded_mean
from posttrain.rewards.guards import checked_scores
from posttrain.rewards.text import completion_text
from posttrain.runs.layout import (
    CANCEL_REQUEST,
    TIMEOUT_REQUEST,
    EventWriter,
    write_rows_atomic,
)
from posttrain.spec.schema import TraceSpec

HEARTBEAT_S = 10.0
ROW = "row"  # the column of a trainer's table that holds each example's index in the rows
TRACE_TEXT_CHARS = 4000  # a trace keeps at most this much of a prompt or completion
LOG_MESSAGE_CHARS = 4000


class Cancelled(Exception):
    """The run was asked to stop (SIGTERM or cancel.request) between stages."""


class Reporter:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.events = EventWriter(run_dir)
        self.step = 0
        self.cancel_requested = False
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        self._heartbeat.start()

    # -- signals and liveness ------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        """SIGTERM means "stop after this step" (only the main thread may set handlers; a
        trainer run in a thread is stopped through cancel.request instead)."""
        if threading.current_thread() is not threading.main_thread():
            return

        def on_term(signum: int, frame: Any) -> None:
            self.cancel_requested = True

        signal.signal(signal.SIGTERM, on_term)

    def should_stop(self) -> bool:
        """Asked to stop: a cancel (SIGTERM or cancel.request) or the run's timeout."""
        if not self.cancel_requested and (self.run_dir / CANCEL_REQUEST).exists():
            self.cancel_requested = True
        return self.cancel_requested or self.timed_out is not None

    @property
    def timed_out(self) -> str | None:
        """'timeout after N s ...' once the supervisor stopped the run at compute.timeout_s."""
        path = self.run_dir / TIMEOUT_REQUEST
        if not path.exists():
            return None
        try:
            limit = json.loads(path.read_text())["timeout_s"]
        except (OSError, ValueError, KeyError, TypeError):
            limit = "?"
        return f"timeout after {limit} s (compute.timeout_s)"

    def check_cancel(self) -> None:
        if self.should_stop():
            raise Cancelled()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S / 2):
            if time.time() - self.events.last_write >= HEARTBEAT_S:
                self.events.write("heartbeat", step=self.step)

    # -- events --------------------------------------------------------------------------
    def stage(self, stage: str) -> None:
        self.events.write("stage", durable=True, stage=stage)
        self.log(f"stage: {stage}")

    def log(self, message: str, level: str = "info") -> None:
        message = redact(message, self.events.secrets)  # before the cut, which could split one
        if len(message) > LOG_MESSAGE_CHARS:  # one line may not flood the log or the index
            message = message[:LOG_MESSAGE_CHARS] + f"... [{len(message)} characters]"
        self.events.write("log", level=level, message=message)

    def metrics(self, phase: str, step: int, values: dict[str, Any]) -> None:
        self.step = step
        self.events.write("metrics", phase=phase, step=step, **values)

    def checkpoint(self, step: int, path: Path) -> None:
        self.events.write(
            "checkpoint", durable=True, step=step, path=str(path.relative_to(self.run_dir))
        )

    def trace(self, step: int, rows: list[dict[str, Any]], phase: str = "train") -> None:
        folder = self.run_dir / "traces"
        folder.mkdir(exist_ok=True)
        name = f"step_{step:04d}.jsonl" if phase == "train" else f"{phase}_step_{step:04d}.jsonl"
        # whole or not at all: the Modal backend copies each trace file once, on first sight
        write_rows_atomic(folder / name, redact_value(rows, self.events.secrets))
        self.events.write("trace", phase=phase, step=step, path=f"traces/{name}", n=len(rows))

    def result(self, status: str, cause: str | None = None, **final: Any) -> None:
        self.events.write("result", durable=True, status=status, cause=cause, final=final)

    def failure(self, exc: BaseException) -> str:
        cause = one_line_cause(exc)
        self.events.write(
            "error", durable=True, cause=cause, traceback="".join(traceback.format_exception(exc))
        )
        self.result("failed", cause=cause)
        return cause

    def close(self) -> None:
        self._stop.set()
        self._heartbeat.join(timeout=HEARTBEAT_S)
        self.events.close()


def one_line_cause(exc: BaseException) -> str:
    """What went wrong in one line a person can act on."""
    said = redact(str(exc)).strip()  # before the cuts below, which could split a secret
    text = said.splitlines()[0] if said else type(exc).__name__
    if "out of memory" in text.lower():
        return (
            "out of GPU memory: lower algorithm.batch_size or max_completion_length, use LoRA, "
            f"or choose a larger GPU ({text[:120]})"
        )
    from posttrain.core.errors import PosttrainError

    if isinstance(exc, PosttrainError):
        return text
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    return f"{type(exc).__name__}: {text}{where}"


def trace_steps(spec: TraceSpec, total: int) -> set[int]:
    """Steps that keep traces: the first, the last, every `every`, and any listed."""
    if spec.samples == 0:
        return set()
    steps = {1, total, *spec.steps}
    if spec.every:
        steps |= set(range(spec.every, total + 1, spec.every))
    return {s for s in steps if 1 <= s <= total}


def _clip(text: str) -> str:
    text = redact(text)  # before the cut, which could split a secret
    return text if len(text) <= TRACE_TEXT_CHARS else text[:TRACE_TEXT_CHARS] + "..."


def prompt_of(prompt: Any) -> str:
    """The last user turn of a prompt (messages) or the prompt text."""
    if isinstance(prompt, str):
        return prompt
    users = [
        m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"
    ]
    return str(users[-1]) if users else completion_text(prompt)


def renderer(tokenizer: Any, template_kwargs: dict[str, Any]) -> Callable[..., str]:
    """prompt messages (and their tool schemas) -> the text the model reads: rendered by the
    chat template, encoded and decoded again (specials kept), so a word the tokenizer cannot
    encode shows up."""

    def render(prompt: Any, tools: Any = None) -> str:
        if isinstance(prompt, str):
            text = prompt
        else:
            text = tokenizer.apply_chat_template(
                prompt,
                tokenize=False,
                add_generation_prompt=True,
                tools=tools or None,
                **template_kwargs,
            )
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        return _clip(tokenizer.decode(ids, skip_special_tokens=False))

    return render


class TracingReward:
    """The reward as TRL calls it: guarded, with traces and per-step component means kept."""

    def __init__(
        self,
        reward: Reward,
        reporter: Reporter,
        steps: set[int],
        samples: int,
        group_size: int,
        render: Callable[..., str] | None = None,
        rows: Sequence[dict[str, Any]] | None = None,
        describe: Callable[[Any, Any, Any], dict[str, Any]] | None = None,
    ) -> None:
        self.reward = reward
        self.describe = describe  # (prompt, completion, environment) -> an episode's trace
        self.rows = rows  # the dataset's rows, by the ROW index TRL passes back
        self.reporter = reporter
        self.steps = steps
        self.samples = samples
        self.group_size = group_size  # TRL lays out each prompt's generations side by side
        self.render = render  # the prompt as the model read it, for traces
        self.component_means: dict[int, dict[str, float]] = {}
        self.scored = 0  # completions scored, for the dry run's report
        self.__name__ = reward.__name__

    def __call__(
        self, completions: Sequence[Any], prompts: Sequence[Any] | None = None, **columns: Any
    ) -> list[float]:
        state = columns.get("trainer_state")
        step = (state.global_step if state is not None else 0) + 1  # the step being built
        if self.rows is not None and ROW in columns:
            columns = {**columns, **row_columns(self.rows, columns.pop(ROW))}
        environments = columns.get("environments")
        scores = checked_scores(self.reward, completions, prompts=prompts, **columns)
        self.scored += len(completions)
        means = {
            k: mean for k, v in scores.components.items() if (mean := graded_mean(v)) is not None
        }
        self.component_means[step] = means
        if step in self.steps:
            references = columns.get("reference") or [None] * len(completions)
            rows = [
                {
                    "step": step,
                    "idx": i,
                    "group": i // self.group_size,
                    "prompt": _clip(prompt_of(prompts[i])) if prompts else "",
                    "rendered": self.render(prompts[i]) if prompts and self.render else None,
                    "completion": _clip(completion_text(completions[i])),
                    "reward": scores.rewards[i],
                    "components": scores.row(i),
                    "reference": None if references[i] is None else _clip(as_text(references[i])),
                }
                for i in spread(len(completions), self.samples)
            ]
            if scores.reasons is not None:  # the judge's word on each traced completion
                for row in rows:
                    row["reason"] = scores.reasons[row["idx"]]
            if self.describe is not None and environments is not None and prompts:
                for row in rows:  # an episode: its turns, calls and the whole rendered text
                    i = row["idx"]
                    row.update(self.describe(prompts[i], completions[i], environments[i]))
            self.reporter.trace(step, rows)
        for note in scores.notes:
            self.reporter.log(note, level="warning")
        return scores.rewards


def row_columns(rows: Sequence[dict[str, Any]], index: Sequence[int]) -> dict[str, list[Any]]:
    """The columns of the rows at `index`, as a reward takes them (prompt and completion are
    TRL's to pass)."""
    picked = [rows[i] for i in index]
    names = dict.fromkeys(k for r in picked for k in r if k not in ("prompt", "completion"))
    return {name: [r.get(name) for r in picked] for name in names}


def quiet_libraries() -> None:
    """Progress bars and per-step prints are noise in run logs; events carry the numbers."""
    import warnings

    import datasets
    import transformers

    # TRL calls transformers APIs that transformers 5 marks deprecated, once per step.
    warnings.filterwarnings("ignore", category=FutureWarning)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    logging.getLogger("trl").setLevel(logging.ERROR)
