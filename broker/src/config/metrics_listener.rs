//! `metrics.listener`: the address of the Prometheus endpoint, parsed with the rest of the
//! configuration.

/// `metrics.listener`: where the endpoint listens, as `http://host:port/path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsListener {
    /// The host to bind (`0.0.0.0` for every interface; brackets stripped from IPv6).
    pub host: String,
    /// The port to bind.
    pub port: u16,
    /// The one path served (`/metrics` when the URL has none).
    pub path: String,
}

impl MetricsListener {
    /// Parses `metrics.listener`; an empty value is `None` (no endpoint).
    ///
    /// # Errors
    ///
    /// The reason, for the configuration error naming the key.
    pub fn parse(value: &str) -> Result<Option<Self>, &'static str> {
        let value = value.trim();
        if value.is_empty() {
            return Ok(None);
        }
        let rest = value
            .strip_prefix("http://")
            .ok_or("must be http://host:port/path (only plain HTTP is served)")?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/metrics"),
        };
        let (host, port) = authority
            .rsplit_once(':')
            .ok_or("must name a port: http://host:port/path")?;
        let port: u16 = port.parse().map_err(|_| "the port must be 1-65535")?;
        if port == 0 {
            return Err("the port must be 1-65535");
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err("must name a host (0.0.0.0 for every interface)");
        }
        if path.contains(['?', '#', ' ']) {
            return Err("the path must be a plain path such as /metrics");
        }
        Ok(Some(MetricsListener {
            host: host.to_owned(),
            port,
            path: path.to_owned(),
        }))
    }

    /// Parses a listener served at the root (`console.listener`): `http://host:port`, with
    /// no path or `/`; an empty value is `None`.
    ///
    /// # Errors
    ///
    /// The reason, for the configuration error naming the key.
    pub fn parse_root(value: &str) -> Result<Option<Self>, &'static str> {
        let value = value.trim();
        let with_root = if value
            .strip_prefix("http://")
            .is_some_and(|r| !r.contains('/'))
        {
            format!("{value}/")
        } else {
            value.to_owned()
        };
        let parsed = Self::parse(&with_root).map_err(|e| {
            if e.starts_with("must be http") {
                "must be http://host:port (only plain HTTP is served)"
            } else {
                e
            }
        })?;
        match parsed {
            Some(l) if l.path != "/" => Err("must be http://host:port, with no path"),
            other => Ok(other),
        }
    }

    /// `host:port` for binding.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}
