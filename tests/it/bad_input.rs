//! Bad input against the real broker, over raw sockets with hand-built frames (independent of
//! Strata's own codec). Each case must get Kafka's error code or a clean close of that one
//! connection, and afterwards the broker must keep serving and still hold every acknowledged
//! record.

use std::io::Write;

use std::net::TcpStream;

use bytes::Bytes;
use strata_protocol::record_batch::{SimpleRecord, encode_batch};
use strata_tests::Broker;
use strata_tests::wire::{self, header, recv, send};

const CORRUPT_MESSAGE: i16 = 2;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const MESSAGE_TOO_LARGE: i16 = 10;
const INVALID_RECORD: i16 = 87;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const NOT_ENOUGH_REPLICAS: i16 = 19;
const UNSUPPORTED_VERSION: i16 = 35;

fn connect(b: &Broker) -> TcpStream {
    wire::connect(b.port())
}

/// ApiVersions v0 on a fresh connection: the broker is alive and serving.
fn assert_serving(b: &Broker) {
    let mut s = connect(b);
    send(&mut s, &header(18, 0, 99));
    let r = recv(&mut s).unwrap_or_else(|| panic!("broker stopped serving:\n{}", b.stderr_tail()));
    assert_eq!(&r[0..4], &99i32.to_be_bytes());
    assert_eq!(&r[4..6], &0i16.to_be_bytes(), "ApiVersions error code");
}

fn batch(n: usize, value_len: usize) -> Vec<u8> {
    let records: Vec<SimpleRecord> = (0..n)
        .map(|i| SimpleRecord {
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(vec![b'v'; value_len])),
            timestamp: 1_700_000_000_000 + i as i64,
            headers: vec![],
        })
        .collect();
    encode_batch(0, &records).to_vec()
}

/// Produce v3 to one partition; returns (error code, base offset).
fn produce(b: &Broker, topic: &str, records: &[u8]) -> (i16, i64) {
    let mut s = connect(b);
    send(&mut s, &wire::produce_request(7, topic, records));
    let r = recv(&mut s).unwrap_or_else(|| panic!("no produce response:\n{}", b.stderr_tail()));
    wire::produce_result(&r, topic)
}

/// Metadata for one topic, which auto-creates it.
fn create_by_metadata(b: &Broker, topic: &str) {
    let mut s = connect(b);
    send(&mut s, &wire::metadata_request(3, topic));
    assert!(recv(&mut s).is_some(), "metadata response");
}

#[test]
fn bad_input_gets_kafka_errors_or_a_clean_close_and_the_broker_keeps_serving() {
    let b = Broker::start(&[
        ("message.max.bytes", "4000"),
        ("socket.request.max.bytes", "1048576"),
    ])
    .unwrap();
    create_by_metadata(&b, "bad-input");
    let good = batch(3, 10);
    assert_eq!(produce(&b, "bad-input", &good), (0, 0));

    // Corrupt CRC: flip one byte of a record (covered by the CRC).
    let mut crc = good.clone();
    let last = crc.len() - 1;
    crc[last] ^= 0xff;
    assert_eq!(
        produce(&b, "bad-input", &crc).0,
        CORRUPT_MESSAGE,
        "corrupt CRC"
    );

    // A batch whose length field claims more bytes than were sent.
    let mut lying = good.clone();
    lying[8..12].copy_from_slice(&(good.len() as i32 + 100).to_be_bytes());
    assert_eq!(
        produce(&b, "bad-input", &lying).0,
        CORRUPT_MESSAGE,
        "lying batch length"
    );

    // A torn batch: the record set ends mid-batch.
    assert_eq!(
        produce(&b, "bad-input", &good[..good.len() - 5]).0,
        CORRUPT_MESSAGE,
        "torn batch"
    );

    // A forged transaction marker: a control batch (attributes bits 4 and 5) from a client.
    // Transactional records without a transactional id refuse the whole request first, as
    // Kafka's handleProduceRequest does; with one, the validator refuses the control batch.
    let mut marker = batch(1, 10);
    marker[22] |= 0x30;
    strata_protocol::record_batch::set_producer(&mut marker, 7, 0, -1);
    assert_eq!(
        produce(&b, "bad-input", &marker).0,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "transactional records without a transactional id"
    );
    let mut s = connect(&b);
    send(
        &mut s,
        &wire::transactional_produce_request(8, Some("forger"), "bad-input", &marker),
    );
    let r = recv(&mut s).expect("produce response");
    assert_eq!(
        wire::produce_result(&r, "bad-input").0,
        INVALID_RECORD,
        "a client's control batch"
    );
    // Transactional records of an id no coordinator serves (no `__transaction_state` yet):
    // refused as Kafka refuses a batch it cannot verify, NOT_ENOUGH_REPLICAS, which the
    // producer retries; appending them would open a transaction nobody ends.
    let mut txn = batch(2, 10);
    strata_protocol::record_batch::set_producer(&mut txn, 7, 0, 0);
    strata_protocol::record_batch::set_transactional(&mut txn);
    send(
        &mut s,
        &wire::transactional_produce_request(9, Some("stranger"), "bad-input", &txn),
    );
    let r = recv(&mut s).expect("produce response");
    assert_eq!(
        wire::produce_result(&r, "bad-input").0,
        NOT_ENOUGH_REPLICAS,
        "transactional records outside any transaction"
    );

    // Larger than max.message.bytes.
    assert_eq!(
        produce(&b, "bad-input", &batch(10, 1000)).0,
        MESSAGE_TOO_LARGE,
        "too large"
    );

    // Unknown and invalid topics.
    assert_eq!(
        produce(&b, "no-such-topic", &good).0,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(produce(&b, "bad/name", &good).0, UNKNOWN_TOPIC_OR_PARTITION);
    assert_serving(&b);

    // ApiVersions newer than we serve: UNSUPPORTED_VERSION with our ranges in a v0 body.
    let mut s = connect(&b);
    send(&mut s, &header(18, 99, 5));
    let r = recv(&mut s).expect("ApiVersions fallback");
    assert_eq!(&r[0..4], &5i32.to_be_bytes());
    assert_eq!(i16::from_be_bytes([r[4], r[5]]), UNSUPPORTED_VERSION);
    assert!(
        i32::from_be_bytes(r[6..10].try_into().unwrap()) > 0,
        "api ranges present"
    );

    // Cases that must close only their own connection.
    let closes: Vec<(&str, Vec<u8>)> = vec![
        ("unknown api key", {
            let mut f = (10i32).to_be_bytes().to_vec();
            f.extend_from_slice(&header(9999, 0, 1));
            f
        }),
        ("unsupported version", {
            let h = header(3, 99, 1);
            let mut f = (h.len() as i32).to_be_bytes().to_vec();
            f.extend_from_slice(&h);
            f
        }),
        ("negative length", (-5i32).to_be_bytes().to_vec()),
        ("huge length", i32::MAX.to_be_bytes().to_vec()),
        ("garbage", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("lying array count", {
            // Fetch v4 claiming 2^31-1 topics in a 20-byte body.
            let mut body = header(1, 4, 1);
            for v in [-1i32, 0, 0, 0] {
                body.extend_from_slice(&v.to_be_bytes());
            }
            body.push(0);
            body.extend_from_slice(&i32::MAX.to_be_bytes());
            let mut f = (body.len() as i32).to_be_bytes().to_vec();
            f.extend_from_slice(&body);
            f
        }),
        ("truncated body", {
            let mut body = header(3, 1, 1);
            body.extend_from_slice(&5i32.to_be_bytes()); // 5 topics, none sent
            let mut f = (body.len() as i32).to_be_bytes().to_vec();
            f.extend_from_slice(&body);
            f
        }),
    ];
    for (what, bytes) in closes {
        let mut s = connect(&b);
        s.write_all(&bytes).unwrap();
        wire::assert_closed(&mut s, what);
        assert_serving(&b);
    }

    // A client that vanishes mid-frame.
    {
        let mut s = connect(&b);
        s.write_all(&100i32.to_be_bytes()).unwrap();
        s.write_all(&[0, 3, 0, 1]).unwrap();
    }
    assert_serving(&b);

    // Nothing acknowledged was lost, and appends continue at the next offset.
    assert_eq!(produce(&b, "bad-input", &good), (0, 3));
}

/// A batch whose records section is `section`, compressed with gzip (codec 1), claiming
/// `count` records, with a valid CRC: what a hostile producer can send.
fn gzip_batch_around(section: &[u8], count: i32) -> Vec<u8> {
    let mut out = batch(1, 1)[..61].to_vec();
    out.extend_from_slice(section);
    let len = i32::try_from(out.len() - 12).unwrap();
    out[8..12].copy_from_slice(&len.to_be_bytes());
    out[21..23].copy_from_slice(&1i16.to_be_bytes()); // attributes: gzip
    out[23..27].copy_from_slice(&(count - 1).to_be_bytes()); // last offset delta
    out[57..61].copy_from_slice(&count.to_be_bytes()); // record count
    strata_protocol::record_batch::write_crc(&mut out);
    out
}

#[test]
fn poison_pill_batches_are_refused_and_consumers_read_past_nothing() {
    let b = Broker::start(&[]).unwrap();
    create_by_metadata(&b, "poison");
    assert_eq!(produce(&b, "poison", &batch(1, 10)), (0, 0));
    // Random bytes with a valid CRC, as a gzip batch.
    let garbage: Vec<u8> = (0..100u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 9) as u8)
        .collect();
    assert_eq!(
        produce(&b, "poison", &gzip_batch_around(&garbage, 1)).0,
        CORRUPT_MESSAGE,
        "a gzip batch of random bytes"
    );
    // About 100 bytes of gzip claiming 2^31-1 records.
    let one = batch(1, 1)[61..].to_vec();
    let gz = strata_protocol::compression::compress(
        strata_protocol::record_batch::Compression::Gzip,
        &one,
    )
    .unwrap();
    let bomb = gzip_batch_around(&gz, i32::MAX);
    assert!(bomb.len() < 200, "{}", bomb.len());
    assert_eq!(
        produce(&b, "poison", &bomb).0,
        CORRUPT_MESSAGE,
        "a small gzip batch claiming 2^31-1 records"
    );
    // The same record, honestly counted, is appended at the next offset: the partition's
    // offsets did not move.
    assert_eq!(produce(&b, "poison", &gzip_batch_around(&gz, 1)), (0, 1));
    // A consumer reads both records and nothing else.
    let mut s = connect(&b);
    send(&mut s, &wire::fetch_request(11, "poison", 0, 0, 1 << 20));
    let r = recv(&mut s).expect("fetch response");
    // Fetch v4: corr, throttle, [topic: name, [partition, error, high watermark, last stable
    // offset, aborted transactions, records]].
    let mut at = 4 + 4 + 4 + 2 + "poison".len() + 4 + 4;
    assert_eq!(&r[at..at + 2], &0i16.to_be_bytes(), "fetch error code");
    at += 2 + 8 + 8;
    let aborted = i32::from_be_bytes(r[at..at + 4].try_into().unwrap());
    at += 4 + 16 * usize::try_from(aborted.max(0)).unwrap();
    let len = usize::try_from(i32::from_be_bytes(r[at..at + 4].try_into().unwrap())).unwrap();
    let records = &r[at + 4..at + 4 + len];
    let mut offsets = Vec::new();
    let mut pos = 0;
    while pos < records.len() {
        let view = strata_protocol::record_batch::RecordBatchView::parse(&records[pos..]).unwrap();
        offsets.push((view.base_offset(), view.record_count()));
        pos += view.total_len();
    }
    assert_eq!(offsets, [(0, 1), (1, 1)]);
    assert_serving(&b);
}
