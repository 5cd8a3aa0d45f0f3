#!/usr/bin/env bash
# Exactness in every precision, measured: the default model writes 2,048 greedy tokens
# (penalty 1.2 over 1,024) on two held-out prompts (prose and a report), in bfloat16 and float32,
# with the batch-invariant passes (ar, tokenswift) beside the earlier ones (ar-legacy,
# tokenswift-legacy) and transformers' generate (hf; in the bfloat16 runs also hf in float32).
# Usage: resources/bench/exactness.sh [OUT_DIR] [MAX_NEW_TOKENS]   (about 40 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-bench-out/exactness}
n=${2:-2048}
mkdir -p "$out"
sw=.venv/bin/swiftwriter
for prompt in orchard quarterly; do
  file=resources/prompts/heldout/$prompt.txt
  $sw bench --dtype bfloat16 --baseline-dtype float32 --prompt-file "$file" --max-new-tokens "$n" \
    --methods hf,ar,tokenswift,ar-legacy,tokenswift-legacy --json "$out/$prompt-bf16.json" \
    | tee "$out/$prompt-bf16.txt"
  $sw bench --dtype float32 --prompt-file "$file" --max-new-tokens "$n" \
    --methods hf,ar,tokenswift,ar-legacy,tokenswift-legacy --json "$out/$prompt-fp32.json" \
    | tee "$out/$prompt-fp32.txt"
done
