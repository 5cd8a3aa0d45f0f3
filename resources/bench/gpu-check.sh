#!/usr/bin/env bash
# The prepared GPU check: exactness (batch invariance in bf16 and fp16, tokenswift = plain
# decoding), the verify-cost curve of a Llama-3.1-8B-shaped model at 4K, 32K and 100K cached
# tokens against stock transformers, host overhead per step at 1 and 16 tree tokens, and a long
# tokenswift run against hf on a Qwen2.5-1.5B-shaped model; and per decoder family (Llama 3.x,
# Mistral, Qwen2.5, Qwen3, Gemma 2, Gemma 3, Phi-3, OLMo 2, Granite) at its real width and
# vocabulary with four layers, in bf16 and fp16, whether tokenswift = ar (plain decoding), each
# family and dtype reported on its own (`--families a,b` or `none` to choose). Random weights
# built from the configurations on the GPU: no download, no network. Runs from the source tree on whatever
# Python has torch, transformers and accelerate (PYTHONPATH=app); writes OUT/gpu-check.json and
# OUT/gpu-check.txt. Without CUDA it says so and exits 2 (`--smoke` rehearses it on the CPU).
# Usage: resources/bench/gpu-check.sh [OUT_DIR] [--smoke] [--long-tokens N] [--families LIST]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-gpu-check}
shift || true
python=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || command -v python3 )}
PYTHONPATH=app${PYTHONPATH:+:$PYTHONPATH} exec "$python" -m experiments.gpucheck --out "$out" "$@"
