"""The client-library scenario with Debian's kcat 1.7.1 running on librdkafka 1.9.2 (2022), built
from rdkafka-sys 4.3.0+1.9.2's vendored source by setup_old_clients.sh. See scenario_kcat.py.

    STRATA_DATA_DIR=<the broker's log.dirs> LD_LIBRARY_PATH=target/compat/librdkafka-1.9.2/src \\
        python3 -B -u scenario_kcat_librdkafka_1_9_2.py --bootstrap ... --results ...

(the broker with num.partitions=6, as for kcat). LD_LIBRARY_PATH defaults to that build
(relative to the repository) when unset; KCAT (default kcat) as in scenario_kcat.py. The
scenario first checks that `kcat -V` reports librdkafka 1.9.2, and fails every step if not.

It runs scenario_kcat.py's steps with two changes:
- produce sends with `-z lz4` and then checks, in the broker's segments (batch_codecs.py, under
  STRATA_DATA_DIR), that the topic's batches are lz4 (batch_codecs.judge: every one, but for a
  single-record batch the client left uncompressed because it would not shrink). A produce row
  that fails only on that check has still stored its messages, so the reading steps run;
- an extra step, "compression", produces 200 messages with each of `-z gzip`, `-z snappy`,
  `-z lz4` and `-z zstd`, one (auto-created) topic each, and checks the same of each.
librdkafka before 2.11 stops compressing gzip, snappy and lz4 when the broker's Produce versions
do not start at v0 (KAFKA-18659); `-d msg` shows its "Broker does not support compression type"
line, which a failed row quotes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import batch_codecs as bc
import scenario as sc
import scenario_kcat as kc

CLIENT = "kcat-librdkafka-1.9.2"
LIBRDKAFKA_VERSION = "1.9.2"
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_LIB_DIR = os.path.join(ROOT, "target", "compat", f"librdkafka-{LIBRDKAFKA_VERSION}", "src")
PRODUCE_CODEC = "lz4"
CODEC_MESSAGES = 200

# scenario_kcat's steps build and check message values with its module's CLIENT.
kc.CLIENT = CLIENT
# This scenario reports one step more than scenario.STEPS; Scenario.run checks names against it.
if bc.COMPRESSION_STEP not in sc.STEPS:
    sc.STEPS.append(bc.COMPRESSION_STEP)


class Run(kc.Run):
    def __init__(self, bootstrap: str, topic: str):
        super().__init__(bootstrap, topic)
        self.headers = [("client", CLIENT.encode()), ("run", topic.encode())]
        self.codec = PRODUCE_CODEC
        self.said: list[str] = []  # librdkafka's "not compressing" lines

    def produce_lines(self, indexes: range, topic: str | None = None) -> None:
        lines = "".join(f"{sc.key_of(i)}\t{sc.value_of(CLIENT, i)}\n" for i in indexes).encode()
        args = ["-P", "-t", topic or self.topic, "-K", "\t", "-X", "acks=all", "-X", "enable.idempotence=true"]
        args += ["-z", self.codec, "-d", "msg"]
        for k, v in self.headers:
            args += ["-H", f"{k}={v.decode()}"]
        p = self.run_kcat(self.kcat(*args), lines)
        err = p.stderr.decode(errors="replace")
        self.said += [line for line in err.splitlines() if bc.NOT_COMPRESSING.search(line)]
        # -d msg logs every batch at level 7 ("%7|..."): look for failures in everything else.
        other = "\n".join(line for line in err.splitlines() if not line.startswith("%7|"))
        assert "fail" not in other.lower() and "error" not in other.lower(), other[-300:]

    def why(self) -> str:
        return bc.librdkafka_said(self.said)

    def produce(self) -> str:
        delivered = super().produce()  # sets self.produced: the messages are stored and read back
        try:
            stored = bc.check_codec(bc.data_dir_from_env(), self.topic, PRODUCE_CODEC)
        except AssertionError as e:
            raise AssertionError(f"{e}{self.why()} [-z {PRODUCE_CODEC}; {delivered}]") from None
        return f"-z {PRODUCE_CODEC}; {delivered}; stored: {stored}"

    def compression(self) -> str:
        data_dir = bc.data_dir_from_env()
        topic_of = {codec: f"{self.topic}-{codec}" for codec in bc.COMPRESSED}
        self.said = []
        for codec, topic in topic_of.items():
            self.codec = codec
            try:
                self.produce_lines(range(CODEC_MESSAGES), topic)
            finally:
                self.codec = PRODUCE_CODEC
        try:
            detail = bc.check_codecs(data_dir, topic_of)
        except AssertionError as e:
            raise AssertionError(f"{e}{self.why()}") from None
        return f"{CODEC_MESSAGES} messages per codec (-z), one auto-created topic each; {detail}"


def librdkafka_version() -> str:
    p = subprocess.run([kc.KCAT, "-V"], capture_output=True, timeout=30)
    m = re.search(r"librdkafka (\S+)", p.stdout.decode(errors="replace"))
    return m.group(1) if m else f"unknown (kcat -V exited {p.returncode}: {p.stderr.decode(errors='replace')[-200:]})"


def main() -> int:
    args = sc.parse_args(CLIENT)
    s = sc.Scenario(CLIENT, args.results)
    os.environ.setdefault("LD_LIBRARY_PATH", DEFAULT_LIB_DIR)
    problem = ""
    if shutil.which(kc.KCAT) is None:
        problem = f"{kc.KCAT} not found on PATH"
    elif (v := librdkafka_version()) != LIBRDKAFKA_VERSION:
        problem = (
            f"kcat -V reports librdkafka {v}, not {LIBRDKAFKA_VERSION} "
            f"(LD_LIBRARY_PATH={os.environ['LD_LIBRARY_PATH']}; run setup_old_clients.sh)"
        )
    if problem:
        for step in sc.STEPS:
            s.fail(step, problem)
        return s.finish()
    run = Run(args.bootstrap, args.topic)
    s.not_applicable("create-topic", f"{kc.NO_ADMIN}; the topic is auto-created (num.partitions=6) on produce")
    s.run("produce", run.produce)
    # A produce that failed only on the stored codec stored its messages: read them anyway.
    read_needs = () if run.produced is not None else ("produce",)
    s.run("list-topics", run.list_topics, needs=read_needs)
    s.not_applicable("describe-configs", kc.NO_ADMIN)
    s.run("group-consume", run.group_consume, needs=read_needs)
    s.run("committed-offsets", run.committed_offsets, needs=("group-consume",))
    s.run("latest-group", run.latest_group, needs=read_needs)
    s.not_applicable("delete-topic", kc.NO_ADMIN)
    s.run(bc.COMPRESSION_STEP, run.compression)
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
