//! `strata admin partitions --hot`: finds partitions that carry far more than their topic's
//! share of the traffic, sampling twice `--window` seconds apart and judging each topic
//! against `--factor` times its median partition rate ([`strata_broker::admin::hot`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::bail;
use strata_broker::admin::hot::{self, MIN_RECORDS_PER_PARTITION, Rate, Verdict, judge, sample};

use super::args::Args;
use super::client::{Client, leaders};
use super::logs::TopicPartition;
use super::table::Table;

pub const USAGE: &str =
    "strata admin partitions --hot [--topic T]... [--window SECS] [--factor N] [--top N]";

/// `--window`'s default, in seconds.
const DEFAULT_WINDOW_SECS: f64 = 10.0;
/// `--factor`'s default.
const DEFAULT_FACTOR: f64 = 3.0;
/// `--top`'s default: how many partitions the ranking shows.
const DEFAULT_TOP: usize = 20;

/// Runs `partitions --hot ...`.
///
/// # Errors
///
/// A bad command line, an unreachable broker, or any error a broker answered.
pub fn run(client: &mut Client, args: &[String]) -> anyhow::Result<()> {
    let a = Args::parse(
        args,
        &["--topic", "--window", "--factor", "--top"],
        &["--hot"],
    )?;
    if !a.switch("--hot") || !a.positional.is_empty() {
        bail!("usage: {USAGE}");
    }
    let window = a.number::<f64>("--window")?.unwrap_or(DEFAULT_WINDOW_SECS);
    if window.is_nan() || window <= 0.0 || window > 3600.0 {
        bail!("--window must be between 0 and 3600 seconds");
    }
    let factor = a.number::<f64>("--factor")?.unwrap_or(DEFAULT_FACTOR);
    if factor.is_nan() || factor <= 1.0 {
        bail!("--factor must be more than 1");
    }
    let top = a.number::<usize>("--top")?.unwrap_or(DEFAULT_TOP);
    let topics = a.values("--topic");
    let m = super::topics::topic_metadata(client, topics)?;
    let named = !topics.is_empty();
    // Internal topics (`__consumer_offsets`) only when named.
    let leaders: BTreeMap<TopicPartition, i32> = leaders(&m)
        .into_iter()
        .filter(|(tp, _)| named || !tp.0.starts_with("__"))
        .collect();
    if leaders.is_empty() {
        bail!("no partitions to sample");
    }
    let first = sample(client, &leaders)?;
    eprintln!(
        "first sample taken of {} partitions; sampling again in {window} s",
        leaders.len()
    );
    let _ = std::io::stderr().flush();
    std::thread::sleep(Duration::from_secs_f64(window));
    let second = sample(client, &leaders)?;
    let elapsed = second.at.duration_since(first.at).as_secs_f64().max(1e-3);
    eprintln!("second sample taken, {elapsed:.1} s after the first");
    let mut rates = hot::rates(&first, &second);
    let mut by_topic: BTreeMap<String, Vec<Rate>> = BTreeMap::new();
    for r in &rates {
        by_topic.entry(r.tp.0.clone()).or_default().push(r.clone());
    }
    let totals: BTreeMap<String, f64> = by_topic
        .iter()
        .map(|(t, rs)| (t.clone(), rs.iter().map(|r| r.records_per_sec).sum()))
        .collect();
    rates.sort_by(|a, b| {
        b.bytes_per_sec
            .total_cmp(&a.bytes_per_sec)
            .then(b.records_per_sec.total_cmp(&a.records_per_sec))
            .then(a.tp.cmp(&b.tp))
    });
    println!("Partitions by rate over {elapsed:.1} s:");
    let mut t = Table::new(&[
        "TOPIC",
        "PARTITION",
        "LEADER",
        "RECORDS/S",
        "BYTES/S",
        "TOPIC-SHARE",
    ]);
    for r in rates.iter().take(top) {
        let total = totals.get(&r.tp.0).copied().unwrap_or(0.0);
        t.row(vec![
            r.tp.0.clone(),
            r.tp.1.to_string(),
            leaders
                .get(&r.tp)
                .map_or_else(|| "-".to_owned(), ToString::to_string),
            format!("{:.1}", r.records_per_sec),
            format!("{:.0}", r.bytes_per_sec),
            if total > 0.0 {
                format!("{:.0}%", 100.0 * r.records_per_sec / total)
            } else {
                "-".to_owned()
            },
        ]);
    }
    t.print();
    println!();
    let mut hot = 0;
    for (topic, rs) in &by_topic {
        match judge(rs, factor) {
            Verdict::Hot { partition, ratio } => {
                hot += 1;
                let times = if ratio.is_finite() {
                    format!("{ratio:.1}x")
                } else {
                    "all".to_owned()
                };
                println!(
                    "HOT PARTITION: {topic}:{partition} carries {times} the topic's median partition rate (threshold {factor}x)."
                );
                println!("  Likely a skewed key: a few keys carry most records. Fixes:");
                println!(
                    "  - a compound key (the hot key plus a second field) to spread one entity's records;"
                );
                println!(
                    "  - salting the hot key (key-0 .. key-N) and merging the N streams downstream;"
                );
                println!(
                    "  - more partitions (strata admin topics add-partitions), which helps only when the load is spread over many keys."
                );
            }
            Verdict::Balanced { max_ratio } => {
                println!(
                    "{topic}: balanced (busiest partition {max_ratio:.1}x the median, threshold {factor}x)"
                );
            }
            Verdict::TooQuiet { records } => {
                println!(
                    "{topic}: {records} records in the window, too few to judge ({} a partition needed)",
                    MIN_RECORDS_PER_PARTITION
                );
            }
        }
    }
    println!();
    println!("{hot} hot topic(s).");
    Ok(())
}
