"""Output sizes are bounded: a huge completion, log line or request cannot flood anything."""

from pathlib import Path

from posttrain.gpu.reporter import LOG_MESSAGE_CHARS, TRACE_TEXT_CHARS, Reporter, TracingReward
from posttrain.rewards.registry import get_reward
from posttrain.runs.layout import iter_events


def test_a_huge_log_line_is_cut_to_its_bound(tmp_path: Path):
    reporter = Reporter(tmp_path)
    reporter.log("x" * 100_000)
    reporter.close()
    [event] = [e for e in iter_events(tmp_path) if e["type"] == "log"]
    assert len(event["message"]) < LOG_MESSAGE_CHARS + 40
    assert event["message"].endswith("[100000 characters]")


def test_trace_texts_are_cut_to_their_bound(tmp_path: Path):
    class State:
        global_step = 0

    reporter = Reporter(tmp_path)
    tracing = TracingReward(get_reward("rhyme"), reporter, {1}, samples=2, group_size=2)
    huge = "word " * 50_000
    tracing(
        [huge, "short answer"],
        prompts=[[{"role": "user", "content": huge}]] * 2,
        trainer_state=State(),
        reference=[huge, "ref"],
    )
    reporter.close()
    rows = (tmp_path / "traces" / "step_0001.jsonl").read_text().splitlines()
    assert len(rows) == 2
    assert all(len(row) < 4 * TRACE_TEXT_CHARS for row in rows)
