"""Evaluate the Dutch checks on the labelled sentences in sentences.jsonl.

    .venv/bin/python plugins/nl/eval/evaluate.py

The sentences were written for these tests: formal, informal and mixed
address, sentences without address (with traps: "om 20 u", "U2", quoted
speech, French "je ne sais quoi", "het woord je"), wrongly split and correct
compounds, legitimate word pairs, and Flemish usage. Prints:

- formality: precision and recall of flagged sentences, for a spec that
  demands u (a sentence should be flagged when it is informal or mixed) and
  one that demands je (formal or mixed), pooled;
- compounds: precision and recall of flagged word pairs;
- Flemish lexicon terms flagged (must be 0).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from geval_spec.spec.sections import Language
from geval_spec_nl import check

HERE = Path(__file__).resolve().parent


def load() -> list[dict]:
    return [json.loads(line) for line in (HERE / "sentences.jsonl").read_text(encoding="utf-8").splitlines() if line]


def evaluate(rows: list[dict], ratio: float = 20.0) -> dict:
    tp = fp = fn = 0
    for wanted, violating in (("u", {"informal", "mixed"}), ("je", {"formal", "mixed"})):
        for row in rows:
            lang = Language(code=row["variant"], formality=wanted, compounds=False)
            flagged = any(f.kind == "formality" for f in check(lang, row["text"]))
            should = row["formality"] in violating
            tp += flagged and should
            fp += flagged and not should
            fn += should and not flagged
    c_tp = c_fp = c_fn = 0
    flemish_flagged = []
    wrong = []
    for row in rows:
        lang = Language(code=row["variant"], formality="any", compounds=True, compound_ratio=ratio)
        findings = check(lang, row["text"])
        got = {f.text for f in findings if f.kind == "compound"}
        want = set(row["compounds"])
        c_tp += len(got & want)
        c_fp += len(got - want)
        c_fn += len(want - got)
        if got != want:
            wrong.append((row["text"], sorted(got), sorted(want)))
        for term in row["flemish"]:
            start = row["text"].lower().find(term)
            for f in check(Language(code=row["variant"], formality="u", compounds=True, compound_ratio=ratio),
                           row["text"]):
                if start >= 0 and f.start < start + len(term) and start < f.end:
                    flemish_flagged.append((term, f.message))
    return {"sentences": len(rows),
            "formality": {"precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / (tp + fn) if tp + fn else 1.0,
                          "tp": tp, "fp": fp, "fn": fn},
            "compounds": {"precision": c_tp / (c_tp + c_fp) if c_tp + c_fp else 1.0,
                          "recall": c_tp / (c_tp + c_fn) if c_tp + c_fn else 1.0, "tp": c_tp, "fp": c_fp, "fn": c_fn},
            "flemish_flagged": flemish_flagged, "compound_mistakes": wrong}


def main() -> None:
    result = evaluate(load())
    f, c = result["formality"], result["compounds"]
    print(f"{result['sentences']} labelled Dutch sentences")
    print(f"formality: precision {f['precision']:.3f}, recall {f['recall']:.3f} "
          f"(tp {f['tp']}, fp {f['fp']}, fn {f['fn']}; specs demanding u and je, pooled)")
    print(f"compounds: precision {c['precision']:.3f}, recall {c['recall']:.3f} (tp {c['tp']}, fp {c['fp']}, fn {c['fn']})")
    print(f"Flemish lexicon terms flagged: {len(result['flemish_flagged'])}")
    for text, got, want in result["compound_mistakes"]:
        print(f"  compound miss: {text!r}: flagged {got}, expected {want}", file=sys.stderr)


if __name__ == "__main__":
    main()
