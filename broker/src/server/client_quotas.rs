//! Produce and fetch byte-rate quotas (KIP-13) with KIP-219's back-pressure.
//!
//! # What is measured
//!
//! Each (user, client-id) pair that a quota applies to has a sensor per quota type,
//! measured as Kafka's `ClientQuotaManager` measures it: a `Rate` over `quota.window.num`
//! (11) samples of `quota.window.size.seconds` (1 s), whose window is the time since the
//! oldest live sample but never less than ten full samples (Kafka's `Rate.windowSize`), so
//! a client's first burst is spread over ten seconds. A produce records the bytes of its
//! record sets; a consumer fetch (never a follower's) the bytes of the records it returns.
//!
//! # Which quota applies
//!
//! The most specific entity that sets the key, in Kafka's order: user + client-id, user +
//! default client-id, user, default user + client-id, default user + default client-id,
//! default user, client-id, default client-id. The user is the connection's principal name
//! (the SASL user, a TLS certificate's mapped name), `ANONYMOUS` without either. As in
//! Kafka, the sensor is shared by the clients the quota covers together: a user-level quota
//! by all of that user's client ids, a default by nobody (each client id gets its own).
//!
//! # Throttling
//!
//! A request that takes the rate over the quota is throttled for Kafka's
//! `(rate - quota) / quota × window` ms: the response goes out at once with that
//! `throttle_time_ms` (KIP-219: the client holds its next request itself), and the
//! connection is muted for the same time, its socket not read at all. A muted connection
//! holds no more than the frames it had read before, so memory stays bounded (TCP flow
//! control stops the client). A throttled fetch answers no records, and its bytes are taken
//! back out of the rate, as Kafka's `getThrottledResponse` and `unrecordQuotaSensor` do.
//! `request_percentage` and `controller_mutation_rate` are stored and described but not
//! enforced.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::{LazyLock, Mutex, PoisonError};

use strata_kraft::MetadataImage;
use strata_kraft::client_quotas::{
    CONSUMER_BYTE_RATE, ClientQuotas, ENTITY_CLIENT_ID, ENTITY_USER, PRODUCER_BYTE_RATE,
    QuotaEntity,
};

/// The user principal of a connection without SASL (Kafka's `KafkaPrincipal.ANONYMOUS`).
pub const ANONYMOUS: &str = "ANONYMOUS";

/// Kafka's `quota.window.num` default: the samples a rate is measured over.
pub const QUOTA_WINDOW_NUM: usize = 11;

/// Kafka's `quota.window.size.seconds` default, in ms: each sample's span.
pub const QUOTA_WINDOW_SIZE_MS: i64 = 1000;

/// Sensors idle this long are dropped (Kafka's `inactiveSensorExpirationTimeSeconds`).
const SENSOR_EXPIRY_MS: i64 = 3_600_000;

/// At most this many sensors per quota type: client ids are the client's to choose, so
/// their number is capped; past it, the sensor idle longest is dropped.
const MAX_SENSORS: usize = 10_000;

/// The two byte-rate quotas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaType {
    /// `producer_byte_rate`.
    Produce,
    /// `consumer_byte_rate`.
    Fetch,
}

impl QuotaType {
    /// The quota key it enforces.
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            QuotaType::Produce => PRODUCER_BYTE_RATE,
            QuotaType::Fetch => CONSUMER_BYTE_RATE,
        }
    }

    /// Kafka's sensor type, the `type=` of its metrics (`kafka.server:type=Produce`).
    fn metric_type(self) -> &'static str {
        match self {
            QuotaType::Produce => "produce",
            QuotaType::Fetch => "fetch",
        }
    }
}

/// One sample of a [`Rate`]: Kafka's `SampledStat.Sample`.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// When the sample's window started (ms).
    start_ms: i64,
    /// The bytes recorded in it.
    value: f64,
    /// The throttle time handed out in it (ms), for the throttle-time metric.
    throttle_ms: f64,
    /// The requests recorded in it.
    events: u64,
}

impl Sample {
    fn new(now_ms: i64) -> Self {
        Sample {
            start_ms: now_ms,
            value: 0.0,
            throttle_ms: 0.0,
            events: 0,
        }
    }
}

/// Kafka's `Rate` over a `SampledStat` of [`QUOTA_WINDOW_NUM`] samples of
/// [`QUOTA_WINDOW_SIZE_MS`]. Sans-IO: the caller passes the time in.
#[derive(Debug, Clone, Default)]
pub struct Rate {
    /// Up to `QUOTA_WINDOW_NUM` samples, used as a ring.
    samples: Vec<Sample>,
    /// The index of the current sample.
    current: usize,
}

impl Rate {
    /// Adds `value` at `now_ms`, moving to a new sample once the current one's window has
    /// passed; the new sample starts on the window grid (Kafka's `SampledStat.record`).
    pub fn record(&mut self, value: f64, now_ms: i64) {
        self.current_sample(now_ms).value += value;
        self.current_sample(now_ms).events += 1;
    }

    /// Adds the throttle time handed out at `now_ms` (no event: [`Rate::record`] counted it).
    fn record_throttle(&mut self, throttle_ms: f64, now_ms: i64) {
        self.current_sample(now_ms).throttle_ms += throttle_ms;
    }

    fn current_sample(&mut self, now_ms: i64) -> &mut Sample {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
            self.current = 0;
        }
        let previous = self.samples[self.current];
        if now_ms - previous.start_ms >= QUOTA_WINDOW_SIZE_MS {
            let previous_end = previous.start_ms + QUOTA_WINDOW_SIZE_MS;
            let start = now_ms - (now_ms - previous_end) % QUOTA_WINDOW_SIZE_MS;
            self.current = (self.current + 1) % QUOTA_WINDOW_NUM;
            if self.current >= self.samples.len() {
                self.samples.push(Sample::new(start));
            } else {
                self.samples[self.current] = Sample::new(start);
            }
        }
        &mut self.samples[self.current]
    }

    /// Resets samples older than the whole window (Kafka's `purgeObsoleteSamples`).
    fn purge(&mut self, now_ms: i64) {
        let expire = QUOTA_WINDOW_SIZE_MS * QUOTA_WINDOW_NUM as i64;
        for s in &mut self.samples {
            if now_ms - s.start_ms >= expire {
                *s = Sample::new(now_ms);
            }
        }
    }

    /// The window the rate divides by, in ms (Kafka's `Rate.windowSize`): from the oldest
    /// sample to now, but at least `QUOTA_WINDOW_NUM - 1` full samples.
    pub fn window_ms(&mut self, now_ms: i64) -> i64 {
        self.purge(now_ms);
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms);
        let mut elapsed = now_ms - oldest;
        let full = elapsed / QUOTA_WINDOW_SIZE_MS;
        let min_full = QUOTA_WINDOW_NUM as i64 - 1;
        if full < min_full {
            elapsed += (min_full - full) * QUOTA_WINDOW_SIZE_MS;
        }
        elapsed
    }

    /// Bytes per second at `now_ms` (Kafka's `Rate.measure`).
    pub fn measure(&mut self, now_ms: i64) -> f64 {
        let window = self.window_ms(now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        let seconds = window as f64 / 1000.0;
        total / seconds
    }

    /// The average throttle time of the requests in the window (Kafka's `throttle-time`,
    /// an `Avg`).
    fn average_throttle_ms(&mut self, now_ms: i64) -> f64 {
        self.purge(now_ms);
        let events: u64 = self.samples.iter().map(|s| s.events).sum();
        let throttle: f64 = self.samples.iter().map(|s| s.throttle_ms).sum();
        if events == 0 {
            0.0
        } else {
            let n = events as f64;
            throttle / n
        }
    }

    /// Records `value` and returns the throttle time the quota `bound` asks for: 0 within
    /// it, else Kafka's `QuotaUtils.throttleTime`, `(rate - bound) / bound × window`.
    pub fn record_and_throttle(&mut self, value: f64, bound: f64, now_ms: i64) -> i64 {
        self.record(value, now_ms);
        let rate = self.measure(now_ms);
        if rate <= bound {
            return 0;
        }
        let window = self.window_ms(now_ms) as f64;
        ((rate - bound) / bound * window).round() as i64
    }
}

/// One sensor: the rate of one (user, client-id) metric-tag pair for one quota type.
#[derive(Debug, Default)]
struct Sensor {
    /// Bytes per second.
    rate: Rate,
    /// The quota last applied, for the metrics.
    quota: f64,
    /// When it was last recorded (ms), for expiry.
    last_used_ms: i64,
}

/// Which quota applies to `user` and `client_id` for `key`, and the sensor tags it is
/// measured under: Kafka's `DefaultQuotaCallback` order (see the module docs).
#[must_use]
pub fn resolve(
    quotas: &ClientQuotas,
    user: &str,
    client_id: &str,
    key: &str,
) -> Option<(f64, (String, String))> {
    let entity = |u: Option<Option<&str>>, c: Option<Option<&str>>| {
        let mut e = QuotaEntity::new();
        if let Some(u) = u {
            e.insert(ENTITY_USER.to_owned(), u.map(str::to_owned));
        }
        if let Some(c) = c {
            e.insert(ENTITY_CLIENT_ID.to_owned(), c.map(str::to_owned));
        }
        e
    };
    let both = (user.to_owned(), client_id.to_owned());
    let user_only = (user.to_owned(), String::new());
    let client_only = (String::new(), client_id.to_owned());
    let order = [
        (
            entity(Some(Some(user)), Some(Some(client_id))),
            both.clone(),
        ),
        (entity(Some(Some(user)), Some(None)), both.clone()),
        (entity(Some(Some(user)), None), user_only.clone()),
        (entity(Some(None), Some(Some(client_id))), both.clone()),
        (entity(Some(None), Some(None)), both),
        (entity(Some(None), None), user_only),
        (entity(None, Some(Some(client_id))), client_only.clone()),
        (entity(None, Some(None)), client_only),
    ];
    order
        .into_iter()
        .find_map(|(e, tags)| quotas.get(&e, key).map(|q| (q, tags)))
}

/// The sensors of one quota type, by (user, client-id) tags.
#[derive(Default)]
struct Sensors {
    by_tags: HashMap<(String, String), Sensor>,
}

impl Sensors {
    fn sensor(&mut self, tags: (String, String), now_ms: i64) -> &mut Sensor {
        if !self.by_tags.contains_key(&tags) && self.by_tags.len() >= MAX_SENSORS {
            self.by_tags
                .retain(|_, s| now_ms - s.last_used_ms < SENSOR_EXPIRY_MS);
            if self.by_tags.len() >= MAX_SENSORS
                && let Some(idle) = self
                    .by_tags
                    .iter()
                    .min_by_key(|(_, s)| s.last_used_ms)
                    .map(|(k, _)| k.clone())
            {
                self.by_tags.remove(&idle);
            }
        }
        self.by_tags.entry(tags).or_default()
    }
}

/// Every sensor of the process: a process is one node.
static SENSORS: LazyLock<[Mutex<Sensors>; 2]> = LazyLock::new(|| {
    [
        Mutex::new(Sensors::default()),
        Mutex::new(Sensors::default()),
    ]
});

fn sensors(kind: QuotaType) -> std::sync::MutexGuard<'static, Sensors> {
    let i = match kind {
        QuotaType::Produce => 0,
        QuotaType::Fetch => 1,
    };
    SENSORS[i].lock().unwrap_or_else(PoisonError::into_inner)
}

/// Records `bytes` of a request from `user` (a principal's name) and `client_id`, and
/// returns its throttle time in ms, 0 when no quota applies or the rate is within it.
#[must_use]
pub fn record(
    image: &MetadataImage,
    kind: QuotaType,
    user: &str,
    client_id: &str,
    bytes: u64,
    now_ms: i64,
) -> i32 {
    let Some((quota, tags)) = resolve(&image.client_quotas, user, client_id, kind.key()) else {
        return 0;
    };
    let mut sensors = sensors(kind);
    let sensor = sensors.sensor(tags, now_ms);
    sensor.quota = quota;
    sensor.last_used_ms = now_ms;
    let throttle = sensor.rate.record_and_throttle(bytes as f64, quota, now_ms);
    let throttle = i32::try_from(throttle.max(0)).unwrap_or(i32::MAX);
    sensor.rate.record_throttle(throttle as f64, now_ms);
    throttle
}

/// Takes `bytes` back out of the current sample (Kafka's `unrecordQuotaSensor`): a
/// throttled fetch returns no records, so it must not count them.
pub fn unrecord(
    image: &MetadataImage,
    kind: QuotaType,
    user: &str,
    client_id: &str,
    bytes: u64,
    now_ms: i64,
) {
    let Some((_, tags)) = resolve(&image.client_quotas, user, client_id, kind.key()) else {
        return;
    };
    let mut sensors = sensors(kind);
    if let Some(sensor) = sensors.by_tags.get_mut(&tags) {
        sensor.rate.current_sample(now_ms).value -= bytes as f64;
    }
}

/// A connection's mute (KIP-219): while it lasts, the connection reads no requests.
#[derive(Debug, Default)]
pub struct Mute {
    /// Until when; `None` when the connection was never throttled.
    until: Mutex<Option<tokio::time::Instant>>,
}

impl Mute {
    /// Mutes for `throttle_ms` from now, or longer if already muted longer.
    pub fn extend(&self, throttle_ms: i32) {
        let Ok(ms) = u64::try_from(throttle_ms) else {
            return;
        };
        if ms == 0 {
            return;
        }
        let until = tokio::time::Instant::now() + std::time::Duration::from_millis(ms);
        let mut cur = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        if cur.is_none_or(|c| c < until) {
            *cur = Some(until);
        }
    }

    /// Waits out the mute, if any.
    pub async fn wait(&self) {
        let until = *self.until.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(until) = until
            && until > tokio::time::Instant::now()
        {
            tracing::trace!(?until, "connection muted by a quota");
            tokio::time::sleep_until(until).await;
        }
    }
}

/// Appends the quota metrics in Kafka's names, as the Prometheus JMX exporter maps
/// `kafka.server:type=Produce,user=U,client-id=C` (and `type=Fetch`): `byte_rate` in bytes
/// per second, `throttle_time` the average throttle (ms) over the quota window.
pub fn render_metrics(out: &mut String, escape: fn(&str) -> String) {
    let now_ms = crate::now_ms();
    for kind in [QuotaType::Produce, QuotaType::Fetch] {
        let t = kind.metric_type();
        let mut sensors = sensors(kind);
        let mut rows: Vec<_> = sensors
            .by_tags
            .iter_mut()
            .map(|((u, c), s)| {
                (
                    u.clone(),
                    c.clone(),
                    s.rate.measure(now_ms),
                    s.rate.average_throttle_ms(now_ms),
                    s.quota,
                )
            })
            .collect();
        drop(sensors);
        rows.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        for (metric, help, column) in [
            (
                "byte_rate",
                "Bytes per second of the client's requests, as its quota measures them (Kafka's byte-rate).",
                2,
            ),
            (
                "throttle_time",
                "Average throttle time in ms of the client's requests over the quota window (Kafka's throttle-time).",
                3,
            ),
            (
                "quota",
                "The byte-rate quota that applies to the client.",
                4,
            ),
        ] {
            let name = format!("kafka_server_{t}_{metric}");
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            for row in &rows {
                let v = match column {
                    2 => row.2,
                    3 => row.3,
                    _ => row.4,
                };
                let _ = writeln!(
                    out,
                    "{name}{{user=\"{}\",client_id=\"{}\"}} {v}",
                    escape(&row.0),
                    escape(&row.1)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_kraft::client_quotas::alter_client_quota_records;
    use strata_kraft::record::MetadataRecord;

    #[test]
    fn the_first_window_is_ten_samples_long() {
        let mut r = Rate::default();
        r.record(10_000.0, 0);
        assert_eq!(r.window_ms(0), 10_000);
        assert!((r.measure(0) - 1_000.0).abs() < 1e-9);
        // Five seconds on, the rate is still over ten seconds.
        r.record(0.0, 5_000);
        assert_eq!(r.window_ms(5_000), 10_000);
        // Thirteen seconds after the oldest sample the window is its age...
        r.record(1_000.0, 10_000);
        assert_eq!(r.window_ms(10_500), 10_500);
        // ...and past the whole window (11 s) the first sample is gone.
        assert!(
            (r.measure(11_000) - 100.0).abs() < 1e-9,
            "{}",
            r.measure(11_000)
        );
    }

    #[test]
    fn the_throttle_time_is_kafkas() {
        let mut r = Rate::default();
        // 1000 B/s quota, 20 000 B at once: rate 2000 over a 10 s window, so
        // (2000 - 1000) / 1000 × 10 000 ms.
        assert_eq!(r.record_and_throttle(20_000.0, 1_000.0, 0), 10_000);
        let mut ok = Rate::default();
        assert_eq!(ok.record_and_throttle(5_000.0, 1_000.0, 0), 0);
    }

    #[test]
    fn a_steady_client_at_the_quota_is_not_throttled_and_one_above_is() {
        let mut r = Rate::default();
        let mut throttled = 0;
        for i in 0..100i64 {
            // 100 B every 100 ms: exactly 1000 B/s.
            throttled += r.record_and_throttle(100.0, 1_000.0, i * 100);
        }
        assert_eq!(throttled, 0);
        let mut fast = Rate::default();
        let mut last = 0;
        for i in 0..100i64 {
            last = fast.record_and_throttle(300.0, 1_000.0, i * 100);
        }
        assert!(last > 0);
    }

    /// An entity's (type, name) pairs and its `producer_byte_rate`.
    type Quota<'a> = (&'a [(&'a str, Option<&'a str>)], f64);

    fn quotas(entries: &[Quota<'_>]) -> ClientQuotas {
        let mut q = ClientQuotas::default();
        for (entity, v) in entries {
            let parts: Vec<(String, Option<String>)> = entity
                .iter()
                .map(|(t, n)| ((*t).to_owned(), n.map(str::to_owned)))
                .collect();
            for r in
                alter_client_quota_records(&q, &parts, &[(PRODUCER_BYTE_RATE.to_owned(), Some(*v))])
                    .unwrap()
            {
                let MetadataRecord::ClientQuota(r) = r else {
                    panic!()
                };
                q.apply(&r);
            }
        }
        q
    }

    #[test]
    fn the_most_specific_quota_wins_in_kafkas_order() {
        const U: &str = "ANONYMOUS";
        let u = U;
        let all: Vec<Quota<'_>> = vec![
            (&[("user", Some(U)), ("client-id", Some("app"))], 1.0),
            (&[("user", Some(U)), ("client-id", None)], 2.0),
            (&[("user", Some(U))], 3.0),
            (&[("user", None), ("client-id", Some("app"))], 4.0),
            (&[("user", None), ("client-id", None)], 5.0),
            (&[("user", None)], 6.0),
            (&[("client-id", Some("app"))], 7.0),
            (&[("client-id", None)], 8.0),
        ];
        for skip in 0..all.len() {
            let q = quotas(&all[skip..]);
            let (value, _) = resolve(&q, u, "app", PRODUCER_BYTE_RATE).unwrap();
            let expected = (skip + 1) as f64;
            assert!((value - expected).abs() < 1e-9, "skip {skip}: {value}");
        }
        let q = quotas(&[(&[("client-id", Some("app"))], 7.0)]);
        assert_eq!(resolve(&q, u, "other", PRODUCER_BYTE_RATE), None);
        assert_eq!(resolve(&q, u, "app", CONSUMER_BYTE_RATE), None);
        let shared = quotas(&[(&[("user", Some(u))], 3.0)]);
        assert_eq!(
            resolve(&shared, u, "app", PRODUCER_BYTE_RATE).unwrap().1,
            (u.to_owned(), String::new()),
            "a user quota is one sensor for all its client ids"
        );
    }

    #[test]
    fn a_user_quota_throttles_that_user_only() {
        // The user is the connection's principal name: a SASL user's quota is its own.
        let mut image = MetadataImage::new("c".to_owned(), -1);
        image.client_quotas = quotas(&[(&[("user", Some("alice-q"))], 1000.0)]);
        let now = 1_000_000;
        let alice = record(&image, QuotaType::Produce, "alice-q", "app", 1_000_000, now);
        assert!(alice > 0, "alice over her quota is throttled");
        let bob = record(&image, QuotaType::Produce, "bob-q", "app", 1_000_000, now);
        assert_eq!(bob, 0, "bob has no quota");
        let anonymous = record(&image, QuotaType::Produce, ANONYMOUS, "app", 1_000_000, now);
        assert_eq!(anonymous, 0, "nor has ANONYMOUS");
    }
}
