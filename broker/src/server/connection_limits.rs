//! Kafka's connection quotas (`SocketServer.ConnectionQuotas`), with Kafka's keys, read at
//! each accept so that AlterConfigs changes them live (they are cluster-wide dynamic keys):
//!
//! | key | what happens |
//! |---|---|
//! | `max.connections.per.ip`, `max.connections.per.ip.overrides` | a connection over its address's limit is closed as soon as it is accepted |
//! | `max.connections` | at the limit, client listeners stop accepting until a connection closes; the inter-broker and controller listeners are exempt, so a flood of clients cannot cut the nodes off from one another (Kafka protects its inter-broker listener the same way) |
//! | `max.connection.creation.rate` | each listener accepts at most this many connections a second; the rest wait in the kernel's backlog |
//! | `listener.name.<l>.max.connections` | at the limit, listener `<l>` stops accepting until one of its connections closes; this applies to the listeners between nodes too, as in Kafka |
//! | `listener.name.<l>.max.connection.creation.rate` | listener `<l>` accepts at most this many connections a second (and no more than `max.connection.creation.rate`) |
//!
//! Every limit defaults to 2^31-1, that is, none.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::broker::Broker;

const UNLIMITED: u64 = i32::MAX as u64;

/// The node's open connections, by address.
#[derive(Default)]
pub struct ConnectionLimits {
    open: Mutex<Open>,
    closed: Notify,
}

#[derive(Default)]
struct Open {
    total: u64,
    per_ip: HashMap<IpAddr, u64>,
    per_listener: HashMap<Arc<str>, u64>,
}

/// One admitted connection: it counts until dropped.
pub struct Admitted {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
    listener: Arc<str>,
    counted_in_total: bool,
}

/// Takes one from `key`'s count in `map`, dropping the entry at zero.
fn decrement<K: std::hash::Hash + Eq>(map: &mut HashMap<K, u64>, key: &K) {
    if let Some(n) = map.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            map.remove(key);
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        {
            let mut open = self.limits.open.lock().unwrap_or_else(|e| e.into_inner());
            if self.counted_in_total {
                open.total = open.total.saturating_sub(1);
            }
            decrement(&mut open.per_ip, &self.ip);
            decrement(&mut open.per_listener, &self.listener);
        }
        self.limits.closed.notify_waiters();
    }
}

/// A key's value as this node resolves it: its dynamic value (its own, else the cluster
/// default), else `server.properties`.
fn setting(broker: &Broker, key: &str) -> Option<String> {
    let image = broker.image();
    crate::config::dynamic::broker_value(&image, broker.config.node_id, key)
        .map(|(v, _)| v.to_owned())
        .or_else(|| broker.config.values.get(key).cloned())
        // `listener.name.<l>.<key>` from `server.properties`.
        .or_else(|| broker.config.listener_overrides.get(key).cloned())
}

/// A limit key's value; none when unset or unparsable.
fn limit(broker: &Broker, key: &str) -> u64 {
    setting(broker, key)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(UNLIMITED)
}

/// `max.connections.per.ip` for `ip`, with `max.connections.per.ip.overrides`
/// (`host:count,...`; the host as the address prints, or a name that resolves to it is not
/// looked up).
fn per_ip_limit(broker: &Broker, ip: IpAddr) -> u64 {
    let overrides = setting(broker, "max.connections.per.ip.overrides").unwrap_or_default();
    let me = ip.to_string();
    overrides
        .split(',')
        .filter_map(|entry| entry.trim().rsplit_once(':'))
        .find(|(host, _)| host.trim() == me)
        .and_then(|(_, n)| n.trim().parse().ok())
        .unwrap_or_else(|| limit(broker, "max.connections.per.ip"))
}

impl ConnectionLimits {
    /// Waits until the node holds fewer than `max.connections` counted connections (any
    /// number for an exempt listener), and `listener` fewer than its
    /// `listener.name.<l>.max.connections`.
    pub async fn wait_for_room(&self, broker: &Broker, listener: &str, exempt: bool) {
        loop {
            let closed = self.closed.notified();
            let max = if exempt {
                UNLIMITED
            } else {
                limit(broker, "max.connections")
            };
            let listener_max = limit(
                broker,
                &crate::config::listener_key(listener, "max.connections"),
            );
            if max >= UNLIMITED && listener_max >= UNLIMITED {
                return;
            }
            {
                let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
                let on_listener = open.per_listener.get(listener).copied().unwrap_or(0);
                if open.total < max && on_listener < listener_max {
                    return;
                }
            }
            // A connection closing, or a raised limit (checked again every second).
            let _ = tokio::time::timeout(Duration::from_secs(1), closed).await;
        }
    }

    /// Counts a connection accepted from `ip`, or refuses it: its address already holds
    /// `max.connections.per.ip`.
    pub fn admit(
        self: &Arc<Self>,
        broker: &Broker,
        ip: IpAddr,
        listener: &Arc<str>,
        exempt: bool,
    ) -> Result<Admitted, u64> {
        let per_ip = per_ip_limit(broker, ip);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.per_ip.entry(ip).or_insert(0);
        if *n >= per_ip {
            return Err(per_ip);
        }
        *n += 1;
        if !exempt {
            open.total += 1;
        }
        *open.per_listener.entry(listener.clone()).or_insert(0) += 1;
        Ok(Admitted {
            limits: self.clone(),
            ip,
            listener: listener.clone(),
            counted_in_total: !exempt,
        })
    }
}

/// Paces one listener's accepts to `max.connection.creation.rate`.
#[derive(Default)]
pub struct CreationPacer {
    next: Option<Instant>,
}

impl CreationPacer {
    /// Waits, if need be, so that `listener`'s accepts run no faster than its rate: the lower
    /// of `max.connection.creation.rate` and `listener.name.<l>.max.connection.creation.rate`.
    pub async fn pace(&mut self, broker: &Broker, listener: &str) {
        let rate = limit(broker, "max.connection.creation.rate").min(limit(
            broker,
            &crate::config::listener_key(listener, "max.connection.creation.rate"),
        ));
        if rate >= UNLIMITED || rate == 0 {
            self.next = None;
            return;
        }
        let gap = Duration::from_secs(1) / u32::try_from(rate).unwrap_or(u32::MAX);
        let now = Instant::now();
        let at = self.next.map_or(now, |n| n.max(now));
        if at > now {
            tokio::time::sleep_until(at).await;
        }
        self.next = Some(at + gap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admitted_connection_counts_until_dropped() {
        let limits = Arc::new(ConnectionLimits::default());
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let listener: Arc<str> = Arc::from("EXTERNAL");
        let mut open = limits.open.lock().unwrap();
        open.per_ip.insert(ip, 1);
        open.per_listener.insert(listener.clone(), 1);
        open.total = 1;
        drop(open);
        let a = Admitted {
            limits: limits.clone(),
            ip,
            listener,
            counted_in_total: true,
        };
        drop(a);
        let open = limits.open.lock().unwrap();
        assert_eq!(open.total, 0);
        assert!(open.per_ip.is_empty());
        assert!(open.per_listener.is_empty());
    }
}
