//! `strata-bench validate`: what produce validation costs per codec, in process.
//!
//! Since compressed batches are walked on produce (their records decompressed as a stream
//! and checked, as Kafka's `LogValidator` does), a produce of a compressed batch pays for a
//! decompression. This measures, for each codec, on batches of `--records` records of
//! `--value-bytes` bytes of text-like values:
//!
//! - `check`: the header and CRC checks alone (all a compressed batch cost before);
//! - `validate`: `validate_for_append`, what a produce pays now;
//! - `decompress`: decompressing the records section into memory, the reference.
//!
//! Each is the median of `--rounds` timed runs, in MB/s of the batch as sent and in
//! nanoseconds per record. One thread, no I/O.
//!
//! Usage: `strata-bench validate [--records N] [--value-bytes N] [--rounds N]`.

use std::time::Instant;

use bytes::Bytes;
use strata_protocol::compression::{self, Compression};
use strata_protocol::record_batch::{
    self, BATCH_HEADER_LEN, RecordBatchView, SimpleRecord, encode_batch,
};

pub fn run(args: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let (mut records, mut value_bytes, mut rounds) = (1000usize, 1000usize, 21usize);
    let mut args = args;
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value"))
        };
        match a.as_str() {
            "--records" => records = value()?.parse()?,
            "--value-bytes" => value_bytes = value()?.parse()?,
            "--rounds" => rounds = value()?.parse()?,
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    let words = [
        "order",
        "shipped",
        "customer",
        "amount",
        "currency",
        "EUR",
        "status",
        "pending",
        "warehouse",
        "item",
        "quantity",
        "price",
        "2026-12-05",
        "true",
        "false",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let batch_records: Vec<SimpleRecord> = (0..records)
        .map(|i| {
            let mut v = String::with_capacity(value_bytes);
            while v.len() < value_bytes {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                v.push_str(words[(seed % words.len() as u64) as usize]);
                v.push_str(&format!("={} ", seed % 10_000));
            }
            v.truncate(value_bytes);
            SimpleRecord {
                key: Some(Bytes::from(format!("key-{i}"))),
                value: Some(Bytes::from(v)),
                timestamp: 1_764_900_000_000 + i as i64,
                headers: vec![],
            }
        })
        .collect();
    let plain = encode_batch(0, &batch_records).to_vec();
    println!(
        "{records} records of {value_bytes} bytes; median of {rounds} rounds; MB/s of the batch as sent, ns per record"
    );
    println!(
        "{:<8} {:>10} {:>14} {:>14} {:>14}",
        "codec", "batch B", "check", "validate", "decompress"
    );
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let batch = record_batch::with_codec(&plain, codec)?;
        let section = &batch[BATCH_HEADER_LEN..];
        let check = median(rounds, || {
            let v = RecordBatchView::parse(&batch).expect("parses");
            v.verify_crc().expect("crc");
        });
        let validate = median(rounds, || {
            record_batch::validate_for_append(&batch, usize::MAX).expect("valid");
        });
        let decompress = median(rounds, || {
            compression::decompress(codec, section, 1 << 30).expect("decompresses");
        });
        let show = |secs: f64| {
            format!(
                "{:>7.0} {:>5.0}ns",
                batch.len() as f64 / secs / 1e6,
                secs * 1e9 / records as f64
            )
        };
        println!(
            "{:<8} {:>10} {:>14} {:>14} {:>14}",
            format!("{codec:?}").to_lowercase(),
            batch.len(),
            show(check),
            show(validate),
            show(decompress)
        );
    }
    Ok(())
}

/// The median time of `rounds` runs of `f`, in seconds.
fn median(rounds: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm up
    let mut times: Vec<f64> = (0..rounds.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
