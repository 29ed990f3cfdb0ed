"""export_run on real tiny runs: the folder plain transformers loads and generates from; a
LoRA run's merged weights are its base plus the adapter, computed here by hand from the
files; the CLI and the MCP tool; clear errors."""

import asyncio
import json

import pytest
from mcp import Client

from posttrain.cli.app import app
from posttrain.core.errors import ConfigError
from posttrain.jobs.detached import get_job
from posttrain.server.app import build_server
from posttrain.tools.export import export_run
from posttrain.tools.launch import launch
from tests.conftest import kill_leftover_runs, wait_finished, wait_for
from tests.specs import tiny

pytestmark = pytest.mark.slow

LORA = {"r": 4, "alpha": 16, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A LoRA run and a full fine-tune, trained for real on the tiny model."""
    home = tmp_path_factory.mktemp("export") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POSTTRAIN_HOME", str(home))
        sft = tiny(kind="sft", lora=LORA, learning_rate=5e-2, seed=1)  # SFT: gradients from step 1
        sft["dataset"] = {**sft["dataset"], "response_column": "response"}
        lora = launch(sft).run_id
        full = launch(tiny(seed=2)).run_id
        try:
            details = [wait_finished(r, 300) for r in (lora, full)]
        finally:
            kill_leftover_runs(home)
        assert [d.status for d in details] == ["succeeded", "succeeded"], details
        yield home, lora, full


@pytest.fixture
def at_home(runs, monkeypatch):
    home, lora, full = runs
    monkeypatch.setenv("POSTTRAIN_HOME", str(home))
    monkeypatch.chdir(home.parent)
    return home, lora, full


def generates(folder) -> str:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "why is the sky blue"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    ids = tokenizer(text, return_tensors="pt").input_ids
    out = model.generate(ids, max_new_tokens=8, do_sample=False)
    assert out.shape[1] > ids.shape[1]
    return tokenizer.decode(out[0, ids.shape[1] :])


def test_a_lora_run_exports_as_its_base_plus_the_adapter(at_home, tmp_path):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    home, lora, _ = at_home
    run_dir = home / "runs" / lora
    result = export_run(lora, tmp_path / "merged", roots=[tmp_path])
    assert result.merged and not result.adapter_only
    assert "model.safetensors" in result.files and "tokenizer.json" in result.files
    assert "adapter_config.json" not in result.files
    generates(result.out)

    # by hand: W + (alpha / r) * B @ A for every adapted projection, the rest untouched
    merged = load_file(f"{result.out}/model.safetensors")
    base = AutoModelForCausalLM.from_pretrained(result.base).state_dict()
    adapter = load_file(str(run_dir / "final" / "adapter_model.safetensors"))
    scale = LORA["alpha"] / LORA["r"]
    adapted = 0
    for name, weight in merged.items():
        stem = name.removesuffix(".weight")
        a = next((v for k, v in adapter.items() if k.endswith(f"{stem}.lora_A.weight")), None)
        if a is None:
            assert torch.equal(weight, base[name]), name
            continue
        b = next(v for k, v in adapter.items() if k.endswith(f"{stem}.lora_B.weight"))
        assert b.abs().sum() > 0  # training moved the adapter: the check means something
        expected = base[name] + scale * (b.float() @ a.float()).to(base[name].dtype)
        torch.testing.assert_close(weight, expected, rtol=1e-5, atol=1e-6)
        adapted += 1
    assert adapted == 2 * AutoModelForCausalLM.from_pretrained(result.out).config.num_hidden_layers


def test_a_full_fine_tune_exports_its_own_weights_and_chat_template(at_home, tmp_path):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    home, _, full = at_home
    result = export_run(full, tmp_path / "full", roots=[tmp_path])
    assert not result.merged
    final = AutoModelForCausalLM.from_pretrained(home / "runs" / full / "final").state_dict()
    exported = load_file(f"{result.out}/model.safetensors")
    assert all(torch.equal(exported[k], final[k]) for k in exported)
    assert AutoTokenizer.from_pretrained(result.out).chat_template
    info = json.loads((tmp_path / "full" / "posttrain_export.json").read_text())
    assert info["run_id"] == full and info["merged_adapter"] is False


def test_the_cli_exports_the_adapter_alone_or_merged(at_home, tmp_path):
    from typer.testing import CliRunner

    _, lora, _ = at_home
    cli = CliRunner()
    out = cli.invoke(
        app, ["run", "export", lora, "--adapter", "--out", str(tmp_path / "a"), "--json"]
    )
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)  # one document on stdout; its progress line on stderr
    assert result["adapter_only"] and "adapter_config.json" in result["files"]
    assert result["loads_with"].startswith("peft.AutoPeftModelForCausalLM")
    human = cli.invoke(app, ["run", "export", lora, "--out", str(tmp_path / "m")])
    assert human.exit_code == 0 and "merged into" in human.output, human.output
    again = cli.invoke(app, ["run", "export", lora, "--out", str(tmp_path / "m")])
    assert again.exit_code != 0 and "not empty" in again.output


def test_export_refuses_clearly(at_home, tmp_path, monkeypatch, empty_hf_home):
    _, lora, _ = at_home
    with pytest.raises(ConfigError, match="owner/name"):
        export_run(lora, tmp_path / "x", push_to_hub="not a repo", roots=[tmp_path])
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(empty_hf_home))  # no cached token either
    with pytest.raises(ConfigError, match="no Hugging Face token"):
        export_run(lora, tmp_path / "y", push_to_hub="me/rhymes", roots=[tmp_path])
    assert (tmp_path / "y" / "model.safetensors").is_file()  # the export itself is kept
    with pytest.raises(ConfigError, match="outside the allowed folders"):
        export_run(lora, "/elsewhere/model", roots=[tmp_path])
    assert not list(tmp_path.glob(".*partial*"))


def test_export_run_through_a_real_mcp_client(at_home, tmp_path):
    home, lora, _ = at_home

    async def go():
        async with Client(build_server(roots=[home.parent, tmp_path])) as client:
            started = await client.call_tool(
                "export_run", {"run_id": lora, "out": str(tmp_path / "m")}
            )
            outside = await client.call_tool("export_run", {"run_id": lora, "out": "/etc/m"})
            listed = await client.call_tool("list_runs", {})
            return started, outside, listed

    started, outside, listed = asyncio.run(go())
    assert not started.is_error and started.structured_content["status"] == "started"
    done = wait_for(
        lambda: (v := get_job(started.structured_content["job_id"])).status != "running" and v,
        timeout_s=300,
    )
    assert done.status == "succeeded", done.error
    assert done.result["merged"] is True
    generates(done.result["out"])
    assert outside.is_error and "outside the allowed folders" in outside.content[0].text
    assert not listed.is_error
