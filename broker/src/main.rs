//! `strata [server.properties] [--override key=value]...`
//!
//! Starts one broker node. With no arguments it serves `localhost:9092` with data in `./data`.

use std::process::ExitCode;

use strata_broker::broker::Broker;
use strata_broker::config::BrokerConfig;
use strata_broker::{connection, housekeeping, now_ms};
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: strata [server.properties] [--override key=value]...");
        return ExitCode::SUCCESS;
    }
    let env: Vec<(String, String)> = std::env::vars().collect();
    let config = match BrokerConfig::from_args(&args, &env) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("strata: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("strata: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "broker stopped");
            eprintln!("strata: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: BrokerConfig) -> anyhow::Result<()> {
    let bind = format!("{}:{}", config.listen_host, config.listen_port);
    let listener = TcpListener::bind(&bind)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {bind}: {e}"))?;
    let data_dir = config.log_dir.clone();
    // Before any log is opened, so that every write knows its path from the start.
    tracing::info!("{}", strata_storage::io::detect());
    let broker = tokio::task::spawn_blocking(move || Broker::open(config, now_ms())).await??;
    tracing::info!(
        listener = %bind,
        advertised = %format!("{}:{}", broker.config.advertised_host, broker.config.advertised_port),
        data_dir = %data_dir.display(),
        node_id = broker.config.node_id,
        cluster_id = %broker.image().cluster_id,
        "strata started"
    );
    tokio::spawn(housekeeping::run(broker.clone()));
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tokio::spawn(connection::serve(broker.clone(), stream, peer));
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = sigterm.recv() => break,
        }
    }
    tracing::info!("shutting down: flushing logs");
    let b = broker.clone();
    tokio::task::spawn_blocking(move || b.flush_all()).await?;
    tracing::info!(
        zero_copy_bytes = broker
            .zero_copy_bytes
            .load(std::sync::atomic::Ordering::Relaxed),
        copied_bytes = broker
            .copied_bytes
            .load(std::sync::atomic::Ordering::Relaxed),
        "fetch bytes sent"
    );
    let (uring_ops, plain_ops) = strata_storage::io::counters();
    tracing::info!(uring_ops, plain_ops, "segment writes and fsyncs");
    let (flush_waits, flush_batches, files_fsynced) =
        strata_broker::partition::group_commit::counters();
    tracing::info!(
        flush_waits,
        flush_batches,
        files_fsynced,
        "group commit: appends that waited for an fsync, batches, .log fsyncs"
    );
    tracing::info!("clean shutdown complete");
    Ok(())
}
