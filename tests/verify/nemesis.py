"""Faults at random, from a seed, overlapping: each fault starts at a random moment and is healed
after a random time, while others may be under way.

| fault | what | healed by |
|---|---|---|
| kill | SIGKILL of a node | a start on the same data |
| pause | SIGSTOP | SIGCONT |
| partition-one | a node cut from the others, both ways | the rules removed |
| partition-half | the nodes split in a majority and a minority | the rules removed |
| partition-oneway | one node drops what one other sends it | the rule removed |
| slow | a node's links limited to 2 Mbit/s (a queue that delays every packet) | the queue removed |
| clock | a node's wall clock jumps by -300 s to +300 s | the clock set back |
| wipe | SIGKILL, every partition of the node deleted, a start | (at once) |
| lose-unsynced | SIGKILL, each partition's newest segment cut at random, a start | (at once) |
| reassign | a partition of `queue` given another replica order or set | (lasting) |
| membership | SIGKILL of a node, then its removal from the dynamic quorum's voters (RemoveRaftVoter) | a start: it adds itself back (auto-join, AddRaftVoter) |

Constraints that keep the run meaningful (each is a promise Kafka does not make beyond):
- at most a minority of nodes is down or paused at once, so the cluster can make progress;
- a destructive fault (wipe, lose-unsynced) takes a node only when every partition of the
  workloads' topics has its full ISR and no node is down, paused or cut off, so that the data it
  destroys has live copies, as replication factor 3 promises for one lost disk;
- after a destructive fault, until the node has registered again (which takes it out of every
  ISR) and every ISR is full again, no fault takes a node away or cuts one off: until then the
  image may still count the emptied replica in sync and elect it, which no replication factor
  survives (a run once wiped two replicas of a partition and killed the third within 3 s).
"""

from __future__ import annotations

import random
import subprocess
import threading
import time
from dataclasses import dataclass, field

from history import History
from netcluster import NetCluster

FAULTS = [
    "kill",
    "pause",
    "partition-one",
    "partition-half",
    "partition-oneway",
    "slow",
    "clock",
    "wipe",
    "lose-unsynced",
    "reassign",
    "membership",
]
DESTRUCTIVE = {"wipe", "lose-unsynced"}


@dataclass
class Active:
    kind: str
    nodes: list[int]
    until: float
    detail: dict = field(default_factory=dict)


class Nemesis(threading.Thread):
    def __init__(
        self,
        cluster: NetCluster,
        history: History,
        seed: int,
        faults: list[str],
        interval_s: float,
        max_faults: int,
        full_isr,  # () -> bool: every workload partition has its full ISR
        reassign,  # (rng) -> dict | None: one reassignment, or None
    ):
        super().__init__(name="nemesis", daemon=True)
        self.c = cluster
        self.h = history
        self.rng = random.Random(seed)
        self.faults = faults
        self.interval_s = interval_s
        self.max_faults = max_faults
        self.full_isr = full_isr
        self.reassign = reassign
        self.stop_ev = threading.Event()
        self.active: list[Active] = []
        # Nodes whose data a destructive fault took, until they have registered again (which
        # takes them out of every ISR) and every ISR is full again: till then the image may
        # still count an empty replica in sync, and taking the last real copy away is beyond
        # what replication factor 3 promises.
        self.recovering: set[int] = set()
        self.counts: dict[str, int] = {f: 0 for f in faults}
        self.skipped: dict[str, int] = {}
        self.error: BaseException | None = None

    # -- bookkeeping ---------------------------------------------------------------------

    def down(self) -> set[int]:
        """Nodes killed or paused now."""
        return {
            n for a in self.active if a.kind in ("kill", "pause", "membership") for n in a.nodes
        }

    def busy(self) -> set[int]:
        return self.recovering | {n for a in self.active for n in a.nodes}

    def recovered(self) -> None:
        """Ends the recovery of nodes that registered again since their restart, once every
        ISR is full."""
        back = {i for i in self.recovering if self.c.nodes[i].registered_since_start()}
        if back and self.full_isr():
            self.recovering -= back

    def minority(self) -> int:
        return (len(self.c.nodes) - 1) // 2

    def record(self, kind: str, f: str, value: dict) -> None:
        self.h.add("nemesis", kind, f, value)

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while not self.stop_ev.wait(self.rng.uniform(0.5, 1.5) * self.interval_s):
                self.heal_due()
                if sum(self.counts.values()) >= self.max_faults:
                    continue
                self.inject(self.rng.choice(self.faults))
            self.heal_all()
        except BaseException as e:  # noqa: BLE001 - reported by the runner
            self.error = e
            self.record("info", "nemesis-crash", {"error": repr(e)})

    def heal_due(self) -> None:
        self.recovered()
        now = time.monotonic()
        for a in [a for a in self.active if a.until <= now]:
            self.heal(a)

    def heal_all(self) -> None:
        for a in list(self.active):
            self.heal(a)

    def heal(self, a: Active) -> None:
        self.active.remove(a)
        for i in a.nodes:
            node = self.c.nodes[i]
            if a.kind in ("kill", "membership"):
                node.start()
            elif a.kind == "pause":
                node.resume()
            elif a.kind.startswith("partition"):
                node.heal()
            elif a.kind == "slow":
                node.fast_link()
            elif a.kind == "clock":
                node.set_clock(0)
        # A heal of one cut must not lift another active cut of the same node.
        if a.kind.startswith("partition"):
            for other in self.active:
                if other.kind.startswith("partition"):
                    self.apply_cut(other)
        self.record("ok", "heal", {"fault": a.kind, "nodes": a.nodes})

    def remove_voter(self, i: int, directory: str | None, others: list[int]) -> str:
        """RemoveRaftVoter of node `i` through another node's controller listener; tried
        again for 15 s, since the node just killed may have been the leader."""
        deadline = time.monotonic() + 15
        answer = ""
        while time.monotonic() < deadline:
            other = self.c.nodes[self.rng.choice(others)]
            try:
                out = self.c.admin(
                    "--bootstrap-controller",
                    other.controller,
                    "--timeout-ms",
                    "10000",
                    "cluster",
                    "remove-controller",
                    "--controller-id",
                    str(i),
                    "--controller-directory-id",
                    str(directory),
                    timeout_s=20,
                )
                answer = (out.stdout + out.stderr).strip()[-200:]
                if out.returncode == 0:
                    return answer
            except subprocess.TimeoutExpired:
                answer = "no answer within 20 s"
            time.sleep(1)
        return answer

    def apply_cut(self, a: Active) -> None:
        for dst, srcs in a.detail["drops"].items():
            self.c.nodes[int(dst)].cut([self.c.nodes[s].ip for s in srcs])

    def inject(self, kind: str) -> None:
        ids = sorted(self.c.nodes)
        free = [i for i in ids if i not in self.busy()]
        hold = self.rng.uniform(2, 12)
        until = time.monotonic() + hold
        if self.recovering and kind not in ("slow", "clock", "reassign"):
            # Nothing takes a node away, or cuts one off, while a replica is empty.
            self.skipped[kind] = self.skipped.get(kind, 0) + 1
            return
        if kind in DESTRUCTIVE:
            # Slow links and moved clocks may go on; nothing that takes a node away.
            if any(a.kind not in ("slow", "clock") for a in self.active) or not self.full_isr():
                self.skipped[kind] = self.skipped.get(kind, 0) + 1
                return
            node = self.c.nodes[self.rng.choice(ids)]
            self.record("invoke", "fault", {"fault": kind, "nodes": [node.id]})
            node.kill9()
            if kind == "wipe":
                detail = {"bytes": node.wipe_partitions()}
            else:
                detail = {"bytes_cut": node.lose_unsynced(self.rng)}
            node.start()
            self.recovering.add(node.id)
            self.counts[kind] += 1
            self.record("ok", "fault", {"fault": kind, "nodes": [node.id], **detail})
            return
        if kind in ("kill", "pause"):
            if len(self.down()) >= self.minority() or not free:
                self.skipped[kind] = self.skipped.get(kind, 0) + 1
                return
            i = self.rng.choice(free)
            self.record("invoke", "fault", {"fault": kind, "nodes": [i], "for_s": round(hold, 1)})
            if kind == "kill":
                self.c.nodes[i].kill9()
            else:
                self.c.nodes[i].pause()
            self.active.append(Active(kind, [i], until))
        elif kind.startswith("partition"):
            if any(a.kind.startswith("partition") for a in self.active):
                self.skipped[kind] = self.skipped.get(kind, 0) + 1
                return
            shuffled = ids[:]
            self.rng.shuffle(shuffled)
            drops: dict[int, list[int]] = {}
            if kind == "partition-one":
                lone, rest = shuffled[0], shuffled[1:]
                drops[lone] = rest
                for r in rest:
                    drops[r] = [lone]
            elif kind == "partition-half":
                k = self.minority()
                small, big = shuffled[:k], shuffled[k:]
                for s in small:
                    drops[s] = big
                for b in big:
                    drops[b] = small
            else:
                drops[shuffled[0]] = [shuffled[1]]
            a = Active(kind, sorted(drops), until, {"drops": drops})
            self.record(
                "invoke",
                "fault",
                {
                    "fault": kind,
                    "drops": {str(k): v for k, v in drops.items()},
                    "for_s": round(hold, 1),
                },
            )
            self.apply_cut(a)
            self.active.append(a)
        elif kind == "slow":
            if not free:
                return
            i = self.rng.choice(free)
            self.record("invoke", "fault", {"fault": kind, "nodes": [i], "for_s": round(hold, 1)})
            self.c.nodes[i].slow_link()
            self.active.append(Active(kind, [i], until))
        elif kind == "clock":
            if not self.c.clock_faults or not free:
                self.skipped[kind] = self.skipped.get(kind, 0) + 1
                return
            i = self.rng.choice(free)
            jump = self.rng.choice([-1, 1]) * self.rng.randint(5, 300)
            self.record(
                "invoke",
                "fault",
                {"fault": kind, "nodes": [i], "jump_s": jump, "for_s": round(hold, 1)},
            )
            self.c.nodes[i].set_clock(jump)
            self.active.append(Active(kind, [i], until))
        elif kind == "membership":
            if not self.c.dynamic_quorum or len(self.down()) >= self.minority() or not free:
                self.skipped[kind] = self.skipped.get(kind, 0) + 1
                return
            i = self.rng.choice(free)
            node = self.c.nodes[i]
            directory = node.directory_id()
            self.record("invoke", "fault", {"fault": kind, "nodes": [i], "for_s": round(hold, 1)})
            node.kill9()
            answer = self.remove_voter(i, directory, [j for j in ids if j != i])
            self.active.append(Active(kind, [i], until, {"removed": answer}))
            self.counts[kind] += 1
            self.record("ok", "fault", {"fault": kind, "nodes": [i], "removed": answer})
            return
        elif kind == "reassign":
            detail = self.reassign(self.rng)
            if detail is None:
                self.skipped[kind] = self.skipped.get(kind, 0) + 1
                return
            self.record("ok", "fault", {"fault": kind, **detail})
            self.counts[kind] += 1
            return
        self.counts[kind] += 1
        self.record("ok", "fault", {"fault": kind})
