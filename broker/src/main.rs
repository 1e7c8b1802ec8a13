//! `strata [server.properties] [--override key=value]...`
//!
//! Starts one broker node. With no arguments it serves `localhost:9092` with data in `./data`.
//! `strata healthcheck ...` asks a running node instead (see `healthcheck.rs`), and
//! `strata admin ...` administers a running cluster (see `admin_cli/`).

mod admin_cli;
mod healthcheck;

use std::process::ExitCode;
use std::sync::Arc;

use strata_broker::broker::Broker;
use strata_broker::config::BrokerConfig;
use strata_broker::quorum::QuorumHandle;
use strata_broker::security::ListenerSecurity;
use strata_broker::server::connection_limits::{ConnectionLimits, CreationPacer};
use strata_broker::server::{connection, housekeeping, start};
use strata_protocol::versions::ListenerType;
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

/// How long a shutdown waits for the connections to answer the requests they hold: a
/// parked fetch (`fetch.max.wait.ms`, 500 ms by default) or a produce being appended ends
/// well inside it; a produce waiting for replicas that do not come is cut off.
const DRAIN_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("healthcheck") {
        return healthcheck::main(&std::env::args().skip(2).collect::<Vec<_>>());
    }
    if std::env::args().nth(1).as_deref() == Some("admin") {
        return admin_cli::main(&std::env::args().skip(2).collect::<Vec<_>>());
    }
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

/// One bound entry of `listeners`.
struct BoundListener {
    /// The listener's name (`PLAINTEXT`, `CONTROLLER`), for logs.
    name: String,
    /// Which API table its connections are served.
    kind: ListenerType,
    socket: TcpListener,
    /// Its TLS and SASL settings.
    security: Arc<ListenerSecurity>,
}

/// Binds every listener in `listeners` before anything else starts, so that a port in use
/// stops the node at once. A listener named in `controller.listener.names` is tagged as a
/// controller listener.
async fn bind_listeners(config: &BrokerConfig) -> anyhow::Result<Vec<BoundListener>> {
    let mut bound = Vec::with_capacity(config.listeners.len());
    for endpoint in &config.listeners {
        // Kafka binds an empty host to every interface.
        let host = if endpoint.host.is_empty() {
            "0.0.0.0"
        } else {
            endpoint.host.as_str()
        };
        let addr = format!("{host}:{}", endpoint.port);
        let addr = if host.contains(':') {
            format!("[{host}]:{}", endpoint.port)
        } else {
            addr
        };
        let socket = TcpListener::bind(&addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {} ({addr}): {e}", endpoint.name))?;
        let kind = if config.is_controller_listener(&endpoint.name) {
            ListenerType::Controller
        } else {
            ListenerType::Broker
        };
        let security = Arc::new(ListenerSecurity::for_listener(config, endpoint)?);
        let ktls = strata_broker::security::ktls::support();
        let tls = match &security.tls {
            None => "none".to_owned(),
            Some(_) if ktls.any() => format!(
                "kernel TLS (kTLS) after the rustls handshake, fetches keep sendfile ({}); other ciphers in user space",
                ktls.describe()
            ),
            Some(_) => format!(
                "user-space TLS (rustls), fetches are read and written: no kernel TLS ({})",
                ktls.unavailable.unwrap_or("unknown")
            ),
        };
        let mechanisms: Vec<&str> = security
            .sasl
            .iter()
            .flat_map(|s| s.mechanisms.iter().map(|m| m.name()))
            .collect();
        tracing::info!(listener = %endpoint.name, address = %socket.local_addr().map_or(addr, |a| a.to_string()), ?kind, protocol = endpoint.security_protocol.name(), tls = %tls, sasl = ?mechanisms, "listening");
        bound.push(BoundListener {
            name: endpoint.name.clone(),
            kind,
            socket,
            security,
        });
    }
    Ok(bound)
}

/// Every 5 s, loads a listener's TLS keys again for its next connections if a keystore or
/// truststore file changed, or if AlterConfigs set this node's
/// `listener.name.<l>.ssl.*` keys (Kafka's dynamic keystore update), which take
/// precedence over `server.properties`.
async fn reload_tls(
    broker: Arc<Broker>,
    listener: String,
    tls: Arc<strata_broker::security::tls::ReloadingConfig>,
) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
    let mut refused = None;
    loop {
        tick.tick().await;
        let image = broker.image();
        let config = &broker.config;
        let dynamic = |k: &str| {
            strata_broker::config::dynamic::broker_value(
                &image,
                config.node_id,
                &strata_broker::config::listener_key(&listener, k),
            )
            .map(|(v, _)| v.to_owned())
            .filter(|v| !v.is_empty())
        };
        let settings = strata_broker::security::tls::TlsSettings::from_lookup(
            &listener,
            |k| dynamic(k).or_else(|| config.listener_value(&listener, k).map(str::to_owned)),
            |k| dynamic(k).is_some() || config.listener_value_is_explicit(&listener, k),
        );
        match settings {
            Ok(settings) => {
                refused = None;
                let t = tls.clone();
                let _ = tokio::task::spawn_blocking(move || t.reload(settings)).await;
            }
            Err(e) => {
                let why = e.to_string();
                if refused.as_ref() != Some(&why) {
                    tracing::warn!(%listener, error = %why, "dynamic TLS settings refused; keeping the previous ones");
                    refused = Some(why);
                }
            }
        }
    }
}

/// Accepts connections on one listener until the process stops. Controller-listener
/// connections hand the quorum RPCs to `quorum`, when this node runs one. Kafka's connection
/// quotas apply (`server::connection_limits`): the creation rate paces the accepts, a full
/// `max.connections` holds them (not on the listeners between nodes), and an address over
/// `max.connections.per.ip` has its new connection closed at once.
async fn accept_loop(
    broker: Arc<Broker>,
    listener: BoundListener,
    quorum: Option<QuorumHandle>,
    limits: Arc<ConnectionLimits>,
) {
    let name: Arc<str> = Arc::from(listener.name.as_str());
    let between_nodes = listener.kind == ListenerType::Controller
        || (listener.name == broker.config.inter_broker_listener_name
            && !broker.config.is_sole_voter());
    if let Some(tls) = listener.security.tls.clone() {
        tokio::spawn(reload_tls(broker.clone(), listener.name.clone(), tls));
    }
    let mut pacer = CreationPacer::default();
    loop {
        limits.wait_for_room(&broker, &name, between_nodes).await;
        pacer.pace(&broker, &name).await;
        match listener.socket.accept().await {
            Ok((stream, peer)) => {
                let admitted = match limits.admit(&broker, peer.ip(), &name, between_nodes) {
                    Ok(a) => a,
                    Err(max) => {
                        strata_broker::metrics::connection_refused_per_ip();
                        tracing::debug!(listener = %listener.name, %peer, max, "closing connection: max.connections.per.ip reached");
                        drop(stream);
                        continue;
                    }
                };
                let serve = connection::serve_on(
                    broker.clone(),
                    stream,
                    peer,
                    listener.kind,
                    Some(name.clone()),
                    quorum.clone(),
                    listener.security.clone(),
                );
                tokio::spawn(async move {
                    serve.await;
                    drop(admitted);
                });
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(listener = %listener.name, error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

async fn run(config: BrokerConfig) -> anyhow::Result<()> {
    // First of all, so that a SIGTERM that arrives while the node is still starting (its
    // listeners already take connections into the backlog) is a clean stop after the start,
    // not the default action of killing the process.
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let listeners = bind_listeners(&config).await?;
    let bind = format!("{}:{}", config.listen_host, config.listen_port);
    let data_dir = config.log_dir.clone();
    // Before any log is opened, so that every write knows its path from the start.
    tracing::info!("{}", strata_storage::io::detect());
    let node = start::start(config).await?;
    let broker = node.broker.clone();
    tracing::info!(
        listener = %bind,
        advertised = %format!("{}:{}", broker.config.advertised_host, broker.config.advertised_port),
        data_dir = %data_dir.display(),
        node_id = broker.config.node_id,
        cluster_id = %broker.image().cluster_id,
        "strata started"
    );
    let quorum = Some(node.quorum.clone());
    let lifecycle = Some(node.lifecycle.clone());
    tokio::spawn(housekeeping::run(broker.clone()));
    strata_broker::server::observe::start(broker.clone()).await?;
    strata_broker::server::console::start(broker.clone()).await?;
    let limits = Arc::new(ConnectionLimits::default());
    // The controller listeners first: the quorum (and so the wait below) needs them.
    let (controller, clients): (Vec<_>, Vec<_>) = listeners
        .into_iter()
        .partition(|l| l.kind == ListenerType::Controller);
    let mut accepting: Vec<_> = controller
        .into_iter()
        .map(|l| {
            tokio::spawn(accept_loop(
                broker.clone(),
                l,
                quorum.clone(),
                limits.clone(),
            ))
        })
        .collect();
    node.wait_for_clients().await;
    accepting.extend(clients.into_iter().map(|l| {
        tokio::spawn(accept_loop(
            broker.clone(),
            l,
            quorum.clone(),
            limits.clone(),
        ))
    }));
    tokio::select! {
        _ = sigint.recv() => {}
        _ = sigterm.recv() => {}
    }
    // No new connections from here on, as before: the listeners close with their tasks.
    if let Some(lifecycle) = lifecycle
        .as_ref()
        .filter(|_| broker.config.process_roles.broker && broker.config.controlled_shutdown_enable)
    {
        // Controlled shutdown: the controller moves this broker's leaderships away first.
        let moved = lifecycle
            .controlled_shutdown(std::time::Duration::from_secs(10))
            .await;
        tracing::info!(moved, "controlled shutdown");
    }
    for task in &accepting {
        task.abort();
    }
    if let Some(quorum) = &quorum {
        // A leader hands over before it goes, so the quorum does not wait out a timeout.
        quorum.resign(std::time::Duration::from_millis(200)).await;
    }
    // The requests already read are answered before the logs are flushed.
    strata_broker::server::drain::begin();
    let left = strata_broker::server::drain::wait(DRAIN_BOUND).await;
    if left > 0 {
        tracing::warn!(connections = left, bound = ?DRAIN_BOUND, "closing connections still waiting for an answer");
    } else {
        tracing::info!("every connection answered and closed");
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
