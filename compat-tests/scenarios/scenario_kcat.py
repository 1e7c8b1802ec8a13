"""The client-library scenario with kcat (librdkafka's command-line client). See scenario.py.

kcat has no admin API: creating, describing and deleting a topic are reported as `n/a`. The
topic is auto-created on the first produce, so run.sh starts this client's broker with
`num.partitions=6`. `-H` sets the same headers on every message of one kcat run, so the
message index travels in the value and every message carries `client=kcat`, `run=<topic>`.
kcat cannot fetch a group's committed offsets; the committed-offsets step instead re-joins the
group with auto.offset.reset=earliest: with the offsets committed it reads nothing and its
partitions report EOF at the end offsets.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import scenario as sc

CLIENT = "kcat"
KCAT = os.environ.get("KCAT", "kcat")
FORMAT = r"%p\t%o\t%k\t%h\t%s\n"
NO_ADMIN = "n/a (kcat has no admin API)"
ASSIGNED = re.compile(r"rebalanced \(memberid [^)]*\): assigned: (.*)$")
EOF_LINE = re.compile(r"Reached end of topic (\S+) \[(\d+)\] at offset (\d+)")


class Run:
    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap = bootstrap
        self.topic = topic
        self.headers = [("client", b"kcat"), ("run", topic.encode())]
        self.produced: sc.Produced | None = None
        self.group = f"{topic}-group"

    def kcat(self, *args: str) -> list[str]:
        return [KCAT, "-b", self.bootstrap, *args]

    def run_kcat(self, args: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess:
        p = subprocess.run(args, input=stdin, capture_output=True, timeout=sc.STEP_TIMEOUT_S)
        assert p.returncode == 0, f"{' '.join(args[3:])} exited {p.returncode}: {tail(p.stderr)}"
        return p

    def parse(self, out: bytes) -> list[sc.Record]:
        records = []
        for line in out.decode().splitlines():
            p, o, k, h, v = line.split("\t", 4)
            headers = [(kv.split("=", 1)[0], kv.split("=", 1)[1].encode()) for kv in h.split(",") if kv]
            records.append(sc.Record(int(p), int(o), k.encode(), v.encode(), headers))
        return records

    def produce_lines(self, indexes: range) -> None:
        lines = "".join(f"{sc.key_of(i)}\t{sc.value_of(CLIENT, i)}\n" for i in indexes).encode()
        args = ["-P", "-t", self.topic, "-K", "\t", "-X", "acks=all", "-X", "enable.idempotence=true"]
        for k, v in self.headers:
            args += ["-H", f"{k}={v.decode()}"]
        p = self.run_kcat(self.kcat(*args), lines)
        assert b"fail" not in p.stderr.lower() and b"error" not in p.stderr.lower(), tail(p.stderr)

    # ---- steps ----------------------------------------------------------------------------

    def produce(self) -> str:
        start = time.monotonic()
        self.produce_lines(range(sc.MESSAGES))
        took = time.monotonic() - start
        # kcat -P prints no delivery reports: read everything back by assignment to check it.
        p = self.run_kcat(self.kcat("-C", "-t", self.topic, "-o", "beginning", "-e", "-f", FORMAT))
        records = self.parse(p.stdout)
        assert len(records) == sc.MESSAGES, f"read back {len(records)} messages, produced {sc.MESSAGES}"
        acks = {}
        for r in records:
            i = sc.check_record(CLIENT, r, self.headers)
            assert i not in acks, f"message {i} stored twice"
            acks[i] = (r.partition, r.offset)
        self.produced = sc.check_acks(acks, range(sc.MESSAGES))
        counts = sorted(self.produced.end_offsets.values())
        return (
            f"{sc.MESSAGES} sent (-K keys, -H headers, acks=all, enable.idempotence=true) in {took:.1f}s; "
            f"read back on {sc.PARTITIONS} partitions ({counts[0]}..{counts[-1]} each), offsets 0..n-1, "
            f"each of {sc.KEYS} keys on one partition"
        )

    def list_topics(self) -> str:
        p = self.run_kcat(self.kcat("-L", "-J"))
        md = json.loads(p.stdout)
        topics = {t["topic"]: t for t in md["topics"]}
        assert self.topic in topics, f"{self.topic} not in {sorted(topics)}"
        parts = topics[self.topic]["partitions"]
        assert len(parts) == sc.PARTITIONS, f"listed with {len(parts)} partitions"
        assert all(pt["leader"] >= 0 for pt in parts), f"partitions without a leader: {parts}"
        user = [t for t in topics if not t.startswith("__")]
        return f"-L: listed with {len(parts)} led partitions among {len(user)} topic(s), {len(md['brokers'])} broker(s)"

    def group_member(self, group: str, reset: str, *extra: str) -> list[str]:
        return self.kcat("-G", group, "-X", f"auto.offset.reset={reset}", *extra, "-f", FORMAT, self.topic)

    def group_consume(self) -> str:
        # Two members started together join the same first generation (the broker's
        # group.initial.rebalance.delay.ms); -e: each exits when its partitions reach the end,
        # committing on close (kcat's default enable.auto.commit).
        procs = {
            name: subprocess.Popen(
                self.group_member(self.group, "earliest", "-e"),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for name in ("m1", "m2")
        }
        outs = {}
        try:
            for name, proc in procs.items():
                try:
                    out, err = proc.communicate(timeout=sc.STEP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    raise AssertionError(f"member {name} did not reach the end within {sc.STEP_TIMEOUT_S:.0f}s")
                assert proc.returncode == 0, f"member {name} exited {proc.returncode}: {tail(err)}"
                outs[name] = (out, err)
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        records = {name: self.parse(out) for name, (out, _) in outs.items()}
        # Each member's first assignment: the split the two of them got together.
        assignments = {}
        for name, (_, err) in outs.items():
            first = next((m.group(1) for m in map(ASSIGNED.search, err.decode().splitlines()) if m), "")
            assignments[name] = {int(x) for x in re.findall(r"\[(\d+)\]", first)}
        return sc.check_group_read(CLIENT, records, assignments, self.produced, range(sc.MESSAGES), self.headers)

    def committed_offsets(self) -> str:
        p = self.run_kcat(self.group_member(self.group, "earliest", "-e"))
        again = self.parse(p.stdout)
        eof = {int(m.group(2)): int(m.group(3)) for m in EOF_LINE.finditer(p.stderr.decode())}
        assert not again, f"re-joining the group read {len(again)} messages again: offsets not committed"
        assert eof == self.produced.end_offsets, (
            f"re-joined member positioned at {dict(sorted(eof.items()))}, end offsets {self.produced.end_offsets}"
        )
        return (
            "re-joining the group (auto.offset.reset=earliest) read 0 messages; it resumed at the "
            f"committed offsets = end offsets on all {sc.PARTITIONS} partitions"
        )

    def latest_group(self) -> str:
        proc = subprocess.Popen(
            # -u: unbuffered output, so each message reaches the pipe as it is consumed.
            self.group_member(f"{self.topic}-latest", "latest", "-u"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out_lines: list[bytes] = []
        err_text: list[str] = []
        readers = [
            threading.Thread(target=lambda: out_lines.extend(iter(proc.stdout.readline, b"")), daemon=True),
            threading.Thread(
                target=lambda: err_text.extend(line.decode() for line in iter(proc.stderr.readline, b"")),
                daemon=True,
            ),
        ]
        for t in readers:
            t.start()
        try:
            # EOF at the end offset on every partition: "latest" resolved, fetching is there.
            def positioned() -> dict[int, int] | None:
                assert proc.poll() is None, f"kcat exited {proc.returncode}: {''.join(err_text)[-300:]}"
                eof = {int(m.group(2)): int(m.group(3)) for m in EOF_LINE.finditer("".join(err_text))}
                return eof if len(eof) == sc.PARTITIONS else None

            eof = sc.wait_for("6 partitions at their end (EOF)", positioned)
            assert not out_lines, f"read {len(out_lines)} old messages before anything new was produced"
            assert eof == self.produced.end_offsets, (
                f"positioned at {dict(sorted(eof.items()))}, end offsets {self.produced.end_offsets}"
            )
            self.produce_lines(range(sc.MESSAGES, sc.MESSAGES + sc.NEW_MESSAGES))
            sc.wait_for(f"{sc.NEW_MESSAGES} new messages", lambda: len(out_lines) >= sc.NEW_MESSAGES)
            time.sleep(sc.QUIET_S)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            for t in readers:
                t.join(timeout=5)
        records = self.parse(b"".join(out_lines))
        return "positioned at the end offsets (EOF); " + sc.check_latest(CLIENT, records, self.headers)


def tail(b: bytes) -> str:
    return b.decode(errors="replace")[-300:]


def main() -> int:
    args = sc.parse_args(CLIENT)
    s = sc.Scenario(CLIENT, args.results)
    if shutil.which(KCAT) is None:
        for step in sc.STEPS:
            s.fail(step, f"{KCAT} not found on PATH")
        return s.finish()
    run = Run(args.bootstrap, args.topic)
    s.not_applicable("create-topic", f"{NO_ADMIN}; the topic is auto-created (num.partitions=6) on produce")
    s.run("produce", run.produce)
    s.run("list-topics", run.list_topics, needs=("produce",))
    s.not_applicable("describe-configs", NO_ADMIN)
    s.run("group-consume", run.group_consume, needs=("produce",))
    s.run("committed-offsets", run.committed_offsets, needs=("group-consume",))
    s.run("latest-group", run.latest_group, needs=("produce",))
    s.not_applicable("delete-topic", NO_ADMIN)
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
