//! # Whole-system test harness
//!
//! Real clients against the real `strata` binary; nothing here mocks the broker. The tests
//! themselves are one binary, `tests/it` (one module per area); this library is what they
//! share.
//!
//! ## Layout
//!
//! - [`Broker`]: one `strata` child process on a free 127.0.0.1 port with its own temporary
//!   data directory. Started by [`Broker::start`], killed (SIGKILL) on drop, stopped cleanly by
//!   [`Broker::stop`] (SIGTERM), crashed by [`Broker::kill9`] and brought back on the same port
//!   and data directory by [`Broker::restart`].
//! - [`cluster`]: several `strata` processes on 127.0.0.1 forming one cluster, for the
//!   multi-node tests.
//! - [`wire`]: hand-built request frames, independent of Strata's codec.
//! - [`run_with_timeout`]: runs an external client (kcat) with bounded time and captured output.
//! - [`wait_until`]: the one bounded polling loop the tests use.
//! - [`serial`]: the lock the heavy tests hold so that they never run at the same time.
//!
//! ## Invariants
//!
//! - Every wait is bounded in time; a broker that does not come up within
//!   [`READY_TIMEOUT`] is an error, not a hang.
//! - The broker binds only 127.0.0.1.
//! - The broker's stderr goes to `<tempdir>/broker.stderr.log` (appended across restarts); its
//!   tail is printed when a test panics while the broker is alive, so failures show the broker
//!   side too. Set `STRATA_TEST_KEEP=1` to keep the temporary directory after a failure.
//!
//! The binary comes from `$STRATA_BIN`, else `<workspace>/target/release/strata`.

pub mod cluster;
pub mod wire;

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// How long the broker may take to accept TCP connections after it is spawned.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`Broker::stop`] waits for a clean exit after SIGTERM.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// How many bytes of the broker's stderr to show when a test fails.
const STDERR_TAIL_BYTES: u64 = 8 * 1024;

/// Path of the `strata` binary under test: `$STRATA_BIN`, else `<workspace>/target/release/strata`.
pub fn strata_bin() -> PathBuf {
    match std::env::var_os("STRATA_BIN") {
        Some(p) => PathBuf::from(p),
        None => workspace_root().join("target/release/strata"),
    }
}

/// The Cargo workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent directory")
        .to_path_buf()
}

/// The ports [`free_port`] hands out: below Linux's ephemeral range (32768-60999 by
/// default), from which the kernel picks both `bind(0)` ports and the local ends of outgoing
/// connections.
const TEST_PORTS: std::ops::Range<u32> = 20_000..32_000;

/// Picks a currently free TCP port on 127.0.0.1 for a server to listen on.
///
/// The port is outside the ephemeral range: a port the kernel hands out there can be taken
/// by any outgoing connection between the pick and the server's bind (a cluster node once
/// failed to start with "Address already in use" that way). Ports are tried in turn from a
/// start that differs per process, each checked free by binding it, and one process never
/// hands out a port twice.
///
/// # Errors
///
/// Returns an error if no port of the range is free.
pub fn free_port() -> anyhow::Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let span = TEST_PORTS.end - TEST_PORTS.start;
    // The first call seeds the start from the process id and the clock.
    let _ = NEXT.compare_exchange(
        u32::MAX,
        (std::process::id().wrapping_mul(7919)
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos()))
            % span,
        Ordering::AcqRel,
        Ordering::Acquire,
    );
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::AcqRel);
        let port = u16::try_from(TEST_PORTS.start + n % span).expect("below 32000");
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free port in {TEST_PORTS:?}")
}

/// A running `strata` broker owned by one test.
pub struct Broker {
    /// The child process; `None` after [`Broker::kill9`] or [`Broker::stop`] until [`Broker::restart`].
    child: Option<Child>,
    /// Port of the PLAINTEXT listener; kept across restarts so clients reconnect to the same address.
    port: u16,
    /// Owns the temporary directory (data dir + stderr log); deleted on drop unless kept.
    tempdir: Option<tempfile::TempDir>,
    /// `log.dirs` of the broker, inside `tempdir`; kept across restarts.
    data_dir: PathBuf,
    /// Where the broker's stderr goes, appended across restarts.
    stderr_path: PathBuf,
    /// The caller's extra `--override`s, re-applied on restart.
    extra_overrides: Vec<(String, String)>,
    /// The binary, resolved once so a restart runs the same one.
    bin: PathBuf,
    /// Extra environment variables for the broker process, re-applied on restart.
    env: Vec<(String, String)>,
    /// Listeners beside PLAINTEXT (`NAME://127.0.0.1:PORT`), listened on and advertised.
    extra_listeners: Vec<String>,
}

impl Broker {
    /// Starts a broker on a free 127.0.0.1 port with a fresh temporary data directory and waits
    /// (at most [`READY_TIMEOUT`]) until it accepts TCP connections.
    ///
    /// `extra_overrides` are passed as `--override key=value` after the listener and `log.dirs`
    /// overrides.
    ///
    /// # Errors
    ///
    /// Fails if the binary is missing, cannot be spawned, exits early, or does not accept
    /// connections in time; the error includes the tail of the broker's stderr.
    pub fn start(extra_overrides: &[(&str, &str)]) -> anyhow::Result<Broker> {
        Broker::start_with_env(extra_overrides, &[])
    }

    /// [`Broker::start`] with extra environment variables for the broker process.
    ///
    /// # Errors
    ///
    /// As [`Broker::start`].
    pub fn start_with_env(
        extra_overrides: &[(&str, &str)],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Broker> {
        Broker::start_with_listeners(&[], extra_overrides, env)
    }

    /// [`Broker::start_with_env`] with more listeners (`NAME://127.0.0.1:PORT`, e.g. a
    /// `SASL_SSL` one) after the PLAINTEXT listener, which stays the one the harness probes
    /// and [`Broker::bootstrap`] names. They are advertised too.
    ///
    /// # Errors
    ///
    /// As [`Broker::start`].
    pub fn start_with_listeners(
        extra_listeners: &[&str],
        extra_overrides: &[(&str, &str)],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Broker> {
        let bin = strata_bin();
        if !bin.is_file() {
            bail!(
                "strata binary not found at {} (build it with `cargo build --release --bin strata` or set STRATA_BIN)",
                bin.display()
            );
        }
        let tempdir = tempfile::Builder::new()
            .prefix("strata-test-")
            .tempdir()
            .context("create temp dir")?;
        let data_dir = tempdir.path().join("data");
        fs::create_dir_all(&data_dir)?;
        let stderr_path = tempdir.path().join("broker.stderr.log");
        let mut broker = Broker {
            child: None,
            port: free_port()?,
            tempdir: Some(tempdir),
            data_dir,
            stderr_path,
            extra_overrides: extra_overrides
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            bin,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            extra_listeners: extra_listeners.iter().map(|l| l.to_string()).collect(),
        };
        broker.spawn_and_wait()?;
        Ok(broker)
    }

    /// `host:port` for clients' `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The listener port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The broker's process id while it runs, e.g. to read its memory from
    /// `/proc/<pid>/status`.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The broker's `log.dirs`.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The file that collects the broker's stderr.
    pub fn stderr_path(&self) -> &Path {
        &self.stderr_path
    }

    /// The last few KiB of the broker's stderr (all runs), for diagnostics.
    pub fn stderr_tail(&self) -> String {
        read_tail(&self.stderr_path, STDERR_TAIL_BYTES)
    }

    /// Whether the broker process is currently running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Kills the broker with SIGKILL and reaps it. The data directory and port are kept.
    ///
    /// # Errors
    ///
    /// Fails if the broker is not running or the kill fails.
    pub fn kill9(&mut self) -> anyhow::Result<()> {
        let mut child = self.child.take().context("kill9: broker is not running")?;
        child.kill().context("kill -9 strata")?;
        child.wait().context("reap strata")?;
        self.note("---- harness: broker killed with SIGKILL ----");
        Ok(())
    }

    /// Sends SIGTERM and waits (at most [`STOP_TIMEOUT`]) for the broker to exit; returns its exit
    /// status. The contract says SIGTERM is a clean shutdown that exits 0; callers assert that.
    ///
    /// # Errors
    ///
    /// Fails if the broker is not running, the signal cannot be sent, or the broker does not exit
    /// in time (it is then killed with SIGKILL).
    pub fn stop(&mut self) -> anyhow::Result<ExitStatus> {
        let mut child = self.child.take().context("stop: broker is not running")?;
        let pid = child.id().to_string();
        let status = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .context("run `kill -TERM`")?;
        if !status.success() {
            let _ = child.kill();
            let _ = child.wait();
            bail!("`kill -TERM {pid}` failed: {status}");
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait()? {
                self.note(&format!(
                    "---- harness: broker exited after SIGTERM: {status} ----"
                ));
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "broker did not exit within {STOP_TIMEOUT:?} of SIGTERM; killed it. stderr tail:\n{}",
                    self.stderr_tail()
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the broker again on the same port and data directory (after [`Broker::kill9`] or
    /// [`Broker::stop`]); if it is still running it is killed with SIGKILL first.
    ///
    /// # Errors
    ///
    /// As for [`Broker::start`].
    pub fn restart(&mut self) -> anyhow::Result<()> {
        if self.child.is_some() {
            self.kill9()?;
        }
        self.note("---- harness: restarting broker ----");
        self.spawn_and_wait()
    }

    /// Sets (`Some`) or removes (`None`) one of the caller's `--override`s for the next
    /// [`Broker::restart`], e.g. to restart without a setting the first start needed.
    pub fn set_override(&mut self, key: &str, value: Option<&str>) {
        self.extra_overrides.retain(|(k, _)| k != key);
        if let Some(v) = value {
            self.extra_overrides.push((key.to_owned(), v.to_owned()));
        }
    }

    fn args(&self) -> Vec<String> {
        let listener = std::iter::once(format!("PLAINTEXT://127.0.0.1:{}", self.port))
            .chain(self.extra_listeners.iter().cloned())
            .collect::<Vec<_>>()
            .join(",");
        let mut overrides = vec![
            ("listeners".to_string(), listener.clone()),
            ("advertised.listeners".to_string(), listener),
            ("log.dirs".to_string(), self.data_dir.display().to_string()),
        ];
        overrides.extend(self.extra_overrides.iter().cloned());
        overrides
            .into_iter()
            .flat_map(|(k, v)| ["--override".to_string(), format!("{k}={v}")])
            .collect()
    }

    fn spawn_and_wait(&mut self) -> anyhow::Result<()> {
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.stderr_path)
            .with_context(|| format!("open {}", self.stderr_path.display()))?;
        let stdout = stderr.try_clone()?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(self.args())
            .current_dir(self.tempdir_path())
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        // The log is a file: no terminal colour codes in it.
        cmd.env("NO_COLOR", "1");
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        let child = cmd
            .spawn()
            .with_context(|| format!("spawn {}", self.bin.display()))?;
        self.child = Some(child);
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                bail!(
                    "strata exited during startup with {status}; stderr tail:\n{}",
                    self.stderr_tail()
                );
            }
            if let Ok(probe) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                // A connect to a port no one listens on yet can meet itself (TCP
                // simultaneous open, when the kernel happens to pick that very port as the
                // source): that connection is not the broker, which may not be up.
                if probe.local_addr().ok() != probe.peer_addr().ok() {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                if let Some(mut child) = self.child.take() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                bail!(
                    "strata did not accept connections on {addr} within {READY_TIMEOUT:?}; stderr tail:\n{}",
                    self.stderr_tail()
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn tempdir_path(&self) -> &Path {
        self.tempdir
            .as_ref()
            .map(|t| t.path())
            .unwrap_or(&self.data_dir)
    }

    /// Appends a harness marker line to the stderr log so restarts are visible in the tail.
    fn note(&self, line: &str) {
        if let Ok(mut f) = OpenOptions::new().append(true).open(&self.stderr_path) {
            let _ = writeln!(f, "{line}");
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if thread::panicking() {
            eprintln!(
                "==== strata stderr tail ({}) ====\n{}\n==== end of strata stderr ====",
                self.stderr_path.display(),
                self.stderr_tail()
            );
            if std::env::var_os("STRATA_TEST_KEEP").is_some()
                && let Some(t) = self.tempdir.take()
            {
                eprintln!("keeping test directory {}", t.keep().display());
            }
        }
    }
}

/// Held for its whole run by each test that must not share the machine with another such
/// test: every test that starts a multi-node [`cluster`], and the single-broker tests that
/// measure rates, memory or descriptors or kill -9 a broker under load.
///
/// All the whole-system tests run in one process, on libtest's threads (as many as there
/// are cores unless `--test-threads` says otherwise). A heavy test therefore runs beside
/// light ones (one broker, a bounded exchange) but never beside another heavy one: several
/// three-node clusters at once would stretch the failover times they measure, and a cluster
/// beside a quota test would skew the rates it measures.
///
/// A test that fails while holding the lock poisons it; the next one takes it all the same,
/// since it guards no data.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts a broker with `extra_overrides`, runs `scenario` against it, and panics with the full
/// error chain if it fails, while the broker is still alive, so that [`Broker`]'s drop prints the
/// broker's stderr tail next to the failure.
///
/// # Panics
///
/// If the broker cannot start or the scenario returns an error.
pub fn with_broker<F>(extra_overrides: &[(&str, &str)], scenario: F)
where
    F: FnOnce(&mut Broker) -> anyhow::Result<()>,
{
    let mut broker =
        Broker::start(extra_overrides).unwrap_or_else(|e| panic!("starting strata: {e:?}"));
    if let Err(e) = scenario(&mut broker) {
        panic!("{e:?}");
    }
}

/// The last `max` bytes of a file, lossily decoded; a note if it cannot be read.
pub fn read_tail(path: &Path, max: u64) -> String {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) => return format!("<cannot open {}: {e}>", path.display()),
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max);
    let mut buf = Vec::new();
    if start > 0 {
        use std::io::Seek;
        if f.seek(std::io::SeekFrom::Start(start)).is_err() {
            return "<seek failed>".to_string();
        }
    }
    let _ = f.take(max).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Polls `cond` every `every` until it returns `Ok(true)` or `timeout` passes.
///
/// # Errors
///
/// Returns the last error from `cond`, or a timeout error naming `what`.
pub fn wait_until<F>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut cond: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> anyhow::Result<bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last = cond();
        match last {
            Ok(true) => return Ok(()),
            Ok(false) if Instant::now() >= deadline => bail!("timed out after {timeout:?}: {what}"),
            Err(e) if Instant::now() >= deadline => {
                return Err(e.context(format!("timed out after {timeout:?}: {what}")));
            }
            _ => thread::sleep(every),
        }
    }
}

/// Runs `cmd` with `stdin` fed to it, capturing stdout and stderr, and kills it if it has not
/// exited within `timeout`.
///
/// # Errors
///
/// Fails if the command cannot be spawned or times out (the error shows what it printed).
pub fn run_with_timeout(
    cmd: &mut Command,
    stdin: &[u8],
    timeout: Duration,
) -> anyhow::Result<Output> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawn {cmd:?}"))?;
    let mut child_stdin = child.stdin.take().expect("stdin is piped");
    let input = stdin.to_vec();
    let writer = thread::spawn(move || {
        // A write error (the child exited early) shows up in its exit status and stderr.
        let _ = child_stdin.write_all(&input);
    });
    let mut out = child.stdout.take().expect("stdout is piped");
    let mut err = child.stderr.take().expect("stderr is piped");
    let out_reader = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_reader = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + timeout;
    let (status, timed_out) = loop {
        if let Some(status) = child.try_wait()? {
            break (status, false);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            break (child.wait()?, true);
        }
        thread::sleep(Duration::from_millis(20));
    };
    let _ = writer.join();
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    if timed_out {
        bail!(
            "{cmd:?} did not finish within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        );
    }
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_until_times_out() {
        let err = wait_until(
            "never",
            Duration::from_millis(100),
            Duration::from_millis(10),
            || Ok(false),
        )
        .unwrap_err();
        assert!(err.to_string().contains("timed out"), "{err}");
    }

    #[test]
    fn run_with_timeout_kills_a_hung_command() {
        let started = Instant::now();
        let err = run_with_timeout(
            Command::new("sleep").arg("30"),
            b"",
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(err.to_string().contains("did not finish"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn run_with_timeout_feeds_stdin() {
        let out =
            run_with_timeout(&mut Command::new("cat"), b"a:b\n", Duration::from_secs(10)).unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, b"a:b\n");
    }

    #[test]
    fn read_tail_returns_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read_tail(&p, 4), "6789");
        assert_eq!(read_tail(&p, 100), "0123456789");
    }
}
