"""Regenerate the synthetic FaithBench-like fixture in this folder (seeded; run from anywhere).

    python tests/data/external/make_fixture.py

Nothing here is real data: classes, labellers, detectors and scores are drawn from a seeded
generator so that the tests have several labellers (some items with two, most with three),
multi-class labels, a score-only detector, unscored verdicts and an item without verdict.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLASSES = ["consistent", "benign", "questionable", "unwanted"]  # least to most severe
LABELLERS = ["ann-a", "ann-b", "ann-c"]


def main() -> None:
    rng = random.Random(14)
    labels, verdicts = [], []
    for i in range(1, 41):
        tid = f"fb-{i:03d}"
        truth = rng.choices(range(4), weights=[4, 2, 2, 3])[0]
        who = LABELLERS if i <= 30 else (LABELLERS[:2] if i % 2 else LABELLERS[1:])
        for n, labeller in enumerate(who):
            seen = truth if rng.random() < 0.7 else min(3, max(0, truth + rng.choice([-1, 1])))
            if len(who) == 2 and n == 1 and i % 3 == 0:  # two labellers on opposite sides: a majority tie
                seen = 3 if truth <= 1 else 0
            labels.append({"trajectory_id": tid, "axis": "faithfulness", "category": CLASSES[seen], "labeler": labeller})
        good = truth <= 1  # consistent or benign: the summary is faithful
        # a score-only detector: probability that the summary is faithful
        score = min(1.0, max(0.0, (0.7 if good else 0.35) + rng.gauss(0, 0.2)))
        verdicts.append({"trajectory_id": tid, "axis": "faithfulness", "score": round(score, 3), "judge": "hhem-2.1"})
        # an LLM judge: pass/fail, a few replies that did not parse
        if i in (5, 17, 29):
            verdicts.append({"trajectory_id": tid, "axis": "faithfulness", "verdict": None,
                             "unscored_reason": "parse_failure", "judge": "gpt-4o-judge"})
        else:
            right = rng.random() < 0.8
            verdicts.append({"trajectory_id": tid, "axis": "faithfulness", "judge": "gpt-4o-judge",
                             "verdict": "pass" if good == right else "fail"})
        # a weaker detector: one timeout, one item it never saw
        if i == 40:
            continue
        if i == 11:
            verdicts.append({"trajectory_id": tid, "axis": "faithfulness", "unscored_reason": "timeout",
                             "judge": "minicheck-7b"})
        else:
            right = rng.random() < 0.65
            verdicts.append({"trajectory_id": tid, "axis": "faithfulness", "judge": "minicheck-7b",
                             "verdict": "pass" if good == right else "fail"})
    rng.shuffle(verdicts)  # judges interleaved, as a merged file would be
    (HERE / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labels), encoding="utf-8")
    (HERE / "verdicts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in verdicts), encoding="utf-8")


if __name__ == "__main__":
    main()
