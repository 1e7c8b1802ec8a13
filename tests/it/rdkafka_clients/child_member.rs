//! A consumer-group member in a process of its own, so that killing it (SIGKILL) is a real
//! crash: no leave, no close. The process is the test binary re-executed with only one
//! (ignored) test selected, which calls [`run_from_env`]; what it is to do travels in an
//! environment variable as a [`ChildSpec`], and it reports what it read and committed in a
//! progress file that the test reads with [`progress`].

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use strata_tests::read_tail;

use super::group::{Member, PHASE};

/// What the child process is to do; passed in an environment variable as `key=value` lines.
pub struct ChildSpec {
    pub bootstrap: String,
    pub group: String,
    pub topic: String,
    pub partitions: i32,
    /// Client settings on top of [`Member::join`]'s defaults.
    pub settings: Vec<(String, String)>,
    /// The child commits what it reads below this offset, and nothing at or above it, so
    /// that its successors have uncommitted messages to read again.
    pub commit_below: i64,
    /// Where the child appends `consumed <partition> <offset>` and
    /// `committed <partition> <offset>` lines.
    pub progress: PathBuf,
}

/// Marks a client setting among the spec's lines.
const SETTING: &str = "setting:";

impl ChildSpec {
    fn encode(&self) -> String {
        let mut s = format!(
            "bootstrap={}\ngroup={}\ntopic={}\npartitions={}\ncommit_below={}\nprogress={}",
            self.bootstrap,
            self.group,
            self.topic,
            self.partitions,
            self.commit_below,
            self.progress.display()
        );
        for (k, v) in &self.settings {
            s.push_str(&format!("\n{SETTING}{k}={v}"));
        }
        s
    }

    fn decode(s: &str) -> anyhow::Result<ChildSpec> {
        let fields: BTreeMap<&str, &str> = s.lines().filter_map(|l| l.split_once('=')).collect();
        let get = |k: &str| {
            fields
                .get(k)
                .copied()
                .with_context(|| format!("{k} missing in {s:?}"))
        };
        let settings = fields
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(SETTING)?.to_owned(), (*v).to_owned())))
            .collect();
        Ok(ChildSpec {
            bootstrap: get("bootstrap")?.to_owned(),
            group: get("group")?.to_owned(),
            topic: get("topic")?.to_owned(),
            partitions: get("partitions")?.parse()?,
            settings,
            commit_below: get("commit_below")?.parse()?,
            progress: PathBuf::from(get("progress")?),
        })
    }
}

/// The child's side: runs the member described in `env`; returns at once when `env` is not
/// set (the test binary's ordinary run). Exits the process with status 1 on an error.
pub fn run_from_env(env: &str) {
    let Ok(spec) = std::env::var(env) else {
        return;
    };
    if let Err(e) = ChildSpec::decode(&spec).and_then(|spec| run(&spec)) {
        eprintln!("child member failed: {e:?}");
        std::process::exit(1);
    }
}

/// Reads and commits (synchronously, below `commit_below`) until killed, recording progress;
/// gives up after a few phases so that an orphan does not outlive its test for long.
fn run(spec: &ChildSpec) -> anyhow::Result<()> {
    let mut progress = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&spec.progress)?;
    let settings: Vec<(&str, &str)> = spec
        .settings
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut m = Member::join(
        &spec.bootstrap,
        &spec.group,
        "child",
        &spec.topic,
        spec.partitions,
        &settings,
    )?;
    let mut pending: BTreeMap<i32, i64> = BTreeMap::new();
    let started = Instant::now();
    while started.elapsed() < 3 * PHASE {
        let from = m.records.len();
        m.poll_once()?;
        for r in &m.records[from..] {
            writeln!(progress, "consumed {} {}", r.partition, r.offset)?;
            if r.offset < spec.commit_below {
                pending.insert(r.partition, r.offset + 1);
            }
        }
        if pending.is_empty() {
            continue;
        }
        let mut tpl = TopicPartitionList::new();
        for (&p, &o) in &pending {
            tpl.add_partition_offset(&spec.topic, p, Offset::Offset(o))?;
        }
        // A commit that races a rebalance fails; it is retried on the next round.
        match m.consumer.commit(&tpl, CommitMode::Sync) {
            Ok(()) => {
                for (p, o) in std::mem::take(&mut pending) {
                    writeln!(progress, "committed {p} {o}")?;
                }
            }
            Err(e) => writeln!(progress, "commit-error {e}")?,
        }
    }
    Ok(())
}

/// The child's progress file, read.
#[derive(Debug, Default)]
pub struct ChildProgress {
    pub consumed: BTreeMap<i32, BTreeSet<i64>>,
    /// The highest offset committed on each partition.
    pub committed: BTreeMap<i32, i64>,
}

impl ChildProgress {
    /// partition -> (distinct offsets read, last offset read, committed offset).
    pub fn summary(&self) -> BTreeMap<i32, (usize, i64, i64)> {
        self.consumed
            .iter()
            .map(|(&p, o)| {
                let last = o.last().copied().unwrap_or(-1);
                (
                    p,
                    (o.len(), last, self.committed.get(&p).copied().unwrap_or(-1)),
                )
            })
            .collect()
    }
}

/// Reads the progress file at `path` (empty while the child has written nothing).
pub fn progress(path: &Path) -> ChildProgress {
    let mut out = ChildProgress::default();
    for line in fs::read_to_string(path).unwrap_or_default().lines() {
        let mut w = line.split(' ');
        let (kind, p, o) = (w.next(), w.next(), w.next());
        let (Some(p), Some(o)) = (
            p.and_then(|p| p.parse::<i32>().ok()),
            o.and_then(|o| o.parse::<i64>().ok()),
        ) else {
            continue;
        };
        match kind {
            Some("consumed") => {
                out.consumed.entry(p).or_default().insert(o);
            }
            Some("committed") => {
                let c = out.committed.entry(p).or_default();
                *c = (*c).max(o);
            }
            _ => {}
        }
    }
    out
}

/// The child process; killed with SIGKILL on drop.
pub struct ChildMember {
    pub child: Child,
    /// Its progress file ([`ChildSpec::progress`]).
    progress: PathBuf,
    /// Its stdout and stderr, shown in errors.
    log: PathBuf,
}

impl ChildMember {
    /// Re-executes this test binary running only `test`, which calls [`run_from_env`]`(env)`,
    /// with `spec` in `env`; its output goes to `log`.
    pub fn spawn(spec: &ChildSpec, env: &str, test: &str, log: PathBuf) -> anyhow::Result<Self> {
        let out = File::create(&log)?;
        let child = Command::new(std::env::current_exe()?)
            .args(["--exact", test, "--include-ignored", "--nocapture"])
            .env(env, spec.encode())
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("spawn the child member")?;
        Ok(ChildMember {
            child,
            progress: spec.progress.clone(),
            log,
        })
    }

    /// What it has read and committed so far.
    pub fn progress(&self) -> ChildProgress {
        progress(&self.progress)
    }

    pub fn log_tail(&self) -> String {
        read_tail(&self.log, 4096)
    }

    /// Its progress and the tail of its log, for an error message.
    pub fn report(&self) -> String {
        format!(
            "child progress {:?}, log:\n{}",
            self.progress().summary(),
            self.log_tail()
        )
    }

    /// Fails if the child has exited (it runs until killed).
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the child member exited: {status}\n{}", self.log_tail());
        }
        Ok(())
    }
}

impl Drop for ChildMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
