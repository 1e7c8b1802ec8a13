//! Round trips, error classification and no-panic properties of the batch view.

use super::*;
use proptest::prelude::*;

fn rec(ts: i64, key: Option<&'static [u8]>, value: Option<&'static [u8]>) -> SimpleRecord {
    SimpleRecord {
        key: key.map(Bytes::from_static),
        value: value.map(Bytes::from_static),
        timestamp: ts,
        headers: vec![
            ("h".into(), Some(Bytes::from_static(b"v"))),
            ("n".into(), None),
        ],
    }
}

#[test]
fn header_fields_round_trip() {
    let b = encode_batch(
        42,
        &[
            rec(1000, Some(b"k"), Some(b"v")),
            rec(999, None, Some(b"w")),
            rec(1005, None, None),
        ],
    );
    let v = RecordBatchView::parse(&b).unwrap();
    v.verify_crc().unwrap();
    assert_eq!(v.base_offset(), 42);
    assert_eq!(v.last_offset(), 44);
    assert_eq!(v.record_count(), 3);
    assert_eq!(v.first_timestamp(), 1000);
    assert_eq!(v.max_timestamp(), 1005);
    assert_eq!(v.total_len(), b.len());
    assert_eq!(v.compression(), Compression::None);
    assert_eq!(v.timestamp_type(), TimestampType::CreateTime);
    let s = validate_for_append(&b, 1 << 20).unwrap();
    assert_eq!(s[0].offset_delta_of_max_timestamp, 2);
    let r: Vec<_> = v.records().unwrap().map(Result::unwrap).collect();
    assert_eq!(r[1].timestamp, 999);
    assert_eq!(r[0].key, Some(&b"k"[..]));
    assert_eq!(r[2].value, None);
    let h: Vec<_> = r[0].headers().collect();
    assert_eq!(h, vec![(&b"h"[..], Some(&b"v"[..])), (&b"n"[..], None)]);
}

#[test]
fn kafka_protocol_decoder_agrees() {
    let b = encode_batch(
        7,
        &[rec(5, Some(b"a"), Some(b"b")), rec(6, None, Some(b"c"))],
    );
    let mut buf = b.clone();
    let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut buf).unwrap();
    assert_eq!(set.records.len(), 2);
    assert_eq!(set.records[1].offset, 8);
    assert_eq!(set.records[1].timestamp, 6);
    assert_eq!(set.records[0].key.as_deref(), Some(&b"a"[..]));
    assert_eq!(set.records[0].headers.len(), 2);
}

#[test]
fn rewrites_keep_crc_valid() {
    let mut b = encode_batch(0, &[rec(1, None, Some(b"x"))]).to_vec();
    set_base_offset(&mut b, 1234);
    set_partition_leader_epoch(&mut b, 9);
    let v = RecordBatchView::parse(&b).unwrap();
    v.verify_crc().unwrap();
    assert_eq!((v.base_offset(), v.partition_leader_epoch()), (1234, 9));
    set_log_append_time(&mut b, 777);
    let v = RecordBatchView::parse(&b).unwrap();
    v.verify_crc().unwrap();
    assert_eq!(v.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(v.max_timestamp(), 777);
    assert_eq!(v.records().unwrap().next().unwrap().unwrap().timestamp, 777);
}

#[test]
fn error_kinds() {
    let b = encode_batch(0, &[rec(1, None, Some(b"x"))]).to_vec();
    let mut bad_magic = b.clone();
    bad_magic[MAGIC_AT] = 1;
    assert_eq!(
        RecordBatchView::parse(&bad_magic).unwrap_err(),
        BatchError::UnsupportedMagic(1)
    );
    let mut bad_crc = b.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    assert_eq!(
        validate_for_append(&bad_crc, 1 << 20).unwrap_err().kind(),
        BatchErrorKind::Corrupt
    );
    assert_eq!(
        validate_for_append(&b[..b.len() - 1], 1 << 20)
            .unwrap_err()
            .kind(),
        BatchErrorKind::Corrupt
    );
    assert_eq!(
        validate_for_append(&b, 10).unwrap_err().kind(),
        BatchErrorKind::TooLarge
    );
    let mut bad_count = b.clone();
    bad_count[RECORD_COUNT_AT + 3] = 2;
    write_crc(&mut bad_count);
    assert!(matches!(
        validate_for_append(&bad_count, 1 << 20),
        Err(BatchError::RecordCount { .. })
    ));
    assert!(validate_for_append(&encode_batch(0, &[]), 1 << 20).is_err());
    // Two batches back to back.
    let two = [b.clone(), b.clone()].concat();
    assert_eq!(validate_for_append(&two, 1 << 20).unwrap().len(), 2);
    assert_eq!(batches(&two).count(), 2);
}

fn arb_record() -> impl Strategy<Value = SimpleRecord> {
    (
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
        -5i64..1_000_000_000_000,
        proptest::collection::vec(
            (
                "[a-z]{0,5}",
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..5)),
            ),
            0..3,
        ),
    )
        .prop_map(|(k, v, ts, h)| SimpleRecord {
            key: k.map(Bytes::from),
            value: v.map(Bytes::from),
            timestamp: ts,
            headers: h
                .into_iter()
                .map(|(k, v)| (k, v.map(Bytes::from)))
                .collect(),
        })
}

proptest! {
    #[test]
    fn encode_then_view_round_trips(base in 0i64..i64::MAX / 2, recs in proptest::collection::vec(arb_record(), 1..20)) {
        let b = encode_batch(base, &recs);
        let s = validate_for_append(&b, usize::MAX).unwrap();
        prop_assert_eq!(s.len(), 1);
        let v = RecordBatchView::parse(&b).unwrap();
        prop_assert_eq!(v.base_offset(), base);
        prop_assert_eq!(v.record_count() as usize, recs.len());
        prop_assert_eq!(v.last_offset(), base + recs.len() as i64 - 1);
        prop_assert_eq!(v.max_timestamp(), recs.iter().map(|r| r.timestamp).max().unwrap());
        for (r, want) in v.records().unwrap().zip(&recs) {
            let r = r.unwrap();
            prop_assert_eq!(r.timestamp, want.timestamp);
            prop_assert_eq!(r.key, want.key.as_deref());
            prop_assert_eq!(r.value, want.value.as_deref());
            let hs: Vec<_> = r.headers().collect();
            let want_h: Vec<_> = want.headers.iter().map(|(k, v)| (k.as_bytes(), v.as_deref())).collect();
            prop_assert_eq!(hs, want_h);
        }
    }

    #[test]
    fn mutation_never_panics_and_crc_catches_it(
        recs in proptest::collection::vec(arb_record(), 1..5),
        at in any::<prop::sample::Index>(),
        xor in 1u8..=255,
    ) {
        let mut b = encode_batch(3, &recs).to_vec();
        let i = at.index(b.len());
        b[i] ^= xor;
        let res = validate_for_append(&b, usize::MAX);
        // Only the base offset and the leader epoch are outside the CRC and length checks.
        if !(0..8).contains(&i) && !(12..16).contains(&i) {
            prop_assert!(res.is_err(), "mutation at {} undetected", i);
        }
        if let Ok(v) = RecordBatchView::parse(&b) {
            let _ = v.verify_crc();
            if let Ok(it) = v.records() {
                for r in it.flatten() { let _ = r.headers().count(); }
            }
        }
        let _ = batches(&b).count();
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = validate_for_append(&b, usize::MAX);
        for v in batches(&b).flatten() {
            if let Ok(it) = v.records() { for r in it.flatten() { let _ = r.headers().count(); } }
        }
    }
}

#[test]
fn set_producer_rewrites_the_fields_and_keeps_the_crc_valid() {
    let mut b = encode_batch(0, &[rec(5, Some(b"k"), Some(b"v")), rec(6, None, None)]).to_vec();
    set_producer(&mut b, 4242, 3, 17);
    let v = RecordBatchView::parse(&b).unwrap();
    assert_eq!(
        (v.producer_id(), v.producer_epoch(), v.base_sequence()),
        (4242, 3, 17)
    );
    v.verify_crc().unwrap();
    assert!(validate_batch(&b, 0).is_ok());
    // Without the CRC fix-up the same bytes would be refused.
    b[BASE_SEQUENCE_AT + 3] ^= 1;
    assert!(matches!(
        RecordBatchView::parse(&b).unwrap().verify_crc(),
        Err(BatchError::CrcMismatch { .. })
    ));
}

#[test]
fn an_end_txn_marker_has_kafka_s_layout_and_reads_back() {
    let marker = EndTxnMarker {
        commit: true,
        coordinator_epoch: 7,
    };
    let b = encode_end_txn_marker(42, 3, marker, 1_000);
    assert_eq!(b.len(), 78, "Kafka's marker batch is 78 bytes");
    let v = RecordBatchView::parse(&b).unwrap();
    v.verify_crc().unwrap();
    assert_eq!(v.attributes(), 0x30);
    assert!(v.is_control() && v.is_transactional());
    assert_eq!((v.producer_id(), v.producer_epoch()), (42, 3));
    assert_eq!((v.base_sequence(), v.record_count()), (-1, 1));
    assert_eq!(v.end_txn_marker(), Some(marker));
    let abort = encode_end_txn_marker(
        42,
        3,
        EndTxnMarker {
            commit: false,
            coordinator_epoch: -1,
        },
        1_000,
    );
    let v = RecordBatchView::parse(&abort).unwrap();
    assert_eq!(
        v.end_txn_marker(),
        Some(EndTxnMarker {
            commit: false,
            coordinator_epoch: -1
        })
    );
    validate_batch(&abort, 0).unwrap();
    // A data batch is no marker, transactional or not.
    let mut data = encode_batch(0, &[rec(1, None, Some(b"v"))]).to_vec();
    set_transactional(&mut data);
    let v = RecordBatchView::parse(&data).unwrap();
    v.verify_crc().unwrap();
    assert!(v.is_transactional() && !v.is_control());
    assert_eq!(v.end_txn_marker(), None);
}

#[test]
fn kafka_protocol_decodes_our_marker_as_a_control_batch() {
    let b = encode_end_txn_marker(
        5,
        1,
        EndTxnMarker {
            commit: false,
            coordinator_epoch: 2,
        },
        9,
    );
    let mut buf = b.clone();
    let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut buf).unwrap();
    let r = &set.records[0];
    assert!(r.control && r.transactional);
    assert_eq!((r.producer_id, r.producer_epoch), (5, 1));
    assert_eq!(r.key.as_deref(), Some(&[0u8, 0, 0, 0][..]));
}

/// `encode_batch`'s records at `base`, recompressed with `codec` (as a producer would send
/// them), with producer fields set.
fn batch_with(codec: Compression, base: i64, records: &[SimpleRecord]) -> Vec<u8> {
    let mut out = with_codec(&encode_batch(base, records), codec).unwrap();
    set_producer(&mut out, 77, 3, 100);
    out
}

/// A record as the tests compare it: offset, timestamp, key, value, header count.
type Seen = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>, usize);

fn records_of(view: &RecordBatchView<'_>) -> Vec<Seen> {
    let section = crate::compression::decompress(
        view.compression(),
        &view.bytes()[BATCH_HEADER_LEN..],
        1 << 20,
    )
    .unwrap();
    view.records_in(&section)
        .map(|r| {
            let r = r.unwrap();
            (
                r.offset,
                r.timestamp,
                r.key.map(<[u8]>::to_vec),
                r.value.map(<[u8]>::to_vec),
                r.headers().count(),
            )
        })
        .collect()
}

#[test]
fn a_rebuilt_batch_keeps_offsets_producer_fields_and_codec() {
    let records: Vec<SimpleRecord> = (0..5)
        .map(|i| SimpleRecord {
            key: Some(format!("k{i}").into()),
            value: (i != 3).then(|| format!("v{i}").into()),
            timestamp: 1_000 + i64::from(i) * 10,
            headers: vec![("h".to_owned(), Some("x".into()))],
        })
        .collect();
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let bytes = batch_with(codec, 40, &records);
        let view = RecordBatchView::parse(&bytes).unwrap();
        let all = records_of(&view);
        let section =
            crate::compression::decompress(codec, &bytes[BATCH_HEADER_LEN..], 1 << 20).unwrap();
        let kept: Vec<RecordView<'_>> = view
            .records_in(&section)
            .map(Result::unwrap)
            .filter(|r| r.offset_delta == 1 || r.offset_delta == 3)
            .collect();
        for horizon in [None, Some(9_999)] {
            let rebuilt = rebuild_batch(&view, &kept, horizon).unwrap();
            let r = RecordBatchView::parse(&rebuilt).unwrap();
            r.verify_crc().unwrap();
            assert_eq!(
                (r.base_offset(), r.last_offset_delta(), r.record_count()),
                (40, 4, 2),
                "{codec:?}"
            );
            assert_eq!(
                (r.producer_id(), r.producer_epoch(), r.base_sequence()),
                (77, 3, 100)
            );
            assert_eq!(r.compression(), codec);
            assert_eq!(r.delete_horizon_ms(), horizon);
            assert_eq!(r.max_timestamp(), 1_030);
            assert_eq!(
                records_of(&r),
                vec![all[1].clone(), all[3].clone()],
                "{codec:?}"
            );
            let summary = validate_replicated_batch(&rebuilt, 0).unwrap();
            assert_eq!(summary.record_count, 2);
            assert!(
                validate_batch(&rebuilt, 0).is_err(),
                "a produce would be refused"
            );
        }
        let empty = empty_header_of(&view);
        let e = RecordBatchView::parse(&empty).unwrap();
        e.verify_crc().unwrap();
        assert_eq!(empty.len(), BATCH_HEADER_LEN);
        assert_eq!(
            (
                e.base_offset(),
                e.last_offset(),
                e.record_count(),
                e.base_sequence()
            ),
            (40, 44, 0, 100)
        );
        assert_eq!(e.compression(), Compression::None);
        validate_replicated_batch(&empty, 0).unwrap();
    }
}

#[test]
fn replicated_validation_refuses_what_no_cleaner_writes() {
    let records: Vec<SimpleRecord> = (0..3)
        .map(|i| SimpleRecord {
            key: Some(format!("k{i}").into()),
            value: Some("v".into()),
            timestamp: 5,
            headers: vec![],
        })
        .collect();
    let mut bytes = encode_batch(0, &records).to_vec();
    validate_replicated_batch(&bytes, 0).unwrap();
    // More records than offsets.
    bytes[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].copy_from_slice(&1i32.to_be_bytes());
    write_crc(&mut bytes);
    assert!(validate_replicated_batch(&bytes, 0).is_err());
    // A corrupt CRC.
    let mut bytes = encode_batch(0, &records).to_vec();
    let at = bytes.len() - 1;
    bytes[at] ^= 1;
    assert!(validate_replicated_batch(&bytes, 0).is_err());
}

/// A batch of `codec` around `section` (already compressed, or crafted) claiming `count`
/// records, with a valid CRC: what a hostile producer can send.
fn crafted(codec: Compression, section: &[u8], count: i32) -> Vec<u8> {
    let mut out = batch_with(codec, 0, &[rec(1, None, Some(b"x"))])[..BATCH_HEADER_LEN].to_vec();
    out.extend_from_slice(section);
    let len = i32::try_from(out.len() - LOG_OVERHEAD).unwrap();
    out[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&len.to_be_bytes());
    out[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&count.to_be_bytes());
    out[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].copy_from_slice(&(count - 1).to_be_bytes());
    set_producer(&mut out, 77, 3, 100); // recomputes the CRC
    out
}

/// The uncompressed records section of `records`.
fn plain_section(records: &[SimpleRecord]) -> Vec<u8> {
    encode_batch(0, records)[BATCH_HEADER_LEN..].to_vec()
}

const CODECS: [Compression; 4] = [
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

#[test]
fn compressed_batches_are_walked_on_produce() {
    let records = [
        rec(1000, Some(b"k"), Some(b"v")),
        rec(1009, None, Some(b"w")),
        rec(1005, None, None),
    ];
    for codec in CODECS {
        let b = batch_with(codec, 0, &records);
        let s = validate_batch(&b, 0).unwrap_or_else(|e| panic!("{codec:?}: {e}"));
        assert_eq!(
            (s.record_count, s.offset_delta_of_max_timestamp),
            (3, 0),
            "{codec:?}"
        );
    }
}

#[test]
fn poison_pill_batches_are_refused() {
    for codec in CODECS {
        // Random bytes with a valid CRC: the consumers' decompression error, refused here.
        let garbage: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
            .collect();
        let e = validate_batch(&crafted(codec, &garbage, 1), 0).unwrap_err();
        assert_eq!(e.kind(), BatchErrorKind::Corrupt, "{codec:?}: {e}");
        // A small batch that claims 2^31-1 records: it would move the partition's offsets
        // by 2^31.
        let one = crate::compression::compress(codec, &plain_section(&[rec(1, None, Some(b"x"))]))
            .unwrap();
        let e = validate_batch(&crafted(codec, &one, i32::MAX), 0).unwrap_err();
        assert!(matches!(e, BatchError::Decompress { .. }), "{codec:?}: {e}");
        assert_eq!(e.kind(), BatchErrorKind::Corrupt);
        // A byte after the last record.
        let mut section = plain_section(&[rec(1, None, Some(b"x"))]);
        section.push(0);
        let extra = crate::compression::compress(codec, &section).unwrap();
        let e = validate_batch(&crafted(codec, &extra, 1), 0).unwrap_err();
        assert_eq!(
            e,
            BatchError::TrailingRecordBytes { remaining: 1 },
            "{codec:?}"
        );
        assert_eq!(e.kind(), BatchErrorKind::Invalid);
        // Two records that both say offset delta 0.
        let one_plain = plain_section(&[rec(1, None, Some(b"x"))]);
        let twice =
            crate::compression::compress(codec, &[one_plain.clone(), one_plain].concat()).unwrap();
        let e = validate_batch(&crafted(codec, &twice, 2), 0).unwrap_err();
        assert!(
            matches!(
                e,
                BatchError::Record {
                    index: 1,
                    defect: RecordDefect::OffsetDelta { .. }
                }
            ),
            "{codec:?}: {e}"
        );
        assert_eq!(e.kind(), BatchErrorKind::Invalid);
        // A record whose value claims more bytes than the record has.
        let mut bad = vec![];
        // length 6: attributes, ts delta 0, offset delta 0, key -1, value len 100 (varint 200), ...
        bad.extend_from_slice(&[12, 0, 0, 0, 1, 0xc8, 0x01]);
        let bad = crate::compression::compress(codec, &bad).unwrap();
        let e = validate_batch(&crafted(codec, &bad, 1), 0).unwrap_err();
        assert!(
            matches!(e, BatchError::Record { index: 0, .. }),
            "{codec:?}: {e}"
        );
    }
}

proptest! {
    /// Whatever a compressed section holds, validation answers without panicking.
    #[test]
    fn arbitrary_compressed_sections_never_panic(
        codec in 0usize..4,
        section in proptest::collection::vec(any::<u8>(), 0..512),
        count in 1i32..100,
    ) {
        let _ = validate_batch(&crafted(CODECS[codec], &section, count), 0);
    }

    /// A valid stream with one byte flipped is refused or accepted, never a panic; and an
    /// accepted one holds exactly the claimed records.
    #[test]
    fn flipped_compressed_bytes_never_panic(codec in 0usize..4, at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let records = [rec(1, Some(b"key"), Some(b"value")), rec(2, None, Some(b"v2"))];
        let mut section = crate::compression::compress(CODECS[codec], &plain_section(&records)).unwrap();
        let i = at.index(section.len());
        section[i] ^= 1 << bit;
        if let Ok(s) = validate_batch(&crafted(CODECS[codec], &section, 2), 0) {
            prop_assert_eq!(s.record_count, 2);
        }
    }
}
