#!/bin/bash
# History seeding benchmark (README, "Speed, measured"): a novel project whose chapters the model
# continues, then three `swiftwriter bench PROJECT` runs, each with and without the history:
#   new-chapter.json    chapter 3's opening, unrelated to anything stored (2,048 tokens)
#   regenerate.json     chapter 3 continued once, then a phrase near its end changed (1,024)
#   edit-continue.json  chapter 1 as stored, a phrase in its first paragraph changed and cut
#                       about 1,460 characters into the model's continuation (1,024)
# Usage: resources/bench/novel/history.sh [OUT_DIR]   (about 15 minutes on 2 cores)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
S="$root/.venv/bin/swiftwriter"
out=${1:-/tmp/swiftwriter-novel}
mkdir -p "$out" && cd "$out"
rm -f Novel.swiftwriter Novel.swiftwriter-wal Novel.swiftwriter-shm
P=Novel.swiftwriter
common=("$P" --methods ar,tokenswift-noheads --no-heads --dtype float32)

$S project new $P
$S project import $P "$here/ch1.md"
$S project import $P "$here/ch2.md"
$S generate $P "Chapter One: The Lighthouse" --max-new-tokens 2048 --dtype float32 > ch1.out
$S generate $P "Chapter Two: The Stranger" --max-new-tokens 2048 --dtype float32 > ch2.out
$S bench "${common[@]}" --prompt-file "$here/ch3.txt" --max-new-tokens 2048 --json new-chapter.json

$S project import $P "$here/ch3.md"
$S generate $P "Chapter Three: The Letter" --max-new-tokens 1024 --dtype float32 > ch3.out
$S bench "${common[@]}" --prompt-file "$here/ch3b.txt" --max-new-tokens 1024 --json regenerate.json

$S project show $P "Chapter One: The Lighthouse" > ch1-stored.txt
python3 - <<'PY'
text = open("ch1-stored.txt", encoding="utf-8").read()
edited = text.replace("small, careful hand", "small, neat hand", 1)
assert edited != text, "chapter one's first paragraph changed: update the edit"
cut = edited[:2120]
open("ch1edit.txt", "w", encoding="utf-8").write(cut[: cut.rfind(". ") + 1])
PY
$S bench "${common[@]}" --prompt-file ch1edit.txt --max-new-tokens 1024 --json edit-continue.json
