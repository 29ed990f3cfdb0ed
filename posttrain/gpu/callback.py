"""The trainer's callback: its logs become one metrics event per step, the first step is
marked as the proof step, checkpoints are recorded, and a requested stop (cancel, timeout)
ends training after the current step, on every data-parallel rank at once. Apart from the
reporter so that the reporter (events, traces, rewards) loads without transformers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from posttrain.gpu.ranks import rank
from posttrain.gpu.reporter import Reporter, TracingReward
from posttrain.runs.layout import SAVING

# Trainer log keys -> our metric names (TRL's GRPO, SFT, DPO, KTO and distillation trainers).
METRIC_KEYS = {
    "reward": "reward",
    "reward_std": "reward_std",
    "loss": "loss",
    "kl": "kl",
    "entropy": "entropy",
    "grad_norm": "grad_norm",
    "learning_rate": "learning_rate",
    "completions/mean_length": "completion_length",
    "frac_reward_zero_std": "frac_zero_std",
    "mean_token_accuracy": "token_accuracy",
    # DPO: the implicit reward's margin (chosen minus rejected), the share of pairs in the
    # batch it ranks right, and the answers' summed log-likelihoods under the policy
    "rewards/margins": "margin",
    "rewards/accuracies": "preference_accuracy",
    "logps/chosen": "logp_chosen",
    "logps/rejected": "logp_rejected",
    # KTO: the implicit reward of the batch's answers labelled good and bad (DPO: chosen, rejected)
    "rewards/chosen": "reward_chosen",
    "rewards/rejected": "reward_rejected",
}


class ReportingCallback(TrainerCallback):
    """Metrics per step, the proof step, checkpoints and cooperative cancellation."""

    def __init__(
        self,
        reporter: Reporter,
        phase: str,
        tracing: TracingReward | None = None,
        on_step: Any = None,
        proof: bool = True,
    ) -> None:
        self.reporter = reporter
        self.phase = phase
        self.tracing = tracing
        self.on_step = on_step  # extra per-step work (SFT traces)
        self._step_started = self._step_ended = time.perf_counter()
        self._tokens_seen = 0.0
        # the first step this process runs is its proof step (a dry run's resume is not)
        self._proven = not proof

    def on_train_begin(self, args, state, control, **kwargs):
        # a resumed run's token count starts at the checkpoint's, not at zero
        self._tokens_seen = float(getattr(state, "num_input_tokens_seen", 0) or 0)

    def on_step_begin(self, args, state, control, **kwargs):
        self._step_started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self._step_ended = time.perf_counter()  # before trace sampling, which is not the step
        if self.phase == "train" and not self._proven:
            self._proven = True
            self.reporter.events.write(
                "proof_step",
                durable=True,
                ok=True,
                step_time_s=round(time.perf_counter() - self._step_started, 3),
            )
            self.reporter.stage("training")
        if self.on_step is not None:
            self.on_step(state.global_step)
        if agreed(self.reporter.should_stop()):
            why = self.reporter.timed_out or "stop requested"
            self.reporter.log(f"{why}: stopping after step {state.global_step}")
            control.should_training_stop = True
            control.should_save = True
        if control.should_save and rank() == 0:  # a Volume commit waits until on_save
            (self.reporter.run_dir / SAVING).write_text(f"checkpoint {state.global_step}\n")
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "train_runtime" in logs:
            return
        values = {ours: logs[theirs] for theirs, ours in METRIC_KEYS.items() if theirs in logs}
        step_time = logs.get("step_time") or (self._step_ended - self._step_started)
        tokens = float(logs.get("num_tokens", 0) or 0)
        if tokens and step_time:
            values["tokens_per_s"] = round((tokens - self._tokens_seen) / step_time, 1)
        self._tokens_seen = tokens or self._tokens_seen
        values["step_time_s"] = round(float(step_time), 4)
        values["peak_memory_gb"] = peak_memory_gb()
        if self.tracing is not None:
            comps = self.tracing.component_means.pop(state.global_step, None)
            if comps:
                values["components"] = comps
        self.reporter.metrics(self.phase, state.global_step, values)

    def on_save(self, args, state, control, **kwargs):
        path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if path.exists():
            self.reporter.checkpoint(state.global_step, path)
        if rank() == 0:
            (self.reporter.run_dir / SAVING).unlink(missing_ok=True)


def agreed(flag: bool) -> bool:
    """True on every rank when any rank says True (data-parallel ranks must stop together,
    or the others wait forever at the next all-reduce)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return flag
    import torch

    value = torch.tensor([1 if flag else 0], device=reduce_device(str(dist.get_backend())))
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def reduce_device(backend: str) -> str:
    """Where a tensor must live for the process group's backend to reduce it: NCCL (accelerate's
    multi-GPU group) reduces CUDA tensors only, on this rank's own GPU (accelerate sets it as
    the current device), and refuses CPU ones; gloo reduces CPU tensors. A group with a backend
    for each device ("cpu:gloo,cuda:nccl") takes the CPU's."""
    names = {part.rsplit(":", 1)[-1] for part in backend.split(",")}  # "cuda:nccl" -> nccl
    if "nccl" not in names or "gloo" in names:
        return "cpu"
    import torch

    return f"cuda:{torch.cuda.current_device()}"


def peak_memory_gb() -> float:
    """Peak memory so far: GPU memory allocated by torch on CUDA, else the process's RSS."""
    import torch

    if torch.cuda.is_available():
        return round(torch.cuda.max_memory_allocated() / 1e9, 2)
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)  # KiB on Linux
