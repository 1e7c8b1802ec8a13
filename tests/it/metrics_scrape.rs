//! Scraping the metrics endpoint over plain HTTP, for the tests that read it: [`http`]
//! sends a request as is, [`scrape`] parses every sample of a `GET /metrics` and checks
//! that each metric was declared with `# TYPE`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{Context, ensure};

/// Sends `request` as is and reads the whole answer (the server closes the connection).
pub fn http(port: u16, request: &[u8]) -> anyhow::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).context("connect to metrics")?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(request)?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).context("read the answer")?;
    let text = String::from_utf8(answer)?;
    let (head, body) = text.split_once("\r\n\r\n").context("no end of head")?;
    let status: u16 = head
        .split(' ')
        .nth(1)
        .context("no status")?
        .parse()
        .context("status")?;
    // A HEAD answer announces the length of the body it leaves out.
    if let Some(len) = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .filter(|_| !request.starts_with(b"HEAD "))
    {
        ensure!(
            len.parse::<usize>()? == body.len(),
            "Content-Length {len}, body {}",
            body.len()
        );
    }
    Ok((status, body.to_owned()))
}

/// Scrapes and parses every sample: `name{labels}` -> value. Checks that each sample's
/// metric was declared with `# TYPE` before it.
pub fn scrape(port: u16) -> anyhow::Result<BTreeMap<String, f64>> {
    let (status, body) = http(port, b"GET /metrics HTTP/1.1\r\nHost: strata\r\n\r\n")?;
    ensure!(status == 200, "status {status}: {body}");
    let mut declared = Vec::<String>::new();
    let mut samples = BTreeMap::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            declared.push(rest.split(' ').next().unwrap_or("").to_owned());
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').context("sample without a value")?;
        let name = series.split('{').next().unwrap_or(series);
        ensure!(
            declared.iter().any(|d| name == d
                || name
                    .strip_prefix(d.as_str())
                    .is_some_and(|s| { ["_bucket", "_sum", "_count"].contains(&s) })),
            "{name} has no # TYPE"
        );
        samples.insert(series.to_owned(), value.parse::<f64>().context("value")?);
    }
    Ok(samples)
}

pub fn get(samples: &BTreeMap<String, f64>, series: &str) -> anyhow::Result<f64> {
    samples
        .get(series)
        .copied()
        .with_context(|| format!("no sample {series}"))
}
