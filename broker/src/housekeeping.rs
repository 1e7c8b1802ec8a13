//! The periodic task that applies retention (`log.retention.check.interval.ms`) and the
//! time-based flush policy (`log.flush.interval.ms`).

use std::sync::Arc;
use std::time::Duration;

use crate::broker::Broker;

/// Runs housekeeping forever. Retention deletes whole segments and may block on the disk, so
/// each pass runs on the blocking pool, away from the connection tasks.
pub async fn run(broker: Arc<Broker>) {
    let mut period = broker.config.log_retention_check_interval_ms;
    period = period.min(broker.config.offsets_retention_check_interval_ms);
    if let Some(flush_ms) = broker.config.log_flush_interval_ms {
        period = period.min(u64::try_from(flush_ms.max(1)).unwrap_or(1));
    }
    let mut ticker = tokio::time::interval(Duration::from_millis(period.max(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let b = broker.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || b.housekeeping(crate::now_ms())).await {
            tracing::error!(error = %e, "housekeeping pass failed");
        }
    }
}
