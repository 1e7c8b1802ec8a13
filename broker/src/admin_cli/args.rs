//! The subcommands' command line: `--name value` options (repeatable), `--name` switches
//! and positional words, parsed against each subcommand's list of what it takes, so that a
//! misspelt option is an error rather than ignored.

use std::collections::HashMap;

use anyhow::{Context, bail};

use super::UsageError;

/// One subcommand's parsed arguments.
#[derive(Debug, Default)]
pub struct Args {
    /// `--name value` options in order, a name repeated as often as given.
    values: HashMap<String, Vec<String>>,
    /// `--name` switches given.
    switches: Vec<String>,
    /// Words that are not options.
    pub positional: Vec<String>,
}

impl Args {
    /// Parses `args`: `options` take a value (`--name value` or `--name=value`), `switches`
    /// take none; anything else starting with `--` is an error.
    ///
    /// # Errors
    ///
    /// A [`UsageError`]: an unknown option, or an option missing its value.
    pub fn parse(args: &[String], options: &[&str], switches: &[&str]) -> anyhow::Result<Args> {
        let mut out = Args::default();
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            if !arg.starts_with("--") || arg == "--" {
                out.positional.push(arg.clone());
                continue;
            }
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (arg.as_str(), None),
            };
            if switches.contains(&name) && inline.is_none() {
                out.switches.push(name.to_owned());
            } else if options.contains(&name) {
                let value = match inline {
                    Some(v) => v,
                    None => iter
                        .next()
                        .cloned()
                        .ok_or_else(|| UsageError(format!("{name} needs a value")))?,
                };
                out.values.entry(name.to_owned()).or_default().push(value);
            } else {
                return Err(UsageError(format!("unknown option {arg}")).into());
            }
        }
        Ok(out)
    }

    /// The last value of `name`.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    /// Every value of `name`, in order.
    pub fn values(&self, name: &str) -> &[String] {
        self.values.get(name).map_or(&[], Vec::as_slice)
    }

    /// The value of `name`, which must be given.
    ///
    /// # Errors
    ///
    /// When it is not.
    pub fn required(&self, name: &str) -> anyhow::Result<&str> {
        self.value(name)
            .with_context(|| format!("{name} is required"))
    }

    /// `name`'s value parsed as a number, if given.
    ///
    /// # Errors
    ///
    /// When it is not a number of that type.
    pub fn number<T: std::str::FromStr>(&self, name: &str) -> anyhow::Result<Option<T>> {
        self.value(name)
            .map(|v| {
                v.parse::<T>()
                    .map_err(|_| anyhow::anyhow!("{name} must be a number, not {v:?}"))
            })
            .transpose()
    }

    /// Whether switch `name` was given.
    pub fn switch(&self, name: &str) -> bool {
        self.switches.iter().any(|s| s == name)
    }
}

/// Splits `k=v` (a `--config` or `--set` value).
///
/// # Errors
///
/// When there is no `=` or the key is empty.
pub fn key_value(s: &str) -> anyhow::Result<(String, String)> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => bail!("expected key=value, got {s:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn options_switches_and_words() {
        let a = Args::parse(
            &strings(&[
                "create",
                "--topic",
                "t",
                "--config=a=1",
                "--config",
                "b=2",
                "--execute",
            ]),
            &["--topic", "--config"],
            &["--execute"],
        )
        .unwrap();
        assert_eq!(a.positional, ["create"]);
        assert_eq!(a.value("--topic"), Some("t"));
        assert_eq!(a.values("--config"), ["a=1", "b=2"]);
        assert!(a.switch("--execute"));
        assert!(Args::parse(&strings(&["--nope"]), &[], &[]).is_err());
        assert!(Args::parse(&strings(&["--topic"]), &["--topic"], &[]).is_err());
        assert_eq!(key_value("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert!(key_value("=x").is_err());
    }
}
