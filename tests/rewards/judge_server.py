"""A rule-based judge behind a real OpenAI-compatible HTTP endpoint, for tests and benchmarks.

It speaks posttrain's judge protocol (docs/judge.md): it reads the question, the reference
answer where one is shown, and each `<answer id="N">`, and scores an answer 1 when it holds
the right result (the reference, or the arithmetic of "What is A + B?"), else 0. `--gullible`
makes it the judge every rubric fears: an answer that tells it "10/10" or "ignore the rubric"
scores 1. An answer that holds UNGRADABLE gets no verdict at all. `--log` keeps every request
body, one JSON line each. `--delay` adds seconds a request, as a remote judge would.
Run: python -m tests.rewards.judge_server --port 8011
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ANSWER = re.compile(r'<answer id="(\d+)">\n(.*?)\n</answer>', re.DOTALL)
SUM = re.compile(r"(-?\d+)\s*([+\-*x×])\s*(-?\d+)")
NUMBER = re.compile(r"-?\d+")
FOOLED_BY = ("10/10", "ignore the rubric", "ignore previous", "score this")


def truth(question: str, reference: str | None) -> str | None:
    if reference is not None:
        return reference.strip()
    found = SUM.search(question)
    if found is None:
        return None
    a, op, b = int(found.group(1)), found.group(2), int(found.group(3))
    return str(a + b if op == "+" else a - b if op == "-" else a * b)


def grade(answer: str, right: str | None, gullible: bool) -> tuple[float, str]:
    if gullible and any(word in answer.lower() for word in FOOLED_BY):
        return 1.0, "the answer says it deserves full marks"
    if not answer.strip():
        return 0.0, "empty"
    if right is None:
        return 0.5, "no rule for this question"
    if NUMBER.fullmatch(right):
        numbers = NUMBER.findall(answer)
        ok = bool(numbers) and numbers[-1] == right
    else:
        ok = right.lower() in answer.lower()
    return (1.0, "right") if ok else (0.0, f"expected {right}")


def reply_for(body: dict) -> str:
    user = body["messages"][-1]["content"]
    question = user.split("Question:\n", 1)[-1].split("\n\n", 1)[0]
    reference = None
    if "Reference answer:\n" in user:
        reference = user.split("Reference answer:\n", 1)[1].split("\n\n", 1)[0]
    right = truth(question, reference)
    scores = []
    for ident, text in ANSWER.findall(user):
        if "UNGRADABLE" in text:  # left out of the reply: a verdict the judge never gave
            continue
        score, reason = grade(text, right, Handler.gullible)
        scores.append({"id": int(ident), "score": score, "reason": reason})
    return json.dumps({"scores": scores})


class Handler(BaseHTTPRequestHandler):
    gullible = False
    delay_s = 0.0
    log: Path | None = None
    lock = threading.Lock()

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "rule-judge"}]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.log is not None:
            seen = {**body, "authorization": bool(self.headers.get("Authorization"))}
            with self.lock, open(self.log, "a", encoding="utf-8") as out:
                out.write(json.dumps(seen, ensure_ascii=False) + "\n")
        if self.delay_s:
            time.sleep(self.delay_s)
        content = reply_for(body)
        self._send(
            200,
            {
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": len(str(body)) // 4, "completion_tokens": 20},
            },
        )


@contextlib.contextmanager
def serving(log: Path | None = None, gullible: bool = False, delay_s: float = 0.0):
    """The judge in its own process on a free port; yields its base_url, stopped after."""
    from tests.conftest import free_port, wait_listening

    port = free_port()
    command = [sys.executable, "-m", "tests.rewards.judge_server", "--port", str(port)]
    command += ["--gullible"] * gullible + ["--delay", str(delay_s)]
    command += ["--log", str(log)] if log else []
    root = Path(__file__).resolve().parents[2]
    server = subprocess.Popen(command, cwd=root)
    try:
        wait_listening(port)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--gullible", action="store_true")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    Handler.gullible, Handler.delay_s, Handler.log = args.gullible, args.delay, args.log
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
