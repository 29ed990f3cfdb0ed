"""Terminal views mark every cut with what it left out, and keep the end of a rendered chat in
view: a long user turn never makes its `<|im_end|>` vanish as if the template had dropped it."""

import json
import subprocess
import sys

from posttrain.core.formatting import cut

LONG_ORDER = '''
class Clerk:
    def reset(self, **row):
        return "\\n" + " ".join(f"line-item-{i}" for i in range(600))  # a long user turn

    def look_up(self, item: str) -> str:
        """Look an item up.

        Args:
            item: The item's name.
        """
        return f"{item}: 3 in stock"
'''


def test_a_cut_says_how_much_it_left_out_and_keeps_the_closing_token():
    text = "<|im_start|>user\n" + "x" * 500 + "<|im_end|>\n"
    shown = cut(text, 100, tail=20)
    assert shown.endswith("<|im_end|>\n") and len(shown) < 160
    assert f"... [{len(text) - 100:,} more characters]" in shown
    assert cut("short", 100) == "short"
    assert cut("y" * 300, 100) == "y" * 100 + "... [200 more characters]"


def test_env_check_shows_a_long_episode_cut_with_a_mark_and_its_last_turn_whole(tmp_path, home):
    (tmp_path / "clerk.py").write_text(LONG_ORDER)
    (tmp_path / "rows.jsonl").write_text(json.dumps({"prompt": "Is the widget in stock?"}))
    command = [sys.executable, "-m", "posttrain.cli", "env", "check", "clerk.py:Clerk"]
    done = subprocess.run(
        [*command, "--data", "rows.jsonl"], capture_output=True, text=True, cwd=tmp_path,
        timeout=300,
    )  # fmt: skip
    assert "One episode as the model sees it" in done.stdout, done.stderr
    view = done.stdout.split("One episode as the model sees it", 1)[1]
    assert "more characters]" in view
    before_flags = view.split("flagged:")[0].split("note:")[0].rstrip()
    assert before_flags.endswith("<|im_end|>"), before_flags[-300:]
