//! Which partitions carry far more than their topic's share of the traffic: the ranking
//! behind `strata admin partitions --hot` and the console's hot-partitions page.
//!
//! Every partition's log end offset (ListOffsets, to its leader) and size (DescribeLogDirs,
//! on its leader) is sampled twice, some seconds apart; the differences are each
//! partition's records/s and bytes/s. A topic is flagged when its busiest partition's rate,
//! in records or in bytes, is more than a factor times the topic's median partition rate.
//! The median, not the mean, is the yardstick because one hot partition drags the mean up
//! with it. A topic that received too few records in the window to tell skew from chance
//! (fewer than [`MIN_RECORDS_PER_PARTITION`] a partition) is reported, not judged.

use std::collections::BTreeMap;
use std::time::Instant;

use super::client::Client;
use super::logs::{self, LATEST, TopicPartition};

/// Below this many records a partition in the window, a topic's spread is chance.
pub const MIN_RECORDS_PER_PARTITION: i64 = 10;

/// One sample of every partition: log end offset and size.
#[derive(Debug, Clone)]
pub struct Sample {
    pub at: Instant,
    pub ends: BTreeMap<TopicPartition, i64>,
    pub sizes: BTreeMap<TopicPartition, i64>,
}

/// Samples every partition in `leaders` (partition to leader) once.
///
/// # Errors
///
/// An unreachable leader, or an answer that does not decode.
pub fn sample(
    client: &mut Client,
    leaders: &BTreeMap<TopicPartition, i32>,
) -> anyhow::Result<Sample> {
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

pub fn median(mut v: Vec<f64>) -> f64 {
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

/// Each partition's rates between two samples of the same partitions (those in both).
#[must_use]
pub fn rates(first: &Sample, second: &Sample) -> Vec<Rate> {
    let elapsed = second.at.duration_since(first.at).as_secs_f64().max(1e-3);
    second
        .ends
        .iter()
        .filter_map(|(tp, end)| {
            let records = end - first.ends.get(tp)?;
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
        .collect()
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
