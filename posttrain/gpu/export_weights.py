"""`python -m posttrain.gpu.export_weights RUN_DIR OUT`: the trained model as one folder that plain
`transformers` loads: a LoRA adapter merged into the model it was trained on (the run's
warm-start, else its base: the same base evaluate compares against), or a full fine-tune's
weights, written as safetensors with the tokenizer and its chat template.

It runs in a child process (posttrain.tools.export starts it), so the weights never load
into the server; it prints one JSON line describing what it wrote.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from posttrain.core.priority import lower_priority

EXPORT_INFO = "posttrain_export.json"


def merged_model(run_dir: Path) -> tuple[Any, str, bool]:
    """(model, what it was built from, whether an adapter was merged) for the run's final/."""
    from transformers import AutoModelForCausalLM

    from posttrain.gpu.models import start_model
    from posttrain.runs.layout import SPEC
    from posttrain.spec.schema import load_spec

    final = run_dir / "final"
    if not (final / "adapter_config.json").is_file():
        return AutoModelForCausalLM.from_pretrained(str(final), dtype="auto"), str(final), False
    from peft import PeftModel

    base = start_model(run_dir, load_spec(run_dir / SPEC))
    model = AutoModelForCausalLM.from_pretrained(base, dtype="auto")
    return PeftModel.from_pretrained(model, str(final)).merge_and_unload(), base, True


def export(run_dir: Path, out: Path) -> dict[str, Any]:
    """Write the merged model, tokenizer and chat template into `out`; what was written."""
    from posttrain.gpu.models import load_tokenizer
    from posttrain.gpu.reporter import quiet_libraries

    quiet_libraries()
    model, base, merged = merged_model(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer = load_tokenizer(str(run_dir / "final"))  # rank 0 saved it beside the weights
    tokenizer.save_pretrained(str(out))
    info = {
        "run_id": run_dir.name,
        "merged_adapter": merged,
        "base": base,
        "chat_template": bool(tokenizer.chat_template),
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
    }
    (out / EXPORT_INFO).write_text(json.dumps(info, indent=2) + "\n")
    return info


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    lower_priority()  # a merge is CPU work the server must answer beside
    if len(args) != 2:
        print("usage: python -m posttrain.gpu.export_weights RUN_DIR OUT", file=sys.stderr)
        return 2
    print(json.dumps(export(Path(args[0]), Path(args[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
