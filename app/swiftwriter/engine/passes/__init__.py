"""The model passes: running a stock Hugging Face causal LM over a prompt and over a token
tree, exactly (batch-invariant layer walks, our tree-attention kernel) and fast (weight
layouts, product kernels), with the KV cache that grows and compacts under it.

This module is the one door into the package: the decoding loop, the model store, the
benchmarks and training import what they need from here, never from the modules behind it,
so the passes can change inside without the loop knowing (tests/test_layout.py holds it)."""

from swiftwriter.engine.passes.backends import exact_by_default, precision_line, set_exact
from swiftwriter.engine.passes.capture import PrenormCapture, final_norm_of, last_layer_of
from swiftwriter.engine.passes.kernels import PACKED as PACKED_KERNEL
from swiftwriter.engine.passes.kernels import STOCK as STOCK_KERNEL
from swiftwriter.engine.passes.kernels import (
    adopt_fastest,
    choose_kernel,
    kernel_of,
    set_kernel,
    time_kernels,
    time_linears,
    usable,
)
from swiftwriter.engine.passes.kernels import product as kernel_product
from swiftwriter.engine.passes.kvcache import BufferLayer
from swiftwriter.engine.passes.layout import (
    add_few_row_copies,
    few_rows_from,
    time_few_rows,
    transpose_linear_weights,
)
from swiftwriter.engine.passes.leanpass import (
    compute_dtype,
    merge_projections,
    row_classes,
    supports,
)
from swiftwriter.engine.passes.modelstate import ModelSettings, settings_for
from swiftwriter.engine.passes.native import identity as native_identity
from swiftwriter.engine.passes.native import notice as native_notice
from swiftwriter.engine.passes.quant import TYPES as QUANT_TYPES
from swiftwriter.engine.passes.quant import (
    QuantEmbedding,
    QuantLinear,
    QuantWeight,
    quantized_model,
    row_values,
    stored_bytes,
    table_of,
    thread_invariant,
)
from swiftwriter.engine.passes.quant import available as quant_available
from swiftwriter.engine.passes.quant import path_name as quant_path
from swiftwriter.engine.passes.quant import unavailable as quant_unavailable
from swiftwriter.engine.passes.tree import Trie
from swiftwriter.engine.passes.verify import ModelRunner, execution_device, to_host

__all__ = [
    "PACKED_KERNEL",
    "QUANT_TYPES",
    "STOCK_KERNEL",
    "BufferLayer",
    "ModelRunner",
    "ModelSettings",
    "PrenormCapture",
    "QuantEmbedding",
    "QuantLinear",
    "QuantWeight",
    "Trie",
    "add_few_row_copies",
    "adopt_fastest",
    "choose_kernel",
    "compute_dtype",
    "exact_by_default",
    "execution_device",
    "few_rows_from",
    "final_norm_of",
    "kernel_of",
    "kernel_product",
    "last_layer_of",
    "merge_projections",
    "native_identity",
    "native_notice",
    "precision_line",
    "quant_available",
    "quant_path",
    "quant_unavailable",
    "quantized_model",
    "row_classes",
    "row_values",
    "set_exact",
    "set_kernel",
    "settings_for",
    "stored_bytes",
    "table_of",
    "thread_invariant",
    "supports",
    "time_few_rows",
    "time_kernels",
    "time_linears",
    "to_host",
    "transpose_linear_weights",
    "usable",
]
