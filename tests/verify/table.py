#!/usr/bin/env python3
"""The table of runs for docs/RELIABILITY.md, from the runs' summary.json files:

python3 tests/verify/table.py target/verify/campaign-*/run*/summary.json
"""

from __future__ import annotations

import json
import sys
from collections import Counter

FAULT_SHORT = {
    "kill": "kill",
    "pause": "pause",
    "partition-one": "part-1",
    "partition-half": "part-half",
    "partition-oneway": "part-1way",
    "slow": "slow",
    "clock": "clock",
    "wipe": "wipe",
    "lose-unsynced": "lose-tail",
    "reassign": "reassign",
    "membership": "voters",
}


def main(paths: list[str]) -> int:
    runs = [json.load(open(p)) for p in paths]
    if not runs:
        print("no runs")
        return 1
    kinds = list(FAULT_SHORT)
    print(
        "| run | nodes | seed | faults | "
        + " | ".join(FAULT_SHORT[k] for k in kinds)
        + " | sends acked | records read | txns committed / aborted | anomalies |"
    )
    print("|---:|---:|---:|---:|" + "---:|" * len(kinds) + "---:|---:|---:|---|")
    total_faults: Counter = Counter()
    totals = Counter()
    for i, r in enumerate(runs):
        f = r["faults"]
        total_faults.update(f)
        st = r["stats"]
        # The run's own tally (run.py: checkers, the copy's exactly-once, the admin topics,
        # duplicates split by producer epoch), and what else went wrong.
        bad = dict(r.get("anomaly_counts") or {k: v for k, v in r["counts"].items() if v})
        for k in ("crashed", "stuck", "unfinished_final_reads", "notes"):
            if r.get(k):
                bad[k] = len(r[k])
        totals["faults"] += r["faults_total"]
        totals["acked"] += st["sends_ok"]
        totals["read"] += st["final_read_records"]
        totals["committed"] += st["txns_committed"]
        totals["aborted"] += st["txns_aborted"]
        totals["bad"] += sum(bad.values())
        print(
            f"| {i} | {r['nodes']} | {r['seed']} | {r['faults_total']} | "
            + " | ".join(str(f.get(k, 0)) for k in kinds)
            + f" | {st['sends_ok']:,} | {st['final_read_records']:,} | {st['txns_committed']:,} / {st['txns_aborted']:,} | "
            + (", ".join(f"{k} {v}" for k, v in bad.items()) or "none")
            + " |"
        )
    print(
        f"| all | | | {totals['faults']} | "
        + " | ".join(str(total_faults.get(k, 0)) for k in kinds)
        + f" | {totals['acked']:,} | {totals['read']:,} | {totals['committed']:,} / {totals['aborted']:,} | "
        + ("none" if not totals["bad"] else f"{totals['bad']}")
        + " |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
