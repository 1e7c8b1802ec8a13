//! Feeds arbitrary bytes to every entry point of the RecordBatch view: nothing may panic, and
//! whatever validation accepts must survive the in-place rewrites the log performs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_protocol::record_batch::{self, RecordBatchView};

fuzz_target!(|data: &[u8]| {
    for view in record_batch::batches(data).flatten() {
        let _ = view.verify_crc();
        let _ = (
            view.last_offset(),
            view.compression(),
            view.timestamp_type(),
            view.end_txn_marker(),
        );
        if let Ok(records) = view.records() {
            for r in records.flatten() {
                let _ = r.headers().count();
            }
        }
    }
    if let Ok(summaries) = record_batch::validate_for_append(data, usize::MAX) {
        let mut owned = data.to_vec();
        for s in summaries {
            let batch = &mut owned[s.position..s.position + s.len];
            record_batch::set_base_offset(batch, 1 << 40);
            record_batch::set_partition_leader_epoch(batch, 7);
            record_batch::set_log_append_time(batch, 123);
            let view = RecordBatchView::parse(batch).expect("validated batch parses");
            view.verify_crc().expect("rewrites keep the CRC valid");
            assert_eq!(view.base_offset(), 1 << 40);
        }
    }
});
