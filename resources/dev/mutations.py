"""The suite's mutation check: apply each deliberate bug to a scratch copy of the repository (a
git worktree of HEAD), run the tests meant to catch it, restore, and report CAUGHT or SURVIVED.
Usage (from the repository root): .venv/bin/python resources/dev/mutations.py [SCRATCH_DIR]"""

import os
import pathlib
import subprocess
import sys
import tempfile

repo = pathlib.Path(__file__).resolve().parents[2]
root = (
    pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(tempfile.mkdtemp()) / "scratch"
)
if not root.exists():
    subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(root), "HEAD"], check=True
    )
    (root / ".venv").symlink_to(repo / ".venv")
MUTATIONS = [
    (
        "temperature inverted",
        "app/swiftwriter/engine/logits.py",
        "x = x / s.temperature",
        "x = x * s.temperature",
        "tests/engine/decoding/test_sampling_by_hand.py",
    ),
    (
        "top-p ignored",
        "app/swiftwriter/engine/logits.py",
        "if s.top_p < 1.0:",
        "if False:",
        "tests/engine/decoding/test_sampling_by_hand.py",
    ),
    (
        "5% bias in the draw",
        "app/swiftwriter/engine/logits.py",
        "    probs = processed.softmax(dim=-1)\n",
        "    probs = processed.softmax(dim=-1)\n    probs = probs.clone()\n"
        "    probs[probs.argmax()] *= 1.05\n",
        "tests/engine/decoding/test_sampling_by_hand.py",
    ),
    (
        "half a multi-byte character streamed",
        "app/swiftwriter/engine/textgen.py",
        ' and not new_text.endswith("\\ufffd")',
        "",
        "tests/engine/decoding/test_incremental_decoder.py",
    ),
    (
        "off-by-one in the trie's pruning",
        "app/swiftwriter/engine/trie.py",
        "key=lambda i: (-trie.probs[i], trie.depths[i], i))[:keep]",
        "key=lambda i: (-trie.probs[i], trie.depths[i], i))[: keep + 1]",
        "tests/engine/decoding/test_trie_prune.py",
    ),
    (
        "off-by-one in the tree's drop position",
        "app/swiftwriter/ui/project_tree.py",
        "position = parent.indexOfChild(item) if parent else self.indexOfTopLevelItem(item)",
        "position = parent.indexOfChild(item) + 1 if parent else self.indexOfTopLevelItem(item)",
        "tests/ui/test_desk.py::test_drop_in_the_tree_moves_in_the_store",
    ),
    (
        "a flush that never happens",
        "app/swiftwriter/store/take_records.py",
        "if time.monotonic() - self._last_flush >= self.flush_interval:",
        "if False:",
        "tests/store/test_integrity.py",
    ),
]
env = dict(os.environ, PYTHONPATH=str(root / "app"), QT_QPA_PLATFORM="offscreen")
for name, rel, old, new, tests in MUTATIONS:
    path = root / rel
    text = path.read_text()
    assert text.count(old) == 1, (name, text.count(old))
    path.write_text(text.replace(old, new))
    try:
        r = subprocess.run(
            [
                str(root / ".venv/bin/python"),
                "-m",
                "pytest",
                "-x",
                "-q",
                "-p",
                "no:cacheprovider",
                *tests.split(),
            ],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        failed = [line for line in r.stdout.splitlines() if line.startswith("FAILED")]
        print(
            f"{name}: {'CAUGHT' if r.returncode else 'SURVIVED'} rc={r.returncode} {failed[:1]}",
            flush=True,
        )
    except subprocess.TimeoutExpired:
        print(f"{name}: TIMEOUT", flush=True)
    finally:
        path.write_text(text)
