//! Message rates for the topic pages and the hot-partitions page.
//!
//! While the console is in use (a request in the last [`IDLE_AFTER`]), every
//! [`SAMPLE_EVERY`] the console samples every partition's log end offset and size from its
//! leader ([`crate::admin::hot::sample`], the data behind `strata admin partitions --hot`),
//! as this node itself, and keeps the last two samples: their differences are each
//! partition's records/s and bytes/s in, for the whole cluster. Bytes out (answered to
//! fetches) are Kafka's `BytesOutPerSec` counters, which each node keeps for itself: the
//! console shows them for the partitions this node leads. An idle console samples nothing.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::admin::client::leaders;
use crate::admin::hot::{self, Rate, Sample};
use crate::admin::logs::TopicPartition;

use super::Console;

/// How often the partitions are sampled while the console is in use.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// A console not asked for this long stops sampling.
const IDLE_AFTER: Duration = Duration::from_secs(300);

/// The samples and what is derived from them.
#[derive(Default)]
pub struct Rates {
    /// When the console last served a request, in ms since the Unix epoch.
    last_view_ms: AtomicI64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    previous: Option<Taken>,
    last: Option<Taken>,
}

/// One sample and this node's fetch counters at the time.
struct Taken {
    sample: Sample,
    leaders: BTreeMap<TopicPartition, i32>,
    bytes_out: BTreeMap<TopicPartition, u64>,
}

/// The rates of the last window.
pub struct Snapshot {
    /// The window's length in seconds.
    pub window_secs: f64,
    /// How long ago the window ended, in seconds.
    pub age_secs: f64,
    /// Every partition's rates in, by partition.
    pub rates: BTreeMap<TopicPartition, Rate>,
    /// Each partition's leader at the window's end.
    pub leaders: BTreeMap<TopicPartition, i32>,
    /// Bytes/s out of the partitions this node leads.
    pub bytes_out: BTreeMap<TopicPartition, f64>,
}

impl Rates {
    /// Marks the console in use.
    pub fn touch(&self) {
        self.last_view_ms.store(crate::now_ms(), Ordering::Relaxed);
    }

    fn in_use(&self) -> bool {
        let idle = crate::now_ms() - self.last_view_ms.load(Ordering::Relaxed);
        u128::try_from(idle).is_ok_and(|ms| ms < IDLE_AFTER.as_millis())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The last window's rates, once two samples were taken.
    pub fn snapshot(&self) -> Option<Snapshot> {
        let s = self.lock();
        let (a, b) = (s.previous.as_ref()?, s.last.as_ref()?);
        let window = b
            .sample
            .at
            .duration_since(a.sample.at)
            .as_secs_f64()
            .max(1e-3);
        let rates = hot::rates(&a.sample, &b.sample)
            .into_iter()
            .map(|r| (r.tp.clone(), r))
            .collect();
        let bytes_out = b
            .bytes_out
            .iter()
            .filter_map(|(tp, now)| {
                let before = a.bytes_out.get(tp)?;
                Some((tp.clone(), now.saturating_sub(*before) as f64 / window))
            })
            .collect();
        Some(Snapshot {
            window_secs: window,
            age_secs: b.sample.at.elapsed().as_secs_f64(),
            rates,
            leaders: b.leaders.clone(),
            bytes_out,
        })
    }
}

/// Samples every [`SAMPLE_EVERY`] while the console is in use; runs until the process
/// stops.
pub async fn sample_while_viewed(console: Arc<Console>) {
    loop {
        tokio::time::sleep(SAMPLE_EVERY).await;
        if !console.rates.in_use() {
            continue;
        }
        let c = console.clone();
        match tokio::task::spawn_blocking(move || take(&c)).await {
            Ok(Ok(taken)) => {
                let mut s = console.rates.lock();
                s.previous = s.last.take();
                s.last = Some(taken);
            }
            Ok(Err(e)) => tracing::debug!(error = %format!("{e:#}"), "console rate sample failed"),
            Err(e) => tracing::warn!(error = %e, "console rate sample task failed"),
        }
    }
}

fn take(console: &Console) -> anyhow::Result<Taken> {
    let mut client = console.client(None)?;
    let m = client.metadata(None)?;
    let leaders = leaders(&m);
    let started = Instant::now();
    let sample = hot::sample(&mut client, &leaders)?;
    let me = console.broker.config.node_id;
    let traffic = crate::metrics::registry::traffic();
    let bytes_out = leaders
        .iter()
        .filter(|(_, l)| **l == me)
        .filter_map(|(tp, _)| {
            let t = traffic.find(&tp.0, tp.1)?;
            Some((tp.clone(), t.bytes_out.load(Ordering::Relaxed)))
        })
        .collect();
    tracing::trace!(
        partitions = leaders.len(),
        took_ms = started.elapsed().as_millis(),
        "console rate sample"
    );
    Ok(Taken {
        sample,
        leaders,
        bytes_out,
    })
}
