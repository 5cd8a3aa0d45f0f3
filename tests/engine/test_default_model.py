"""The real default model: coherent English from the CLI, and exactness over 1,000 tokens."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"
COMMON = {"the", "a", "and", "to", "of", "was", "she", "he", "her", "in", "it", "that", "had", "i"}


@pytest.mark.default_model
def test_generate_cli_writes_coherent_english():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "swiftwriter",
            "generate",
            "--prompt-file",
            str(DATA / "prose_prompt.txt"),
            "--max-new-tokens",
            "120",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    words = re.findall(r"[A-Za-z']+", result.stdout)
    assert len(words) >= 30, result.stdout
    lowered = [w.lower() for w in words]
    assert sum(w in COMMON for w in lowered) / len(lowered) > 0.1  # function words of English
    assert len(set(lowered)) / len(lowered) > 0.4  # not one phrase looping
    tokens = result.stdout.split()
    assert sum(bool(re.fullmatch(r"[\w'\",.;:!?()-]+", t)) for t in tokens) / len(tokens) > 0.95
