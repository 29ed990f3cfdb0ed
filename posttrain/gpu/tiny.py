"""The `tiny-local` model: a Qwen3-architecture model small enough to train on two CPU cores.

Built from a config with a word-level tokenizer over the rhyme gym's vocabulary, both made
here: no download, ever. About 0.6M parameters (hidden 128, 4 layers, tied embeddings).
The chat template is Qwen's ChatML with `{% generation %}` markers, so SFT can put the loss
on the assistant turns only.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from posttrain.data.gym import vocabulary
from posttrain.rewards.phonetics import cache_dir

TINY_FORMAT = 3  # bump when the tokenizer or config changes, so cached builds are redone
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>")
NEWLINE = "\n"

# ChatML as Qwen writes it, with generation markers around what the assistant says. The
# newline that ends a turn is inside them: the demo's warm start was measured to learn (and
# its GRPO to find the rhymes by step ~300) with the loss on it; without it, the same seed's
# warm start lands elsewhere (loss 3.00 against 2.78) and GRPO had not learned by step 371.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['role'] == 'assistant' %}"
    "{% generation %}{{- message['content'] + '<|im_end|>' + '\\n' }}{% endgeneration %}"
    "{%- else %}"
    "{{- message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

TINY_ARCH = {
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "max_position_embeddings": 256,
    "tie_word_embeddings": True,
}


def build_tokenizer():
    """A word-level fast tokenizer: words split on spaces, newline its own token."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, NEWLINE, *vocabulary()])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"[ \t]+"), behavior="removed"),
            pre_tokenizers.Split(NEWLINE, behavior="isolated"),
        ]
    )
    # Words are joined with spaces; the newline swallows the spaces around it.
    core.decoder = decoders.Sequence(
        [
            decoders.WordPiece(prefix="##", cleanup=False),
            decoders.Fuse(),
            decoders.Replace(" \n", "\n"),
            decoders.Replace("\n ", "\n"),
        ]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<unk>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(tokenizer, seed: int = 0, arch: dict | None = None):
    """A randomly initialised Qwen3ForCausalLM sized for the tokenizer (fp32)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=len(tokenizer),
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **(arch or TINY_ARCH),
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def tiny_model_path() -> Path:
    """The tiny model's folder, built on first use and cached (atomically) thereafter."""
    path = cache_dir() / "models" / f"tiny-local-v{TINY_FORMAT}"
    if (path / "config.json").is_file() and (path / "tokenizer.json").is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=".tiny-"))
    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(staging)
    build_model(tokenizer).save_pretrained(staging)
    (staging / "posttrain.json").write_text(
        json.dumps({"preset": "tiny-local", "format": TINY_FORMAT})
    )
    try:
        os.replace(staging, path)
    except OSError:  # another process built it first; theirs is as good as ours
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
    return path
