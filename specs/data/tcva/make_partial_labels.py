"""Write the demo data of the estimate: SummEval consistency with 40 random human labels kept.

    python specs/data/tcva/make_partial_labels.py

reads summeval-consistency.jsonl and writes summeval-consistency-40-labels.jsonl:
the same records, with ``human_score`` emptied (null) except on 40 cases drawn
uniformly at random (a fixed seed), and every rater's score kept in
``human_score_all``, the truth the estimate is checked against (the spec
summeval-consistency-40-labels does not read it). The draw uses only the
standard library, so the file is the same on every machine.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABELS = 40
SEED = 17


def main() -> None:
    rows = [json.loads(line) for line in (HERE / "summeval-consistency.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    kept = set(random.Random(SEED).sample(range(len(rows)), LABELS))
    out = []
    for i, row in enumerate(rows):
        row = dict(row)
        row["human_score_all"] = row["human_score"]
        if i not in kept:
            row["human_score"] = None
        out.append(json.dumps(row, ensure_ascii=False))
    (HERE / "summeval-consistency-40-labels.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"summeval-consistency-40-labels.jsonl: {len(rows)} cases, {LABELS} labelled (seed {SEED})")


if __name__ == "__main__":
    main()
