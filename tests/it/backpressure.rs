//! Back-pressure against the real broker: `queued.max.request.bytes` (KIP-72) bounds the
//! request bytes the broker holds, and a connection whose frame does not fit stops being read
//! instead of being buffered.
//!
//! The broker runs with a 1 MiB budget: 128 KiB for small frames (<= 64 KiB), 896 KiB for
//! large ones. Each "stalled" client sends all of a 900 KiB Produce frame but its last byte
//! and then goes quiet, so the first one holds the large share for as long as it stays.
//!
//! - `stalled_large_frames_hold_back_large_produces_only`: while stalled frames are pending,
//!   ApiVersions, Metadata and a small librdkafka message are answered, large librdkafka
//!   messages are not (their frame waits for memory); once the stalled clients disconnect,
//!   every message is acknowledged.
//! - `a_frame_larger_than_the_budget_is_served_when_nothing_else_is_pending`: a 2 MiB
//!   Produce against the 1 MiB budget succeeds, twice (the budget came back).
//! - `one_client_s_stalled_frames_leave_half_the_pool_to_others`: four stalled frames from
//!   one address hold at most half of the large share, so another client's large produces
//!   go through at once.
//! - `three_stalled_100_mb_frames_neither_block_others_nor_stay`: the reported attack at
//!   the default budget; another client's large produces go through at once, and the
//!   stalled connections are closed about 5 s after each got its memory.
//! - `memory_stays_bounded_while_stalled_frames_are_pending`: 32 stalled 900 KiB frames grow
//!   the broker's RSS by a few MiB; the same clients against an unbounded broker (-1) grow it
//!   by the ~28 MiB they sent, which shows the measurement can tell the two apart.

use std::io::{ErrorKind, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use strata_protocol::record_batch::{SimpleRecord, encode_batch};
use strata_tests::wire::{self, header, recv, send};
use strata_tests::{Broker, serial, wait_until, with_broker};

/// `queued.max.request.bytes` for these tests.
const BUDGET: &str = "1048576";
/// The record value of a stalled client's Produce frame: larger than the small-frame limit
/// (64 KiB) and than half the budget, so one pending frame fills the large share.
const STALLED_VALUE: usize = 900 * 1024;
/// The line the broker logs when a connection must wait for memory.
const PAUSED_LOG: &str = "reads paused: queued.max.request.bytes exhausted";
/// The line the broker logs when a client's frame waits for that client's share.
const SHARE_LOG: &str = "reads paused: a client at its share of queued.max.request.bytes";
/// Upper bound for any single wait in these tests.
const WAIT: Duration = Duration::from_secs(30);
/// The source address of stalled clients that are not the test's own client.
const OTHER_CLIENT: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// A whole Produce v3 frame (size prefix included) of one record with a `value_len`-byte value
/// to `topic` partition 0.
fn produce_frame(corr: i32, topic: &str, value_len: usize) -> Vec<u8> {
    let batch = encode_batch(
        0,
        &[SimpleRecord {
            key: None,
            value: Some(Bytes::from(vec![b'v'; value_len])),
            timestamp: 1_700_000_000_000,
            headers: vec![],
        }],
    );
    let body = wire::produce_request(corr, topic, &batch);
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// Metadata for `topic`, which auto-creates it.
fn create_topic(b: &Broker, topic: &str) -> anyhow::Result<()> {
    let mut s = wire::connect(b.port());
    send(&mut s, &wire::metadata_request(1, topic));
    recv(&mut s).context("metadata response")?;
    Ok(())
}

/// ApiVersions v0 and Metadata v4 on a fresh connection, each answered within `within`.
fn assert_answers_small_requests(b: &Broker, within: Duration) -> anyhow::Result<()> {
    let mut s = wire::connect(b.port());
    s.set_read_timeout(Some(within))?;
    let started = Instant::now();
    send(&mut s, &header(18, 0, 41));
    let r = recv(&mut s).context("no ApiVersions response while frames are stalled")?;
    ensure!(
        wire::correlation_id(&r) == 41 && r[4..6] == [0, 0],
        "ApiVersions: {r:?}"
    );
    send(&mut s, &wire::metadata_request(42, "bp"));
    let r = recv(&mut s).context("no Metadata response while frames are stalled")?;
    ensure!(wire::correlation_id(&r) == 42, "Metadata correlation id");
    ensure!(started.elapsed() < within, "slow: {:?}", started.elapsed());
    Ok(())
}

/// Clients that each sent all of `frame` but its last byte, as far as their sockets take it.
/// On loopback the kernel's socket buffers take a whole 900 KiB frame whether or not the
/// broker reads it, so what the broker holds shows in its memory, not in what was sent.
struct Stalled {
    streams: Vec<TcpStream>,
}

impl Stalled {
    /// Opens `n` connections and writes (non-blocking) until every frame is in, short of its
    /// last byte, or no client has made progress for `settle`.
    fn open(b: &Broker, n: usize, frame: &[u8], settle: Duration) -> anyhow::Result<Stalled> {
        Stalled::open_from(Ipv4Addr::LOCALHOST, b, n, frame, settle)
    }

    /// [`Stalled::open`] from source address `from` (any of 127.0.0.0/8 on loopback), so
    /// that the broker counts them as another client than the test's own (127.0.0.1).
    fn open_from(
        from: Ipv4Addr,
        b: &Broker,
        n: usize,
        frame: &[u8],
        settle: Duration,
    ) -> anyhow::Result<Stalled> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let mut streams = Vec::with_capacity(n);
        for _ in 0..n {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(SocketAddr::from((from, 0)))?;
            let s = rt.block_on(socket.connect(SocketAddr::from(([127, 0, 0, 1], b.port()))))?;
            // Non-blocking, as tokio left it.
            streams.push(s.into_std()?);
        }
        let target = frame.len() - 1;
        let mut sent = vec![0; n];
        let started = Instant::now();
        let mut last_progress = Instant::now();
        while sent.iter().any(|&x| x < target) && last_progress.elapsed() < settle {
            ensure!(started.elapsed() < WAIT, "stalled clients still writing");
            for (s, done) in streams.iter_mut().zip(sent.iter_mut()) {
                if *done == target {
                    continue;
                }
                match s.write(&frame[*done..target]) {
                    Ok(k) => {
                        *done += k;
                        last_progress = Instant::now();
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => bail!("stalled client write: {e}"),
                }
            }
            thread::sleep(Duration::from_millis(5));
        }
        Ok(Stalled { streams })
    }

    fn disconnect(self) {
        for s in self.streams {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Whether the broker has logged that a read waited for memory.
fn paused_logged(b: &Broker) -> anyhow::Result<bool> {
    Ok(std::fs::read_to_string(b.stderr_path())?.contains(PAUSED_LOG))
}

/// The broker's resident set size in KiB, from `/proc/<pid>/status`.
fn rss_kib(b: &Broker) -> anyhow::Result<u64> {
    let pid = b.pid().context("broker not running")?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("no VmRSS line")?;
    line.split_whitespace()
        .nth(1)
        .context("VmRSS value")?
        .parse()
        .context("VmRSS number")
}

#[test]
fn stalled_large_frames_hold_back_large_produces_only() {
    let _serial = serial();
    with_broker(&[("queued.max.request.bytes", BUDGET)], |b| {
        create_topic(b, "bp")?;
        let frame = produce_frame(1, "bp", STALLED_VALUE);
        // From another address than the producer below: one client's frames wait for its
        // own share (see `one_client_s_stalled_frames_leave_half_the_pool_to_others`).
        let stalled = Stalled::open_from(OTHER_CLIENT, b, 4, &frame, Duration::from_millis(500))?;
        // One stalled frame holds the large share; the next ones wait for their client's
        // share, and say so.
        wait_until(
            "the broker logs that the stalled client is at its share",
            WAIT,
            Duration::from_millis(50),
            || Ok(std::fs::read_to_string(b.stderr_path())?.contains(SHARE_LOG)),
        )?;

        // Small requests are served from their own share meanwhile.
        assert_answers_small_requests(b, Duration::from_secs(5))?;

        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let _in_runtime = rt.enter(); // rdkafka's futures use tokio's timers
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", b.bootstrap())
            .set("acks", "all")
            .set("linger.ms", "0")
            .create()
            .context("create producer")?;
        let small = vec![b's'; 1000];
        let delivery = producer
            .send_result(FutureRecord::<(), _>::to("bp").payload(&small).partition(0))
            .map_err(|(e, _)| e)?;
        let small_ack = rt
            .block_on(tokio::time::timeout(WAIT, delivery))
            .context("a small message was not acknowledged while large frames are stalled")??
            .map_err(|(e, _)| e)?;
        ensure!(
            small_ack.offset == 0,
            "small message at {}",
            small_ack.offset
        );

        // Large messages: their Produce frame waits for the stalled frame's memory.
        let large = vec![b'L'; 200 * 1024];
        let mut acks = Vec::new();
        for _ in 0..3 {
            let delivery = producer
                .send_result(FutureRecord::<(), _>::to("bp").payload(&large).partition(0))
                .map_err(|(e, _)| e)?;
            acks.push(rt.spawn(delivery));
        }
        rt.block_on(tokio::time::sleep(Duration::from_secs(3)));
        let early = acks.iter().filter(|a| a.is_finished()).count();
        ensure!(
            early == 0,
            "{early} large messages were answered while the budget was held by stalled frames"
        );
        ensure!(
            paused_logged(b)?,
            "the broker did not log that the producer's reads are paused"
        );

        // The stalled clients leave: their memory comes back and the producer carries on.
        stalled.disconnect();
        let mut offsets = Vec::new();
        for ack in acks {
            let d = rt
                .block_on(tokio::time::timeout(WAIT, ack))
                .context("large message not acknowledged after the stalled clients left")???
                .map_err(|(e, _)| e)?;
            offsets.push(d.offset);
        }
        offsets.sort_unstable();
        ensure!(offsets == [1, 2, 3], "large messages at {offsets:?}");
        assert_answers_small_requests(b, Duration::from_secs(5))?;
        Ok(())
    });
}

/// Produces `n` 200 KiB messages to partition 0 of `topic` (empty before), one at a time,
/// each acknowledged at the next offset; returns how long they took.
fn produce_large_in_turn(b: &Broker, topic: &str, n: i64) -> anyhow::Result<Duration> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let _in_runtime = rt.enter();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("linger.ms", "0")
        .create()
        .context("create producer")?;
    let large = vec![b'L'; 200 * 1024];
    let started = Instant::now();
    for i in 0..n {
        let delivery = producer
            .send_result(
                FutureRecord::<(), _>::to(topic)
                    .payload(&large)
                    .partition(0),
            )
            .map_err(|(e, _)| e)?;
        let ack = rt
            .block_on(tokio::time::timeout(WAIT, delivery))
            .context("a large message was not acknowledged")??
            .map_err(|(e, _)| e)?;
        ensure!(ack.offset == i, "large message at {}", ack.offset);
    }
    Ok(started.elapsed())
}

/// One client (an address, for anonymous clients) may hold or wait for at most half of a
/// pool: four stalled 300 KiB frames from 127.0.0.2 hold 300 KiB of the 896 KiB large share
/// (the other three wait for their client's first), not all of it with one more queued in
/// front of everyone. So a large produce from 127.0.0.1 is acknowledged at once, well
/// before the frame deadline (5 s behind 1 MiB/s) would have freed anything.
#[test]
fn one_client_s_stalled_frames_leave_half_the_pool_to_others() {
    let _serial = serial();
    with_broker(&[("queued.max.request.bytes", BUDGET)], |b| {
        create_topic(b, "share")?;
        let frame = produce_frame(1, "share", 300 * 1024);
        let stalled = Stalled::open_from(OTHER_CLIENT, b, 4, &frame, Duration::from_millis(500))?;
        wait_until(
            "the broker logs that the stalled client is at its share",
            WAIT,
            Duration::from_millis(50),
            || Ok(std::fs::read_to_string(b.stderr_path())?.contains(SHARE_LOG)),
        )?;
        let took = produce_large_in_turn(b, "share", 2)?;
        eprintln!("two 200 KiB produces beside four stalled frames: {took:?}");
        ensure!(
            took < Duration::from_secs(3),
            "the produces waited {took:?}: the stalled client held more than its share"
        );
        let log = std::fs::read_to_string(b.stderr_path())?;
        ensure!(
            !log.contains("a frame's body did not arrive in time"),
            "a stalled frame was already cut off, so the test showed nothing"
        );
        drop(stalled);
        Ok(())
    });
}

/// The attack as first reported, at the default budget (256 MiB: 224 MiB for large frames):
/// three connections from one address send a 100,000,000-byte size prefix and a Produce
/// header, then nothing. One of them holds 100 MB of the budget, the other two wait for
/// their client's share (half a pool), so another client's large produces go through at
/// once; and each stalled connection is closed about 5 s after its memory was taken, not
/// after the 100 s its size would take at 1 MiB/s.
#[test]
fn three_stalled_100_mb_frames_neither_block_others_nor_stay() {
    let _serial = serial();
    with_broker(&[], |b| {
        create_topic(b, "prefix")?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let mut attackers = Vec::new();
        for corr in 0..3 {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(SocketAddr::from((OTHER_CLIENT, 0)))?;
            let s = rt.block_on(socket.connect(SocketAddr::from(([127, 0, 0, 1], b.port()))))?;
            let mut s = s.into_std()?;
            s.set_nonblocking(false)?;
            let mut start = 100_000_000i32.to_be_bytes().to_vec();
            start.extend_from_slice(&header(0, 9, corr));
            s.write_all(&start)?;
            attackers.push(s);
        }
        let stalled_at = Instant::now();
        let took = produce_large_in_turn(b, "prefix", 3)?;
        eprintln!("three 200 KiB produces beside three stalled 100 MB frames: {took:?}");
        ensure!(
            took < Duration::from_secs(3),
            "the produces waited {took:?} behind the stalled frames"
        );
        // Every stalled connection is closed by the broker: the first at its frame deadline,
        // the others at theirs once they had memory (they follow one another).
        for (i, s) in attackers.iter_mut().enumerate() {
            s.set_read_timeout(Some(WAIT))?;
            let mut byte = [0u8; 1];
            let closed = matches!(std::io::Read::read(s, &mut byte), Ok(0) | Err(_));
            ensure!(closed, "stalled connection {i} is still open");
            eprintln!(
                "stalled connection {i} closed after {:?}",
                stalled_at.elapsed()
            );
        }
        ensure!(
            stalled_at.elapsed() < Duration::from_secs(25),
            "the stalled connections stayed {:?}",
            stalled_at.elapsed()
        );
        Ok(())
    });
}

#[test]
fn a_frame_larger_than_the_budget_is_served_when_nothing_else_is_pending() {
    let _serial = serial();
    with_broker(
        &[
            ("queued.max.request.bytes", BUDGET),
            ("message.max.bytes", "4194304"),
        ],
        |b| {
            create_topic(b, "big")?;
            // Twice: the whole budget went back after the first.
            for i in 0..2 {
                let frame = produce_frame(7, "big", 2 << 20);
                let mut s = wire::connect(b.port());
                s.set_write_timeout(Some(WAIT))?;
                s.write_all(&frame)
                    .context("the broker stopped reading a frame larger than the budget")?;
                let r = recv(&mut s).context("no response to a frame larger than the budget")?;
                ensure!(
                    wire::produce_result(&r, "big") == (0, i),
                    "produce #{i}: {:?}",
                    wire::produce_result(&r, "big")
                );
            }
            assert_answers_small_requests(b, Duration::from_secs(5))?;
            Ok(())
        },
    );
}

/// RSS growth (KiB) of a broker with `budget` while 32 clients each have a 900 KiB frame
/// pending.
fn rss_growth_with_stalled_frames(budget: &str) -> anyhow::Result<u64> {
    const CLIENTS: usize = 32;
    let b = Broker::start(&[("queued.max.request.bytes", budget)])?;
    create_topic(&b, "bp")?;
    assert_answers_small_requests(&b, Duration::from_secs(5))?;
    thread::sleep(Duration::from_millis(300));
    let before = rss_kib(&b)?;
    let frame = produce_frame(1, "bp", STALLED_VALUE);
    let stalled = Stalled::open(&b, CLIENTS, &frame, Duration::from_secs(1))?;
    thread::sleep(Duration::from_millis(300));
    let after = rss_kib(&b)?;
    eprintln!(
        "queued.max.request.bytes={budget}: RSS {before} KiB -> {after} KiB with {CLIENTS} \
         stalled 900 KiB frames"
    );
    assert_answers_small_requests(&b, Duration::from_secs(5))?;
    stalled.disconnect();
    Ok(after.saturating_sub(before))
}

#[test]
fn memory_stays_bounded_while_stalled_frames_are_pending() {
    let _serial = serial();
    // With the budget: one frame in memory, the rest in the clients' and kernel's buffers.
    let bounded = rss_growth_with_stalled_frames(BUDGET).unwrap();
    // Budget (1 MiB) plus 64 KiB read buffers for 32 connections, plus generous slack.
    assert!(
        bounded < 12 * 1024,
        "RSS grew by {bounded} KiB with a 1 MiB budget"
    );
    // Control: unbounded, the broker buffers every frame (32 x 900 KiB = 28.1 MiB).
    let unbounded = rss_growth_with_stalled_frames("-1").unwrap();
    assert!(
        unbounded > 24 * 1024,
        "the control grew only {unbounded} KiB: the measurement cannot tell bounded from unbounded"
    );
}

/// A client that stalls mid-frame is cut off once its frame's deadline (5 s plus its size at
/// 1 MiB/s) passes, and its memory comes back, without the test disconnecting it: a large
/// produce waiting behind two stalled frames is acknowledged. And a connection that sends
/// nothing is closed after `connections.max.idle.ms`.
#[test]
fn stalled_frames_and_idle_connections_are_cut_off() {
    let _serial = serial();
    with_broker(
        &[
            ("queued.max.request.bytes", BUDGET),
            ("connections.max.idle.ms", "3000"),
        ],
        |b| {
            create_topic(b, "cut")?;
            let idle = TcpStream::connect(("127.0.0.1", b.port()))?;
            let frame = produce_frame(1, "cut", STALLED_VALUE);
            let stalled = Stalled::open(b, 2, &frame, Duration::from_millis(500))?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let _in_runtime = rt.enter();
            let producer: FutureProducer = ClientConfig::new()
                .set("bootstrap.servers", b.bootstrap())
                .set("linger.ms", "0")
                .set("message.timeout.ms", "60000")
                .create()
                .context("create producer")?;
            let large = vec![b'L'; 200 * 1024];
            let started = Instant::now();
            let delivery = producer
                .send_result(
                    FutureRecord::<(), _>::to("cut")
                        .payload(&large)
                        .partition(0),
                )
                .map_err(|(e, _)| e)?;
            let ack = rt
                .block_on(tokio::time::timeout(Duration::from_secs(45), delivery))
                .context("a large message stayed behind stalled frames")??
                .map_err(|(e, _)| e)?;
            ensure!(ack.offset == 0, "large message at {}", ack.offset);
            let log = std::fs::read_to_string(b.stderr_path())?;
            ensure!(
                log.contains("a frame's body did not arrive in time"),
                "no frame deadline in the log"
            );
            eprintln!(
                "large produce acknowledged after {:?} behind two stalled frames",
                started.elapsed()
            );
            // The idle connection was closed long ago (3 s).
            let mut idle = idle;
            idle.set_read_timeout(Some(Duration::from_secs(5)))?;
            let mut byte = [0u8; 1];
            let n = std::io::Read::read(&mut idle, &mut byte).unwrap_or(0);
            ensure!(n == 0, "the idle connection is still open");
            ensure!(
                log.contains("closing idle connection"),
                "no idle close in the log"
            );
            drop(stalled);
            Ok(())
        },
    );
}
