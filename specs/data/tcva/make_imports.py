"""Convert the TCVA release's recorded judgments into geval-spec import files.

    python specs/data/tcva/make_imports.py

reads reference/<dataset>_tcva_scores.json and writes <spec>.verdicts.jsonl,
one import line per case:

- a failed judge call (score -1, no verdicts) -> {"case_id", "error"};
- no statements found (scores 0, no verdicts)  -> {"case_id", "verdicts": []};
- otherwise the verdicts, with their reason and supporting passage.

The release records no statement text, so "statement" is left out.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATASETS = {"summeval": "summeval-consistency", "summeval_rel": "summeval-relevance", "usr": "usr-faithfulness"}


def lines(records: list[dict]) -> list[str]:
    out = []
    for rec in records:
        if not rec["verdicts"]:
            if all(v == -1 for v in rec["tcva_scores"].values()):
                out.append({"case_id": rec["id"], "error": "judge call failed (the release records score -1)"})
            else:
                out.append({"case_id": rec["id"], "verdicts": []})
            continue
        out.append({"case_id": rec["id"], "verdicts": [
            {"verdict": v["verdict"], "reason": v.get("reason", ""), "support": v.get("support", "")}
            for v in rec["verdicts"]]})
    return [json.dumps(x, ensure_ascii=False, sort_keys=True) for x in out]


def main() -> None:
    for source, spec in DATASETS.items():
        records = json.loads((HERE / "reference" / f"{source}_tcva_scores.json").read_text(encoding="utf-8"))
        (HERE / f"{spec}.verdicts.jsonl").write_text("\n".join(lines(records)) + "\n", encoding="utf-8")
        print(f"{spec}.verdicts.jsonl: {len(records)} cases")


if __name__ == "__main__":
    main()
