//! The Prometheus endpoint (`metrics.listener`) of the real `strata` binary, scraped over
//! plain HTTP after a real rdkafka producer and consumer run:
//!
//! - `scrape_after_produce_and_consume_is_consistent`: per partition, messages in equal the
//!   messages sent, bytes in cover the payloads and equal the log's size, bytes out equal
//!   the zero-copy plus copied fetch bytes; each per-topic value is the sum of its
//!   partitions'; Produce, Fetch and FetchConsumer have request counts and latency
//!   histograms whose buckets add up; a single node leads its partitions, none
//!   under-replicated, is the active controller and has applied its metadata;
//!   connections and file descriptors are reported; every sample has a `# TYPE`.
//! - `a_groups_lag_is_positive_while_behind_and_zero_once_caught_up`: a group that read and
//!   committed 40 of 100 records of one partition and none of 50 of another has lag 60 and
//!   50 (sum 110, max 60); once it has read and committed the rest, 0 on both.
//! - `the_endpoint_refuses_what_it_does_not_serve`: another path 404, another method 405,
//!   an oversized request head 431, garbage 400, and a scrape still works afterwards.
//! - `a_bad_metrics_listener_stops_the_broker`: a value that does not parse is a
//!   configuration error naming the key.

use std::time::Duration;

use anyhow::{bail, ensure};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use strata_tests::{Broker, free_port, wait_until};

use crate::metrics_scrape::{get, http, scrape};
use crate::rdkafka_clients::*;

fn start_with_metrics() -> anyhow::Result<(Broker, u16)> {
    let port = free_port()?;
    let url = format!("http://127.0.0.1:{port}/metrics");
    let b = Broker::start(&[
        ("metrics.listener", &url),
        ("offsets.topic.num.partitions", "3"),
    ])?;
    // The client port is bound before the node opens, the metrics port once it has: the
    // broker answering is no sign that the endpoint listens yet.
    wait_until(
        "the metrics endpoint listening",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || Ok(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()),
    )?;
    Ok((b, port))
}

#[test]
fn scrape_after_produce_and_consume_is_consistent() {
    let (mut b, port) = start_with_metrics().expect("start strata");
    let run = |b: &mut Broker| -> anyhow::Result<()> {
        let topic = "metrics";
        create_topic(b, topic, 2)?;
        let (producer, deliveries) = producer(b, &[])?;
        // 300 to partition 0, 200 to partition 1.
        let sent = [300usize, 200];
        let mut payload = [0usize; 2];
        for i in 0..sent[0] + sent[1] {
            let p = usize::from(i >= sent[0]);
            let value = value_of("metrics", i);
            payload[p] += value.len();
            send_to_partition(&producer, topic, i32::try_from(p)?, i, &value)?;
        }
        await_reports(&producer, &deliveries, sent[0] + sent[1], PHASE_TIMEOUT)?;
        ensure!(
            deliveries.acked_count() == sent[0] + sent[1],
            "not all acked"
        );
        let consumer = consumer(b, &[])?;
        let got = consume(
            &consumer,
            topic,
            2,
            Offset::Beginning,
            sent[0] + sent[1],
            PHASE_TIMEOUT,
        )?;
        ensure!(got.len() == sent[0] + sent[1], "consumed {}", got.len());

        let m = scrape(port)?;
        let mut bytes_out_total = 0.0;
        for (p, (&n, &payload)) in sent.iter().zip(&payload).enumerate() {
            let labels = format!("{{topic=\"{topic}\",partition=\"{p}\"}}");
            let messages = get(&m, &format!("strata_partition_messages_in_total{labels}"))?;
            ensure!(
                messages == n as f64,
                "partition {p}: messages in {messages}, sent {n}"
            );
            let bytes_in = get(&m, &format!("strata_partition_bytes_in_total{labels}"))?;
            ensure!(
                bytes_in >= payload as f64,
                "partition {p}: bytes in {bytes_in} < payload {payload}"
            );
            // Batches are stored as produced: the log holds exactly the bytes taken in.
            let size = get(&m, &format!("kafka_log_log_size{labels}"))?;
            ensure!(
                size == bytes_in,
                "partition {p}: log size {size}, bytes in {bytes_in}"
            );
            let bytes_out = get(&m, &format!("strata_partition_bytes_out_total{labels}"))?;
            ensure!(
                bytes_out >= bytes_in,
                "partition {p}: bytes out {bytes_out} < bytes in {bytes_in}"
            );
            bytes_out_total += bytes_out;
            ensure!(
                get(&m, &format!("kafka_log_log_logendoffset{labels}"))? == n as f64,
                "log end"
            );
            ensure!(
                get(&m, &format!("kafka_log_log_logstartoffset{labels}"))? == 0.0,
                "log start"
            );
            ensure!(
                get(&m, &format!("kafka_log_log_numlogsegments{labels}"))? >= 1.0,
                "segments"
            );
            // No transaction: read_committed consumers read up to the high watermark.
            ensure!(
                get(
                    &m,
                    &format!("kafka_cluster_partition_laststableoffsetlag{labels}")
                )? == 0.0,
                "last stable offset lag"
            );
            ensure!(
                get(&m, &format!("strata_log_ongoing_transactions{labels}"))? == 0.0,
                "ongoing transactions"
            );
        }
        // Kafka's per-topic series are the sums of the partitions' within one scrape.
        for (kafka, strata) in [
            ("bytesin", "bytes_in"),
            ("messagesin", "messages_in"),
            ("bytesout", "bytes_out"),
        ] {
            let topic_value = get(
                &m,
                &format!("kafka_server_brokertopicmetrics_{kafka}_total{{topic=\"{topic}\"}}"),
            )?;
            let partitions: f64 = (0..sent.len())
                .map(|p| {
                    get(
                        &m,
                        &format!(
                            "strata_partition_{strata}_total{{topic=\"{topic}\",partition=\"{p}\"}}"
                        ),
                    )
                })
                .sum::<anyhow::Result<f64>>()?;
            ensure!(
                topic_value == partitions && topic_value > 0.0,
                "{kafka}: topic {topic_value}, partitions' sum {partitions}"
            );
        }
        ensure!(
            get(
                &m,
                &format!("kafka_server_brokertopicmetrics_messagesin_total{{topic=\"{topic}\"}}")
            )? == (sent[0] + sent[1]) as f64,
            "messages in per topic"
        );
        // Every fetched byte went out by sendfile or by copy.
        let sent_bytes = get(&m, "strata_fetch_zero_copy_bytes_total")?
            + get(&m, "strata_fetch_copied_bytes_total")?;
        ensure!(
            sent_bytes == bytes_out_total,
            "fetch bytes written {sent_bytes}, bytes out {bytes_out_total}"
        );
        ensure!(
            get(&m, "strata_fetch_zero_copy_bytes_total")? > 0.0,
            "no zero-copy bytes"
        );

        // A consumer's fetches count as Kafka's FetchConsumer too; no follower fetched.
        for api in [
            "Produce",
            "Fetch",
            "FetchConsumer",
            "Metadata",
            "ApiVersions",
        ] {
            let requests = get(
                &m,
                &format!("kafka_network_requestmetrics_requests_total{{request=\"{api}\"}}"),
            )?;
            ensure!(requests >= 1.0, "{api}: {requests} requests");
            let h = "kafka_network_requestmetrics_totaltimems";
            let count = get(&m, &format!("{h}_count{{request=\"{api}\"}}"))?;
            ensure!(
                count == requests,
                "{api}: histogram count {count}, requests {requests}"
            );
            let inf = get(&m, &format!("{h}_bucket{{request=\"{api}\",le=\"+Inf\"}}"))?;
            ensure!(inf == count, "{api}: +Inf bucket {inf}, count {count}");
            // Cumulative buckets in `le` order never decrease.
            let prefix = format!("{h}_bucket{{request=\"{api}\",le=\"");
            let mut buckets: Vec<(f64, f64)> = m
                .iter()
                .filter_map(|(k, v)| {
                    let le = k.strip_prefix(&prefix)?.strip_suffix("\"}")?;
                    Some((
                        if le == "+Inf" {
                            f64::INFINITY
                        } else {
                            le.parse().ok()?
                        },
                        *v,
                    ))
                })
                .collect();
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            ensure!(buckets.len() == 19, "{api}: {} buckets", buckets.len());
            ensure!(
                buckets.windows(2).all(|w| w[0].1 <= w[1].1),
                "{api}: buckets decrease: {buckets:?}"
            );
            let sum = get(&m, &format!("{h}_sum{{request=\"{api}\"}}"))?;
            ensure!(sum > 0.0, "{api}: latency sum {sum}");
        }
        ensure!(
            get(
                &m,
                "kafka_network_requestmetrics_requests_total{request=\"FetchConsumer\"}"
            )? == get(
                &m,
                "kafka_network_requestmetrics_requests_total{request=\"Fetch\"}"
            )?,
            "every Fetch was a consumer's"
        );
        ensure!(
            !m.keys().any(|k| k.contains("request=\"FetchFollower\"")),
            "a single node has no follower fetches"
        );
        // A single node leads all it hosts (the topic's 2 partitions and the 3 of
        // `__consumer_offsets`, which the image holds as Kafka's does), is its own active
        // controller and has applied the topic's creation.
        for (series, want) in [
            ("kafka_server_replicamanager_partitioncount", 5.0),
            ("kafka_server_replicamanager_leadercount", 5.0),
            ("kafka_server_replicamanager_underreplicatedpartitions", 0.0),
            ("kafka_server_replicamanager_underminisrpartitioncount", 0.0),
            ("kafka_server_replicamanager_offlinereplicacount", 0.0),
            ("kafka_server_replicamanager_isrshrinks_total", 0.0),
            (
                "kafka_controller_kafkacontroller_activecontrollercount",
                1.0,
            ),
            (
                "kafka_controller_kafkacontroller_offlinepartitionscount",
                0.0,
            ),
            ("kafka_controller_kafkacontroller_globalpartitioncount", 5.0),
            ("kafka_controller_kafkacontroller_globaltopiccount", 2.0),
            ("kafka_controller_kafkacontroller_activebrokercount", 1.0),
            (
                "kafka_server_raft_metrics_current_state{state=\"leader\"}",
                1.0,
            ),
        ] {
            let got = get(&m, series)?;
            ensure!(got == want, "{series}: {got}, want {want}");
        }
        let applied = get(
            &m,
            "kafka_server_broker_metadata_metrics_last_applied_record_offset",
        )?;
        let end = get(&m, "kafka_server_raft_metrics_log_end_offset")?;
        ensure!(
            applied >= 1.0 && applied + 1.0 == end,
            "metadata applied {applied}, log end {end}"
        );
        // The producer and the consumer are still connected.
        let connections = get(&m, "kafka_server_socket_server_metrics_connection_count")?;
        ensure!(connections >= 2.0, "{connections} connections");
        ensure!(get(&m, "process_open_fds")? > 0.0, "no file descriptors");
        for op in ["Fetch", "Produce"] {
            let series = format!(
                "kafka_server_delayedoperationpurgatory_purgatorysize{{delayedOperation=\"{op}\"}}"
            );
            ensure!(get(&m, &series)? >= 0.0, "{series}");
        }

        // Counters only grow: produce more, scrape again.
        send_to_partition(&producer, topic, 0, 999, b"one more")?;
        await_reports(&producer, &deliveries, sent[0] + sent[1] + 1, PHASE_TIMEOUT)?;
        let again = scrape(port)?;
        let series =
            format!("strata_partition_messages_in_total{{topic=\"{topic}\",partition=\"0\"}}");
        ensure!(
            get(&again, &series)? == sent[0] as f64 + 1.0,
            "{series} after one more"
        );
        drop(consumer);
        drop(producer);
        Ok(())
    };
    if let Err(e) = run(&mut b) {
        panic!("{e:?}");
    }
}

/// Commits `offsets` (partition -> next offset to read) of `topic` for the consumer's group.
fn commit(consumer: &TestConsumer, topic: &str, offsets: &[(i32, i64)]) -> anyhow::Result<()> {
    let mut tpl = TopicPartitionList::new();
    for &(p, o) in offsets {
        tpl.add_partition_offset(topic, p, Offset::Offset(o))?;
    }
    consumer.commit(&tpl, CommitMode::Sync)?;
    Ok(())
}

/// The next offset to read after the records of `partition` in `got`.
fn next_offset(got: &[Consumed], partition: i32) -> i64 {
    got.iter()
        .filter(|c| c.partition == partition)
        .map(|c| c.offset + 1)
        .max()
        .unwrap_or(0)
}

#[test]
fn a_groups_lag_is_positive_while_behind_and_zero_once_caught_up() {
    let (mut b, port) = start_with_metrics().expect("start strata");
    let run = |b: &mut Broker| -> anyhow::Result<()> {
        let (topic, group) = ("lagging", "metrics-lag");
        create_topic(b, topic, 2)?;
        let (producer, deliveries) = producer(b, &[])?;
        let sent = [100usize, 50];
        for i in 0..sent[0] + sent[1] {
            let p = i32::from(i >= sent[0]);
            send_to_partition(&producer, topic, p, i, &value_of("lag", i))?;
        }
        await_reports(&producer, &deliveries, sent[0] + sent[1], PHASE_TIMEOUT)?;
        let consumer = consumer(b, &[("group.id", group)])?;

        // Behind: 40 of partition 0 read and committed, nothing of partition 1.
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Beginning)?;
        consumer.assign(&tpl)?;
        let got = poll_n(&consumer, 40, PHASE_TIMEOUT)?;
        let read = next_offset(&got, 0);
        ensure!(read == 40, "read up to {read}");
        commit(&consumer, topic, &[(0, read), (1, 0)])?;
        let m = scrape(port)?;
        let series = |name: &str, p: i32| {
            format!("{name}{{consumergroup=\"{group}\",topic=\"{topic}\",partition=\"{p}\"}}")
        };
        let want_lag = [sent[0] as f64 - 40.0, sent[1] as f64];
        for (p, want) in want_lag.iter().enumerate() {
            let p = i32::try_from(p)?;
            let lag = get(&m, &series("kafka_consumergroup_lag", p))?;
            ensure!(lag == *want, "partition {p}: lag {lag}, want {want}");
        }
        ensure!(
            get(&m, &series("kafka_consumergroup_current_offset", 0))? == 40.0,
            "committed offset of partition 0"
        );
        let total = want_lag[0] + want_lag[1];
        let sum = get(
            &m,
            &format!("kafka_consumergroup_lag_sum{{consumergroup=\"{group}\",topic=\"{topic}\"}}"),
        )?;
        let group_sum = get(
            &m,
            &format!("strata_consumergroup_lag_sum{{consumergroup=\"{group}\"}}"),
        )?;
        let group_max = get(
            &m,
            &format!("strata_consumergroup_lag_max{{consumergroup=\"{group}\"}}"),
        )?;
        ensure!(
            sum == total && group_sum == total && group_max == want_lag[0],
            "lag sum {sum}, group's sum {group_sum}, max {group_max}; want {total} and {}",
            want_lag[0]
        );
        println!("measured: lag {want_lag:?} (total {total}) while behind");

        // Caught up: the rest of both partitions read and committed.
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Offset(read))?;
        tpl.add_partition_offset(topic, 1, Offset::Beginning)?;
        consumer.assign(&tpl)?;
        let rest = poll_n(&consumer, sent[0] - 40 + sent[1], PHASE_TIMEOUT)?;
        let ends = [next_offset(&rest, 0), next_offset(&rest, 1)];
        ensure!(
            ends == [sent[0] as i64, sent[1] as i64],
            "read up to {ends:?}"
        );
        commit(&consumer, topic, &[(0, ends[0]), (1, ends[1])])?;
        let m = scrape(port)?;
        for p in 0..2 {
            let lag = get(&m, &series("kafka_consumergroup_lag", p))?;
            ensure!(lag == 0.0, "partition {p}: lag {lag} once caught up");
        }
        ensure!(
            get(
                &m,
                &format!("strata_consumergroup_lag_sum{{consumergroup=\"{group}\"}}")
            )? == 0.0,
            "the group's lag once caught up"
        );
        // A group that never committed has no lag series.
        ensure!(
            !m.keys().any(|k| k.contains("strata-tests-assign-only")),
            "lag of a group without offsets"
        );
        drop(consumer);
        drop(producer);
        Ok(())
    };
    if let Err(e) = run(&mut b) {
        panic!("{e:?}");
    }
}

#[test]
fn the_endpoint_refuses_what_it_does_not_serve() {
    let (_b, port) = start_with_metrics().expect("start strata");
    let check = || -> anyhow::Result<()> {
        let (status, _) = http(port, b"GET /other HTTP/1.1\r\n\r\n")?;
        ensure!(status == 404, "other path: {status}");
        let (status, _) = http(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")?;
        ensure!(status == 405, "POST: {status}");
        let (status, _) = http(port, b"\x00\x01garbage\r\n\r\n")?;
        ensure!(status == 400, "garbage: {status}");
        // A head that never ends within the cap: refused without reading on.
        let mut big = b"GET /metrics HTTP/1.1\r\n".to_vec();
        while big.len() < 16 * 1024 {
            big.extend_from_slice(
                b"X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
            );
        }
        match http(port, &big) {
            Ok((status, _)) => ensure!(status == 431, "oversized head: {status}"),
            // The server may close while the rest of the head is still being written.
            Err(e)
                if e.chain()
                    .any(|c| c.downcast_ref::<std::io::Error>().is_some()) => {}
            Err(e) => bail!("oversized head: {e:?}"),
        }
        let (status, body) = http(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")?;
        ensure!(
            status == 200 && body.is_empty(),
            "HEAD: {status}, {} bytes",
            body.len()
        );
        ensure!(
            scrape(port)?.contains_key("process_open_fds"),
            "no scrape after the refusals"
        );
        Ok(())
    };
    if let Err(e) = check() {
        panic!("{e:?}");
    }
}

#[test]
fn a_bad_metrics_listener_stops_the_broker() {
    let err = match Broker::start(&[("metrics.listener", "https://127.0.0.1:1/metrics")]) {
        Ok(_) => panic!("strata started with an https metrics.listener"),
        Err(e) => format!("{e:?}"),
    };
    assert!(err.contains("metrics.listener"), "{err}");
}
