//! `RegisterBrokerRecord` (type 0): a broker announced itself and where to reach it.

use uuid::Uuid;

use super::compact::{DecodeError, Reader, Writer};

/// Kafka's `SecurityProtocol` id for PLAINTEXT.
pub const SECURITY_PROTOCOL_PLAINTEXT: i16 = 0;

/// One listener a broker accepts clients on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerEndpoint {
    /// The listener name (`PLAINTEXT`), which clients never see but brokers match on.
    pub name: String,
    /// The advertised host.
    pub host: String,
    /// The advertised port.
    pub port: u16,
    /// Kafka's `SecurityProtocol` id (0 = PLAINTEXT).
    pub security_protocol: i16,
}

/// One feature range a broker supports (KIP-584); we advertise none yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerFeature {
    /// The feature name, e.g. `metadata.version`.
    pub name: String,
    /// Lowest level the broker can run at.
    pub min_supported_version: i16,
    /// Highest level the broker can run at.
    pub max_supported_version: i16,
}

/// A broker registered. Kafka's `RegisterBrokerRecord`, version 0, or version 1 when
/// `in_controlled_shutdown` is set (the only field version 1 adds).
///
/// Value layout after the metadata frame header:
///
/// ```text
/// broker_id       int32
/// incarnation_id  uuid (16 bytes)
/// broker_epoch    int64
/// endpoints       compact array of:
///     name               compact string
///     host               compact string
///     port               uint16
///     security_protocol  int16
///     tagged             uvarint 0
/// features        compact array of:
///     name                   compact string
///     min_supported_version  int16
///     max_supported_version  int16
///     tagged                 uvarint 0
/// rack            compact nullable string
/// fenced          bool
/// in_controlled_shutdown  bool (version 1+ only)
/// tagged          uvarint 0
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBrokerRecord {
    /// The broker's `node.id`.
    pub broker_id: i32,
    /// Random per process start (KIP-631), so the controller can tell a restart from a
    /// duplicate registration.
    pub incarnation_id: Uuid,
    /// KIP-631: the offset of this registration in the metadata log; fences requests
    /// from a previous incarnation.
    pub broker_epoch: i64,
    /// Where clients reach the broker, one per listener.
    pub endpoints: Vec<BrokerEndpoint>,
    /// Supported feature ranges (KIP-584).
    pub features: Vec<BrokerFeature>,
    /// `broker.rack`, for rack-aware assignment and KIP-392 follower fetching.
    pub rack: Option<String>,
    /// A fenced broker leads nothing (KIP-631); a single node unfences at once.
    pub fenced: bool,
    /// The broker is moving its leaderships away before it stops (version 1+).
    pub in_controlled_shutdown: bool,
}

/// Each endpoint takes at least 2 empty strings + port + protocol + tags = 7 bytes.
const MIN_ENDPOINT_LEN: usize = 7;
/// Each feature takes at least an empty string + two int16 + tags = 6 bytes.
const MIN_FEATURE_LEN: usize = 6;

impl RegisterBrokerRecord {
    /// The lowest version that carries every field set.
    pub(crate) fn version(&self) -> u32 {
        u32::from(self.in_controlled_shutdown)
    }

    pub(crate) fn encode(&self, w: &mut Writer) {
        w.i32(self.broker_id);
        w.uuid(self.incarnation_id);
        w.i64(self.broker_epoch);
        w.array_len(self.endpoints.len());
        for e in &self.endpoints {
            w.string(&e.name);
            w.string(&e.host);
            w.u16(e.port);
            w.i16(e.security_protocol);
            w.empty_tagged_fields();
        }
        w.array_len(self.features.len());
        for f in &self.features {
            w.string(&f.name);
            w.i16(f.min_supported_version);
            w.i16(f.max_supported_version);
            w.empty_tagged_fields();
        }
        w.nullable_string(self.rack.as_deref());
        w.bool(self.fenced);
        if self.version() >= 1 {
            w.bool(self.in_controlled_shutdown);
        }
        w.empty_tagged_fields();
    }

    pub(crate) fn decode(r: &mut Reader<'_>, version: u32) -> Result<Self, DecodeError> {
        let broker_id = r.i32("RegisterBrokerRecord.broker_id")?;
        let incarnation_id = r.uuid("RegisterBrokerRecord.incarnation_id")?;
        let broker_epoch = r.i64("RegisterBrokerRecord.broker_epoch")?;
        let n = r.array_len("RegisterBrokerRecord.endpoints", MIN_ENDPOINT_LEN)?;
        let mut endpoints = Vec::with_capacity(n);
        for _ in 0..n {
            endpoints.push(BrokerEndpoint {
                name: r.string("BrokerEndpoint.name")?,
                host: r.string("BrokerEndpoint.host")?,
                port: r.u16("BrokerEndpoint.port")?,
                security_protocol: r.i16("BrokerEndpoint.security_protocol")?,
            });
            r.skip_tagged_fields()?;
        }
        let n = r.array_len("RegisterBrokerRecord.features", MIN_FEATURE_LEN)?;
        let mut features = Vec::with_capacity(n);
        for _ in 0..n {
            features.push(BrokerFeature {
                name: r.string("BrokerFeature.name")?,
                min_supported_version: r.i16("BrokerFeature.min_supported_version")?,
                max_supported_version: r.i16("BrokerFeature.max_supported_version")?,
            });
            r.skip_tagged_fields()?;
        }
        let rack = r.nullable_string("RegisterBrokerRecord.rack")?;
        let fenced = r.bool("RegisterBrokerRecord.fenced")?;
        let in_controlled_shutdown = if version >= 1 {
            r.bool("RegisterBrokerRecord.in_controlled_shutdown")?
        } else {
            false
        };
        r.skip_tagged_fields()?;
        Ok(RegisterBrokerRecord {
            broker_id,
            incarnation_id,
            broker_epoch,
            endpoints,
            features,
            rack,
            fenced,
            in_controlled_shutdown,
        })
    }
}
