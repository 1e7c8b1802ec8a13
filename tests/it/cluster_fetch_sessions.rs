//! Followers fetch in incremental fetch sessions (KIP-227): on a three-node cluster, each
//! node's fetcher holds a session with each leader, which caches every partition it follows
//! there; acks=all produces complete through them; a leader killed with SIGKILL
//! loses its sessions, and the followers, answered FETCH_SESSION_ID_NOT_FOUND once it is
//! back, open new ones. After each round every replica's log ends where its leader's does,
//! and every acknowledged record is read back.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use strata_tests::cluster::{Cluster, create_topic_raw};
use strata_tests::{free_port, serial, strata_bin, wait_until};

use crate::cluster_clients::{produce, producer, read_back};
use crate::metrics_scrape::{get, scrape};

const TOPIC: &str = "sessioned";
const PARTITIONS: i32 = 12;
const ELECTION: Duration = Duration::from_secs(30);
const MARGIN: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);

/// Waits until every partition is led, not by `not_by`, with all three replicas in sync;
/// returns each node's led partitions.
fn wait_in_sync(c: &Cluster, from: i32, not_by: Option<i32>) -> BTreeMap<i32, Vec<i32>> {
    let m = c
        .wait_metadata(from, "every partition led, 3 in sync", MARGIN, |m| {
            let parts = m.partitions(TOPIC);
            parts.len() == PARTITIONS as usize
                && parts
                    .values()
                    .all(|p| p.leader >= 0 && Some(p.leader) != not_by && p.isr.len() == 3)
        })
        .unwrap_or_else(|e| panic!("{e:?}"));
    let mut led: BTreeMap<i32, Vec<i32>> = c.ids().into_iter().map(|id| (id, vec![])).collect();
    for (index, p) in m.partitions(TOPIC) {
        led.entry(p.leader).or_default().push(index);
    }
    led
}

/// Waits until each node holds one session per other node's fetcher, caching the
/// partitions it leads for each, and every replica's log ends where the leader's does.
fn wait_sessions(c: &Cluster, metrics: &BTreeMap<i32, u16>, led: &BTreeMap<i32, Vec<i32>>) {
    let mut last = String::new();
    wait_until("follower sessions and replica logs", MARGIN, POLL, || {
        let samples: BTreeMap<i32, _> = c
            .ids()
            .into_iter()
            .map(|id| scrape(metrics[&id]).map(|m| (id, m)))
            .collect::<anyhow::Result<_>>()?;
        for (id, m) in &samples {
            let n = led[id].len() as f64;
            let (sessions, cached) = (
                get(m, "strata_fetch_sessions")?,
                get(m, "strata_fetch_session_partitions")?,
            );
            // At least: a fetcher that stopped while its connection was down, or a node
            // restarted, leaves a session behind until it is evicted, as in Kafka.
            let want = if n > 0.0 { (2.0, 2.0 * n) } else { (0.0, 0.0) };
            if sessions < want.0 || cached < want.1 {
                last = format!(
                    "node {id}: {sessions} sessions, {cached} partitions; want at least {want:?}"
                );
                return Ok(false);
            }
        }
        for (leader, parts) in led {
            for p in parts {
                let series =
                    format!("kafka_log_log_logendoffset{{topic=\"{TOPIC}\",partition=\"{p}\"}}");
                let end = get(&samples[leader], &series)?;
                for (id, m) in &samples {
                    if get(m, &series)? != end {
                        last = format!("partition {p}: node {id} ends elsewhere than {end}");
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    })
    .unwrap_or_else(|e| panic!("{e:?}: {last}"));
}

#[test]
fn followers_replicate_through_sessions_and_reopen_them_after_a_leader_restarts() {
    let _serial = serial();
    assert!(Path::new(&strata_bin()).is_file(), "build strata first");
    let metrics: BTreeMap<i32, u16> = (1..=3).map(|id| (id, free_port().unwrap())).collect();
    let mut c = Cluster::start_with_node_settings(
        3,
        &[("leader.imbalance.check.interval.seconds", "3600")],
        |id| {
            vec![(
                "metrics.listener".to_owned(),
                format!("http://127.0.0.1:{}/metrics", metrics[&id]),
            )]
        },
    );
    let controller = c.wait_ready(ELECTION);
    assert_eq!(
        create_topic_raw(c.port(controller), TOPIC, PARTITIONS, 3).expect("CreateTopics"),
        0
    );
    let led = wait_in_sync(&c, controller, None);

    let p = producer(&c.bootstrap(&c.ids()));
    let (mut acked, errors) = produce(&p, TOPIC, PARTITIONS, 30, "first");
    assert!(errors.is_empty(), "{errors:?}");
    wait_sessions(&c, &metrics, &led);

    // The node leading the most partitions, other than the controller, is killed and
    // started again: the followers' sessions with it are gone.
    let victim = led
        .iter()
        .filter(|(id, _)| **id != controller)
        .max_by_key(|(_, parts)| parts.len())
        .map(|(id, _)| *id)
        .expect("a leader");
    c.node(victim).kill9();
    c.node(victim).restart();
    // Back within its session, the new incarnation is fenced from leadership when it
    // registers: its partitions move, and it rejoins their ISRs as a follower.
    let led = wait_in_sync(&c, controller, Some(victim));
    let (more, errors) = produce(&p, TOPIC, PARTITIONS, 30, "second");
    assert!(errors.is_empty(), "{errors:?}");
    acked.extend(more);
    wait_sessions(&c, &metrics, &led);
    let missing = read_back(&c.bootstrap(&c.ids()), TOPIC, PARTITIONS, &acked);
    assert!(missing.is_empty(), "{missing:?}");
    println!(
        "measured: {} records acknowledged through follower sessions, all read back",
        acked.len()
    );
}
