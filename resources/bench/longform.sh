#!/usr/bin/env bash
# The long-form loop, measured on the default model (about 30 minutes on 2 cores):
# 1. a 3,000-token take with end-of-text forbidden until 3,000 tokens (CLI, as a project take);
# 2. Distinct-1..4 and repeated 4-grams over 8,000 tokens for each text preset, to choose the
#    default by measurement (tokenswift only: its text is plain decoding's).
# Usage: resources/bench/longform.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-bench-out/longform}
mkdir -p "$out"
sw=.venv/bin/swiftwriter
prompt=resources/prompts/heldout/salvage.txt

project="$out/keep-writing.swiftwriter"
rm -f "$project"
$sw project new "$project" --title "Keep writing" > /dev/null
$sw project import "$project" "$prompt" > /dev/null
start=$(date +%s)
$sw generate "$project" salvage --max-new-tokens 3000 --min-new-tokens 3000 \
  --no-history > "$out/keep-writing.txt" 2> "$out/keep-writing.err"
echo "keep writing: $(tail -1 "$out/keep-writing.err") in $(( $(date +%s) - start )) s" \
  | tee "$out/keep-writing.summary"

preset() {  # name, then bench options
  local name=$1
  shift
  $sw bench --prompt-file "$prompt" --methods tokenswift --max-new-tokens 8000 "$@" \
    --json "$out/preset-$name.json" > "$out/preset-$name.txt" 2>&1
  grep -E "^tokenswift" "$out/preset-$name.txt" | sed "s/^/$name: /"
}
preset precise-1.2-1024 --penalty 1.2 --window 1024
preset precise-1.3-8192 --penalty 1.3 --window 8192
preset creative-0.8 --sampling sample --seed 1 --temperature 0.8 --top-p 0.95 --min-p 0.05
