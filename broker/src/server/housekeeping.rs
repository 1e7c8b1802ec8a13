//! The periodic tasks: retention (`log.retention.check.interval.ms`), the time-based flush
//! policy (`log.flush.interval.ms`), the coordinators' expiry of offsets and transactional
//! ids; on timers of their own, the abort of timed-out transactions and the recovery point
//! checkpoint (`log.flush.offset.checkpoint.interval.ms`, Kafka's 60 s default); and the transaction
//! coordinator's marker sender ([`crate::server::txn_markers`]), and the log cleaner
//! ([`crate::broker::log_cleaner`]).

use std::sync::Arc;
use std::time::Duration;

use crate::broker::{Broker, RECOVERY_POINT_CHECKPOINT_INTERVAL_MS};

/// Runs housekeeping forever. Retention deletes whole segments and may block on the disk, so
/// each pass runs on the blocking pool, away from the connection tasks.
pub async fn run(broker: Arc<Broker>) {
    tokio::spawn(checkpoint_recovery_points(broker.clone()));
    tokio::spawn(crate::server::txn_markers::run(broker.clone()));
    tokio::spawn(abort_timed_out_transactions(broker.clone()));
    if broker.log_cleaner.enabled {
        for _ in 0..broker.log_cleaner.threads {
            tokio::spawn(clean_logs(broker.clone()));
        }
    }
    let mut period = broker.config.log_retention_check_interval_ms;
    period = period.min(broker.config.offsets_retention_check_interval_ms);
    period = period.min(
        u64::try_from(broker.config.transaction_remove_expired_interval_ms).unwrap_or(u64::MAX),
    );
    if let Some(flush_ms) = broker.config.log_flush_interval_ms {
        period = period.min(u64::try_from(flush_ms.max(1)).unwrap_or(1));
    }
    // As Kafka's LogManager, the first pass waits `log.initial.task.delay.ms`, so that a node
    // that starts serves before it deletes; a shorter check interval shortens the wait.
    let period = Duration::from_millis(period.max(1));
    let first = Duration::from_millis(broker.config.log_initial_task_delay_ms).min(period);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + first, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let b = broker.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || b.housekeeping(crate::now_ms())).await {
            tracing::error!(error = %e, "housekeeping pass failed");
        }
    }
}

/// Writes the recovery points every [`RECOVERY_POINT_CHECKPOINT_INTERVAL_MS`], on the
/// blocking pool (the file is fsynced).
async fn checkpoint_recovery_points(broker: Arc<Broker>) {
    let period = Duration::from_millis(RECOVERY_POINT_CHECKPOINT_INTERVAL_MS);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let b = broker.clone();
        match tokio::task::spawn_blocking(move || b.checkpoint_recovery_points()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot write the recovery point checkpoint"),
            Err(e) => tracing::error!(error = %e, "recovery point checkpoint failed"),
        }
    }
}

/// Aborts the transactions that outlived their timeout, every
/// `transaction.abort.timed.out.transaction.cleanup.interval.ms` (each pass waits for its
/// writes, so it runs apart from the other housekeeping).
async fn abort_timed_out_transactions(broker: Arc<Broker>) {
    let period = u64::try_from(broker.txns.config().abort_timed_out_interval_ms).unwrap_or(1);
    let mut ticker = tokio::time::interval(Duration::from_millis(period.max(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if let Some(n @ 1..) = broker.txns.maybe_abort_timed_out(crate::now_ms()).await {
            tracing::info!(aborted = n, "aborted timed-out transactions");
        }
    }
}

/// The log cleaner ([`crate::broker::log_cleaner`]): rounds one after another on the blocking
/// pool while logs are due, `log.cleaner.backoff.ms` apart when none is.
async fn clean_logs(broker: Arc<Broker>) {
    let backoff = Duration::from_millis(broker.log_cleaner.backoff_ms.max(1));
    // This loop's throttle: moved into each round, and back out of it.
    let mut throttle = broker.log_cleaner.throttler();
    loop {
        let b = broker.clone();
        let round = move || {
            let mut t = throttle;
            (b.clean_filthiest_log(crate::now_ms(), &mut t), t)
        };
        let ran = match tokio::task::spawn_blocking(round).await {
            Ok((ran, t)) => {
                throttle = t;
                Ok(ran)
            }
            Err(e) => {
                throttle = broker.log_cleaner.throttler();
                Err(e)
            }
        };
        match ran {
            Ok(true) => {}
            Ok(false) => tokio::time::sleep(backoff).await,
            Err(e) => {
                tracing::error!(error = %e, "log cleaner round failed");
                tokio::time::sleep(backoff).await;
            }
        }
    }
}
