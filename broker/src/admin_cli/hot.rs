//! `strata admin partitions --hot`: finds partitions that carry far more than their topic's
//! share of the traffic.
//!
//! Every partition's log end offset (ListOffsets, to its leader) and size (DescribeLogDirs,
//! on its leader) is sampled twice, `--window` seconds apart; the differences are each
//! partition's records/s and bytes/s. A topic is flagged when its busiest partition's rate,
//! in records or in bytes, is more than `--factor` times the topic's median partition rate.
//! The median, not the mean, is the yardstick because one hot partition drags the mean up
//! with it. A topic that received too few records in the window to tell skew from chance
//! (fewer than [`MIN_RECORDS_PER_PARTITION`] a partition) is reported, not judged.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::bail;

use super::args::Args;
use super::client::{Client, leaders};
use super::logs::{self, LATEST, TopicPartition};
use super::table::Table;

pub const USAGE: &str =
    "strata admin partitions --hot [--topic T]... [--window SECS] [--factor N] [--top N]";

/// `--window`'s default, in seconds.
const DEFAULT_WINDOW_SECS: f64 = 10.0;
/// `--factor`'s default.
const DEFAULT_FACTOR: f64 = 3.0;
/// `--top`'s default: how many partitions the ranking shows.
const DEFAULT_TOP: usize = 20;
/// Below this many records a partition in the window, a topic's spread is chance.
pub const MIN_RECORDS_PER_PARTITION: i64 = 10;

/// One sample of every partition: log end offset and size.
struct Sample {
    at: Instant,
    ends: BTreeMap<TopicPartition, i64>,
    sizes: BTreeMap<TopicPartition, i64>,
}

fn sample(client: &mut Client, leaders: &BTreeMap<TopicPartition, i32>) -> anyhow::Result<Sample> {
    let at = Instant::now();
    let ends = logs::list_offsets(
        client,
        leaders,
        &leaders.keys().map(|tp| (tp.clone(), LATEST)).collect(),
    )?
    .into_iter()
    .filter_map(|(tp, r)| r.ok().map(|o| (tp, o)))
    .collect();
    let sizes = logs::log_sizes(client, leaders, leaders.keys().cloned())?;
    Ok(Sample { at, ends, sizes })
}

/// One partition's rates over the window.
#[derive(Debug, Clone, PartialEq)]
pub struct Rate {
    pub tp: TopicPartition,
    pub records: i64,
    pub records_per_sec: f64,
    pub bytes_per_sec: f64,
}

/// A topic's verdict.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Too few records in the window to judge.
    TooQuiet { records: i64 },
    /// No partition above `factor` × the median.
    Balanced { max_ratio: f64 },
    /// The busiest partition and how many times the median it carries.
    Hot { partition: i32, ratio: f64 },
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// How many times `median` the rate `max` is (infinite over a zero median).
fn ratio(max: f64, median: f64) -> f64 {
    if median > 0.0 {
        max / median
    } else if max > 0.0 {
        f64::INFINITY
    } else {
        1.0
    }
}

/// Judges one topic's partitions (at least one).
pub fn judge(rates: &[Rate], factor: f64) -> Verdict {
    let records: i64 = rates.iter().map(|r| r.records).sum();
    let needed = MIN_RECORDS_PER_PARTITION * i64::try_from(rates.len()).unwrap_or(i64::MAX);
    if rates.len() < 2 || records < needed {
        return Verdict::TooQuiet { records };
    }
    let mut worst = (0, 0.0_f64);
    for by in [
        (|r: &Rate| r.records_per_sec) as fn(&Rate) -> f64,
        |r: &Rate| r.bytes_per_sec,
    ] {
        let m = median(rates.iter().map(by).collect());
        for r in rates {
            let x = ratio(by(r), m);
            if x > worst.1 {
                worst = (r.tp.1, x);
            }
        }
    }
    if worst.1 > factor {
        Verdict::Hot {
            partition: worst.0,
            ratio: worst.1,
        }
    } else {
        Verdict::Balanced { max_ratio: worst.1 }
    }
}

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
    let mut rates: Vec<Rate> = leaders
        .keys()
        .filter_map(|tp| {
            let records = second.ends.get(tp)? - first.ends.get(tp)?;
            let bytes = match (second.sizes.get(tp), first.sizes.get(tp)) {
                // Retention may have deleted segments in between: no negative rates.
                (Some(b), Some(a)) => (b - a).max(0),
                _ => 0,
            };
            Some(Rate {
                tp: tp.clone(),
                records: records.max(0),
                records_per_sec: records.max(0) as f64 / elapsed,
                bytes_per_sec: bytes as f64 / elapsed,
            })
        })
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(records: &[i64]) -> Vec<Rate> {
        records
            .iter()
            .enumerate()
            .map(|(i, &n)| Rate {
                tp: ("t".to_owned(), i32::try_from(i).unwrap()),
                records: n,
                records_per_sec: n as f64,
                bytes_per_sec: n as f64 * 100.0,
            })
            .collect()
    }

    #[test]
    fn skew_is_hot_and_uniform_is_not() {
        assert!(matches!(
            judge(&rates(&[2000, 100, 110, 90, 95, 105]), 3.0),
            Verdict::Hot { partition: 0, .. }
        ));
        assert!(matches!(
            judge(&rates(&[500, 480, 520, 510, 490, 505]), 3.0),
            Verdict::Balanced { .. }
        ));
        // One busy partition among idle ones is as hot as it gets.
        assert!(matches!(
            judge(&rates(&[400, 0, 0, 0]), 3.0),
            Verdict::Hot { partition: 0, ratio } if ratio.is_infinite()
        ));
        assert!(matches!(
            judge(&rates(&[3, 0, 1, 0]), 3.0),
            Verdict::TooQuiet { records: 4 }
        ));
        assert!(matches!(
            judge(&rates(&[1000]), 3.0),
            Verdict::TooQuiet { .. }
        ));
        assert_eq!(median(vec![3.0, 1.0, 2.0, 10.0]), 2.5);
    }
}
