//! What the `scale` and `restart` modes look at from outside the broker: its memory, threads
//! and open file descriptors from `/proc/<pid>`, the bytes under its data directory, and
//! whether it answers on its port.
//!
//! Readiness is asked in Kafka's own words over a fresh TCP connection each time: an
//! ApiVersions v0 request, then a Metadata v1 request for one topic. Both are written by hand
//! (a few fixed bytes) so that the probe has no client-side state, retries or backoff of its
//! own; librdkafka's reconnect backoff would otherwise be measured as broker start time.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};

/// One look at the broker process, from `/proc/<pid>/status` and `/proc/<pid>/fd`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcSample {
    /// Resident set now (`VmRSS`), KiB.
    pub rss_kb: u64,
    /// Peak resident set since start (`VmHWM`), KiB.
    pub hwm_kb: u64,
    pub threads: u64,
    /// Every open descriptor.
    pub fds: u64,
    /// Descriptors on log-directory files: `.log`, `.index`, `.timeindex`, `.snapshot`.
    pub segment_fds: u64,
    pub socket_fds: u64,
}

/// Samples the process, or `None` when it is gone.
pub fn sample(pid: u32) -> Option<ProcSample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let mut s = ProcSample {
        rss_kb: field("VmRSS:"),
        hwm_kb: field("VmHWM:"),
        threads: field("Threads:"),
        ..ProcSample::default()
    };
    // One readlink per descriptor; the directory listing is finite, so this loop is bounded.
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        s.fds += 1;
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        let t = target.to_string_lossy();
        if t.starts_with("socket:") {
            s.socket_fds += 1;
        } else if [".log", ".index", ".timeindex", ".snapshot"]
            .iter()
            .any(|ext| t.ends_with(ext))
        {
            s.segment_fds += 1;
        }
    }
    Some(s)
}

/// `ulimit -n` of a running process (the soft "Max open files" in `/proc/<pid>/limits`).
pub fn max_open_files(pid: u32) -> Option<u64> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Finds the pid of a process whose command line names `strata` and `:port` (the broker was
/// started with `listeners=PLAINTEXT://host:port`), other than this one.
pub fn find_broker_pid(port: u16) -> Option<u32> {
    let me = std::process::id();
    let needle = format!(":{port}");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|raw| {
                let cmd = String::from_utf8_lossy(&raw).replace('\0', " ");
                let exe = cmd.split_whitespace().next().unwrap_or("");
                exe.ends_with("strata") && cmd.contains(&needle)
            })
        })
}

/// Bytes and regular files under `dir`, walked iteratively (depth bounded at 8 levels; the
/// log directory is two deep).
pub fn dir_usage(dir: &Path) -> (u64, u64) {
    let (mut bytes, mut files) = (0u64, 0u64);
    let mut stack = vec![(dir.to_path_buf(), 0u32)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() && depth < 8 {
                stack.push((e.path(), depth + 1));
            } else if meta.is_file() {
                bytes += meta.len();
                files += 1;
            }
        }
    }
    (bytes, files)
}

/// Every regular file under `dir` (same walk as [`dir_usage`]).
pub fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0u32)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() && depth < 8 {
                stack.push((e.path(), depth + 1));
            } else if meta.is_file() {
                out.push(e.path());
            }
        }
    }
    out
}

/// The first address `bootstrap` resolves to.
pub fn resolve(bootstrap: &str) -> anyhow::Result<SocketAddr> {
    bootstrap
        .to_socket_addrs()?
        .next()
        .with_context(|| format!("{bootstrap} resolves to nothing"))
}

const CLIENT_ID: &[u8] = b"strata-bench-probe";

/// Sends one request (header v1: api key, api version, correlation id, client id) and returns
/// the response body after the correlation id (response header v0).
fn round_trip(
    addr: SocketAddr,
    api_key: i16,
    api_version: i16,
    body: &[u8],
    timeout: Duration,
) -> anyhow::Result<Vec<u8>> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.set_nodelay(true)?;
    let correlation_id: i32 = 0x5eed;
    let mut req = Vec::with_capacity(32 + body.len());
    req.extend_from_slice(&api_key.to_be_bytes());
    req.extend_from_slice(&api_version.to_be_bytes());
    req.extend_from_slice(&correlation_id.to_be_bytes());
    req.extend_from_slice(&(CLIENT_ID.len() as i16).to_be_bytes());
    req.extend_from_slice(CLIENT_ID);
    req.extend_from_slice(body);
    let mut frame = (req.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&req);
    s.write_all(&frame)?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    if !(4..=64 << 20).contains(&len) {
        bail!("response size {len}");
    }
    let mut resp = vec![0u8; len as usize];
    s.read_exact(&mut resp)?;
    if resp[..4] != correlation_id.to_be_bytes() {
        bail!("correlation id mismatch");
    }
    Ok(resp.split_off(4))
}

/// ApiVersions v0 answered with error code 0.
pub fn api_versions_ok(addr: SocketAddr, timeout: Duration) -> bool {
    // v0 request body is empty; the response starts with error_code (int16).
    round_trip(addr, 18, 0, &[], timeout).is_ok_and(|b| b.len() >= 2 && b[..2] == [0, 0])
}

/// Metadata v1 for `topic`: how many of its partitions have error code 0 and a leader.
///
/// # Errors
///
/// The connection failed, timed out, or the answer did not parse.
pub fn metadata_led_partitions(
    addr: SocketAddr,
    topic: &str,
    timeout: Duration,
) -> anyhow::Result<usize> {
    // Request v1: topics array (int32 count, then int16-length strings).
    let mut body = 1i32.to_be_bytes().to_vec();
    body.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    body.extend_from_slice(topic.as_bytes());
    let b = round_trip(addr, 3, 1, &body, timeout)?;
    let mut r = Reader { b: &b, at: 0 };
    // Response v1: brokers [node_id int32, host string, port int32, rack nullable string],
    // controller_id int32, topics [error_code int16, name string, is_internal int8,
    // partitions [error_code int16, partition_index int32, leader_id int32,
    // replica_nodes [int32], isr_nodes [int32]]].
    for _ in 0..r.count()? {
        r.skip(4)?;
        r.string()?;
        r.skip(4)?;
        r.string()?;
    }
    r.skip(4)?;
    let mut led = 0;
    for _ in 0..r.count()? {
        let topic_error = r.i16()?;
        r.string()?;
        r.skip(1)?;
        for _ in 0..r.count()? {
            let error = r.i16()?;
            r.skip(4)?;
            let leader = r.i32()?;
            let replicas = r.count()?;
            r.skip(4 * replicas)?;
            let isr = r.count()?;
            r.skip(4 * isr)?;
            if topic_error == 0 && error == 0 && leader >= 0 {
                led += 1;
            }
        }
    }
    Ok(led)
}

/// A bounds-checked cursor over a response body.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> anyhow::Result<&[u8]> {
        let end = self.at.checked_add(n).context("overflow")?;
        let s = self.b.get(self.at..end).context("short response")?;
        self.at = end;
        Ok(s)
    }
    fn skip(&mut self, n: usize) -> anyhow::Result<()> {
        self.take(n).map(|_| ())
    }
    fn i16(&mut self) -> anyhow::Result<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into()?))
    }
    fn i32(&mut self) -> anyhow::Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into()?))
    }
    /// An array length; a null array (-1) counts as empty. Capped by the bytes left, so a
    /// corrupt count cannot make the caller loop for long.
    fn count(&mut self) -> anyhow::Result<usize> {
        let n = self.i32()?;
        let n = usize::try_from(n.max(0))?;
        if n > self.b.len() - self.at {
            bail!("array count {n} exceeds the response");
        }
        Ok(n)
    }
    /// A string or nullable string (int16 length, -1 for null).
    fn string(&mut self) -> anyhow::Result<()> {
        let n = self.i16()?;
        self.skip(usize::try_from(n.max(0))?)
    }
}

/// `strata-bench wait-ready --bootstrap HOST:PORT [--timeout-secs 600]`: polls every 5 ms
/// until the broker answers ApiVersions and prints the seconds since this tool started (start
/// it right after the broker to time a start from the shell).
///
/// # Errors
///
/// Bad arguments, or no answer within the timeout.
pub fn wait_ready_cmd(argv: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let (mut bootstrap, mut timeout_secs) = (String::new(), 600u64);
    let mut it = argv;
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--bootstrap" => bootstrap = value()?,
            "--timeout-secs" => timeout_secs = value()?.parse()?,
            other => bail!("unknown argument {other}"),
        }
    }
    let addr = resolve(&bootstrap)?;
    while started.elapsed() < Duration::from_secs(timeout_secs) {
        if api_versions_ok(addr, Duration::from_secs(2)) {
            println!(
                "{bootstrap} answered ApiVersions after {:.3} s",
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    bail!("{bootstrap} did not answer within {timeout_secs} s")
}

/// Record batches in the `.log` files under `dir`: (all batches, batches in active segments,
/// bytes of active segments). A partition's active segment is its `.log` with the highest
/// base offset (the zero-padded names sort by offset). Only batch headers are read: the base
/// offset (int64) and the batch length (int32, counting the bytes after it), as in Kafka's
/// log format; each step advances at least 12 bytes, so a file's walk is bounded by its
/// length.
pub fn count_batches(dir: &Path) -> (u64, u64, u64) {
    use std::os::unix::fs::FileExt;
    let mut by_partition: std::collections::BTreeMap<std::path::PathBuf, Vec<std::path::PathBuf>> =
        std::collections::BTreeMap::new();
    for f in files_under(dir) {
        if f.extension().is_some_and(|e| e == "log")
            && let Some(parent) = f.parent()
        {
            by_partition
                .entry(parent.to_path_buf())
                .or_default()
                .push(f);
        }
    }
    let (mut all, mut active, mut active_bytes) = (0u64, 0u64, 0u64);
    for logs in by_partition.values_mut() {
        logs.sort();
        for (i, path) in logs.iter().enumerate() {
            let Ok(file) = std::fs::File::open(path) else {
                continue;
            };
            let len = file.metadata().map_or(0, |m| m.len());
            let (mut pos, mut n) = (0u64, 0u64);
            let mut header = [0u8; 12];
            while pos + 12 <= len && file.read_exact_at(&mut header, pos).is_ok() {
                let batch_len = i32::from_be_bytes([header[8], header[9], header[10], header[11]]);
                if batch_len <= 0 {
                    break;
                }
                pos += 12 + batch_len as u64;
                n += 1;
            }
            all += n;
            if i + 1 == logs.len() {
                active += n;
                active_bytes += len;
            }
        }
    }
    (all, active, active_bytes)
}
