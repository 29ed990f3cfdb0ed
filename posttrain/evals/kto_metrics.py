"""evaluate's KTO metrics: did training make the held-out desirable answers likelier and the
undesirable ones less likely?

Per held-out row, the answer's mean token log-likelihood under the base and the trained model
(posttrain.gpu.kto_likelihood). Signed by the rater's verdict (+1 for 👍, -1 for 👎), the
trained-minus-base change is one number a row that KTO should raise on both sides: the rows are
paired, so posttrain.evals.metrics gives its interval, p-value and verdict, as for every other
metric. The two sides are also reported apart (unoptimised views): a gain
that comes only from pushing 👎 answers down reads differently from one that lifts 👍 answers.

Deterministic, like reference_nll: the base passes agree, and the rows and the seeds' spread
are the uncertainty.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from posttrain.evals.metrics import MetricResult, metric_result

SIGNED = "feedback_loglik"  # + for 👍 rows, - for 👎 rows: higher is better on both


def signed(logliks: Sequence[float], labels: Sequence[bool]) -> list[float]:
    """Each row's log-likelihood, negated for undesirable answers."""
    return [v if up else -v for v, up in zip(logliks, labels, strict=True)]


def signed_deltas(
    base: Sequence[float], trained: Sequence[float], labels: Sequence[bool]
) -> list[float]:
    """Per row, how far training moved the answer the rater's way: trained - base for a 👍
    answer, base - trained for a 👎 one. Positive: the model moved as the feedback asked."""
    return [t - b for b, t in zip(signed(base, labels), signed(trained, labels), strict=True)]


def feedback_metrics(
    outs: list[dict[str, Any]], labels: Sequence[bool]
) -> list[MetricResult] | None:
    """The signed metric (optimised), then the desirable and undesirable rows' log-likelihood
    apart, base against trained, paired by row. `outs`: each training seed's arms, each with
    {"logliks": {"base": [row], "trained": [row]}} (a seed's base may be None: the first
    seed's is used); None when the arms carry no log-likelihoods."""
    if not outs or any(o.get("logliks") is None for o in outs):
        return None
    base0 = outs[0]["logliks"]["base"]

    def tasks(values: Sequence[float], keep: list[int], sign: bool) -> list[list[float]]:
        picked = [values[i] for i in keep]
        return [[v] for v in (signed(picked, [labels[i] for i in keep]) if sign else picked)]

    def metric(name: str, keep: list[int], sign: bool, higher: bool, opt: bool) -> MetricResult:
        bases = [tasks(o["logliks"]["base"] or base0, keep, sign) for o in outs]
        return metric_result(
            name,
            [bases[0], bases[0]],
            bases,
            [tasks(o["logliks"]["trained"], keep, sign) for o in outs],
            optimised=opt,
            higher_is_better=higher,
        )

    every = list(range(len(labels)))
    up = [i for i in every if labels[i]]
    down = [i for i in every if not labels[i]]
    found = [metric(SIGNED, every, True, True, True)]
    if up:
        found.append(metric("desirable_loglik", up, False, True, False))
    if down:
        found.append(metric("undesirable_loglik", down, False, False, False))
    return found
