//! The append path allocates per batch, never per record: appending a batch of 1,000 records
//! costs no more heap allocations than appending a batch of one.
//!
//! A counting global allocator observes the test thread only (a const-initialised
//! thread-local flag, which itself never allocates), so the harness's other threads do not
//! disturb the count.

// The allocator below must implement `GlobalAlloc`, an unsafe trait; it only forwards to the
// system allocator and counts.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::Bytes;
use strata_protocol::record_batch::{SimpleRecord, encode_batch};
use strata_storage::{Log, LogConfig};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn note_allocation() {
    if COUNTING.with(Cell::get) {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// thread-locals touched are const-initialised `Cell`s, which neither allocate nor re-enter.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: forwarded as received.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: forwarded as received.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        // SAFETY: forwarded as received.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap allocations made by `f` on this thread.
fn allocations_during(f: impl FnOnce()) -> u64 {
    ALLOCATIONS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(Cell::get)
}

/// An uncompressed batch of `n` keyed 100-byte records with one header each, so validation
/// walks every record's framing.
fn batch(n: usize, now: i64) -> Vec<u8> {
    let records: Vec<SimpleRecord> = (0..n)
        .map(|i| SimpleRecord {
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(vec![b'v'; 100])),
            timestamp: now,
            headers: vec![("h".to_owned(), Some(Bytes::from_static(b"x")))],
        })
        .collect();
    encode_batch(0, &records).to_vec()
}

#[test]
fn appending_a_batch_allocates_per_batch_not_per_record() {
    let dir = tempfile::tempdir().unwrap();
    let now = 1_700_000_000_000;
    let config = LogConfig {
        retention_ms: -1,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), config, now).unwrap();
    // Warm up: first-use allocations (per-thread I/O state, index capacity) are not the
    // steady state being measured.
    for _ in 0..20 {
        log.append(&mut batch(10, now), 0, now).unwrap();
    }

    // The counter sees this thread's allocations: building a batch of 1,000 records makes
    // several per record.
    let building = allocations_during(|| drop(batch(1_000, now)));
    assert!(building >= 1_000, "counter saw {building} allocations");

    let rounds = 20;
    let mut small: Vec<Vec<u8>> = (0..rounds).map(|_| batch(1, now)).collect();
    let mut large: Vec<Vec<u8>> = (0..rounds).map(|_| batch(1_000, now)).collect();
    let mut worst_small = 0;
    let mut worst_large = 0;
    for (s, l) in small.iter_mut().zip(large.iter_mut()) {
        worst_small = worst_small.max(allocations_during(|| {
            log.append(s, 0, now).unwrap();
        }));
        worst_large = worst_large.max(allocations_during(|| {
            log.append(l, 0, now).unwrap();
        }));
    }
    // A per-record allocation would add at least 999 to the large batch's count. A few may
    // differ per batch (an index entry every `index.interval.bytes`, a vector growing).
    assert!(
        worst_large <= worst_small + 4,
        "1,000-record batch: {worst_large} allocations; 1-record batch: {worst_small}"
    );
    assert!(
        worst_large < 100,
        "{worst_large} allocations for one batch append"
    );
}
