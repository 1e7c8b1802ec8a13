//! The console's pages: HTML rendered here from the same data the JSON endpoints answer
//! ([`super::views`]), with a small hand-written script (`console.js`) for the forms, the
//! search's progress and live refresh, and a style sheet, both embedded in the binary.
//! Every value from the cluster is escaped.

use std::fmt::Write as _;

use serde_json::Value;

use super::http::{Failure, Query};
use super::{Console, User, messages, views};

/// The script every page loads.
pub const SCRIPT: &str = include_str!("console.js");
/// The style sheet every page loads.
pub const STYLE: &str = include_str!("console.css");

/// HTML-escapes `s`.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes a path segment or query value (all but RFC 3986's unreserved bytes).
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A JSON value as a cell's text.
fn text(v: &Value) -> String {
    match v {
        Value::Null => "–".to_owned(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => format!("{f:.1}"),
            _ => n.to_string(),
        },
        Value::Bool(b) => if *b { "yes" } else { "no" }.to_owned(),
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(","),
        Value::Object(_) => v.to_string(),
    }
}

/// Milliseconds since the Unix epoch as an ISO 8601 UTC time (the days to a civil date by
/// Howard Hinnant's algorithm); the number itself when it is negative (no timestamp).
fn time_of(v: &Value) -> String {
    let Some(ms) = v.as_i64().filter(|ms| *ms >= 0) else {
        return text(v);
    };
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

/// The elements of a JSON array (none for anything else).
fn items(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// A link to a topic's page.
fn topic_link(name: &str) -> String {
    format!("<a href=\"/topics/{}\">{}</a>", enc(name), esc(name))
}

/// Bytes in human units.
fn bytes(v: &Value) -> String {
    let Some(n) = v.as_f64() else {
        return "–".to_owned();
    };
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = n;
    let mut i = 0;
    while x >= 1024.0 && i + 1 < units.len() {
        x /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n:.0} B")
    } else {
        format!("{x:.1} {}", units[i])
    }
}

/// A table with a test id, for the browser tests and scripts.
fn table(id: &str, headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut h = format!("<table id=\"{id}\"><thead><tr>");
    for c in headers {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("</tr></thead><tbody>");
    for r in rows {
        h.push_str("<tr>");
        for c in r {
            // Cells are already HTML (escaped where they hold cluster data).
            let _ = write!(h, "<td>{c}</td>");
        }
        h.push_str("</tr>");
    }
    if rows.is_empty() {
        let _ = write!(
            h,
            "<tr><td colspan=\"{}\" class=\"empty\">none</td></tr>",
            headers.len()
        );
    }
    h.push_str("</tbody></table>");
    h
}

/// The page around `body`.
fn layout(c: &Console, u: &User, title: &str, body: &str, refresh: Option<u32>) -> String {
    let nav = [
        ("/", "Overview"),
        ("/topics", "Topics"),
        ("/groups", "Consumer groups"),
        ("/hot", "Hot partitions"),
        ("/messages", "Messages"),
        ("/transactions", "Transactions"),
        ("/security", "Security"),
    ]
    .iter()
    .map(|(href, name)| format!("<a href=\"{href}\">{name}</a>"))
    .collect::<Vec<_>>()
    .join("");
    let mode = if c.read_only { " · read-only" } else { "" };
    let refresh = refresh.map_or_else(String::new, |s| format!(" data-refresh=\"{s}\""));
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · Strata</title><link rel=\"stylesheet\" href=\"/static/console.css\">\
<script src=\"/static/console.js\" defer></script></head>\
<body{refresh}><header><span class=\"brand\">Strata</span><nav>{nav}</nav>\
<span class=\"who\">node {node} · {principal}{mode}</span></header>\
<main><h1>{title}</h1><div id=\"flash\" class=\"flash\" hidden></div>{body}</main></body></html>",
        title = esc(title),
        node = c.broker.config.node_id,
        principal = esc(&u.principal),
    )
}

/// The page of a failure.
pub fn failure(status: u16, message: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{status} · Strata</title>\
<link rel=\"stylesheet\" href=\"/static/console.css\"></head><body><main><h1>{status}</h1>\
<p id=\"error\" class=\"error\">{}</p><p><a href=\"/\">Overview</a></p></main></body></html>",
        esc(message)
    )
}

/// The line under a paged table: which page of how many, and links to the pages beside it
/// (`link(page)` is a page's address).
fn pager(v: &Value, what: &str, link: &dyn Fn(u64) -> String) -> String {
    let (page, pages) = (
        v["page"].as_u64().unwrap_or(1),
        v["pages"].as_u64().unwrap_or(1),
    );
    let mut h = format!("<p class=\"pager\">Page {page} of {pages} · {}", esc(what));
    if page > 1 {
        let _ = write!(h, " · <a href=\"{}\">previous</a>", esc(&link(page - 1)));
    }
    if page < pages {
        let _ = write!(
            h,
            " · <a class=\"next-page\" href=\"{}\">next</a>",
            esc(&link(page + 1))
        );
    }
    h.push_str("</p>");
    h
}

/// A form the script sends as JSON (`data-method`, `data-url`), hidden when read-only.
fn form(c: &Console, id: &str, method: &str, url: &str, fields: &str, button: &str) -> String {
    if c.read_only {
        return String::new();
    }
    format!(
        "<form id=\"{id}\" class=\"action\" data-method=\"{method}\" data-url=\"{}\">{fields}<button type=\"submit\">{}</button></form>",
        esc(url),
        esc(button)
    )
}

fn input(name: &str, label: &str, kind: &str, extra: &str) -> String {
    format!(
        "<label>{} <input name=\"{name}\" type=\"{kind}\" {extra}></label>",
        esc(label)
    )
}

/// Renders the page at `path`.
pub fn page(c: &Console, u: &User, path: &[String], q: &Query) -> Result<String, Failure> {
    let parts: Vec<&str> = path.iter().map(String::as_str).collect();
    match parts.as_slice() {
        [] => overview(c, u),
        ["topics"] => topics(c, u, q),
        ["topics", name] => topic(c, u, name, q),
        ["groups"] => groups(c, u),
        ["groups", id] => group(c, u, id),
        ["hot"] => hot(c, u, q),
        ["messages"] => messages_page(c, u, q),
        ["transactions"] => transactions(c, u, q),
        ["security"] => security(c, u),
        _ => Err(Failure::not_found("no such page")),
    }
}

fn overview(c: &Console, u: &User) -> Result<String, Failure> {
    let v = views::overview(c, u)?;
    let mut body = format!(
        "<p class=\"facts\">Cluster <b id=\"cluster-id\">{}</b> · active controller <b id=\"controller\">{}</b> · <span id=\"counts\">{} topics, {} partitions</span></p>",
        esc(&text(&v["cluster_id"])),
        esc(&text(&v["controller_id"])),
        text(&v["topics"]),
        text(&v["partitions"]),
    );
    let brokers: Vec<Vec<String>> = items(&v["brokers"])
        .map(|b| {
            vec![
                esc(&text(&b["id"])),
                esc(&format!("{}:{}", text(&b["host"]), text(&b["port"]))),
                esc(&text(&b["rack"])),
                if b["alive"].as_bool() == Some(true) {
                    format!(
                        "<span class=\"ok\">alive</span> ({} ms)",
                        text(&b["round_trip_ms"])
                    )
                } else {
                    format!(
                        "<span class=\"bad\" title=\"{}\">unreachable</span>",
                        esc(&text(&b["error"]))
                    )
                },
                if b["fenced"].as_bool() == Some(true) {
                    "<span class=\"bad\">fenced</span>".to_owned()
                } else {
                    "no".to_owned()
                },
                esc(&text(&b["version"])),
            ]
        })
        .collect();
    body.push_str("<h2>Brokers</h2>");
    body.push_str(&table(
        "brokers",
        &["Id", "Address", "Rack", "Liveness", "Fenced", "Version"],
        &brokers,
    ));
    body.push_str("<h2>Quorum</h2>");
    let q = &v["quorum"];
    if let Some(e) = q.get("error") {
        let _ = write!(body, "<p class=\"error\">{}</p>", esc(&text(e)));
    } else {
        let _ = write!(
            body,
            "<p class=\"facts\">Leader <b id=\"quorum-leader\">{}</b> · epoch {} · high watermark {}</p>",
            esc(&text(&q["leader"])),
            esc(&text(&q["epoch"])),
            esc(&text(&q["high_watermark"]))
        );
        let voters: Vec<Vec<String>> = items(&q["voters"])
            .map(|r| {
                vec![
                    esc(&text(&r["id"])),
                    esc(&text(&r["log_end_offset"])),
                    esc(&text(&r["lag"])),
                ]
            })
            .collect();
        body.push_str(&table(
            "voters",
            &["Voter", "Log end offset", "Lag"],
            &voters,
        ));
    }
    for (key, id, title) in [
        (
            "under_replicated",
            "under-replicated",
            "Under-replicated partitions",
        ),
        ("offline", "offline", "Offline partitions"),
    ] {
        let _ = write!(
            body,
            "<h2>{title} ({})</h2>",
            text(&v[format!("{key}_count").as_str()])
        );
        let rows: Vec<Vec<String>> = items(&v[key])
            .map(|p| {
                vec![
                    topic_link(&text(&p["topic"])),
                    esc(&text(&p["partition"])),
                    esc(&text(&p["leader"])),
                    esc(&text(&p["replicas"])),
                    esc(&text(&p["isr"])),
                ]
            })
            .collect();
        body.push_str(&table(
            id,
            &["Topic", "Partition", "Leader", "Replicas", "ISR"],
            &rows,
        ));
    }
    Ok(layout(c, u, "Overview", &body, Some(10)))
}

fn topics(c: &Console, u: &User, q: &Query) -> Result<String, Failure> {
    let v = views::topics(c, u, q)?;
    let filter = text(&v["filter"]);
    let mut body = format!(
        "<form class=\"filter\" method=\"get\" action=\"/topics\"><input name=\"filter\" placeholder=\"filter by name\" value=\"{}\"><button>Filter</button></form>",
        esc(if filter == "–" { "" } else { &filter })
    );
    let rows: Vec<Vec<String>> = items(&v["topics"])
        .map(|t| {
            let name = text(&t["name"]);
            vec![
                topic_link(&name),
                esc(&text(&t["partitions"])),
                esc(&text(&t["replication_factor"])),
                esc(&text(&t["under_replicated"])),
                esc(&text(&t["offline"])),
                bytes(&t["size_bytes"]),
                esc(&text(&t["records_in_per_sec"])),
                bytes(&t["bytes_in_per_sec"]),
                bytes(&t["bytes_out_per_sec_led_here"]),
            ]
        })
        .collect();
    body.push_str(&table(
        "topics",
        &[
            "Topic",
            "Partitions",
            "RF",
            "Under-replicated",
            "Offline",
            "Size",
            "Records/s in",
            "Bytes/s in",
            "Bytes/s out (led here)",
        ],
        &rows,
    ));
    let f = enc(if filter == "–" { "" } else { &filter });
    body.push_str(&pager(
        &v,
        &format!("{} topics", text(&v["total"])),
        &|page| format!("/topics?page={page}&filter={f}"),
    ));
    body.push_str("<h2>Create a topic</h2>");
    body.push_str(&form(
        c,
        "create-topic",
        "POST",
        "/api/topics",
        &(input("name", "Name", "text", "required")
            + &input(
                "partitions",
                "Partitions",
                "number",
                "min=\"1\" value=\"1\"",
            )
            + &input(
                "replication_factor",
                "Replication factor",
                "number",
                "min=\"1\" value=\"1\"",
            )),
        "Create",
    ));
    Ok(layout(c, u, "Topics", &body, None))
}

fn topic(c: &Console, u: &User, name: &str, q: &Query) -> Result<String, Failure> {
    let v = views::topic(c, u, name, q)?;
    let url = format!("/api/topics/{}", enc(name));
    let mut body = format!(
        "<p class=\"facts\">Topic id {} · <a id=\"browse\" href=\"/messages?topic={}\">browse messages</a></p>",
        esc(&text(&v["topic_id"])),
        enc(name)
    );
    let rows: Vec<Vec<String>> = items(&v["partitions"])
        .map(|p| {
            vec![
                format!(
                    "<a href=\"/messages?topic={}&partition={}\">{}</a>",
                    enc(name),
                    text(&p["partition"]),
                    esc(&text(&p["partition"]))
                ),
                esc(&text(&p["leader"])),
                esc(&text(&p["replicas"])),
                esc(&text(&p["isr"])),
                esc(&text(&p["log_start_offset"])),
                esc(&text(&p["log_end_offset"])),
                bytes(&p["size_bytes"]),
                esc(&text(&p["records_in_per_sec"])),
                bytes(&p["bytes_out_per_sec_led_here"]),
            ]
        })
        .collect();
    body.push_str("<h2>Partitions</h2>");
    body.push_str(&table(
        "partitions",
        &[
            "Partition",
            "Leader",
            "Replicas",
            "ISR",
            "Log start",
            "Log end",
            "Size",
            "Records/s in",
            "Bytes/s out (led here)",
        ],
        &rows,
    ));
    body.push_str(&pager(
        &v,
        &format!("{} partitions", text(&v["partition_count"])),
        &|page| format!("/topics/{}?page={page}", enc(name)),
    ));
    body.push_str("<h2>Configs</h2>");
    match v["configs"].as_array() {
        Some(configs) => {
            let rows: Vec<Vec<String>> = configs
                .iter()
                .map(|e| {
                    let set = e["default"].as_bool() == Some(false);
                    vec![
                        if set {
                            format!("<b class=\"set\">{}</b>", esc(&text(&e["name"])))
                        } else {
                            esc(&text(&e["name"]))
                        },
                        esc(&text(&e["value"])),
                        esc(&text(&e["source"])),
                    ]
                })
                .collect();
            body.push_str("<p class=\"hint\">Values that are not Kafka's default are in bold.</p>");
            body.push_str(&table("configs", &["Name", "Value", "Source"], &rows));
        }
        None => {
            let _ = write!(
                body,
                "<p class=\"error\">{}</p>",
                esc(&text(&v["configs"]["error"]))
            );
        }
    }
    if !c.read_only {
        body.push_str("<h2>Actions</h2>");
        body.push_str(&form(
            c,
            "alter-config",
            "POST",
            &format!("{url}/configs"),
            &(input("name", "Config", "text", "required")
                + &input("value", "Value (empty: back to the default)", "text", "")),
            "Set",
        ));
        body.push_str(&form(
            c,
            "add-partitions",
            "POST",
            &format!("{url}/partitions"),
            &input(
                "count",
                "New number of partitions",
                "number",
                "min=\"1\" required",
            ),
            "Add partitions",
        ));
        body.push_str(&form(
            c,
            "delete-records",
            "POST",
            &format!("{url}/delete-records"),
            &(input("partition", "Partition", "number", "min=\"0\" value=\"0\"")
                + &input(
                    "offset",
                    "Before offset (-1: all)",
                    "number",
                    "value=\"-1\"",
                )),
            "Delete records",
        ));
        body.push_str(&format!(
            "<form id=\"delete-topic\" class=\"action danger\" data-method=\"DELETE\" data-url=\"{}\" data-confirm=\"Delete topic {}?\" data-then=\"/topics\"><button type=\"submit\">Delete topic</button></form>",
            esc(&url),
            esc(name)
        ));
    }
    Ok(layout(c, u, &format!("Topic {name}"), &body, None))
}

fn groups(c: &Console, u: &User) -> Result<String, Failure> {
    let v = views::groups(c, u)?;
    let rows: Vec<Vec<String>> = items(&v["groups"])
        .map(|g| {
            let id = text(&g["group_id"]);
            vec![
                format!("<a href=\"/groups/{}\">{}</a>", enc(&id), esc(&id)),
                esc(&text(&g["state"])),
                esc(&text(&g["protocol_type"])),
                esc(&text(&g["coordinator"])),
            ]
        })
        .collect();
    let mut body = table(
        "groups",
        &["Group", "State", "Protocol type", "Coordinator"],
        &rows,
    );
    for e in items(&v["errors"]) {
        let _ = write!(body, "<p class=\"error\">{}</p>", esc(&text(e)));
    }
    Ok(layout(c, u, "Consumer groups", &body, Some(10)))
}

/// A small line of the lag's trend, drawn as SVG.
fn sparkline(points: &[Value]) -> String {
    let lags: Vec<f64> = points.iter().filter_map(|p| p["lag"].as_f64()).collect();
    if lags.len() < 2 {
        return String::new();
    }
    let max = lags.iter().copied().fold(1.0_f64, f64::max);
    let (w, h) = (300.0, 40.0);
    let step = w / (lags.len() - 1) as f64;
    let path: Vec<String> = lags
        .iter()
        .enumerate()
        .map(|(i, l)| {
            format!(
                "{:.1},{:.1}",
                i as f64 * step,
                h - (l / max) * (h - 2.0) - 1.0
            )
        })
        .collect();
    format!(
        "<svg id=\"lag-trend\" class=\"spark\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\"><polyline fill=\"none\" stroke=\"#2a6\" stroke-width=\"2\" points=\"{}\"/></svg>",
        path.join(" ")
    )
}

fn group(c: &Console, u: &User, id: &str) -> Result<String, Failure> {
    let v = views::group(c, u, id)?;
    let eta = match v["catch_up_secs"].as_f64() {
        Some(0.0) => "caught up".to_owned(),
        Some(s) => format!("about {s:.0} s"),
        None => "unknown (no progress seen yet)".to_owned(),
    };
    let mut body = format!(
        "<p class=\"facts\">{} group · state <b id=\"group-state\">{}</b> · coordinator {} · assignor {} · total lag <b id=\"total-lag\">{}</b> · consumed {} records/s · time to catch up <b id=\"eta\">{}</b></p>",
        esc(&text(&v["type"])),
        esc(&text(&v["state"])),
        esc(&text(&v["coordinator"])),
        esc(&text(&v["assignor"])),
        esc(&text(&v["total_lag"])),
        esc(&text(&v["consumed_per_sec"])),
        esc(&eta),
    );
    body.push_str(&sparkline(
        v["lag_trend"].as_array().map_or(&[], Vec::as_slice),
    ));
    let rows: Vec<Vec<String>> = items(&v["partitions"])
        .map(|p| {
            vec![
                esc(&text(&p["topic"])),
                esc(&text(&p["partition"])),
                esc(&text(&p["committed_offset"])),
                esc(&text(&p["log_end_offset"])),
                esc(&text(&p["lag"])),
                esc(&text(&p["member_id"])),
            ]
        })
        .collect();
    body.push_str("<h2>Lag by partition</h2>");
    body.push_str(&table(
        "lag",
        &[
            "Topic",
            "Partition",
            "Committed",
            "Log end",
            "Lag",
            "Member",
        ],
        &rows,
    ));
    let members: Vec<Vec<String>> = items(&v["members"])
        .map(|m| {
            let assigned = items(&m["assignment"])
                .map(|a| format!("{}:{}", text(&a["topic"]), text(&a["partition"])))
                .collect::<Vec<_>>()
                .join(", ");
            vec![
                esc(&text(&m["member_id"])),
                esc(&text(&m["client_id"])),
                esc(&text(&m["host"])),
                esc(&assigned),
            ]
        })
        .collect();
    body.push_str("<h2>Members</h2>");
    body.push_str(&table(
        "members",
        &["Member", "Client id", "Host", "Assignment"],
        &members,
    ));
    if !c.read_only {
        body.push_str("<h2>Reset offsets</h2><p class=\"hint\">Only while the group has no members (Empty), as Kafka requires.</p>");
        body.push_str(&form(
            c,
            "reset-offsets",
            "POST",
            &format!("/api/groups/{}/reset-offsets", enc(id)),
            "<label>To <select name=\"to\"><option>earliest</option><option>latest</option><option>timestamp</option><option>offset</option></select></label>",
            "",
        ).replace("<button type=\"submit\"></button>", &(input("value", "Value (ms or offset)", "text", "") + &input("topic", "Topic (empty: every committed one)", "text", "") + "<button type=\"submit\">Reset</button>")));
    }
    Ok(layout(c, u, &format!("Group {id}"), &body, Some(5)))
}

fn hot(c: &Console, u: &User, q: &Query) -> Result<String, Failure> {
    let v = views::hot(c, u, q)?;
    if v["sampling"].as_bool() == Some(true) {
        let body = format!(
            "<p class=\"hint\" id=\"sampling\">{}</p>",
            esc(&text(&v["message"]))
        );
        return Ok(layout(c, u, "Hot partitions", &body, Some(3)));
    }
    let pct = |x: &Value| {
        x.as_f64()
            .map_or_else(|| "–".to_owned(), |p| format!("{p:.0}%"))
    };
    let rows: Vec<Vec<String>> = items(&v["partitions"])
        .map(|p| {
            vec![
                topic_link(&text(&p["topic"])),
                esc(&text(&p["partition"])),
                esc(&text(&p["leader"])),
                esc(&text(&p["records_in_per_sec"])),
                bytes(&p["bytes_in_per_sec"]),
                bytes(&p["bytes_out_per_sec_led_here"]),
                pct(&p["share_of_topic_in_pct"]),
                pct(&p["share_of_broker_in_pct"]),
                pct(&p["share_of_broker_out_pct"]),
            ]
        })
        .collect();
    let mut body = format!(
        "<p class=\"facts\">Over the last {:.0} s · a topic is hot when its busiest partition carries more than {}× its median partition</p>",
        v["window_secs"].as_f64().unwrap_or(0.0),
        text(&v["factor"])
    );
    body.push_str(&table(
        "hot",
        &[
            "Topic",
            "Partition",
            "Leader",
            "Records/s in",
            "Bytes/s in",
            "Bytes/s out (led here)",
            "Share of topic",
            "Share of broker in",
            "Share of broker out",
        ],
        &rows,
    ));
    let verdicts: Vec<Vec<String>> = items(&v["topics"])
        .map(|t| {
            vec![
                esc(&text(&t["topic"])),
                esc(&text(&t["verdict"])),
                esc(&t["detail"].to_string()),
            ]
        })
        .collect();
    body.push_str("<h2>Topics</h2>");
    body.push_str(&table(
        "verdicts",
        &["Topic", "Verdict", "Detail"],
        &verdicts,
    ));
    Ok(layout(c, u, "Hot partitions", &body, Some(10)))
}

fn messages_page(c: &Console, u: &User, q: &Query) -> Result<String, Failure> {
    let val = |k: &str| esc(q.get(k).map_or("", String::as_str));
    let mut body = format!(
        "<form id=\"browse-form\" class=\"filter\" method=\"get\" action=\"/messages\">\
<label>Topic <input name=\"topic\" value=\"{}\" required></label>\
<label>Partition <input name=\"partition\" type=\"number\" min=\"0\" value=\"{}\"></label>\
<label>Offset <input name=\"offset\" value=\"{}\"></label>\
<label>or time (ms) <input name=\"timestamp\" value=\"{}\"></label>\
<label>Show as <select name=\"format\"><option>auto</option><option>utf8</option><option>json</option><option>hex</option></select></label>\
<button>Read</button></form>",
        val("topic"),
        if q.get("partition").is_some() {
            val("partition")
        } else {
            "0".to_owned()
        },
        val("offset"),
        val("timestamp"),
    );
    body.push_str(
        "<h2>Search</h2><form id=\"search-form\" class=\"search\">\
<label>Key <input name=\"key\"></label><label>Value contains <input name=\"value\"></label>\
<label>Regex <input name=\"regex\"></label><label>Header <input name=\"header\" placeholder=\"name or name=value\"></label>\
<label>From (ms) <input name=\"from_ms\"></label><label>To (ms) <input name=\"to_ms\"></label>\
<label>Scan at most (MiB) <input name=\"budget_mib\" type=\"number\" value=\"1024\" min=\"1\"></label>\
<button type=\"submit\">Search</button></form>\
<p id=\"search-progress\" class=\"hint\"></p><progress id=\"search-bar\" max=\"1\" value=\"0\" hidden></progress>\
<table id=\"search-results\"><thead><tr><th>Offset</th><th>Time</th><th>Key</th><th>Value</th><th>Headers</th></tr></thead><tbody></tbody></table>",
    );
    if q.get("topic").is_some_and(|t| !t.is_empty()) {
        match messages::browse(c, u, q) {
            Ok(v) => {
                let _ = write!(
                    body,
                    "<h2>Records</h2><p class=\"facts\">{}:{} · leader {} · offsets {} to {} · from {}</p>",
                    esc(&text(&v["topic"])),
                    esc(&text(&v["partition"])),
                    esc(&text(&v["leader"])),
                    esc(&text(&v["log_start_offset"])),
                    esc(&text(&v["log_end_offset"])),
                    esc(&text(&v["start_offset"])),
                );
                let rows: Vec<Vec<String>> = items(&v["records"]).map(record_row).collect();
                body.push_str(&table(
                    "records",
                    &["Offset", "Time", "Key", "Value", "Headers"],
                    &rows,
                ));
                let next = text(&v["next_offset"]);
                let _ = write!(
                    body,
                    "<p class=\"pager\"><a id=\"more\" href=\"/messages?topic={}&partition={}&offset={}&format={}\">next records</a></p>",
                    enc(&text(&v["topic"])),
                    text(&v["partition"]),
                    enc(&next),
                    enc(q.get("format").map_or("auto", String::as_str))
                );
            }
            Err(f) => {
                let _ = write!(
                    body,
                    "<p id=\"error\" class=\"error\">{}</p>",
                    esc(&f.message)
                );
            }
        }
    }
    Ok(layout(c, u, "Messages", &body, None))
}

/// One record as a table row (the script builds the same for search results).
fn record_row(r: &Value) -> Vec<String> {
    let shown = |x: &Value| {
        if x.is_null() {
            "<i>null</i>".to_owned()
        } else {
            format!(
                "<pre class=\"{}\">{}</pre>",
                esc(&text(&x["as"])),
                esc(x["text"].as_str().unwrap_or(""))
            )
        }
    };
    let headers = items(&r["headers"])
        .map(|h| {
            format!(
                "{}={}",
                esc(&text(&h["key"])),
                esc(h["value"]["text"].as_str().unwrap_or("null"))
            )
        })
        .collect::<Vec<_>>()
        .join("<br>");
    vec![
        esc(&text(&r["offset"])),
        esc(&time_of(&r["timestamp"])),
        shown(&r["key"]),
        shown(&r["value"]),
        headers,
    ]
}

fn transactions(c: &Console, u: &User, q: &Query) -> Result<String, Failure> {
    let v = views::transactions(c, u, q)?;
    let rows: Vec<Vec<String>> = items(&v["transactions"])
        .map(|t| {
            vec![
                esc(&text(&t["transactional_id"])),
                esc(&text(&t["producer_id"])),
                esc(&text(&t["state"])),
                esc(&text(&t["coordinator"])),
            ]
        })
        .collect();
    let mut body = table(
        "transactions",
        &["Transactional id", "Producer id", "State", "Coordinator"],
        &rows,
    );
    let open: Vec<Vec<String>> = items(&v["open_on_partitions"])
        .map(|t| {
            vec![
                esc(&format!("{}:{}", text(&t["topic"]), text(&t["partition"]))),
                esc(&text(&t["producer_id"])),
                esc(&text(&t["producer_epoch"])),
                esc(&text(&t["start_offset"])),
                esc(&text(&t["last_timestamp"])),
                if t["hanging"].as_bool() == Some(true) {
                    "<span class=\"bad\">hanging</span>".to_owned()
                } else {
                    "open".to_owned()
                },
            ]
        })
        .collect();
    let _ = write!(
        body,
        "<h2>Open on partitions</h2><p class=\"hint\">Hanging: its producer's last write is older than {} ms (<code>transaction.max.timeout.ms</code>), so its coordinator should have aborted it; <code>strata admin transactions abort</code> ends it.</p>",
        text(&v["max_timeout_ms"])
    );
    body.push_str(&table(
        "open-transactions",
        &[
            "Partition",
            "Producer id",
            "Epoch",
            "Start offset",
            "Last write",
            "State",
        ],
        &open,
    ));
    for e in items(&v["errors"]) {
        let _ = write!(body, "<p class=\"error\">{}</p>", esc(&text(e)));
    }
    Ok(layout(c, u, "Transactions", &body, Some(10)))
}

fn security(c: &Console, u: &User) -> Result<String, Failure> {
    let v = views::security(c, u)?;
    let mut body = String::new();
    let section = |body: &mut String,
                   title: &str,
                   id: &str,
                   value: &Value,
                   headers: &[&str],
                   row: &dyn Fn(&Value) -> Vec<String>| {
        let _ = write!(body, "<h2>{title}</h2>");
        match value.as_array() {
            Some(items) => body.push_str(&table(
                id,
                headers,
                &items.iter().map(row).collect::<Vec<_>>(),
            )),
            None => {
                let _ = write!(
                    body,
                    "<p class=\"error\">{}</p>",
                    esc(&text(&value["error"]))
                );
            }
        }
    };
    section(
        &mut body,
        "ACLs",
        "acls",
        &v["acls"],
        &[
            "Resource type",
            "Resource",
            "Pattern",
            "Principal",
            "Host",
            "Operation",
            "Permission",
        ],
        &|a| {
            [
                "resource_type",
                "resource_name",
                "pattern_type",
                "principal",
                "host",
                "operation",
                "permission_type",
            ]
            .iter()
            .map(|k| esc(&text(&a[*k])))
            .collect()
        },
    );
    section(
        &mut body,
        "Client quotas",
        "quotas",
        &v["quotas"],
        &["Entity", "Quotas"],
        &|q| {
            vec![
                esc(&items(&q["entity"])
                    .map(|e| format!("{}={}", text(&e["type"]), text(&e["name"])))
                    .collect::<Vec<_>>()
                    .join(", ")),
                esc(&items(&q["values"])
                    .map(|e| format!("{}={}", text(&e["key"]), text(&e["value"])))
                    .collect::<Vec<_>>()
                    .join(", ")),
            ]
        },
    );
    section(
        &mut body,
        "SCRAM users",
        "scram-users",
        &v["scram_users"],
        &["User", "Mechanisms"],
        &|s| {
            vec![
                esc(&text(&s["user"])),
                esc(&items(&s["mechanisms"])
                    .map(|m| {
                        format!(
                            "{} ({} iterations)",
                            if m["mechanism"] == 1 {
                                "SCRAM-SHA-256"
                            } else {
                                "SCRAM-SHA-512"
                            },
                            text(&m["iterations"])
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")),
            ]
        },
    );
    Ok(layout(c, u, "Security", &body, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_text_is_escaped() {
        assert_eq!(esc("<script>&\"'"), "&lt;script&gt;&amp;&quot;&#39;");
        assert_eq!(enc("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn times_read_as_utc() {
        assert_eq!(time_of(&serde_json::json!(0)), "1970-01-01 00:00:00.000");
        assert_eq!(
            time_of(&serde_json::json!(1_796_577_408_350_i64)),
            "2026-12-06 17:16:48.350"
        );
        assert_eq!(
            time_of(&serde_json::json!(951_782_400_000_i64)),
            "2000-02-29 00:00:00.000"
        );
        assert_eq!(time_of(&serde_json::json!(-1)), "-1");
    }

    #[test]
    fn sizes_read_as_people_read_them() {
        assert_eq!(bytes(&serde_json::json!(512)), "512 B");
        assert_eq!(bytes(&serde_json::json!(1536)), "1.5 KiB");
        assert_eq!(bytes(&Value::Null), "–");
    }
}
