"""The prepared GPU check: its CPU rehearsal runs every part and writes its JSON and summary;
without CUDA the real check says so instead of measuring anything."""

from __future__ import annotations

import json

import pytest
import torch

from experiments import gpucheck


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the check would run")
def test_without_cuda_the_check_says_so(tmp_path, capsys):
    assert gpucheck.main(["--out", str(tmp_path)]) == 2
    assert "no CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "gpu-check.json").exists()


def test_the_smoke_run_measures_every_part(tmp_path):
    families = ["--families", "qwen3-1.7b,gemma2-2b"]  # q/k norms; soft-capping, sandwich norms
    assert gpucheck.main(["--smoke", "--out", str(tmp_path), *families]) == 0
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    assert set(report["families"]) == {
        "qwen3-1.7b/bfloat16", "qwen3-1.7b/float16", "gemma2-2b/bfloat16", "gemma2-2b/float16"
    }  # fmt: skip
    for row in report["families"].values():
        assert "error" not in row, row
        assert row["tokenswift_equals_ar"] and row["tree_rows_differing"] == 0
        assert row["accepted_drafts"] > 0  # drafts were verified, not only plain steps
    assert set(report["exactness"]) == {
        "tiny/bfloat16", "tiny/float16", "qwen-1.5b-shaped/bfloat16", "qwen-1.5b-shaped/float16"
    }  # fmt: skip
    for row in report["exactness"].values():
        assert row["invariant"] and row["tree_rows_differing"] == 0
        assert row["tokenswift_equals_plain"] and row["sampled_equals_plain"]
    assert set(report["verify_ms"]) == {"64", "256"}
    assert set(report["verify_ms"]["64"]["ours_ms"]) == {"1", "4", "16"}
    steps = report["host_overhead"]
    assert steps["1"]["model_ms_per_step"] > 0 and steps["16"]["host_ms_per_step"] > 0
    assert report["long_run"]["tokenswift"]["tokens"] == 64
    summary = (tmp_path / "gpu-check.txt").read_text()
    assert "exactness tiny/bfloat16: tree rows differing 0/8" in summary
    assert "per step with 16 tree tokens" in summary
    assert "family gemma2-2b/float16: tokenswift = ar: True" in summary


def test_every_family_is_written_at_its_real_size_and_shrinks_for_the_smoke_run():
    from transformers import AutoConfig

    assert len(gpucheck.FAMILIES) == 9
    for name in gpucheck.FAMILIES:
        real, tiny = gpucheck.family_shape(name, False), gpucheck.family_shape(name, True)
        assert real["hidden_size"] >= 1152 and real["vocab_size"] >= 32000, name
        assert real["num_hidden_layers"] == gpucheck.FAMILY_LAYERS
        assert tiny["hidden_size"] == 64 and tiny["model_type"] == real["model_type"]
        AutoConfig.for_model(**tiny)  # transformers takes the fields as written
    with pytest.raises(SystemExit, match="unknown families"):
        gpucheck.main(["--smoke", "--families", "llama3.2-1b,gpt-17"])
