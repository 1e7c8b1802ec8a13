//! The rdkafka admin client as the admin tests use it: a client for the broker, options
//! bounded by the test's timeout, and a current-thread runtime to wait on its futures.

use std::future::Future;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use strata_tests::Broker;

/// An admin client bootstrapped at the broker.
pub fn admin(b: &Broker) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .create()
        .expect("admin client")
}

/// Admin options whose operation and request timeouts are `timeout`.
pub fn admin_opts(timeout: Duration) -> AdminOptions {
    AdminOptions::new()
        .operation_timeout(Some(timeout))
        .request_timeout(Some(timeout))
}

/// Runs an admin future to completion on a current-thread runtime.
pub fn block<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}
