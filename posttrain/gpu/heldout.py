"""Held-out evaluation during training (algorithm.eval_every, eval_tasks): before step 1 and
every K steps, one sample for each of the first eval_tasks held-out prompts, with a fixed seed,
scored by the training reward; and the held-out references' NLL, which training did not
optimise. Each point is a `heldout` event; get_run shows the curve beside the training
reward, and warns when the one rises while the other does not.

The same seed at every point: the curve moves because the model moved, not the sampling.
Rank 0 alone evaluates under data parallel (generation needs no other rank).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from transformers import TrainerCallback

from posttrain.gpu.ranks import rank


class HeldOutEval(TrainerCallback):
    def __init__(self, job: Any, every: int) -> None:
        self.job, self.every = job, every
        self.tasks = job.holdout[: job.spec.algorithm.eval_tasks]
        self._done: set[int] = set()

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step == 0:  # a resumed run has its earlier points already
            self.evaluate(model, 0)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.every == 0:
            self.evaluate(model, state.global_step)

    def evaluate(self, model: Any, step: int) -> None:
        if rank() != 0 or model is None or step in self._done:
            return
        self._done.add(step)
        from posttrain.gpu.generate import sample
        from posttrain.gpu.likelihood import reference_nll
        from posttrain.rewards.base import graded_mean
        from posttrain.rewards.guards import score_rows

        spec, tokenizer, reward = self.job.spec, self.job.tokenizer, self.job.reward
        a, kwargs = spec.algorithm, spec.model.template_kwargs()
        prompts = [t["prompt"] for t in self.tasks]
        tools = [t.get("tools") for t in self.tasks]
        point: dict[str, Any] = {"n": len(self.tasks)}
        if spec.environment is not None:  # whole episodes, as evaluate plays them
            point.update(self.episodes(model))
            self.job.reporter.events.write("heldout", step=step, **point)
            return
        if reward is not None:
            completions = sample(
                model,
                tokenizer,
                prompts,
                max_new_tokens=a.max_completion_length,
                temperature=a.temperature,
                template_kwargs=kwargs,
                seed=a.seed,
                tools=tools,
            )
            scores = score_rows(reward, completions, self.tasks)
            mean = graded_mean(scores.rewards)  # a judge's ungraded answers left out
            point["reward"] = None if mean is None else round(mean, 4)
            point["components"] = {
                name: round(mean, 4)
                for name, values in scores.components.items()
                if (mean := graded_mean(values)) is not None
            }
        references = [t.get("reference") for t in self.tasks]
        if any(references):
            nll = reference_nll(
                model, tokenizer, prompts, references, template_kwargs=kwargs, tools=tools
            )
            clean = [v for v in nll if v is not None and math.isfinite(v)]
            point["reference_nll"] = round(statistics.fmean(clean), 4) if clean else None
        self.job.reporter.events.write("heldout", step=step, **point)

    def episodes(self, model: Any) -> dict[str, Any]:
        """The reward and its component means over one episode per held-out task."""
        from posttrain.gpu.environment import environment_class
        from posttrain.gpu.episodes import play_episodes

        spec = self.job.spec
        a = spec.algorithm
        played = play_episodes(
            model,
            self.job.tokenizer,
            self.tasks,
            environment_class(spec),
            self.job.reward,
            k=1,
            seed=a.seed,
            max_new_tokens=a.max_completion_length,
            temperature=a.temperature,
            template_kwargs=spec.model.template_kwargs(),
            max_turns=spec.environment.max_turns,
        )
        records = [task[0] for task in played]
        names = dict.fromkeys(k for r in records for k in r["components"])
        return {
            "reward": round(statistics.fmean(r["reward"] for r in records), 4),
            "components": {
                k: round(statistics.fmean(r["components"].get(k, 0.0) for r in records), 4)
                for k in names
            },
        }
