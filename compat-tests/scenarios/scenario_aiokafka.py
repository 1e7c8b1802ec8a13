"""The client-library scenario with aiokafka (asyncio, pure Python). See scenario.py.

Each step runs its own coroutine to completion under `asyncio.wait_for`, so every wait is
bounded even when the client itself would wait forever.
"""

from __future__ import annotations

import asyncio
import sys
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

import scenario as sc

CLIENT = "aiokafka"
REQUEST_TIMEOUT_MS = 30_000
# DescribeConfigs v1+ config_source: 1 = DYNAMIC_TOPIC_CONFIG.
DYNAMIC_TOPIC_CONFIG = 1


class Run:
    def __init__(self, bootstrap: str, topic: str, loop: asyncio.AbstractEventLoop):
        self.bootstrap = bootstrap
        self.topic = topic
        self.loop = loop
        self.admin: AIOKafkaAdminClient | None = None
        self.produced: sc.Produced | None = None
        self.group = f"{topic}-group"

    def sync(self, coro_fn):
        """A step body for Scenario.run: runs `coro_fn()` on the loop, bounded."""
        return lambda: self.loop.run_until_complete(asyncio.wait_for(coro_fn(), sc.STEP_TIMEOUT_S * 2))

    async def admin_client(self) -> AIOKafkaAdminClient:
        if self.admin is None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
            await admin.start()
            self.admin = admin
        return self.admin

    async def close(self) -> None:
        if self.admin is not None:
            await self.admin.close()

    # ---- admin ----------------------------------------------------------------------------

    async def described(self) -> dict | None:
        admin = await self.admin_client()
        for t in await admin.describe_topics([self.topic]):
            if t["topic"] == self.topic and t["error_code"] == 0:
                return t
        return None

    async def wait_for(self, what: str, cond, timeout: float = sc.STEP_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while True:
            got = await cond()
            if got:
                return got
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
            await asyncio.sleep(0.1)

    async def create_topic(self) -> str:
        admin = await self.admin_client()
        new = NewTopic(self.topic, sc.PARTITIONS, 1, topic_configs={"retention.ms": sc.RETENTION_MS})
        resp = await admin.create_topics([new], timeout_ms=REQUEST_TIMEOUT_MS)
        errs = [e for e in resp.topic_errors if e[1] != 0]
        assert not errs, f"CreateTopics errors: {errs}"

        async def led() -> dict | None:
            t = await self.described()
            if t and all(p["error_code"] == 0 and p["leader"] >= 0 for p in t["partitions"]):
                return t
            return None

        t = await self.wait_for(f"{self.topic} in metadata with leaders", led)
        n = len(t["partitions"])
        assert n == sc.PARTITIONS, f"metadata shows {n} partitions, expected {sc.PARTITIONS}"
        return f"CreateTopics ok; metadata shows {n} partitions, each with a leader"

    async def list_topics(self) -> str:
        admin = await self.admin_client()
        names = await admin.list_topics()
        assert self.topic in names, f"{self.topic} not in {sorted(names)}"
        t = await self.described()
        assert t is not None and len(t["partitions"]) == sc.PARTITIONS, f"described as {t}"
        user = [n for n in names if not n.startswith("__")]
        return f"listed among {len(user)} topic(s); described with {sc.PARTITIONS} partitions"

    async def describe_configs(self) -> str:
        admin = await self.admin_client()
        res = ConfigResource(ConfigResourceType.TOPIC, self.topic)
        responses = await admin.describe_configs([res])
        resources = [r for resp in responses for r in resp.resources]
        assert len(resources) == 1, f"{len(resources)} resources in the response"
        error_code, error_message, _rtype, name, entries = resources[0][:5]
        assert error_code == 0, f"error {error_code}: {error_message}"
        assert name == self.topic, f"resource {name}"
        by_name = {e[0]: e for e in entries}
        ret, pol = by_name.get("retention.ms"), by_name.get("cleanup.policy")
        assert ret is not None, f"no retention.ms among {sorted(by_name)}"
        assert ret[1] == sc.RETENTION_MS, f"retention.ms = {ret[1]}, set to {sc.RETENTION_MS}"
        version = responses[0].API_VERSION
        if version >= 1:
            assert ret[3] == DYNAMIC_TOPIC_CONFIG, f"retention.ms config_source {ret[3]}"
        else:
            assert ret[3] is False, f"retention.ms is_default {ret[3]}"
        assert pol is not None and pol[1] == "delete", f"cleanup.policy = {pol and pol[1]}"
        return f"DescribeConfigs v{version}: {len(entries)} entries; retention.ms={ret[1]} (topic config), cleanup.policy=delete"

    async def delete_topic(self) -> str:
        admin = await self.admin_client()
        resp = await admin.delete_topics([self.topic], timeout_ms=REQUEST_TIMEOUT_MS)
        errs = [e for e in resp.topic_error_codes if e[1] != 0]
        assert not errs, f"DeleteTopics errors: {errs}"

        async def gone() -> bool:
            return self.topic not in await admin.list_topics()

        await self.wait_for(f"{self.topic} gone from the topic list", gone)
        await asyncio.sleep(1.0)
        assert await gone(), "topic came back"
        return "DeleteTopics ok; the topic is no longer listed"

    # ---- produce --------------------------------------------------------------------------

    async def send(self, indexes: range) -> dict[int, tuple[int, int]]:
        p = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )
        await p.start()
        try:
            # send() returns once the message is queued; the future it returns resolves on ack.
            futures = {
                i: await p.send(
                    self.topic,
                    key=sc.key_of(i).encode(),
                    value=sc.value_of(CLIENT, i).encode(),
                    headers=sc.headers_of(CLIENT, i),
                )
                for i in indexes
            }
            await p.flush()
            acks = {}
            for i, f in futures.items():
                md = await f
                acks[i] = (md.partition, md.offset)
            return acks
        finally:
            await p.stop()

    async def produce(self) -> str:
        start = time.monotonic()
        acks = await self.send(range(sc.MESSAGES))
        took = time.monotonic() - start
        self.produced = sc.check_acks(acks, range(sc.MESSAGES))
        counts = sorted(self.produced.end_offsets.values())
        return (
            f"{sc.MESSAGES} acked (acks=all, enable_idempotence) in {took:.1f}s on {sc.PARTITIONS} partitions "
            f"({counts[0]}..{counts[-1]} each), offsets 0..n-1, each of {sc.KEYS} keys on one partition"
        )

    # ---- consume --------------------------------------------------------------------------

    def consumer(self, group: str, reset: str, member: str) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            group_id=group,
            client_id=member,
            auto_offset_reset=reset,
            enable_auto_commit=False,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )

    async def group_consume(self) -> str:
        stop = asyncio.Event()
        records: dict[str, list[sc.Record]] = {"m1": [], "m2": []}
        assignments: dict[str, set[int]] = {"m1": set(), "m2": set()}
        errors: list[str] = []
        commits = {"ok": 0, "failed": 0}

        async def member(name: str) -> None:
            c = self.consumer(self.group, "earliest", name)
            try:
                await c.start()
                while not stop.is_set():
                    got = 0
                    for batch in (await c.getmany(timeout_ms=200, max_records=500)).values():
                        for m in batch:
                            records[name].append(to_record(m))
                            got += 1
                    assignments[name] = {tp.partition for tp in c.assignment()}
                    if got:
                        try:
                            await c.commit()
                            commits["ok"] += 1
                        except Exception as e:  # noqa: BLE001 - a commit racing a rebalance
                            commits["failed"] += 1
                            print(f"{name}: commit failed: {e}", file=sys.stderr)
            except Exception as e:  # noqa: BLE001
                errors.append(f"{name}: {type(e).__name__}: {e}")
            finally:
                await c.stop()

        tasks = [asyncio.create_task(member(n)) for n in records]

        async def done() -> bool:
            if errors:
                return True
            seen = {r.seq() for rs in records.values() for r in rs}
            return len(seen) >= sc.MESSAGES and all(assignments.values())

        try:
            await self.wait_for("the group to read every message with both members assigned", done)
        finally:
            final = {n: set(a) for n, a in assignments.items()}
            stop.set()
            await asyncio.wait(tasks, timeout=30)
        assert not errors, f"consumer errors: {errors[:3]}"
        detail = sc.check_group_read(CLIENT, records, final, self.produced, range(sc.MESSAGES))
        return f"{detail}; {commits['ok']} commits ({commits['failed']} failed)"

    async def committed_offsets(self) -> str:
        admin = await self.admin_client()
        offsets = await admin.list_consumer_group_offsets(self.group)
        committed = {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == self.topic}
        return "OffsetFetch via admin: " + sc.check_committed(committed, self.produced)

    async def latest_group(self) -> str:
        c = self.consumer(f"{self.topic}-latest", "latest", "latest")
        early: list[sc.Record] = []
        records: list[sc.Record] = []

        async def poll_into(sink: list[sc.Record]) -> None:
            for batch in (await c.getmany(timeout_ms=200, max_records=500)).values():
                sink.extend(to_record(m) for m in batch)

        try:
            await c.start()

            async def assigned() -> bool:
                await poll_into(early)
                return len(c.assignment()) == sc.PARTITIONS

            await self.wait_for("6 partitions assigned", assigned)
            # position() waits for auto.offset.reset (ListOffsets latest) to resolve.
            positions = {tp.partition: await c.position(tp) for tp in c.assignment()}
            assert not early, f"read {len(early)} old messages before anything new was produced"
            assert positions == self.produced.end_offsets, (
                f"positioned at {dict(sorted(positions.items()))}, end offsets {self.produced.end_offsets}"
            )
            await self.send(range(sc.MESSAGES, sc.MESSAGES + sc.NEW_MESSAGES))

            async def got_all() -> bool:
                await poll_into(records)
                return len(records) >= sc.NEW_MESSAGES

            await self.wait_for(f"{sc.NEW_MESSAGES} new messages", got_all)
            quiet_end = time.monotonic() + sc.QUIET_S
            while time.monotonic() < quiet_end:
                await poll_into(records)
        finally:
            await c.stop()
        return "positioned at the end offsets; " + sc.check_latest(CLIENT, records)


def to_record(m) -> sc.Record:
    return sc.Record(
        partition=m.partition,
        offset=m.offset,
        key=m.key,
        value=m.value,
        headers=[(k, v) for k, v in (m.headers or [])],
    )


def main() -> int:
    args = sc.parse_args(CLIENT)
    s = sc.Scenario(CLIENT, args.results)
    loop = asyncio.new_event_loop()
    run = Run(args.bootstrap, args.topic, loop)
    try:
        s.run("create-topic", run.sync(run.create_topic))
        s.run("list-topics", run.sync(run.list_topics), needs=("create-topic",))
        s.run("describe-configs", run.sync(run.describe_configs), needs=("create-topic",))
        s.run("produce", run.sync(run.produce), needs=("create-topic",))
        s.run("group-consume", run.sync(run.group_consume), needs=("produce",))
        s.run("committed-offsets", run.sync(run.committed_offsets), needs=("group-consume",))
        s.run("latest-group", run.sync(run.latest_group), needs=("produce",))
        s.run("delete-topic", run.sync(run.delete_topic), needs=("create-topic",))
    finally:
        loop.run_until_complete(asyncio.wait_for(run.close(), 30))
        loop.close()
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
