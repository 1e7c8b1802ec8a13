"""The client-library scenario with kafka-python 2.0.2, the last 2.0 release (2020). See scenario.py.

Runs from its own venv (target/venv-kafka-python-2.0.2, set up by setup_old_clients.sh):

    target/venv-kafka-python-2.0.2/bin/python -B -u scenario_kafka_python_2_0_2.py --bootstrap ... --results ...

It runs scenario_kafka_python.py's steps (its Run, subclassed here) and overrides the calls
2.0.2 does not have:
- KafkaProducer has no `enable_idempotence` (idempotence came in kafka-python 2.1): the
  producer is acks=all without it, and the produce row says so;
- KafkaConsumer.commit() and position() take no `timeout_ms` (added in 2.1).
The api version kafka-python detects from ApiVersions (`api_version=None`, its default) is
reported in the create-topic row.
"""

from __future__ import annotations

import sys

import kafka
from kafka import KafkaConsumer, KafkaProducer

import scenario as sc
import scenario_kafka_python as kp

CLIENT = "kafka-python-2.0.2"


class Run(kp.Run):
    client = CLIENT
    PRODUCE_SETTINGS = "acks=all; no idempotence, which kafka-python 2.0.2 does not have"

    def create_topic(self) -> str:
        detail = super().create_topic()
        detected = ".".join(map(str, self.admin.config["api_version"]))
        return f"{detail}; kafka-python {kafka.__version__} detected broker api_version {detected}"

    def producer_config(self) -> dict:
        config = super().producer_config()
        del config["enable_idempotence"]  # 2.1+
        return config

    def producer(self) -> KafkaProducer:
        p = super().producer()
        # The api version it detected (at construction), for the produce row.
        self.producer_api_version = ".".join(map(str, p.config["api_version"]))
        return p

    def produce(self) -> str:
        return f"{super().produce()}; producer api_version {self.producer_api_version}"

    # 2.0.2's commit() (synchronous) and position() take no timeout argument.

    def commit(self, c: KafkaConsumer) -> None:
        c.commit()

    def position(self, c: KafkaConsumer, tp) -> int:
        return c.position(tp)


def main() -> int:
    if kafka.__version__ == "2.0.2":
        return kp.main(Run)
    args = sc.parse_args(CLIENT)
    s = sc.Scenario(CLIENT, args.results)
    for step in sc.STEPS:
        s.fail(step, f"kafka-python {kafka.__version__} imported, expected 2.0.2 (not its venv?)")
    return s.finish()


if __name__ == "__main__":
    sys.exit(main())
