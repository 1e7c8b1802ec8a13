//! SIGTERM drains the connections before the broker exits: requests already read are
//! answered, then the connections close, then the logs are flushed.
//!
//! A long-polling fetch is parked on an empty partition when SIGTERM arrives: its answer
//! still comes (empty, once its wait ends), and the broker exits 0 soon after. A second
//! connection that is idle is closed without an answer to anything. After the restart,
//! what was acknowledged before the stop is there.

use std::thread;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use strata_tests::Broker;
use strata_tests::wire::{self, recv, send};

const TOPIC: &str = "draining";
/// The parked fetch's wait: long enough that SIGTERM lands while it is parked.
const MAX_WAIT_MS: i32 = 2000;

#[test]
fn sigterm_answers_a_parked_fetch_then_exits() {
    let mut b = Broker::start(&[]).expect("start");
    // One record, acknowledged with acks=all (the topic is auto-created).
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("acks", "all")
        .set("linger.ms", "0")
        .create()
        .expect("producer");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let delivery = rt
        .block_on(
            p.send(
                FutureRecord::<(), str>::to(TOPIC)
                    .partition(0)
                    .payload("before-stop"),
                Duration::from_secs(30),
            ),
        )
        .unwrap_or_else(|(e, _)| panic!("produce: {e}"));
    assert_eq!(
        (delivery.partition, delivery.offset),
        (0, 0),
        "acknowledged at offset 0"
    );
    drop(p);

    let mut s = wire::connect(b.port());
    // A fetch past the end parks; an idle connection waits for nothing.
    send(&mut s, &wire::fetch_request(4, TOPIC, 1, MAX_WAIT_MS, 1));
    let idle = wire::connect(b.port());
    let parked = thread::spawn(move || {
        let answer = recv(&mut s);
        (answer, Instant::now())
    });
    let idle_closed = thread::spawn(move || {
        let mut idle = idle;
        recv(&mut idle).is_none()
    });
    thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let status = b.stop().expect("stop");
    let exited = t.elapsed();
    assert!(status.success(), "SIGTERM exits 0: {status}");
    let (answer, answered_at) = parked.join().expect("reader");
    let answer = answer.unwrap_or_else(|| {
        panic!(
            "the parked fetch was dropped without an answer; broker log:\n{}",
            b.stderr_tail()
        )
    });
    assert_eq!(wire::correlation_id(&answer), 4, "the fetch's own answer");
    assert!(
        idle_closed.join().expect("idle reader"),
        "the idle connection is closed"
    );
    let waited = answered_at.saturating_duration_since(t);
    println!(
        "measured: SIGTERM to the parked fetch's answer {} ms, to exit {} ms",
        waited.as_millis(),
        exited.as_millis()
    );
    assert!(
        exited < Duration::from_secs(10),
        "exit within the drain bound: {exited:?}"
    );
    let log = b.stderr_tail();
    assert!(
        log.contains("every connection answered and closed"),
        "the drain finished: {log}"
    );

    // Acknowledged before the stop: still there after the restart.
    b.restart().expect("restart");
    let mut s = wire::connect(b.port());
    send(&mut s, &wire::list_offsets_request(5, TOPIC, -1));
    let (code, end) = wire::list_offsets_result(&recv(&mut s).expect("ListOffsets"), TOPIC);
    assert_eq!(
        (code, end),
        (0, 1),
        "the acknowledged record survives the stop"
    );
}
