//! The Prometheus endpoint (`metrics.listener`) of the real `strata` binary, scraped over
//! plain HTTP after a real rdkafka producer and consumer run:
//!
//! - `scrape_after_produce_and_consume_is_consistent`: per partition, messages in equal the
//!   messages sent, bytes in cover the payloads and equal the log's size, bytes out equal
//!   the zero-copy plus copied fetch bytes; Produce and Fetch have request counts and
//!   latency histograms whose buckets add up; connections and file descriptors are
//!   reported; every sample has a `# TYPE`.
//! - `the_endpoint_refuses_what_it_does_not_serve`: another path 404, another method 405,
//!   an oversized request head 431, garbage 400, and a scrape still works afterwards.
//! - `a_bad_metrics_listener_stops_the_broker`: a value that does not parse is a
//!   configuration error naming the key.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use rdkafka::topic_partition_list::Offset;
use strata_tests::{Broker, free_port};

mod rdkafka_clients;
use rdkafka_clients::*;

/// Sends `request` as is and reads the whole answer (the server closes the connection).
fn http(port: u16, request: &[u8]) -> anyhow::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).context("connect to metrics")?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(request)?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).context("read the answer")?;
    let text = String::from_utf8(answer)?;
    let (head, body) = text.split_once("\r\n\r\n").context("no end of head")?;
    let status: u16 = head
        .split(' ')
        .nth(1)
        .context("no status")?
        .parse()
        .context("status")?;
    // A HEAD answer announces the length of the body it leaves out.
    if let Some(len) = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .filter(|_| !request.starts_with(b"HEAD "))
    {
        ensure!(
            len.parse::<usize>()? == body.len(),
            "Content-Length {len}, body {}",
            body.len()
        );
    }
    Ok((status, body.to_owned()))
}

/// Scrapes and parses every sample: `name{labels}` -> value. Checks that each sample's
/// metric was declared with `# TYPE` before it.
fn scrape(port: u16) -> anyhow::Result<BTreeMap<String, f64>> {
    let (status, body) = http(port, b"GET /metrics HTTP/1.1\r\nHost: strata\r\n\r\n")?;
    ensure!(status == 200, "status {status}: {body}");
    let mut declared = Vec::<String>::new();
    let mut samples = BTreeMap::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            declared.push(rest.split(' ').next().unwrap_or("").to_owned());
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').context("sample without a value")?;
        let name = series.split('{').next().unwrap_or(series);
        ensure!(
            declared.iter().any(|d| name == d
                || name
                    .strip_prefix(d.as_str())
                    .is_some_and(|s| { ["_bucket", "_sum", "_count"].contains(&s) })),
            "{name} has no # TYPE"
        );
        samples.insert(series.to_owned(), value.parse::<f64>().context("value")?);
    }
    Ok(samples)
}

fn get(samples: &BTreeMap<String, f64>, series: &str) -> anyhow::Result<f64> {
    samples
        .get(series)
        .copied()
        .with_context(|| format!("no sample {series}"))
}

fn start_with_metrics() -> anyhow::Result<(Broker, u16)> {
    let port = free_port()?;
    let url = format!("http://127.0.0.1:{port}/metrics");
    let b = Broker::start(&[("metrics.listener", &url)])?;
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
            let messages = get(
                &m,
                &format!("kafka_server_brokertopicmetrics_messagesin_total{labels}"),
            )?;
            ensure!(
                messages == n as f64,
                "partition {p}: messages in {messages}, sent {n}"
            );
            let bytes_in = get(
                &m,
                &format!("kafka_server_brokertopicmetrics_bytesin_total{labels}"),
            )?;
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
            let bytes_out = get(
                &m,
                &format!("kafka_server_brokertopicmetrics_bytesout_total{labels}"),
            )?;
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
        }
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

        for api in ["Produce", "Fetch", "Metadata", "ApiVersions"] {
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
        let series = format!(
            "kafka_server_brokertopicmetrics_messagesin_total{{topic=\"{topic}\",partition=\"0\"}}"
        );
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
