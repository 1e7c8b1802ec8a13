#!/usr/bin/env python3
"""One verification run: a cluster of `strata` nodes in network namespaces, the workloads'
clients recording a history, faults from a seed, then the checkers over the history.

    target/venv/bin/python tests/verify/run.py --nodes 3 --duration 120 --seed 7
    target/venv/bin/python tests/verify/run.py --replay target/verify/<run>    # same seed, args
    python3 tests/verify/checkers.py target/verify/<run>/history.jsonl          # check again

Needs root (network namespaces, iptables, tc) and the release binary. Each run writes
target/verify/<UTC time>-s<seed>/: run.json (the arguments and seed), summary.json, and, when
an anomaly is found or --keep is given, history.jsonl and each node's log and data. Exits 1
when any checker reports an anomaly or the run could not be completed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
REPO = HERE.parents[1]

import batches  # noqa: E402
import checkers  # noqa: E402
import nemesis as nem  # noqa: E402
import workloads as wl  # noqa: E402
from history import History  # noqa: E402
from netcluster import NetCluster  # noqa: E402

WORKLOADS = ["queue", "txn", "admin"]
QUEUE_PARTITIONS = 4
TXN_PARTITIONS = 3


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=3, choices=[3, 5])
    ap.add_argument("--duration", type=float, default=120, help="seconds of faults")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--faults", default=",".join(nem.FAULTS))
    ap.add_argument("--interval", type=float, default=3.0, help="mean seconds between faults")
    ap.add_argument("--max-faults", type=int, default=10**9)
    ap.add_argument("--rate", type=float, default=150.0, help="sends per second per producer")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the history and data of a clean run")
    ap.add_argument(
        "--known",
        default="",
        help="checkers whose findings are reported but do not fail the run: open findings "
        "recorded in docs/RELIABILITY.md (comma-separated)",
    )
    ap.add_argument(
        "--replay", type=Path, default=None, help="a run directory: its seed and arguments"
    )
    args = ap.parse_args(argv)
    if args.replay is not None:
        saved = json.loads((args.replay / "run.json").read_text())["args"]
        for k, v in saved.items():
            if k not in ("out", "replay", "keep"):
                setattr(args, k, v)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    return args


class Run:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self._admin = None
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        self.out = args.out or REPO / "target" / "verify" / f"{stamp}-s{args.seed}"
        self.out.mkdir(parents=True, exist_ok=True)
        self.workloads = [w for w in args.workloads.split(",") if w]
        self.faults = [f for f in args.faults.split(",") if f]
        for f in self.faults:
            if f not in nem.FAULTS:
                raise SystemExit(f"unknown fault {f}; known: {', '.join(nem.FAULTS)}")
        (self.out / "run.json").write_text(
            json.dumps(
                {
                    "args": {
                        k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                    }
                },
                indent=1,
            )
        )
        binary = Path(os.environ.get("STRATA_BIN", REPO / "target" / "release" / "strata"))
        self.cluster = NetCluster(
            self.out / "cluster",
            args.nodes,
            binary,
            settings={
                "default.replication.factor": "3",
                "min.insync.replicas": "2",
                "offsets.topic.num.partitions": "6",
                "transaction.state.log.num.partitions": "6",
                "group.initial.rebalance.delay.ms": "0",
            },
            clock_faults="clock" in self.faults,
            dynamic_quorum="membership" in self.faults,
        )
        self.history = History(self.out / "history.jsonl")
        handler = logging.FileHandler(self.out / "clients.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
        for name in ("verify.clients", "kafka"):
            lg = logging.getLogger(name)
            lg.addHandler(handler)
            # DEBUG for librdkafka: the idempotent producers' eos log comes at that level.
            lg.setLevel(logging.DEBUG if name == "verify.clients" else logging.WARNING)
            lg.propagate = False
        self.stop_producers = threading.Event()
        self.stop_consumers = threading.Event()
        self.producers: list[wl.Worker] = []
        self.consumers: list[wl.Worker] = []
        self.admin_worker: wl.AdminWorker | None = None
        self._kp_admin = None
        self.notes: list[str] = []
        self.last_short_isr = ""

    def log(self, msg: str) -> None:
        print(f"[{self.history.elapsed():7.1f}s] {msg}", flush=True)

    # -- cluster state ---------------------------------------------------------------------

    def admin(self):
        """The run's one admin client. None is destroyed while the process lives: librdkafka's
        destroy of a client can block without end after a run of faults (seen: an admin
        client's rd_kafka_destroy joining its main thread for minutes, when each call made
        and dropped a client of its own), and the process ends with os._exit (main)."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(
                {
                    "bootstrap.servers": self.cluster.bootstrap(),
                    "error_cb": wl.quiet,
                    "logger": wl.CLIENT_LOG,
                }
            )
            _KEPT.append(self._admin)
        return self._admin

    def topics(self) -> list[str]:
        t = []
        if "queue" in self.workloads:
            t.append(wl.QUEUE)
        if "txn" in self.workloads:
            t += [wl.TXN_IN, wl.TXN_OUT]
        return t

    def full_isr(self) -> bool:
        """Every node registered, and every partition of the workloads' topics and the
        internal topics led, with its whole replica set in the ISR."""
        try:
            md = self.admin().list_topics(timeout=5)
        except Exception:  # noqa: BLE001
            return False
        if len(md.brokers) != len(self.cluster.nodes):
            self.last_short_isr = f"brokers registered: {sorted(md.brokers)}"
            return False
        for name in self.topics() + ["__consumer_offsets", "__transaction_state"]:
            t = md.topics.get(name)
            if t is None:
                continue
            for p in t.partitions.values():
                if p.leader < 0 or sorted(p.isrs) != sorted(p.replicas):
                    self.last_short_isr = (
                        f"{name}-{p.id}: leader {p.leader}, replicas {p.replicas}, ISR {p.isrs}"
                    )
                    return False
        return True

    def wait_healthy(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.full_isr():
                return True
            time.sleep(1)
        return False

    def reassign(self, rng: random.Random) -> dict | None:
        """`reassign_once`, bounded by 30 s: kafka-python's admin client can wait for a node
        without end."""
        out: list = []
        t = threading.Thread(target=lambda: out.append(self.reassign_once(rng)), daemon=True)
        t.start()
        t.join(30)
        if t.is_alive():
            self._kp_admin = None
            return {"error": "no answer within 30 s"}
        return out[0]

    def reassign_once(self, rng: random.Random) -> dict | None:
        """Gives a random partition of `queue` another replica list: another order (a new
        preferred leader) on three nodes, another set of three on five."""
        if "queue" not in self.workloads:
            return None
        from kafka import KafkaAdminClient
        from kafka.protocol.admin import AlterPartitionReassignmentsRequest_v0

        try:
            md = self.admin().list_topics(wl.QUEUE, timeout=5)
            p = rng.randrange(QUEUE_PARTITIONS)
            before = list(md.topics[wl.QUEUE].partitions[p].replicas)
            ids = sorted(self.cluster.nodes)
            after = rng.sample(ids, 3)
            while after == before:
                after = rng.sample(ids, 3)
            if self._kp_admin is None:
                self._kp_admin = KafkaAdminClient(
                    bootstrap_servers=self.cluster.bootstrap().split(","), request_timeout_ms=15000
                )
            req = AlterPartitionReassignmentsRequest_v0(
                timeout_ms=30000, topics=[(wl.QUEUE, [(p, after, {})], {})], tags={}
            )
            resp = self._kp_admin.send_request(req)
            errors = [e for _, parts, _ in resp.responses for _, e, _, _ in parts] + [
                resp.error_code
            ]
            return {"partition": p, "from": before, "to": after, "error": max(errors)}
        except Exception as e:  # noqa: BLE001 - the cluster may be faulted
            try:
                if self._kp_admin is not None:
                    self._kp_admin.close()
            except Exception:  # noqa: BLE001
                pass
            self._kp_admin = None
            return {"error": repr(e)[:200]}

    def create_topics(self) -> None:
        from confluent_kafka.admin import NewTopic

        want = []
        if "queue" in self.workloads:
            want.append(
                NewTopic(wl.QUEUE, QUEUE_PARTITIONS, 3, config={"min.insync.replicas": "2"})
            )
        if "txn" in self.workloads:
            want += [
                NewTopic(wl.TXN_IN, TXN_PARTITIONS, 3, config={"min.insync.replicas": "2"}),
                NewTopic(wl.TXN_OUT, TXN_PARTITIONS, 3, config={"min.insync.replicas": "2"}),
            ]
        if not want:
            return
        admin = self.admin()
        for name, fut in admin.create_topics(want, request_timeout=30).items():
            fut.result(timeout=60)
        if not self.wait_healthy(60):
            raise RuntimeError("topics not led with full ISRs within 60 s")

    # -- workloads -------------------------------------------------------------------------

    def start_workloads(self) -> None:
        b = self.cluster.bootstrap()
        h = self.history
        seed = self.args.seed
        rate = self.args.rate
        if "queue" in self.workloads:
            self.producers += [
                wl.CkProducer(
                    "ck-idem",
                    h,
                    b,
                    self.stop_producers,
                    seed + 1,
                    idempotent=True,
                    partitions=QUEUE_PARTITIONS,
                    rate=rate,
                ),
                wl.CkProducer(
                    "ck-plain",
                    h,
                    b,
                    self.stop_producers,
                    seed + 2,
                    idempotent=False,
                    partitions=QUEUE_PARTITIONS,
                    rate=rate,
                ),
                wl.KpProducer(
                    "kp-idem",
                    h,
                    b,
                    self.stop_producers,
                    seed + 3,
                    partitions=QUEUE_PARTITIONS,
                    rate=rate / 2,
                ),
            ]
            self.consumers += [
                wl.CkGroupConsumer(
                    "ck-group-1",
                    h,
                    b,
                    self.stop_consumers,
                    seed + 4,
                    group="queue-group",
                    topic=wl.QUEUE,
                ),
                wl.CkGroupConsumer(
                    "ck-group-2",
                    h,
                    b,
                    self.stop_consumers,
                    seed + 5,
                    group="queue-group",
                    topic=wl.QUEUE,
                ),
                wl.KpAssignedConsumer(
                    "kp-assigned",
                    h,
                    b,
                    self.stop_consumers,
                    seed + 6,
                    group="queue-assigned",
                    topic=wl.QUEUE,
                    partitions=QUEUE_PARTITIONS,
                ),
            ]
        if "txn" in self.workloads:
            txids = ["tx-1", "tx-2"]
            self.producers += [
                wl.TxnProducer(
                    t, h, b, self.stop_producers, seed + 10 + i, partitions=TXN_PARTITIONS, rate=5
                )
                for i, t in enumerate(txids)
            ]
            self.producers.append(
                wl.Fencer(
                    "fencer",
                    h,
                    b,
                    self.stop_producers,
                    seed + 20,
                    txids=txids,
                    partitions=TXN_PARTITIONS,
                    every_s=15,
                )
            )
            self.producers.append(
                wl.CkProducer(
                    "feed",
                    h,
                    b,
                    self.stop_producers,
                    seed + 21,
                    idempotent=True,
                    partitions=TXN_PARTITIONS,
                    rate=rate / 3,
                    topic=wl.TXN_IN,
                )
            )
            self.consumers += [
                wl.Transformer("ctp", h, b, self.stop_consumers, seed + 22),
                wl.CkAssignedReader(
                    "rc-reader",
                    h,
                    b,
                    self.stop_consumers,
                    seed + 23,
                    topic=wl.TXN_OUT,
                    partitions=TXN_PARTITIONS,
                    isolation="read_committed",
                ),
            ]
        if "admin" in self.workloads:
            self.admin_worker = wl.AdminWorker(
                "admin", h, b, self.stop_producers, seed + 30, every_s=4
            )
            self.producers.append(self.admin_worker)
        for w in self.producers + self.consumers:
            w.start()

    def classify_duplicates(self, events) -> dict:
        """The duplicated values of idempotent and transactional producers, split by the
        producer epochs of the batches that hold their copies in the nodes' logs."""
        idx = checkers.analyze(events)
        dups = {}
        for vid, positions in idx.id_positions.items():
            send = idx.sends.get(vid)
            if len(positions) < 2 or send is None or not (send.idempotent or send.txn):
                continue
            dups[vid] = [list(pos) for pos, _ in sorted(positions.items(), key=lambda x: x[1])]
        return batches.classify_duplicates(dups, [n.data for n in self.cluster.nodes.values()])

    def dump_stacks(self, workers: list) -> None:
        """Where each stuck worker is: its thread's Python stack, into stuck-stacks.txt (a
        client call that does not return in its timeout shows which call)."""
        if not workers:
            return
        frames = sys._current_frames()
        with open(self.out / "stuck-stacks.txt", "w") as f:
            for w in workers:
                frame = frames.get(w.ident)
                f.write(f"== {w.proc}\n")
                if frame is not None:
                    f.write("".join(traceback.format_stack(frame)))

    def ctp_committed(self) -> dict[int, int] | None:
        """The transformer group's committed offsets of txn-in, by partition (None if they
        cannot be read now)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        try:
            got = (
                self.admin()
                .list_consumer_group_offsets([ConsumerGroupTopicPartitions("ctp")])["ctp"]
                .result(timeout=10)
            )
        except Exception:  # noqa: BLE001
            return None
        return {t.partition: t.offset for t in got.topic_partitions if t.topic == wl.TXN_IN}

    def ctp_caught_up(self) -> bool:
        """The transformer's committed offsets reached txn-in's ends."""
        from confluent_kafka import TopicPartition

        committed = self.ctp_committed()
        if committed is None:
            return False
        try:
            c = wl.Consumer(
                {
                    "bootstrap.servers": self.cluster.bootstrap(),
                    "group.id": "ends-unused",
                    "error_cb": wl.quiet,
                }
            )
            try:
                for p in range(TXN_PARTITIONS):
                    _, hi = c.get_watermark_offsets(
                        TopicPartition(wl.TXN_IN, p), timeout=10, cached=False
                    )
                    if committed.get(p, -1) < hi:
                        return False
            finally:
                c.close()
            return True
        except Exception:  # noqa: BLE001
            return False

    # -- checks beyond the history's -------------------------------------------------------

    def check_eos(self, finals: dict, committed: dict[int, int], progressed: bool) -> dict:
        """Every record of txn-in below the copy's committed offsets is in txn-out as often
        as it is in txn-in (a value the feed's idempotent producer wrote twice is copied
        twice), among what read_committed reads, in its own partition. Records at or past
        the committed offsets are not copied yet (`uncopied`); that counts against the copy
        (`stalled`) only if its offsets did not move while the run waited for it."""
        inputs: Counter = Counter()
        partition_of: dict[str, int] = {}
        uncopied = 0
        for _, p, offset, vid in finals[(wl.TXN_IN, "read_committed")]["records"]:
            if offset >= committed.get(p, 0):
                uncopied += 1
                continue
            inputs[vid] += 1
            partition_of[vid] = p
        outputs: dict[str, list[int]] = {}
        for r in finals[(wl.TXN_OUT, "read_committed")]["records"]:
            if "@ctp#" in r[3]:
                src = r[3].split("@", 1)[0]
                outputs.setdefault(src, []).append(r[1])
        missing = [i for i, n in inputs.items() if len(outputs.get(i, ())) < n]
        dup = [i for i, ps in outputs.items() if i in inputs and len(ps) > inputs[i]]
        moved = [
            i for i, ps in outputs.items() if i in inputs and any(p != partition_of[i] for p in ps)
        ]
        # A copy of a record past the committed offsets would be a commit of outputs without
        # their inputs' offsets: the copy's transaction was torn.
        foreign = [i for i in outputs if i not in inputs]
        return {
            "inputs": sum(inputs.values()),
            "missing": len(missing),
            "duplicated": len(dup),
            "other_partition": len(moved),
            "without_input": len(foreign),
            "uncopied": uncopied,
            "stalled": int(bool(uncopied) and not progressed),
            "examples": {
                "missing": missing[:5],
                "duplicated": dup[:5],
                "other_partition": moved[:5],
                "without_input": foreign[:5],
            },
        }

    def voters(self) -> int | None:
        """The dynamic quorum's voters (the Leader and Follower rows of `cluster quorum`)."""
        for node in self.cluster.nodes.values():
            try:
                out = self.cluster.admin(
                    "--bootstrap-controller", node.controller, "cluster", "quorum"
                )
            except subprocess.TimeoutExpired:
                continue
            if out.returncode == 0:
                rows = [line.split() for line in out.stdout.splitlines()]
                return sum(1 for r in rows if len(r) > 1 and r[1] in ("Leader", "Follower"))
        return None

    def wait_voters(self, timeout_s: float) -> int | None:
        """Waits until every node is a voter again (each removed one adds itself back)."""
        deadline = time.monotonic() + timeout_s
        seen = None
        while time.monotonic() < deadline:
            seen = self.voters()
            if seen == len(self.cluster.nodes):
                break
            time.sleep(2)
        return seen

    def check_admin(self) -> dict:
        """Each topic whose last admin operation was acknowledged is as it left it."""
        w = self.admin_worker
        if w is None:
            return {}
        md = self.admin().list_topics(timeout=10)
        wrong = []
        checked = 0
        for topic, parts in w.expected.items():
            if topic.startswith("?"):
                continue
            checked += 1
            t = md.topics.get(topic)
            have = None if t is None or t.error is not None else len(t.partitions)
            if have != parts:
                wrong.append({"topic": topic, "expected": parts, "found": have})
        return {"checked": checked, "wrong": len(wrong), "examples": wrong[:5]}

    # -- the run ---------------------------------------------------------------------------

    def execute(self) -> int:
        a = self.args
        self.log(
            f"seed {a.seed}, {a.nodes} nodes, workloads {self.workloads}, faults {self.faults}, out {self.out}"
        )
        self.cluster.start()
        if not self.wait_healthy(90):
            raise RuntimeError("the cluster did not form within 90 s")
        self.create_topics()
        self.start_workloads()
        time.sleep(2)
        n = nem.Nemesis(
            self.cluster,
            self.history,
            a.seed,
            self.faults,
            a.interval,
            a.max_faults,
            self.full_isr,
            self.reassign,
        )
        n.start()
        self.log("faults begin")
        deadline = time.monotonic() + a.duration
        while time.monotonic() < deadline and n.is_alive():
            time.sleep(1)
        n.stop_ev.set()
        n.join(timeout=120)
        self.cluster.heal_all()
        for node in self.cluster.nodes.values():
            if not node.running():
                node.start()
        self.log(f"faults end: {n.counts}, skipped {n.skipped}")
        healthy = self.wait_healthy(180)
        self.log(f"healed: full ISRs {'yes' if healthy else 'NO'}")
        if not healthy:
            self.notes.append(
                f"the cluster did not regain full ISRs within 180 s of the heal ({self.last_short_isr})"
            )
        if self.cluster.dynamic_quorum:
            voters = self.wait_voters(90)
            self.log(f"voters: {voters} of {len(self.cluster.nodes)}")
            if voters != len(self.cluster.nodes):
                self.notes.append(f"{voters} voters of {len(self.cluster.nodes)} after the heal")
        time.sleep(3)
        self.stop_producers.set()
        deadline = time.monotonic() + 150
        for w in self.producers:
            w.join(timeout=max(0.1, deadline - time.monotonic()))
        if "txn" in self.workloads:
            deadline = time.monotonic() + 120
            before = self.ctp_committed()
            while time.monotonic() < deadline and not self.ctp_caught_up():
                time.sleep(1)
            # Whether the copy still moved while it was waited for (not stalled).
            after = self.ctp_committed()
            progressed = before is None or (after is not None and after != before)
            # Transactions left open by fenced or killed instances end by timeout (30 s).
        time.sleep(2)
        self.stop_consumers.set()
        deadline = time.monotonic() + 60
        for w in self.consumers:
            w.join(timeout=max(0.1, deadline - time.monotonic()))
        stuck = [w.proc for w in self.producers + self.consumers if w.is_alive()]
        self.dump_stacks([w for w in self.producers + self.consumers if w.is_alive()])
        crashed = {
            w.proc: repr(w.error) for w in self.producers + self.consumers if w.error is not None
        }
        if n.error is not None:
            crashed["nemesis"] = repr(n.error)
        self.log("final reads")
        finals = {}
        b = self.cluster.bootstrap()
        if "queue" in self.workloads:
            finals[(wl.QUEUE, "read_uncommitted")] = wl.final_read(
                self.history, b, wl.QUEUE, QUEUE_PARTITIONS, "read_uncommitted"
            )
        if "txn" in self.workloads:
            finals[(wl.TXN_IN, "read_committed")] = wl.final_read(
                self.history, b, wl.TXN_IN, TXN_PARTITIONS, "read_committed"
            )
            finals[(wl.TXN_OUT, "read_uncommitted")] = wl.final_read(
                self.history, b, wl.TXN_OUT, TXN_PARTITIONS, "read_uncommitted"
            )
            finals[(wl.TXN_OUT, "read_committed")] = wl.final_read(
                self.history, b, wl.TXN_OUT, TXN_PARTITIONS, "read_committed", timeout_s=90
            )
        extra = {}
        if "txn" in self.workloads:
            committed = None
            for _ in range(5):
                committed = self.ctp_committed()
                if committed is not None:
                    break
                time.sleep(2)
            if committed is None:
                # Unknown: every input counts as one the copy should have made.
                committed = {p: 2**62 for p in range(TXN_PARTITIONS)}
            extra["eos"] = self.check_eos(finals, committed, progressed)
        if "admin" in self.workloads:
            extra["admin"] = self.check_admin()
        self.history.close()
        events = checkers.load_history(self.history.path)
        result = checkers.check_all(events)
        if result["counts"]["duplicate"]:
            extra["duplicates"] = self.classify_duplicates(events)
        ops = {w.proc: w.ops for w in self.producers + self.consumers}
        # Client calls abandoned as hung (librdkafka's, named in workloads.send_offsets).
        hangs = {w.proc: w.hangs for w in self.producers + self.consumers if getattr(w, "hangs", 0)}
        unfinished = {
            f"{t}/{iso}": v["unfinished"] for (t, iso), v in finals.items() if v["unfinished"]
        }
        bad = {k: v for k, v in result["counts"].items() if v}
        if extra.get("eos"):
            for k in ("missing", "duplicated", "other_partition", "without_input", "stalled"):
                if extra["eos"][k]:
                    bad[f"eos_{k}"] = extra["eos"][k]
        if extra.get("admin", {}).get("wrong"):
            bad["admin_wrong"] = extra["admin"]["wrong"]
        if "duplicates" in extra:
            # Copies in two epochs of one producer are the client's re-send after its own
            # epoch bump (batches.py); only the others are the broker's.
            d = extra["duplicates"]
            bad.pop("duplicate", None)
            brokers = d["same_epoch"] + d["stale_epoch"] + d["unresolved"]
            if brokers:
                bad["duplicate"] = brokers
            if d["epoch_bump"]:
                bad["duplicate_epoch_bump"] = d["epoch_bump"]
        known = {k for k in a.known.split(",") if k}
        failing = {k: v for k, v in bad.items() if k not in known}
        failed = bool(failing or crashed or stuck or unfinished or self.notes)
        summary = {
            "seed": a.seed,
            "nodes": a.nodes,
            "workloads": self.workloads,
            "duration_s": a.duration,
            "faults": n.counts,
            "faults_total": sum(n.counts.values()),
            "skipped": n.skipped,
            "ops": ops,
            "events": len(events),
            "counts": result["counts"],
            "stats": result["stats"],
            "anomalies": result["anomalies"],
            "extra": extra,
            "crashed": crashed,
            "stuck": stuck,
            "client_hangs": hangs,
            "unfinished_final_reads": unfinished,
            "notes": self.notes,
            "anomaly_counts": bad,
            "known": sorted(known & set(bad)),
            "ok": not failed,
        }
        (self.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        self.print_summary(summary)
        return 1 if failed else 0

    def print_summary(self, s: dict) -> None:
        print(f"faults: {s['faults_total']} {s['faults']}")
        print(f"operations: {s['ops']}")
        st = s["stats"]
        print(f"stats: {json.dumps(st)}")
        for k, v in s["counts"].items():
            print(f"  {k:30s} {v}")
        for k, v in s["extra"].items():
            print(f"  {k:30s} {json.dumps(v)}")
        for k in ("crashed", "stuck", "unfinished_final_reads", "notes"):
            if s[k]:
                print(f"  {k}: {s[k]}")
        if s.get("client_hangs"):
            print(f"  client calls abandoned as hung: {s['client_hangs']}")
        if s["known"]:
            print(f"  known, not failing the run (docs/RELIABILITY.md): {s['known']}")
        print("RESULT:", "ok" if s["ok"] else "ANOMALIES")

    def finish(self, code: int) -> None:
        self.cluster.stop()
        if code == 0 and not self.args.keep:
            (self.out / "history.jsonl").unlink(missing_ok=True)
            shutil.rmtree(self.out / "cluster", ignore_errors=True)
        else:
            print(f"history, node logs and data kept in {self.out}")
            print(f"replay: target/venv/bin/python tests/verify/run.py --replay {self.out}")


def on_signal(signum, _frame):
    raise SystemExit(f"signal {signum}")


# Clients never destroyed while the process lives (Run.admin).
_KEPT: list = []


def main(argv: list[str]) -> int:
    # A timeout's SIGTERM unwinds through finish(): the nodes and namespaces go.
    signal.signal(signal.SIGTERM, on_signal)
    args = parse(argv)
    run = Run(args)
    code = 2
    try:
        code = run.execute()
    except BaseException as e:
        print(f"run failed: {e!r}", flush=True)
        for node in run.cluster.nodes.values():
            print(f"==== node {node.id} ====\n{node.tail()}")
        code = 2
        raise
    finally:
        run.finish(code)
    return code


if __name__ == "__main__":
    status = main(sys.argv[1:])
    # No destructor runs after this: a librdkafka client's destroy may block (Run.admin).
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
