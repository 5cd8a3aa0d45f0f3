"""How a finished take holds up, segment by segment: the marathon's quality columns (bench/
marathon.py) for a take the app wrote and saved, read back from its project. Per segment of
2,000 tokens: Distinct-1..4, the share of 4-grams that repeat earlier text, chatter, and the
surprise of the plain model (mean nats a token given the 512 tokens before; the take's first
segment reads after the end of its document's text before the take).

Run from the top of the checkout:
`.venv/bin/python -m experiments.take_quality PROJECT [--take ID] [--segment 2000] [--json F]`
(the project's longest take by default)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from swiftwriter.bench import marathon


def segments(tokens: list[int], size: int, decode, score=None, before: list[int] = ()) -> list:
    """One row per segment of `size` tokens (the last may be shorter): the marathon's own
    quality columns (`marathon.segment_row`, untimed), the chatter as its rate; `score(before,
    tokens)` gives its surprise when the model is at hand."""
    rows = []
    for index, start in enumerate(range(0, len(tokens), size)):
        full = marathon.segment_row(tokens, [], [], index, size, decode)
        row = {key: full[key] for key in ("segment", "start", "end", "repetition_4")}
        row.update({f"distinct_{n}": full[f"distinct_{n}"] for n in range(1, 5)})
        row["chatter"] = full["chatter"]["rate"]
        if score is not None:
            context = (list(before) + tokens[:start])[-marathon.SURPRISE_CONTEXT :]
            row["surprise"] = round(score(context, tokens[start : row["end"]]), 3)
        rows.append(row)
    return rows


def summary(rows: list[dict]) -> dict:
    """The lowest Distinct-4, the highest chatter and surprise, and the segments below 0.8."""
    d4 = [r["distinct_4"] for r in rows if r["distinct_4"] is not None]
    nats = [r["surprise"] for r in rows if r.get("surprise") is not None]
    return {
        "segments": len(rows),
        "min_distinct_4": min(d4) if d4 else None,
        "segments_distinct_4_below_0_8": sum(d < 0.8 for d in d4),
        "max_chatter": max(r["chatter"] for r in rows) if rows else None,
        "surprise_first_max": (nats[0], max(nats)) if nats else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("project", type=Path)
    ap.add_argument("--take", type=int, default=None, help="generation id (default: the longest)")
    ap.add_argument("--segment", type=int, default=marathon.SEGMENT)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from swiftwriter.engine.decoding.textgen import encode
    from swiftwriter.modelstore import loader, registry
    from swiftwriter.store import Project

    with Project.open(args.project, readonly=True) as project:
        takes = project.generations(with_tokens=True)
        if not takes:
            raise SystemExit(f"{args.project} holds no take")
        take = (
            project.generation(args.take)
            if args.take is not None
            else max(takes, key=lambda g: g.n_tokens)
        )
        document = project.document(take.doc_id).text
    loaded = loader.load(registry.resolve(None), device="cpu", dtype="auto", with_drafter=False)
    tokenizer = loaded.tokenizer
    tokens = list(take.token_ids or encode(tokenizer, take.text))
    head = document.split(take.text[:200])[0] if take.text[:200] in document else ""
    before = encode(tokenizer, head)[-marathon.SURPRISE_CONTEXT :]

    def score(context, own):
        return marathon.surprise(loaded.model, [], context, own)

    rows = segments(tokens, args.segment, tokenizer.decode, score, before)
    for row in rows:
        d = "/".join(f"{row[f'distinct_{n}']:.2f}" for n in range(1, 5))
        print(f"{row['start']:>6}-{row['end']:<6} distinct {d}  rep4 {row['repetition_4']:.2f}"
              f"  chatter {row['chatter']:.3f}  surprise {row['surprise']:.2f}", flush=True)  # fmt: skip
    result = {"take": take.id, "tokens": len(tokens), "summary": summary(rows), "rows": rows}
    print(json.dumps(result["summary"]))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
