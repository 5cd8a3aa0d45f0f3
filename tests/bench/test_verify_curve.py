"""`bench --verify-curve`: the runs' own pass over k rows against one row, per dtype and
context (measured here on a tiny model: the table and its ratios, never a speed claim)."""

from __future__ import annotations

from swiftwriter.bench import verifycost


def test_the_curve_times_every_size_and_the_table_shows_ratios_to_one_row(tiny_llama):
    costs = verifycost.curve(tiny_llama, context=24, ks=(1, 2, 8), reps=2)
    assert list(costs) == [1, 2, 8]
    assert all(seconds > 0 for seconds in costs.values())
    table = verifycost.format_curve({"float32": {24: costs}})
    header, row = table.splitlines()
    assert header.split()[-3:] == ["k=1", "k=2", "k=8"]
    cells = row.split()
    assert cells[:2] == ["float32", "24"]
    assert cells[3] == "1.00x"
    assert cells[4:] == [f"{costs[k] / costs[1]:.2f}x" for k in (2, 8)]


def test_the_curve_is_measured_where_long_takes_spend_their_steps(tiny_llama):
    """After 1,000, 4,000 and 8,000 cached tokens, the ones the model's context holds with
    room for the largest pass (a full window is where a long take writes most)."""
    config = tiny_llama.config
    old = config.max_position_embeddings
    try:
        config.max_position_embeddings = 8192
        assert verifycost.curve_contexts(tiny_llama) == [1000, 4000, 8000]
        config.max_position_embeddings = 4000
        assert verifycost.curve_contexts(tiny_llama) == [1000]
    finally:
        config.max_position_embeddings = old
