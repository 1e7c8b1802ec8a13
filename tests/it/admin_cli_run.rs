//! Running `strata admin ...` as the tests do: the release binary as a child process,
//! bounded in time, with its exit status and output captured.

use std::process::Command;
use std::time::Duration;

use strata_tests::{run_with_timeout, strata_bin};

/// The bound on one admin command (the `partitions --hot` runs add their window).
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(60);

/// What one run printed and how it ended.
#[derive(Debug)]
pub struct Run {
    pub ok: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `strata admin --bootstrap-server <bootstrap> <args...>`.
///
/// # Panics
///
/// When the binary cannot be run or does not exit within [`ADMIN_TIMEOUT`].
pub fn admin(bootstrap: &str, args: &[&str]) -> Run {
    let mut all = vec!["--bootstrap-server", bootstrap];
    all.extend_from_slice(args);
    admin_raw(&all)
}

/// Runs `strata admin <args...>`.
///
/// # Panics
///
/// As [`admin`].
pub fn admin_raw(args: &[&str]) -> Run {
    let out = run_with_timeout(
        Command::new(strata_bin()).arg("admin").args(args),
        b"",
        ADMIN_TIMEOUT,
    )
    .unwrap_or_else(|e| panic!("strata admin {args:?}: {e:?}"));
    Run {
        ok: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs it and insists that it succeeded; returns stdout.
///
/// # Panics
///
/// When it failed, with what it printed.
pub fn admin_ok(bootstrap: &str, args: &[&str]) -> String {
    let r = admin(bootstrap, args);
    assert!(r.ok, "strata admin {args:?} failed: {r:?}");
    r.stdout
}

/// The rows of the table in `out` whose header line starts with `first_column`: each row as
/// `column name → cell`. Stops at the first blank line after the header.
pub fn table(out: &str, first_column: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut lines = out.lines().skip_while(|l| !l.starts_with(first_column));
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let columns: Vec<&str> = header.split_whitespace().collect();
    lines
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            columns
                .iter()
                .map(|c| (*c).to_owned())
                .zip(l.split_whitespace().map(str::to_owned))
                .collect()
        })
        .collect()
}
