"""Record the cassette that ``geval-spec init`` ships with its example spec.

The example spec (``geval_spec/cli/scaffold/spec.yaml``) is run, through the real command line, against the
local test server (``tests/openai_server.py``) answering as a scripted stand-in judge, and the run is
exported with ``geval-spec export --cassette``. The stand-in is not a language model: it scores a summary by
the share of its content words that occur in the article (0.6 or less -> 1, all of them -> 5), with a
distribution over the scores around that value as its logprobs, and says so in its reasoning. It is a weak
judge on purpose (it misses a contradiction phrased with one new word) and its answers are only there so that
``run --replay`` works offline in a new project.

The server's address and client are added to a copy of the spec: neither enters a request's hash nor the
judging fingerprint, so the cassette answers the spec exactly as ``init`` writes it.

Usage: ``python tests/make_scaffold_cassette.py [OUT]`` (default: the packaged
``geval_spec/cli/scaffold/cassette.jsonl``). ``tests/test_init.py`` records it again and checks that the
packaged file holds the same requests and answers.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCAFFOLD = ROOT / "geval_spec" / "cli" / "scaffold"
sys.path.insert(0, str(HERE))

from openai_server import FakeOpenAI, ServerConfig, candidate_of  # noqa: E402

STOP = frozenset("a an the and or of to in on at for from by with is are was were be been will can may its it this "
                 "that which who after before than then there their they them some any all each every because "
                 "during instead".split())


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+|\d+", text.lower())


def overlap_judge(body: dict[str, Any], index: int) -> dict[str, Any]:
    """The stand-in judge: word overlap between the candidate and the source, as a G-Eval style answer."""
    prompt = body["messages"][-1]["content"]
    source = re.search(r"Source:\n(.*?)\n\nCandidate:", prompt, re.S)
    article = set(_words(source.group(1) if source else ""))
    content = [w for w in _words(candidate_of(body)) if w not in STOP and (len(w) > 2 or w.isdigit())]
    missing = [w for w in content if w not in article]
    share = 1 - len(missing) / max(1, len(content))
    value = max(1.0, min(5.0, 1 + 4 * (share - 0.6) / 0.4))
    weights = {s: math.exp(-((s - value) ** 2) / (2 * 0.6 ** 2)) for s in range(1, 6)}
    total = sum(weights.values())
    distribution = {s: round(w / total, 4) for s, w in weights.items() if w / total >= 0.001}
    score = max(distribution, key=lambda s: distribution[s])
    reasoning = (f"Stand-in judge, not a language model: {len(content) - len(missing)} of {len(content)} content "
                 "words of the summary occur in the article.")
    answer = {"reasoning": reasoning, "errors": [f"not in the article: {w}" for w in missing], "score": score}
    return {"content": json.dumps(answer), "score": score, "distribution": distribution}


def _cli(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run([sys.executable, "-m", "geval_spec", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)
    if proc.returncode not in (0, 1):  # 1: the example's gate failed, which is not an error here
        raise SystemExit(f"geval-spec {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def record(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "specs" / "data").mkdir(parents=True)
        shutil.copy(SCAFFOLD / "summaries.jsonl", project / "specs" / "data" / "summaries.jsonl")
        with FakeOpenAI(ServerConfig(judge=overlap_judge)) as server:
            spec = (SCAFFOLD / "spec.yaml").read_text(encoding="utf-8")
            marker = "  top_logprobs: 20\n"
            assert marker in spec, "the example spec's judge block changed: update make_scaffold_cassette.py"
            spec = spec.replace(marker, f"{marker}  api_base: {server.base_url}\n  client: openai-http\n")
            (project / "specs" / "summary-consistency.yaml").write_text(spec, encoding="utf-8")
            run_id = _cli(project, "run", "summary-consistency").strip().splitlines()[-1]
        _cli(project, "export", run_id, "--cassette", str(out.resolve()))


if __name__ == "__main__":
    record(Path(sys.argv[1]) if len(sys.argv) > 1 else SCAFFOLD / "cassette.jsonl")
