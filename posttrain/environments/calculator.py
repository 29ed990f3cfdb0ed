"""The built-in example environment: arithmetic word problems solved with a calculator.

Each row of `data/calculator.jsonl` is a question a person would ask ("A box holds 24 eggs;
how many eggs are in 17 boxes?"), its exact answer, and a demonstration (the calls a good
episode makes). The model has two tools: `calculate` evaluates an arithmetic expression,
`submit_answer` ends the task. The episode earns 1.0 when the submitted answer is right,
and nothing without a submission, so answering in prose earns nothing.

    environment: {name: calculator, demo_column: demo}
    dataset: {path: <posttrain>/environments/data/calculator.jsonl, reference_column: answer}
"""

from __future__ import annotations

import ast
import json
import operator
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "calculator.jsonl"
MAX_EXPRESSION_CHARS = 200
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand))
    raise ValueError("only numbers, + - * / // % and parentheses are allowed")


def rows() -> list[dict[str, Any]]:
    """The shipped tasks (question, answer, demo)."""
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]


class Calculator:
    """One episode: a question, a calculator, and one answer to submit."""

    def __init__(self) -> None:
        self.answer: float | None = None
        self.submitted: float | None = None
        self.calls = 0

    def reset(self, answer: float | None = None, **row: Any) -> str | None:
        self.answer = None if answer is None else float(answer)
        self.submitted, self.calls = None, 0
        return "\n\nUse the calculator, then submit your answer with submit_answer."

    def calculate(self, expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: Numbers with + - * / // % and parentheses, e.g. "(12 + 3) * 4".
        """
        self.calls += 1
        if not isinstance(expression, str) or len(expression) > MAX_EXPRESSION_CHARS:
            return f"error: give the expression as text of at most {MAX_EXPRESSION_CHARS} chars"
        try:
            value = _evaluate(ast.parse(expression, mode="eval").body)
        except (SyntaxError, ValueError, ZeroDivisionError, TypeError) as exc:
            return f"error: {exc}"
        return f"{value:g}" if isinstance(value, float) else str(value)

    def submit_answer(self, answer: float) -> str:
        """Submit the final answer; the episode is scored on it.

        Args:
            answer: The number that answers the question.
        """
        if isinstance(answer, bool) or not isinstance(answer, int | float):
            return "error: the answer must be a number"
        if self.submitted is not None:
            return "error: an answer was already submitted"
        self.submitted = float(answer)
        return "Answer recorded."

    def get_reward(self) -> float:
        """1.0 for the right answer submitted, else 0.0."""
        if self.submitted is None or self.answer is None:
            return 0.0
        return 1.0 if abs(self.submitted - self.answer) < 1e-6 else 0.0
