//! The active controller under a storm of metadata writes while leadership changes, on a
//! three-node combined cluster of real `strata` processes.
//!
//! Writers send CreateTopics and CreateAcls to every node at once (the leader answers its
//! own in process, the others forward them), and in the middle of it the controller is
//! stopped (it resigns) and started again. The controller's writes once waited on runtime
//! workers (a std mutex held across the commit, a sleep-poll for readiness), and a write
//! answered inline on the leader starved the quorum driver of its worker: the followers'
//! fetches went unanswered and the quorum stalled for the proposal timeout. So, throughout:
//!
//! - every voter that stays up fetches from the leader within
//!   `controller.quorum.fetch.timeout.ms`, as the leader's DescribeQuorum reports it
//!   (`LastFetchTimestamp`, aged from when the question was asked, since a stalled driver
//!   answers the queued fetches and the question together);
//! - the one leadership change the test causes is the only one or nearly (a starved
//!   leader loses its followers, who elect again and again);
//! - every write is answered, with success or one of the errors a client retries, and
//!   every topic whose creation succeeded is on every node once the storm is over.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use strata_protocol::StrBytes;
use strata_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use strata_protocol::messages::{
    ApiKey, CreateAclsRequest, DescribeQuorumRequest, RequestKind, ResponseKind, TopicName,
    create_acls_request,
};
use strata_tests::cluster::{Cluster, create_topic_raw};
use strata_tests::{serial, wait_until};

/// The quorum's fetch timeout (Kafka's default), and the bound every voter's fetches must
/// keep to.
const FETCH_TIMEOUT_MS: i64 = 2000;
const SETTINGS: &[(&str, &str)] = &[
    ("broker.session.timeout.ms", "6000"),
    ("broker.heartbeat.interval.ms", "500"),
    ("controller.quorum.fetch.timeout.ms", "2000"),
    // ACL writes need an authorizer (else SECURITY_DISABLED); every request stays allowed.
    (
        "authorizer.class.name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    ),
    ("allow.everyone.if.no.acl.found", "true"),
];
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);
/// How long the writers write.
const STORM: Duration = Duration::from_secs(14);
/// Writers at once.
const WRITERS: usize = 6;
/// The errors a client retries on a metadata write while the controller moves.
const RETRIABLE: &[i16] = &[
    7,  // REQUEST_TIMED_OUT
    41, // NOT_CONTROLLER
];

/// CreateAcls v3 of one ALLOW READ binding on group `name`: its error code.
fn create_acl(port: u16, name: &str) -> anyhow::Result<i16> {
    let s = |v: &str| StrBytes::from_string(v.to_owned());
    let creation = create_acls_request::AclCreation::default()
        // A group binding: a topic binding would hide the topic from the anonymous client.
        .with_resource_type(3) // GROUP
        .with_resource_name(s(name))
        .with_resource_pattern_type(3) // LITERAL
        .with_principal(s("User:storm"))
        .with_host(s("*"))
        .with_operation(3) // READ
        .with_permission_type(3); // ALLOW
    let req = RequestKind::CreateAcls(CreateAclsRequest::default().with_creations(vec![creation]));
    match crate::acl_client::try_call(port, ApiKey::CreateAcls, 3, &req, Duration::from_secs(30))? {
        ResponseKind::CreateAcls(r) => Ok(r.results.first().map_or(-1, |r| r.error_code)),
        other => anyhow::bail!("unexpected {other:?}"),
    }
}

/// What the leader's DescribeQuorum says: the leader, its epoch, and each voter's
/// `(id, last fetch ms)`.
type QuorumView = (i32, i32, Vec<(i32, i64)>);

/// The leader's DescribeQuorum v1.
fn describe_quorum(port: u16) -> anyhow::Result<QuorumView> {
    let req = RequestKind::DescribeQuorum(DescribeQuorumRequest::default().with_topics(vec![
        TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)]),
    ]));
    let ResponseKind::DescribeQuorum(r) = crate::acl_client::try_call(
        port,
        ApiKey::DescribeQuorum,
        1,
        &req,
        Duration::from_secs(5),
    )?
    else {
        anyhow::bail!("not a DescribeQuorum answer");
    };
    let p = r
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| anyhow::anyhow!("no partition in the answer"))?;
    anyhow::ensure!(p.error_code == 0, "DescribeQuorum error {}", p.error_code);
    let voters = p
        .current_voters
        .iter()
        .map(|v| (v.replica_id.0, v.last_fetch_timestamp))
        .collect();
    Ok((p.leader_id.0, p.leader_epoch, voters))
}

fn wall_ms() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

#[test]
fn the_quorum_keeps_its_fetch_timeouts_under_concurrent_writes_across_a_leader_change() {
    let _serial = serial();
    let mut c = Cluster::start(3, SETTINGS);
    let first = c.wait_ready(WAIT);
    let survivors: Vec<i32> = c.ids().into_iter().filter(|id| *id != first).collect();
    let ports: Vec<(i32, u16)> = c.ids().into_iter().map(|id| (id, c.port(id))).collect();
    let (_, start_epoch, _) = describe_quorum(c.port(first)).expect("DescribeQuorum");

    let stop = Arc::new(AtomicBool::new(false));
    let created = Arc::new(Mutex::new(Vec::<String>::new()));
    let refused = Arc::new(Mutex::new(Vec::<(String, i16)>::new()));
    // How each kind of write was answered ("unsent": the node was down), for the log.
    let outcomes = Arc::new(Mutex::new(BTreeMap::<String, usize>::new()));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (stop, created, refused) = (stop.clone(), created.clone(), refused.clone());
            let outcomes = outcomes.clone();
            let count = move |what: &str, answer: &anyhow::Result<i16>| {
                let key = match answer {
                    Ok(code) => format!("{what} {code}"),
                    Err(_) => format!("{what} unsent"),
                };
                *outcomes.lock().unwrap().entry(key).or_default() += 1;
            };
            let ports = ports.clone();
            std::thread::spawn(move || {
                let mut n = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let (_, port) = ports[(w + n) % ports.len()];
                    let topic = format!("storm-{w}-{n}");
                    n += 1;
                    // A node that is down refuses the connection: that write was never sent.
                    // Two replicas: while the controller is away two brokers are left.
                    let answer = create_topic_raw(port, &topic, 1, 2);
                    count("CreateTopics", &answer);
                    if let Ok(code) = answer {
                        match code {
                            // TOPIC_ALREADY_EXISTS: a forwarded creation that committed
                            // before its answer was lost, sent again by the forwarder.
                            0 | 36 => created.lock().unwrap().push(topic.clone()),
                            c if RETRIABLE.contains(&c) => {}
                            c => refused.lock().unwrap().push((topic.clone(), c)),
                        }
                    }
                    let answer = create_acl(port, &topic);
                    count("CreateAcls", &answer);
                    if let Ok(code) = answer
                        && code != 0
                        && !RETRIABLE.contains(&code)
                    {
                        refused.lock().unwrap().push((format!("acl {topic}"), code));
                    }
                }
                n
            })
        })
        .collect();

    // The monitor: the voters that stay up keep fetching from whichever of them leads.
    let monitor = {
        let stop = stop.clone();
        let survivors = survivors.clone();
        let ports = ports.clone();
        std::thread::spawn(move || {
            let mut worst: Vec<(i32, i64)> = Vec::new();
            let mut samples = 0;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                for &(id, port) in ports.iter().filter(|(id, _)| survivors.contains(id)) {
                    let asked = wall_ms();
                    let Ok((leader, _, voters)) = describe_quorum(port) else {
                        continue;
                    };
                    if leader != id {
                        continue;
                    }
                    let now = wall_ms();
                    samples += 1;
                    // The driver answers DescribeQuorum in turn with the fetches: a leader
                    // whose driver stalls answers late, and the fetches it then answers at
                    // once look fresh. So the age counts from when the question was asked.
                    let waited = now - asked;
                    for (voter, last) in voters {
                        // The leader itself, a voter that has not fetched from this leader
                        // yet (-1), and the node the test stops are not judged.
                        if voter == leader || last < 0 || !survivors.contains(&voter) {
                            continue;
                        }
                        worst.push((voter, (asked - last).max(0) + waited));
                    }
                }
            }
            (samples, worst)
        })
    };

    std::thread::sleep(STORM / 3);
    // The leadership change: the controller stops cleanly (it resigns), and comes back.
    let (status, took) = c.node(first).stop(Duration::from_secs(20)).expect("stop");
    assert!(
        status.success(),
        "the controller's exit: {status:?} after {took:?}"
    );
    let next = c
        .wait_controller(&survivors, WAIT)
        .expect("a new controller among the others");
    assert_ne!(next, first);
    std::thread::sleep(STORM / 3);
    c.node(first).restart();
    std::thread::sleep(STORM / 3);
    stop.store(true, Ordering::Relaxed);
    let written: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
    let (samples, ages) = monitor.join().unwrap();

    let refused = refused.lock().unwrap().clone();
    assert!(
        refused.is_empty(),
        "{} writes refused, the first: {:?}",
        refused.len(),
        &refused[..refused.len().min(10)]
    );
    let created = created.lock().unwrap().clone();
    assert!(
        created.len() >= WRITERS,
        "only {} of {written} topics created",
        created.len()
    );
    assert!(samples >= 10, "only {samples} DescribeQuorum samples");
    let late: Vec<_> = ages
        .iter()
        .filter(|(_, age)| *age > FETCH_TIMEOUT_MS)
        .collect();
    assert!(
        late.is_empty(),
        "voters that did not fetch within {FETCH_TIMEOUT_MS} ms: {late:?} (of {} samples)",
        ages.len()
    );
    let leader = c.wait_controller(&c.ids(), WAIT).expect("one controller");
    let (_, end_epoch, _) = describe_quorum(c.port(leader)).expect("DescribeQuorum");
    // One change caused, and at most one more (the stopped node's return may start one).
    assert!(
        end_epoch - start_epoch <= 2,
        "epochs {start_epoch} -> {end_epoch}: the quorum elected again and again"
    );
    eprintln!("quorum epochs {start_epoch} -> {end_epoch}");
    let started = Instant::now();
    for id in c.ids() {
        let port = c.port(id);
        let mut missing = Vec::new();
        let mut failure = None;
        wait_until("every created topic on every node", WAIT, POLL, || {
            let m = match strata_tests::cluster::metadata(port) {
                Ok(m) => m,
                Err(e) => {
                    failure = Some(e.to_string());
                    return Ok(false);
                }
            };
            missing = created
                .iter()
                .filter(|t| !m.topics.contains_key(*t))
                .cloned()
                .collect();
            Ok(missing.is_empty())
        })
        .unwrap_or_else(|e| {
            let elsewhere: Vec<_> = c
                .ids()
                .into_iter()
                .map(|other| {
                    let m = strata_tests::cluster::metadata(c.port(other)).ok();
                    let has = missing
                        .iter()
                        .filter(|t| m.as_ref().is_some_and(|m| m.topics.contains_key(*t)))
                        .count();
                    (other, has)
                })
                .collect();
            panic!(
                "node {id}: {e} after {:?} (last Metadata failure {failure:?}); {} missing, the first {:?}; (node, of those it has) {elsewhere:?}",
                started.elapsed(),
                missing.len(),
                &missing[..missing.len().min(5)]
            )
        });
    }
    eprintln!(
        "{written} writes {:?}, {} topics created, {samples} DescribeQuorum samples, oldest fetch {} ms",
        outcomes.lock().unwrap(),
        created.len(),
        ages.iter().map(|(_, a)| *a).max().unwrap_or(0)
    );
}
