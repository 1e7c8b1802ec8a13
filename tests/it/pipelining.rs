//! Pipelined requests on one connection (ARCHITECTURE.md decision 7): a parked fetch must not
//! stop the requests behind it from being processed, and responses still leave in request
//! order.

use std::time::{Duration, Instant};

use bytes::Bytes;
use strata_protocol::record_batch::{SimpleRecord, encode_batch};
use strata_tests::Broker;
use strata_tests::wire::{self, correlation_id, recv, send};

#[test]
fn a_parked_fetch_does_not_stall_the_requests_behind_it() {
    let b = Broker::start(&[]).unwrap();
    for topic in ["quiet", "busy"] {
        let mut s = wire::connect(b.port());
        send(&mut s, &wire::metadata_request(1, topic));
        recv(&mut s).expect("metadata");
    }
    let batch = encode_batch(
        0,
        &[SimpleRecord {
            key: None,
            value: Some(Bytes::from_static(b"x")),
            timestamp: 1,
            headers: vec![],
        }],
    );

    // One connection: a fetch that parks for up to 3 s on an empty partition, then a produce.
    let mut conn = wire::connect(b.port());
    let started = Instant::now();
    send(&mut conn, &wire::fetch_request(10, "quiet", 0, 3000, 1));
    send(&mut conn, &wire::produce_request(11, "busy", &batch));

    // From another connection, the produce is visible long before the fetch's wait ends.
    let mut seen_at = None;
    while started.elapsed() < Duration::from_millis(2500) {
        let mut other = wire::connect(b.port());
        send(&mut other, &wire::list_offsets_request(1, "busy", -1));
        let r = recv(&mut other).expect("list offsets");
        if wire::list_offsets_result(&r, "busy") == (0, 1) {
            seen_at = Some(started.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen_at = seen_at
        .expect("the produce behind a parked fetch was not processed while the fetch waited");
    assert!(seen_at < Duration::from_millis(2500), "{seen_at:?}");

    // Responses leave in request order: the fetch (after its wait), then the produce.
    let first = recv(&mut conn).expect("fetch response");
    let second = recv(&mut conn).expect("produce response");
    assert_eq!(correlation_id(&first), 10);
    assert_eq!(correlation_id(&second), 11);
    assert_eq!(wire::produce_result(&second, "busy"), (0, 0));
    assert!(
        started.elapsed() >= Duration::from_millis(2900),
        "the fetch honoured max_wait_ms"
    );
}

#[test]
fn a_parked_fetch_wakes_when_data_arrives() {
    let b = Broker::start(&[]).unwrap();
    let mut s = wire::connect(b.port());
    send(&mut s, &wire::metadata_request(1, "wake"));
    recv(&mut s).expect("metadata");
    let started = Instant::now();
    send(&mut s, &wire::fetch_request(2, "wake", 0, 8000, 1));
    std::thread::sleep(Duration::from_millis(300));
    let batch = encode_batch(
        0,
        &[SimpleRecord {
            key: None,
            value: Some(Bytes::from_static(b"y")),
            timestamp: 1,
            headers: vec![],
        }],
    );
    let mut p = wire::connect(b.port());
    send(&mut p, &wire::produce_request(3, "wake", &batch));
    recv(&mut p).expect("produce response");
    let r = recv(&mut s).expect("fetch response");
    assert_eq!(correlation_id(&r), 2);
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(4),
        "woken by the append, not by max_wait_ms: {waited:?}"
    );
    // corr(4) throttle(4) topics(4) name(2+4) partitions(4) index(4) error(2) hw(8)
    let at = 4 + 4 + 4 + 2 + 4 + 4 + 4;
    assert_eq!(
        i16::from_be_bytes([r[at], r[at + 1]]),
        0,
        "fetch error code"
    );
    assert_eq!(
        i64::from_be_bytes(r[at + 2..at + 10].try_into().unwrap()),
        1,
        "high watermark"
    );
    assert_eq!(
        r.last(),
        Some(&0),
        "the record's header count (0) ends the returned batch"
    );
    assert!(
        r.len() > at + 30 + 61,
        "a whole batch came back ({} bytes)",
        r.len()
    );
}
