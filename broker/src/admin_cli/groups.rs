//! `strata admin groups`: list, describe (members, committed offsets and lag), reset-offsets,
//! delete (Kafka's `kafka-consumer-groups.sh`).
//!
//! Group requests go to the group's coordinator, found with FindCoordinator; log end
//! offsets come from each partition's leader. A reset is planned first and printed; only
//! `--execute` commits it, and only while the group has no members, as Kafka's tool
//! insists, since a live member would overwrite the reset with its next commit.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, bail};
use strata_protocol::StrBytes;
use strata_protocol::messages::{
    ApiKey, DeleteGroupsRequest, GroupId, ListGroupsRequest, RequestKind, ResponseKind,
};

use strata_broker::admin::groups::{
    Target, commit, committed, describe_group, log_ends, members, plan,
};

use super::args::Args;
use super::client::{Client, error_name, leaders};
use super::logs::TopicPartition;
use super::table::Table;

pub const USAGE: &str = "\
strata admin groups list
strata admin groups describe --group G
strata admin groups reset-offsets --group G (--topic T[:P,P...]... | --all-topics)
    (--to-earliest | --to-latest | --to-datetime RFC3339|MS | --to-offset N) [--dry-run | --execute]
strata admin groups delete --group G...";

/// Runs `groups <action> ...`.
///
/// # Errors
///
/// A bad command line, an unreachable broker, or any error a broker answered.
pub fn run(client: &mut Client, args: &[String]) -> anyhow::Result<()> {
    let a = Args::parse(
        args,
        &["--group", "--topic", "--to-datetime", "--to-offset"],
        &[
            "--all-topics",
            "--to-earliest",
            "--to-latest",
            "--dry-run",
            "--execute",
        ],
    )?;
    match a.positional.first().map(String::as_str) {
        Some("list") => list(client),
        Some("describe") => {
            for g in groups_of(&a)? {
                describe(client, g)?;
            }
            Ok(())
        }
        Some("reset-offsets") => reset_offsets(client, &a),
        Some("delete") => delete(client, groups_of(&a)?),
        _ => bail!("usage:\n{USAGE}"),
    }
}

fn groups_of(a: &Args) -> anyhow::Result<&[String]> {
    let g = a.values("--group");
    if g.is_empty() {
        bail!("--group is required");
    }
    Ok(g)
}

/// ListGroups asked of every broker (each knows only the groups it coordinates).
fn list(client: &mut Client) -> anyhow::Result<()> {
    client.metadata(Some(&[]))?;
    let ids: Vec<i32> = client.brokers().keys().copied().collect();
    let mut groups = BTreeMap::new();
    for id in ids {
        let ResponseKind::ListGroups(r) = client.send_to(
            id,
            ApiKey::ListGroups,
            RequestKind::ListGroups(ListGroupsRequest::default()),
        )?
        else {
            bail!("ListGroups was not answered with ListGroups");
        };
        if r.error_code != 0 {
            bail!("ListGroups on broker {id}: {}", error_name(r.error_code));
        }
        for g in r.groups {
            groups.insert(
                g.group_id.to_string(),
                (g.group_state.to_string(), g.protocol_type.to_string()),
            );
        }
    }
    let mut table = Table::new(&["GROUP", "STATE", "PROTOCOL-TYPE"]);
    for (g, (state, protocol)) in groups {
        table.row(vec![g, state, protocol]);
    }
    table.print();
    Ok(())
}

fn describe(client: &mut Client, group: &str) -> anyhow::Result<()> {
    let coordinator = client.coordinator(group)?;
    let g = describe_group(client, coordinator, group)?;
    let offsets = committed(client, coordinator, group)?;
    let members = members(&g);
    let mut owner: BTreeMap<TopicPartition, usize> = BTreeMap::new();
    for (i, m) in members.iter().enumerate() {
        for tp in &m.partitions {
            owner.insert(tp.clone(), i);
        }
    }
    let partitions: BTreeSet<TopicPartition> =
        offsets.keys().chain(owner.keys()).cloned().collect();
    let ends = log_ends(client, &partitions)?;
    println!(
        "Group: {group}\tState: {}\tProtocolType: {}\tProtocol: {}\tMembers: {}\tCoordinator: {coordinator}",
        g.group_state,
        g.protocol_type,
        g.protocol_data,
        members.len()
    );
    println!();
    let mut table = Table::new(&[
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]);
    for tp in &partitions {
        let current = offsets.get(tp).copied();
        let end = ends.get(tp).cloned();
        let lag = match (current, &end) {
            (Some(c), Some(Ok(e))) => (e - c).max(0).to_string(),
            _ => "-".to_owned(),
        };
        let m = owner.get(tp).map(|&i| &members[i]);
        table.row(vec![
            group.to_owned(),
            tp.0.clone(),
            tp.1.to_string(),
            current.map_or_else(|| "-".to_owned(), |c| c.to_string()),
            match end {
                Some(Ok(e)) => e.to_string(),
                Some(Err(code)) => error_name(code),
                None => "-".to_owned(),
            },
            lag,
            m.map_or_else(|| "-".to_owned(), |m| m.id.clone()),
            m.map_or_else(|| "-".to_owned(), |m| m.host.clone()),
            m.map_or_else(|| "-".to_owned(), |m| m.client_id.clone()),
        ]);
    }
    table.print();
    if !members.is_empty() {
        println!();
        let mut t = Table::new(&[
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
            "ASSIGNMENT",
        ]);
        for m in &members {
            t.row(vec![
                m.id.clone(),
                m.host.clone(),
                m.client_id.clone(),
                m.partitions.len().to_string(),
                m.partitions
                    .iter()
                    .map(|(t, p)| format!("{t}:{p}"))
                    .collect::<Vec<_>>()
                    .join(","),
            ]);
        }
        t.print();
    }
    Ok(())
}

fn target(a: &Args) -> anyhow::Result<Target> {
    let mut targets = Vec::new();
    if a.switch("--to-earliest") {
        targets.push(Target::Earliest);
    }
    if a.switch("--to-latest") {
        targets.push(Target::Latest);
    }
    if let Some(t) = a.value("--to-datetime") {
        targets.push(Target::Datetime(parse_time(t)?));
    }
    if let Some(o) = a.number::<i64>("--to-offset")? {
        targets.push(Target::Offset(o));
    }
    if targets.len() != 1 {
        bail!(
            "reset-offsets needs exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset"
        );
    }
    Ok(targets.remove(0))
}

fn reset_offsets(client: &mut Client, a: &Args) -> anyhow::Result<()> {
    let group = a.required("--group")?.to_owned();
    let target = target(a)?;
    if a.switch("--execute") && a.switch("--dry-run") {
        bail!("--execute and --dry-run exclude each other");
    }
    let execute = a.switch("--execute");
    let coordinator = client.coordinator(&group)?;
    let g = describe_group(client, coordinator, &group)?;
    let state = g.group_state.to_string();
    if !matches!(state.as_str(), "Empty" | "Dead") {
        bail!(
            "Assignments can only be reset if the group '{group}' is inactive, but the current state is {state} ({} members).",
            g.members.len()
        );
    }
    let current = committed(client, coordinator, &group)?;
    // Which partitions: every partition the group has committed, or the topics named
    // (all their partitions, or those listed after a colon).
    let mut wanted: BTreeSet<TopicPartition> = BTreeSet::new();
    let mut whole_topics = Vec::new();
    if a.switch("--all-topics") {
        if !a.values("--topic").is_empty() {
            bail!("--all-topics and --topic exclude each other");
        }
        wanted.extend(current.keys().cloned());
    } else {
        if a.values("--topic").is_empty() {
            bail!("reset-offsets needs --topic T[:partitions] or --all-topics");
        }
        for spec in a.values("--topic") {
            match spec.split_once(':') {
                Some((t, ps)) => {
                    for p in ps.split(',') {
                        let p: i32 = p
                            .trim()
                            .parse()
                            .with_context(|| format!("bad partition in --topic {spec}"))?;
                        wanted.insert((t.to_owned(), p));
                    }
                }
                None => whole_topics.push(spec.clone()),
            }
        }
    }
    let topics: Vec<String> = wanted
        .iter()
        .map(|(t, _)| t.clone())
        .chain(whole_topics.iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if topics.is_empty() {
        bail!("group {group} has no committed offsets to reset");
    }
    let m = super::topics::topic_metadata(client, &topics)?;
    let leaders = leaders(&m);
    for tp in leaders.keys() {
        if whole_topics.contains(&tp.0) {
            wanted.insert(tp.clone());
        }
    }
    if let Some(tp) = wanted.iter().find(|tp| !leaders.contains_key(*tp)) {
        bail!("partition {}:{}: {}", tp.0, tp.1, error_name(3));
    }
    let plan = plan(client, &leaders, &wanted, &target)?;
    let mut table = Table::new(&[
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "NEW-OFFSET",
    ]);
    for (tp, new) in &plan {
        table.row(vec![
            group.clone(),
            tp.0.clone(),
            tp.1.to_string(),
            current
                .get(tp)
                .map_or_else(|| "-".to_owned(), ToString::to_string),
            new.to_string(),
        ]);
    }
    table.print();
    if !execute {
        println!();
        println!(
            "Dry run: nothing was committed. Run again with --execute to commit these offsets."
        );
        return Ok(());
    }
    commit(client, coordinator, &group, &plan)?;
    println!();
    println!("Committed {} offsets for group {group}.", plan.len());
    Ok(())
}

fn delete(client: &mut Client, groups: &[String]) -> anyhow::Result<()> {
    let mut failed = Vec::new();
    for group in groups {
        let coordinator = client.coordinator(group)?;
        let request = DeleteGroupsRequest::default()
            .with_groups_names(vec![GroupId(StrBytes::from_string(group.clone()))]);
        let ResponseKind::DeleteGroups(r) = client.send_to(
            coordinator,
            ApiKey::DeleteGroups,
            RequestKind::DeleteGroups(request),
        )?
        else {
            bail!("DeleteGroups was not answered with DeleteGroups");
        };
        for res in r.results {
            if res.error_code == 0 {
                println!("Deleted group {}.", &*res.group_id.0);
            } else {
                failed.push(format!(
                    "{}: {}",
                    &*res.group_id.0,
                    error_name(res.error_code)
                ));
            }
        }
    }
    if !failed.is_empty() {
        bail!("cannot delete groups: {}", failed.join("; "));
    }
    Ok(())
}

/// `--to-datetime`: milliseconds since the epoch, or an RFC 3339 time
/// (`2024-05-01T12:00:00Z`, `2024-05-01T12:00:00.250+02:00`).
///
/// # Errors
///
/// When it is neither.
pub fn parse_time(s: &str) -> anyhow::Result<i64> {
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    parse_rfc3339(s).with_context(|| {
        format!("--to-datetime takes RFC 3339 (2024-05-01T12:00:00Z) or milliseconds, not {s:?}")
    })
}

fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &s[19..];
    let mut millis = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let ms: String = frac[..digits]
            .chars()
            .chain("000".chars())
            .take(3)
            .collect();
        millis = ms.parse().ok()?;
        rest = &frac[digits..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let tz = &rest[1..];
            if tz.len() != 5 || tz.as_bytes()[2] != b':' {
                return None;
            }
            let h: i64 = tz[0..2].parse().ok()?;
            let m: i64 = tz[3..5].parse().ok()?;
            sign * (h * 60 + m)
        }
    };
    // Days from 1970-01-01 to the civil date (Howard Hinnant's `days_from_civil`).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse() {
        assert_eq!(parse_time("1700000000000").unwrap(), 1_700_000_000_000);
        assert_eq!(parse_time("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(
            parse_time("2023-11-14T22:13:20Z").unwrap(),
            1_700_000_000_000
        );
        assert_eq!(
            parse_time("2023-11-14T23:13:20.5+01:00").unwrap(),
            1_700_000_000_500
        );
        assert_eq!(
            parse_time("2000-03-01T00:00:00-00:30").unwrap(),
            951_870_600_000
        );
        assert!(parse_time("2023-13-14T22:13:20Z").is_err());
        assert!(parse_time("yesterday").is_err());
        assert!(parse_time("2023-11-14T22:13:20").is_err());
    }
}
