"""Helper of docker/test-faults.sh: topic set-up, metadata queries, the acknowledged producer
and the final check, with confluent-kafka (librdkafka).

    faults_check.py create   BOOTSTRAP TOPIC
    faults_check.py leader   BOOTSTRAP TOPIC PARTITION           # prints the leader's node id
    faults_check.py isr-full BOOTSTRAP TOPIC SECONDS             # waits for 3 replicas in every ISR
    faults_check.py produce  BOOTSTRAP TOPIC ACKED_FILE STOP_FILE
    faults_check.py check    BOOTSTRAP TOPIC ACKED_FILE

The producer sends msg-00000001, msg-00000002, ... round-robin over the partitions (number
n goes to partition n % partitions) with acks=all and enable.idempotence=true, and appends
"partition offset n" to ACKED_FILE for each delivery report without error, until STOP_FILE
exists. The check reads every partition from the beginning to its high watermark and fails
if an acknowledged message is missing or not at its acknowledged offset, if numbers go back
within a partition, or if a number appears twice.
"""

import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 3
REPLICATION_FACTOR = 3


def metadata(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(topic, timeout=5).topics[topic]


def create(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while True:
        new = NewTopic(topic, num_partitions=PARTITIONS, replication_factor=REPLICATION_FACTOR,
                       config={"min.insync.replicas": "2"})
        try:
            admin.create_topics([new], request_timeout=15)[topic].result(timeout=20)
            print(f"created {topic}: {PARTITIONS} partitions, replication factor "
                  f"{REPLICATION_FACTOR}, min.insync.replicas=2")
            return 0
        except KafkaException as e:
            err = e.args[0]
            if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return 0
            if time.monotonic() > deadline:
                print(f"FAIL: CreateTopics {topic}: {err}")
                return 1
            print(f"CreateTopics {topic}: {err}; retrying")
            time.sleep(1)


def leader(bootstrap, topic, partition):
    deadline = time.monotonic() + 30
    while True:
        try:
            p = metadata(bootstrap, topic).partitions[int(partition)]
            if p.leader >= 0 and p.error is None:
                print(p.leader)
                return 0
        except (KafkaException, KeyError):
            pass
        if time.monotonic() > deadline:
            print("FAIL: no leader", file=sys.stderr)
            return 1
        time.sleep(0.5)


def isr_full(bootstrap, topic, seconds):
    deadline = time.monotonic() + float(seconds)
    last = None
    while True:
        try:
            parts = metadata(bootstrap, topic).partitions
            last = {i: (p.leader, sorted(p.isrs)) for i, p in parts.items()}
            if len(parts) == PARTITIONS and all(
                    p.leader >= 0 and len(p.isrs) == REPLICATION_FACTOR for p in parts.values()):
                print(f"ISRs full: {last}")
                return 0
        except KafkaException as e:
            last = str(e)
        if time.monotonic() > deadline:
            print(f"FAIL: ISRs not full within {seconds}s: {last}")
            return 1
        time.sleep(0.5)


def produce(bootstrap, topic, acked_file, stop_file):
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "message.timeout.ms": 120000,
        "linger.ms": 5,
        "reconnect.backoff.max.ms": 1000,
    })
    acked = open(acked_file, "a", buffering=1)
    stats = {"acked": 0, "failed": 0, "errors": {}}

    def report(err, msg):
        if err is None:
            acked.write(f"{msg.partition()} {msg.offset()} {int(msg.value()[4:])}\n")
            stats["acked"] += 1
        else:
            stats["failed"] += 1
            stats["errors"][str(err.name())] = stats["errors"].get(str(err.name()), 0) + 1

    n = 0
    while not os.path.exists(stop_file):
        # Bounded in flight: while the cluster cannot take writes, wait instead of queueing.
        if len(producer) < 500:
            n += 1
            value = b"msg-%08d" % n
            producer.produce(topic, value=value, partition=n % PARTITIONS, on_delivery=report)
        producer.poll(0.002)
    left = producer.flush(130)
    print(f"producer: sent {n}, acknowledged {stats['acked']}, failed {stats['failed']} "
          f"{stats['errors']}, unreported {left}")
    acked.close()
    return 0


def check(bootstrap, topic, acked_file):
    acked = {}
    for line in open(acked_file):
        p, off, n = map(int, line.split())
        acked[(p, off)] = n
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"faults-check-{os.getpid()}",
        "enable.auto.commit": False,
        "isolation.level": "read_uncommitted",
    })
    log = {}  # (partition, offset) -> number
    for p in range(PARTITIONS):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        consumer.assign([TopicPartition(topic, p, low)])
        deadline = time.monotonic() + 60
        next_offset = low
        while next_offset < high:
            if time.monotonic() > deadline:
                print(f"FAIL: partition {p}: read only up to {next_offset} of {high} in 60s")
                return 1
            for msg in consumer.consume(1000, timeout=1):
                if msg.error():
                    print(f"partition {p}: {msg.error()}")
                    continue
                log[(p, msg.offset())] = int(msg.value()[4:])
                next_offset = msg.offset() + 1
        print(f"partition {p}: log start {low}, high watermark {high}")
    consumer.close()

    failures = 0
    missing = [(k, n) for k, n in acked.items() if log.get(k) != n]
    if missing:
        failures += 1
        print(f"FAIL: {len(missing)} acknowledged messages missing or not at their offset; "
              f"first: {sorted(missing)[:10]} (log has {[log.get(k) for k, _ in sorted(missing)[:10]]})")
    seen = {}
    for (p, off), n in log.items():
        seen.setdefault(n, []).append((p, off))
    duplicates = {n: where for n, where in seen.items() if len(where) > 1}
    if duplicates:
        failures += 1
        print(f"FAIL: {len(duplicates)} numbers stored more than once (idempotent producer); "
              f"first: {sorted(duplicates.items())[:10]}")
    for p in range(PARTITIONS):
        numbers = [n for (q, off), n in sorted(log.items()) if q == p]
        wrong = [n for n in numbers if n % PARTITIONS != p]
        back = [(a, b) for a, b in zip(numbers, numbers[1:]) if b <= a]
        if wrong or back:
            failures += 1
            print(f"FAIL: partition {p}: {len(back)} places where numbers go back "
                  f"(first {back[:5]}), {len(wrong)} of another partition")
    unacked = len(log) - sum(1 for k, n in log.items() if acked.get(k) == n)
    print(f"checked: {len(acked)} acknowledged messages, {len(log)} messages in the log "
          f"({unacked} stored without an acknowledgement), {len(duplicates)} duplicates")
    if failures:
        return 1
    print("ok: every acknowledged message is at its offset, once, in order per partition")
    return 0


def main(argv):
    commands = {"create": (create, 2), "leader": (leader, 3), "isr-full": (isr_full, 3),
                "produce": (produce, 4), "check": (check, 3)}
    if len(argv) < 2 or argv[1] not in commands or len(argv) - 2 != commands[argv[1]][1]:
        print(__doc__)
        return 2
    fn, _ = commands[argv[1]]
    return fn(*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
