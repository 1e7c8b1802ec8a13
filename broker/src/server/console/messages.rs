//! The message browser and the search.
//!
//! Both read a partition with Fetch from its leader, as a consumer would, as the signed-in
//! user (READ on the topic), read_committed unless `isolation=uncommitted`. Compressed
//! batches are inflated here (at most [`MAX_INFLATED_BYTES`] a batch); control batches are
//! skipped.
//!
//! A search scans forward from an offset (or the first offset at a time) and keeps the
//! records that pass every filter given: `key` (equal), `value` (contains, bytes), `regex`
//! (on the value as UTF-8; Rust's `regex`, linear in the input whatever the pattern, with
//! its compiled size bounded), `header` (`name` or `name=value`), `from_ms` and `to_ms`
//! (the record's timestamp). One call scans at most `max_bytes` and `max_ms`, then answers
//! what it found with how far it got (`next_offset`); the page calls again from there and
//! shows the progress, so no request holds the console, or a connection, for long.

use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::{Value, json};
use strata_protocol::StrBytes;
use strata_protocol::compression::decompress;
use strata_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use strata_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, RequestKind, ResponseKind, TopicName,
};
use strata_protocol::record_batch::{BATCH_HEADER_LEN, RecordView, batches};

use super::http::{Failure, Query};
use super::views::{number, within};
use super::{Console, User};
use crate::admin::client::{Client, error_name, leaders};
use crate::admin::logs::{self, EARLIEST, LATEST};

/// Records a browse shows by default, and at most.
const BROWSE_DEFAULT: usize = 50;
const BROWSE_MAX: usize = 500;
/// Matches one search call answers by default, and at most.
const MATCHES_DEFAULT: usize = 20;
const MATCHES_MAX: usize = 200;
/// One search call's scan: bytes and time, by default and at most.
const SCAN_BYTES_DEFAULT: u64 = 64 << 20;
const SCAN_BYTES_MAX: u64 = 1 << 30;
const SCAN_MS_DEFAULT: u64 = 2_000;
const SCAN_MS_MAX: u64 = 10_000;
/// One Fetch's bound.
const FETCH_BYTES: i32 = 4 << 20;
/// The largest batch inflated.
const MAX_INFLATED_BYTES: usize = 64 << 20;
/// The longest key or value shown; longer ones are cut (and marked).
const SHOWN_BYTES: usize = 16 * 1024;
/// The longest regular expression, and its compiled size.
const REGEX_MAX_LEN: usize = 1_000;
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// How values and keys are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// JSON when it parses, UTF-8 when it is, hex otherwise.
    Auto,
    Utf8,
    Json,
    Hex,
}

fn format_of(q: &Query) -> Result<Format, Failure> {
    match q.get("format").map(String::as_str).unwrap_or("auto") {
        "auto" | "" => Ok(Format::Auto),
        "utf8" => Ok(Format::Utf8),
        "json" => Ok(Format::Json),
        "hex" => Ok(Format::Hex),
        other => Err(Failure::bad(format!(
            "parameter format: {other:?} is not auto, utf8, json or hex"
        ))),
    }
}

/// Bytes as the page shows them: the text and how it was decoded.
fn show(bytes: Option<&[u8]>, format: Format) -> Value {
    let Some(all) = bytes else {
        return Value::Null;
    };
    let cut = all.len() > SHOWN_BYTES;
    let b = &all[..all.len().min(SHOWN_BYTES)];
    let hex = || b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let (text, as_) = match format {
        Format::Hex => (hex(), "hex"),
        Format::Utf8 => (String::from_utf8_lossy(b).into_owned(), "utf8"),
        Format::Json | Format::Auto => match serde_json::from_slice::<Value>(b) {
            Ok(v) if !cut => (serde_json::to_string_pretty(&v).unwrap_or_default(), "json"),
            _ => match std::str::from_utf8(b) {
                Ok(s) => (s.to_owned(), "utf8"),
                Err(_) if format == Format::Json => {
                    (String::from_utf8_lossy(b).into_owned(), "utf8")
                }
                Err(_) => (hex(), "hex"),
            },
        },
    };
    json!({ "text": text, "as": as_, "bytes": all.len(), "truncated": cut })
}

fn record_json(r: &RecordView<'_>, format: Format) -> Value {
    json!({
        "offset": r.offset,
        "timestamp": r.timestamp,
        "key": show(r.key, format),
        "value": show(r.value, format),
        "headers": r.headers().map(|(k, v)| json!({
            "key": String::from_utf8_lossy(k),
            "value": show(v, format),
        })).collect::<Vec<_>>(),
    })
}

/// The partition asked for and its leader.
struct Target {
    topic: String,
    partition: i32,
    leader: i32,
}

fn target(client: &mut Client, q: &Query) -> Result<Target, Failure> {
    let topic = q
        .get("topic")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Failure::bad("parameter topic is required"))?
        .clone();
    let partition = number::<i32>(q, "partition")?.unwrap_or(0);
    let m = client.metadata(Some(std::slice::from_ref(&topic)))?;
    if let Some(t) = m.topics.first()
        && t.error_code != 0
    {
        return Err(match t.error_code {
            3 => Failure::not_found(format!("topic {topic}: UNKNOWN_TOPIC_OR_PARTITION")),
            29 => Failure::forbidden(format!("topic {topic}: TOPIC_AUTHORIZATION_FAILED")),
            c => Failure::bad(format!("topic {topic}: {}", error_name(c))),
        });
    }
    let leader = leaders(&m)
        .get(&(topic.clone(), partition))
        .copied()
        .ok_or_else(|| Failure::not_found(format!("topic {topic} has no partition {partition}")))?;
    if leader < 0 {
        return Err(Failure::bad(format!(
            "{topic}:{partition} has no leader now (LEADER_NOT_AVAILABLE)"
        )));
    }
    Ok(Target {
        topic,
        partition,
        leader,
    })
}

/// The log's start and end offsets, and the offset of the first record at or after `ms`.
fn bounds(
    client: &mut Client,
    t: &Target,
    at_ms: Option<i64>,
) -> Result<(i64, i64, Option<i64>), Failure> {
    let leaders = [((t.topic.clone(), t.partition), t.leader)]
        .into_iter()
        .collect();
    let mut ask = |ts: i64| -> Result<i64, Failure> {
        let answer = logs::list_offsets(
            client,
            &leaders,
            &[((t.topic.clone(), t.partition), ts)].into_iter().collect(),
        )?;
        match answer.into_values().next() {
            Some(Ok(o)) => Ok(o),
            Some(Err(code)) => Err(Failure::bad(format!("ListOffsets: {}", error_name(code)))),
            None => Err(Failure::bad("ListOffsets answered nothing")),
        }
    };
    let start = ask(EARLIEST)?;
    let end = ask(LATEST)?;
    let at = at_ms
        .map(&mut ask)
        .transpose()?
        .map(|o| if o < 0 { end } else { o });
    Ok((start, end, at))
}

/// Where a read begins: `offset`, or the first record at or after `timestamp`, or
/// `position` (`earliest`, or `latest`: the last `limit` records); the log's start by
/// default.
fn start_offset(
    client: &mut Client,
    t: &Target,
    q: &Query,
    tail: usize,
) -> Result<(i64, i64, i64), Failure> {
    let offset = number::<i64>(q, "offset")?;
    let timestamp = number::<i64>(q, "timestamp")?.or(number::<i64>(q, "from_ms")?);
    if offset.is_some_and(|o| o < 0) {
        return Err(Failure::bad("parameter offset: not negative"));
    }
    let (log_start, log_end, at) =
        bounds(client, t, if offset.is_none() { timestamp } else { None })?;
    let from = match (offset, at, q.get("position").map(String::as_str)) {
        (Some(o), _, _) => {
            if o > log_end {
                return Err(Failure::bad(format!(
                    "offset {o} is past the log's end ({log_end}) of {}:{}",
                    t.topic, t.partition
                )));
            }
            o.max(log_start)
        }
        (None, Some(a), _) => a,
        (None, None, Some("latest")) => {
            (log_end - i64::try_from(tail).unwrap_or(i64::MAX)).max(log_start)
        }
        (None, None, None | Some("earliest" | "")) => log_start,
        (None, None, Some(other)) => {
            return Err(Failure::bad(format!(
                "parameter position: {other:?} is not earliest or latest"
            )));
        }
    };
    Ok((from, log_start, log_end))
}

/// One Fetch from the leader: the records bytes and the high watermark.
fn fetch(
    client: &mut Client,
    t: &Target,
    offset: i64,
    committed: bool,
) -> anyhow::Result<(bytes::Bytes, i64)> {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(FETCH_BYTES)
        .with_isolation_level(i8::from(committed))
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(t.topic.clone())))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(t.partition)
                        .with_fetch_offset(offset)
                        .with_current_leader_epoch(-1)
                        .with_last_fetched_epoch(-1)
                        .with_log_start_offset(-1)
                        .with_partition_max_bytes(FETCH_BYTES),
                ]),
        ]);
    let ResponseKind::Fetch(r) =
        client.send_to(t.leader, ApiKey::Fetch, RequestKind::Fetch(request))?
    else {
        bail!("Fetch was not answered with Fetch");
    };
    if r.error_code != 0 {
        bail!("Fetch: {}", error_name(r.error_code));
    }
    let Some(p) = r.responses.into_iter().flat_map(|t| t.partitions).next() else {
        bail!("Fetch answered no partition");
    };
    if p.error_code != 0 {
        bail!(
            "Fetch of {}:{}: {}",
            t.topic,
            t.partition,
            error_name(p.error_code)
        );
    }
    let limit = if committed {
        p.last_stable_offset.max(0)
    } else {
        p.high_watermark
    };
    Ok((p.records.unwrap_or_default(), limit))
}

/// Walks the records of `bytes` at or after `from`, in order: `visit` returns `false` to
/// stop. Returns the offset after the last record visited (or after the last batch).
fn each_record(
    bytes: &[u8],
    from: i64,
    mut visit: impl FnMut(&RecordView<'_>) -> bool,
) -> anyhow::Result<Option<i64>> {
    let mut next = None;
    for batch in batches(bytes) {
        // A partial batch at the end of a Fetch answer is normal.
        let Ok(batch) = batch else { break };
        if batch.last_offset() < from {
            continue;
        }
        if batch.is_control() {
            next = Some(batch.last_offset() + 1);
            continue;
        }
        let inflated;
        let records = match batch.records() {
            Ok(r) => r,
            Err(_) => {
                inflated = decompress(
                    batch.compression(),
                    &batch.bytes()[BATCH_HEADER_LEN..],
                    MAX_INFLATED_BYTES,
                )?;
                batch.records_in(&inflated)
            }
        };
        for r in records {
            let r = r?;
            if r.offset < from {
                continue;
            }
            next = Some(r.offset + 1);
            if !visit(&r) {
                return Ok(next);
            }
        }
        next = Some(next.unwrap_or(from).max(batch.last_offset() + 1));
    }
    Ok(next)
}

/// Reads `limit` records from a position: `GET /api/messages`.
pub fn browse(c: &Console, u: &User, q: &Query) -> Result<Value, Failure> {
    let format = format_of(q)?;
    let limit = within(q, "limit", BROWSE_DEFAULT, BROWSE_MAX)?;
    let committed = q.get("isolation").map(String::as_str) != Some("uncommitted");
    let mut client = c.client(Some(u))?;
    let t = target(&mut client, q)?;
    let (from, log_start, log_end) = start_offset(&mut client, &t, q, limit)?;
    let mut records = Vec::new();
    let mut offset = from;
    let deadline = Instant::now() + Duration::from_millis(SCAN_MS_DEFAULT);
    while records.len() < limit && offset < log_end && Instant::now() < deadline {
        let (bytes, readable) = fetch(&mut client, &t, offset, committed)?;
        let next = each_record(&bytes, offset, |r| {
            records.push(record_json(r, format));
            records.len() < limit
        })?;
        match next {
            Some(n) if n > offset => offset = n,
            _ => break,
        }
        if offset >= readable {
            break;
        }
    }
    Ok(json!({
        "topic": t.topic,
        "partition": t.partition,
        "leader": t.leader,
        "log_start_offset": log_start,
        "log_end_offset": log_end,
        "start_offset": from,
        "next_offset": offset,
        "records": records,
    }))
}

/// The filters of a search.
struct Filters {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    regex: Option<regex::bytes::Regex>,
    header: Option<(Vec<u8>, Option<Vec<u8>>)>,
    from_ms: Option<i64>,
    to_ms: Option<i64>,
}

impl Filters {
    fn parse(q: &Query) -> Result<Filters, Failure> {
        let text = |name: &str| q.get(name).filter(|v| !v.is_empty()).cloned();
        let regex = match text("regex") {
            None => None,
            Some(p) if p.len() > REGEX_MAX_LEN => {
                return Err(Failure::bad(format!(
                    "parameter regex: longer than {REGEX_MAX_LEN} characters"
                )));
            }
            Some(p) => Some(
                regex::bytes::RegexBuilder::new(&p)
                    .size_limit(REGEX_SIZE_LIMIT)
                    .dfa_size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .map_err(|e| Failure::bad(format!("parameter regex: {e}")))?,
            ),
        };
        let header = text("header").map(|h| match h.split_once('=') {
            Some((k, v)) => (k.as_bytes().to_vec(), Some(v.as_bytes().to_vec())),
            None => (h.as_bytes().to_vec(), None),
        });
        Ok(Filters {
            key: text("key").map(String::into_bytes),
            value: text("value").map(String::into_bytes),
            regex,
            header,
            from_ms: number::<i64>(q, "from_ms")?,
            to_ms: number::<i64>(q, "to_ms")?,
        })
    }

    fn pass(&self, r: &RecordView<'_>) -> bool {
        let contains = |hay: &[u8], needle: &[u8]| {
            needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
        };
        self.key
            .as_ref()
            .is_none_or(|k| r.key == Some(k.as_slice()))
            && self
                .value
                .as_ref()
                .is_none_or(|v| contains(r.value.unwrap_or_default(), v))
            && self
                .regex
                .as_ref()
                .is_none_or(|re| re.is_match(r.value.unwrap_or_default()))
            && self.header.as_ref().is_none_or(|(name, value)| {
                r.headers().any(|(k, v)| {
                    k == name.as_slice()
                        && value.as_ref().is_none_or(|want| v == Some(want.as_slice()))
                })
            })
            && self.from_ms.is_none_or(|from| r.timestamp >= from)
            && self.to_ms.is_none_or(|to| r.timestamp <= to)
    }
}

/// Scans a partition for records that pass the filters: `GET /api/search`.
pub fn search(c: &Console, u: &User, q: &Query) -> Result<Value, Failure> {
    let started = Instant::now();
    let format = format_of(q)?;
    let filters = Filters::parse(q)?;
    let limit = within(q, "limit", MATCHES_DEFAULT, MATCHES_MAX)?;
    let max_bytes = within(q, "max_bytes", SCAN_BYTES_DEFAULT, SCAN_BYTES_MAX)?;
    let max_ms = within(q, "max_ms", SCAN_MS_DEFAULT, SCAN_MS_MAX)?;
    let committed = q.get("isolation").map(String::as_str) != Some("uncommitted");
    let mut client = c.client(Some(u))?;
    let t = target(&mut client, q)?;
    let (from, log_start, log_end) = start_offset(&mut client, &t, q, 0)?;
    let deadline = started + Duration::from_millis(max_ms);
    let mut matches = Vec::new();
    let (mut scanned_bytes, mut scanned_records) = (0_u64, 0_u64);
    let mut offset = from;
    let stopped = loop {
        if offset >= log_end {
            break "end";
        }
        if matches.len() >= limit {
            break "limit";
        }
        if scanned_bytes >= max_bytes {
            break "bytes";
        }
        if Instant::now() >= deadline {
            break "time";
        }
        let (bytes, readable) = fetch(&mut client, &t, offset, committed)?;
        scanned_bytes += bytes.len() as u64;
        let next = each_record(&bytes, offset, |r| {
            scanned_records += 1;
            if filters.pass(r) {
                matches.push(record_json(r, format));
            }
            matches.len() < limit
        })?;
        match next {
            Some(n) if n > offset => offset = n,
            // Nothing readable at the offset: the rest is not committed yet.
            _ => break "end",
        }
        if offset >= readable && readable < log_end {
            break "end";
        }
    };
    Ok(json!({
        "topic": t.topic,
        "partition": t.partition,
        "leader": t.leader,
        "log_start_offset": log_start,
        "log_end_offset": log_end,
        "start_offset": from,
        "next_offset": offset,
        "done": stopped == "end",
        "stopped": stopped,
        "scanned_bytes": scanned_bytes,
        "scanned_records": scanned_records,
        "elapsed_ms": started.elapsed().as_millis() as u64,
        "matches": matches,
    }))
}
