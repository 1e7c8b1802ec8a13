//! The web console (`console.listener`): the cluster in a browser, served by the broker
//! itself, with nothing else to install. See docs/CONSOLE.md for the pages and the JSON
//! endpoints behind them.
//!
//! The console is a Kafka client of the cluster, as an external console would be: every
//! page is built from the answers of Kafka's APIs (Metadata, DescribeConfigs, ListOffsets,
//! DescribeLogDirs, ListGroups, DescribeGroups, OffsetFetch, Fetch, DescribeAcls, ...) sent
//! to the node that serves each (a partition's leader, a group's coordinator, the active
//! controller for metadata writes), through the admin client [`crate::admin`]. It reaches
//! every node, itself included, on the inter-broker listener with the node's own
//! credentials, and marks each request with the signed-in user (the forwarded client id of
//! [`crate::server::forward`]), so each node authorizes it as that user: what the user may
//! not describe is not shown, and an action the user may not take is refused with Kafka's
//! error code.
//!
//! - `http`: the listener (hyper, HTTP/1.1), limits, routing, and the answers.
//! - `auth`: who is asking: HTTP basic checked against the SCRAM credentials and the SASL
//!   listeners' PLAIN users; anonymous only when the node runs no authorizer and no SASL.
//! - `views`: the data of each page, as JSON.
//! - `messages`: the message browser and the bounded search.
//! - `actions`: the writes (topics, partitions, configs, offsets, records).
//! - `rates`: the sampler behind message rates and hot partitions.
//! - `pages`: the HTML of each page, and the embedded script and style.

mod actions;
mod auth;
mod http;
mod messages;
mod pages;
mod rates;
mod views;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::admin::client::Client;
use crate::broker::Broker;

/// How long each Kafka request of the console may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the overview's liveness probe of a node may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The console's state: the node, its settings, and what it remembers between requests.
pub struct Console {
    broker: Arc<Broker>,
    read_only: bool,
    auth: auth::Authenticator,
    rates: rates::Rates,
    lag: views::LagHistory,
}

/// The signed-in user a request acts as.
#[derive(Debug, Clone)]
pub struct User {
    /// Kafka's principal, `User:<name>` (`User:ANONYMOUS` without security).
    pub principal: String,
    /// The browser's address, which ACLs with a host match.
    pub host: IpAddr,
}

/// Binds `console.listener`, when set, and serves it in a task of its own.
///
/// # Errors
///
/// The bind failure, or PLAIN users that do not parse: a configured console that cannot
/// serve stops the node, as a client listener does.
pub async fn start(broker: Arc<Broker>) -> std::io::Result<()> {
    let Some(listener) = broker.config.console_listener.clone() else {
        return Ok(());
    };
    let addr = listener.address();
    let socket = tokio::net::TcpListener::bind(&addr).await.map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot listen on console.listener ({addr}): {e}"),
        )
    })?;
    let authenticator = auth::Authenticator::for_node(&broker.config)
        .map_err(|e| std::io::Error::other(format!("console.listener: {e:#}")))?;
    let console = Arc::new(Console {
        read_only: broker.config.console_read_only,
        auth: authenticator,
        rates: rates::Rates::default(),
        lag: views::LagHistory::default(),
        broker,
    });
    tracing::info!(
        address = %socket.local_addr()?,
        read_only = console.read_only,
        authentication = console.auth.required(),
        "console listening"
    );
    tokio::spawn(rates::sample_while_viewed(console.clone()));
    tokio::spawn(http::serve(socket, console));
    Ok(())
}

impl Console {
    /// Every registered node's inter-broker endpoint, `host:port`.
    fn routes(&self) -> BTreeMap<i32, String> {
        let image = self.broker.image();
        image
            .brokers
            .keys()
            .filter_map(|&id| {
                crate::broker::inter_broker_endpoint(&self.broker, &image, id)
                    .map(|(h, p)| (id, join_host_port(&h, p)))
            })
            .collect()
    }

    /// An admin client that reaches every node on its inter-broker listener and acts as
    /// `user` (`None`: as this node itself, for the rate sampler).
    ///
    /// # Errors
    ///
    /// When this node has no registered inter-broker endpoint yet.
    fn client(&self, user: Option<&User>) -> anyhow::Result<Client> {
        self.client_within(user, REQUEST_TIMEOUT)
    }

    /// [`Console::client`] with each request bounded by `timeout`.
    ///
    /// # Errors
    ///
    /// As [`Console::client`].
    fn client_within(&self, user: Option<&User>, timeout: Duration) -> anyhow::Result<Client> {
        let routes = self.routes();
        let own = routes
            .get(&self.broker.config.node_id)
            .cloned()
            .context("this node is not registered yet; try again in a moment")?;
        let client_id = match user {
            Some(u) => format!(
                "{}|{}|{}",
                crate::server::forward::FORWARDED_CLIENT_ID,
                u.host,
                u.principal
            ),
            None => "strata-console".to_owned(),
        };
        Ok(Client::new(&own, timeout)
            .with_security(self.broker.peers.inter_broker.clone())
            .with_client_id(client_id)
            .with_routes(routes))
    }

    /// The active controller's node id, where metadata writes go: a request marked with a
    /// user is never forwarded again, so it must reach the controller itself.
    ///
    /// # Errors
    ///
    /// While no controller is known, or when it is a dedicated controller with no broker
    /// endpoint.
    fn controller(&self) -> anyhow::Result<i32> {
        let id = match self.broker.quorum() {
            Some(q) => q
                .status()
                .leader
                .map(|l| l.0)
                .context("no active controller is known; try again in a moment")?,
            None => self.broker.config.node_id,
        };
        anyhow::ensure!(
            self.routes().contains_key(&id),
            "the active controller ({id}) is a dedicated controller; the console writes through broker endpoints only"
        );
        Ok(id)
    }
}

/// `host:port`, with brackets around an IPv6 host.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}
