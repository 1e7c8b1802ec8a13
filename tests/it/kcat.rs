//! Debian's `kcat` (librdkafka 2.0.2 inside) against the real `strata` binary: an older client
//! than the rdkafka crate's, so this checks compatibility with what is deployed in the wild.
//!
//! kcat is a prerequisite: `./test.sh` installs it. If it is missing these tests fail; they do
//! not skip. Set `KCAT` to use another binary.

use std::collections::{BTreeMap, HashMap};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, ensure};
use strata_tests::{Broker, run_with_timeout, with_broker};

const KCAT_TIMEOUT: Duration = Duration::from_secs(60);

fn kcat_bin() -> String {
    std::env::var("KCAT").unwrap_or_else(|_| "kcat".to_string())
}

/// Runs kcat with `args` and `stdin`; fails on timeout or a non-zero exit. Returns stdout.
fn kcat(args: &[&str], stdin: &[u8]) -> anyhow::Result<String> {
    let bin = kcat_bin();
    let mut cmd = Command::new(&bin);
    cmd.args(args);
    let out = match run_with_timeout(&mut cmd, stdin, KCAT_TIMEOUT) {
        Ok(out) => out,
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
            }) =>
        {
            panic!(
                "`{bin}` not found on PATH. kcat is required for these tests: \
                 install it with `apt-get install -y kcat` (./test.sh does this)"
            )
        }
        Err(e) => return Err(e),
    };
    let stdout = String::from_utf8(out.stdout).context("kcat stdout is not UTF-8")?;
    ensure!(
        out.status.success(),
        "kcat {args:?} exited with {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(stdout)
}

fn produce_lines(
    broker: &Broker,
    topic: &str,
    lines: &[String],
    extra: &[&str],
) -> anyhow::Result<()> {
    let mut input = lines.join("\n");
    input.push('\n');
    let bootstrap = broker.bootstrap();
    let mut args = vec!["-P", "-b", &bootstrap, "-t", topic, "-K:", "-X", "acks=all"];
    args.extend_from_slice(extra);
    kcat(&args, input.as_bytes())?;
    Ok(())
}

/// Consumes a whole topic with `-e` (exit at the end of every partition) in `format`.
fn consume_all(broker: &Broker, topic: &str, format: &str) -> anyhow::Result<Vec<String>> {
    let bootstrap = broker.bootstrap();
    let out = kcat(
        &[
            "-C",
            "-b",
            &bootstrap,
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-f",
            format,
        ],
        b"",
    )?;
    Ok(out.lines().map(str::to_string).collect())
}

fn keyed_lines(n: usize, tag: &str) -> Vec<String> {
    (0..n)
        .map(|i| format!("key{}:{tag}-value-{i}", i % 17))
        .collect()
}

/// Checks that `got` holds exactly the lines of `sent` and that, for each key, the values come
/// in the order they were sent (one key always lands on one partition, which keeps order).
fn check_keyed(sent: &[String], got: &[String]) -> anyhow::Result<()> {
    let mut want_sorted = sent.to_vec();
    want_sorted.sort();
    let mut got_sorted = got.to_vec();
    got_sorted.sort();
    ensure!(
        want_sorted == got_sorted,
        "consumed {} lines, produced {}; first consumed: {:?}",
        got.len(),
        sent.len(),
        &got[..got.len().min(5)]
    );
    let per_key = |lines: &[String]| {
        let mut m: HashMap<String, Vec<String>> = HashMap::new();
        for l in lines {
            let (k, v) = l.split_once(':').expect("key:value");
            m.entry(k.to_string()).or_default().push(v.to_string());
        }
        m
    };
    ensure!(per_key(sent) == per_key(got), "per-key order differs");
    Ok(())
}

#[test]
fn kcat_produce_list_consume() {
    with_broker(&[("num.partitions", "3")], |broker| {
        let topic = "kcat-keyed";
        let sent = keyed_lines(1_000, "plain");
        // The topic does not exist yet: the producer's Metadata request auto-creates it.
        produce_lines(broker, topic, &sent, &[])?;

        let listing = kcat(&["-L", "-b", &broker.bootstrap()], b"")?;
        let want_broker = format!("broker 1 at 127.0.0.1:{}", broker.port());
        ensure!(
            listing.contains(&want_broker),
            "no `{want_broker}` in:\n{listing}"
        );
        let want_topic = format!("topic \"{topic}\" with 3 partitions");
        ensure!(
            listing.contains(&want_topic),
            "no `{want_topic}` in:\n{listing}"
        );

        let got = consume_all(broker, topic, "%k:%s\n")?;
        check_keyed(&sent, &got)?;

        // Offsets: each partition 0..n with no gap, and ListOffsets (kcat -Q) agrees.
        let placed = consume_all(broker, topic, "%p:%o\n")?;
        let mut offsets: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
        for l in &placed {
            let (p, o) = l.split_once(':').context("partition:offset")?;
            offsets.entry(p.parse()?).or_default().push(o.parse()?);
        }
        ensure!(
            offsets.len() == 3,
            "partitions with data: {:?}",
            offsets.keys()
        );
        for (p, os) in &offsets {
            ensure!(
                os.iter().copied().eq(0..os.len() as i64),
                "partition {p} offsets are not 0..{}: {os:?}",
                os.len()
            );
            // -1 asks ListOffsets for the latest offset, i.e. the high watermark.
            let q = kcat(
                &[
                    "-Q",
                    "-b",
                    &broker.bootstrap(),
                    "-t",
                    &format!("{topic}:{p}:-1"),
                ],
                b"",
            )?;
            let want = format!("[{p}] offset {}", os.len());
            ensure!(q.contains(&want), "kcat -Q: want `{want}` in {q:?}");
        }
        Ok(())
    });
}

/// Each codec round-trips, and the batches on disk carry the codec kcat was asked for.
/// librdkafka before 2.11 (Debian's is 2.0.2) compresses only when the broker advertises
/// Produce from v0 (KAFKA-18659); against a range starting at v3 it silently sends every
/// batch uncompressed, and only the stored attributes show it.
#[test]
fn kcat_compressed_round_trip() {
    with_broker(&[("num.partitions", "2")], |broker| {
        for (codec, id) in [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)] {
            let topic = format!("kcat-{codec}");
            let sent = keyed_lines(2_000, codec);
            produce_lines(broker, &topic, &sent, &["-z", codec, "-X", "linger.ms=20"])?;
            let got = consume_all(broker, &topic, "%k:%s\n")?;
            check_keyed(&sent, &got).with_context(|| format!("codec {codec}"))?;
            let codecs = stored_codecs(broker, &topic, 2)?;
            ensure!(
                codecs == BTreeMap::from([(id, codecs.values().sum())]),
                "{codec}: stored batches by codec id {codecs:?}, want all {id}"
            );
        }
        Ok(())
    });
}

/// The number of stored batches per codec id (attributes & 7) in the first segment of each
/// of the topic's `partitions`, read from disk in Kafka's layout: each batch starts with its
/// base offset (8 bytes) and its length (4, counted from the byte after it), then the
/// partition leader epoch (4), magic (1), CRC (4) and attributes (2).
fn stored_codecs(
    broker: &Broker,
    topic: &str,
    partitions: i32,
) -> anyhow::Result<BTreeMap<u8, usize>> {
    let mut codecs = BTreeMap::new();
    for p in 0..partitions {
        let path = broker
            .data_dir()
            .join(format!("{topic}-{p}"))
            .join(format!("{:020}.log", 0));
        let log = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let mut at = 0;
        while let Some(head) = log.get(at..at + 23) {
            let len = i32::from_be_bytes(head[8..12].try_into()?);
            ensure!(
                head[16] == 2,
                "{}: batch at {at} has magic {}",
                path.display(),
                head[16]
            );
            *codecs.entry(head[22] & 7).or_default() += 1;
            at += 12 + usize::try_from(len)?;
        }
    }
    ensure!(!codecs.is_empty(), "{topic}: no batches on disk");
    Ok(codecs)
}
