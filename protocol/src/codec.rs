//! Request decoding and response encoding.
//!
//! This module and [`crate::record_batch`] are the only places in Strata that call
//! `kafka-protocol`'s codec. The broker receives typed requests and hands back typed
//! responses; it never sees a header version or a tagged-field section.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
    api_versions_response::ApiVersion,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use thiserror::Error;

use crate::frame::SIZE_PREFIX_LEN;
use crate::versions::ListenerType;

/// Kafka's UNSUPPORTED_VERSION error code.
const UNSUPPORTED_VERSION: i16 = 35;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A decoded request, ready for dispatch.
#[derive(Debug)]
pub struct Request {
    /// The API, already checked against the listener's table ([`SUPPORTED_APIS`](crate::versions::SUPPORTED_APIS) on a
    /// client listener).
    pub api_key: ApiKey,
    /// The request header; its version determines the response header's.
    pub header: RequestHeader,
    /// The typed body.
    pub body: RequestKind,
}

/// The outcome of decoding one frame that the broker can answer.
#[derive(Debug)]
pub enum Decoded {
    /// A request to dispatch.
    Request(Box<Request>),
    /// An ApiVersions request newer than we serve. KIP-511: answer UNSUPPORTED_VERSION with
    /// our ranges in a v0 body, so the client can retry with a version we know.
    ApiVersionsTooNew {
        /// Echoed in the response header.
        correlation_id: i32,
    },
}

/// A frame that cannot be answered. Each one closes the connection, as Kafka does: the
/// client cannot match a response to a request whose header we could not read.
#[derive(Debug, Error)]
pub enum DecodeError {
    /// The API key is not one Kafka defines, or not one served on this listener (Kafka
    /// closes the connection too: its `SocketServer` refuses a header whose API is not
    /// enabled for the listener's type).
    #[error("unsupported api key {api_key} (correlation id {correlation_id})")]
    UnknownApiKey { api_key: i16, correlation_id: i32 },
    /// The API is served, but not at this version.
    #[error("unsupported version {version} of {api_key:?} (correlation id {correlation_id})")]
    UnsupportedVersion {
        api_key: ApiKey,
        version: i16,
        correlation_id: i32,
    },
    /// The header or body does not parse at the stated version.
    #[error("malformed {api_key:?} v{version} request (correlation id {correlation_id}): {source}")]
    Malformed {
        api_key: ApiKey,
        version: i16,
        correlation_id: i32,
        #[source]
        source: BoxError,
    },
    /// Fewer bytes than a request header.
    #[error("frame of {len} bytes is too short for a request header")]
    TooShort { len: usize },
}

/// A response that could not be encoded. This is a broker bug, never a client's fault.
#[derive(Debug, Error)]
#[error("cannot encode {api_key:?} v{version} response: {source}")]
pub struct EncodeError {
    api_key: ApiKey,
    version: i16,
    #[source]
    source: BoxError,
}

impl EncodeError {
    pub(crate) fn new(api_key: ApiKey, version: i16, source: impl Into<BoxError>) -> Self {
        EncodeError {
            api_key,
            version,
            source: source.into(),
        }
    }
}

/// Decodes one frame body (without its size prefix) received on a client listener.
///
/// # Errors
///
/// [`DecodeError`] when the frame cannot be answered; the caller closes the connection.
pub fn decode_request(frame: Bytes) -> Result<Decoded, DecodeError> {
    decode_request_on(ListenerType::Broker, frame)
}

/// Decodes one frame body (without its size prefix) received on a `listener` of the given
/// type: only that listener's APIs ([`ListenerType::apis`]) are accepted.
///
/// # Errors
///
/// [`DecodeError`] when the frame cannot be answered; the caller closes the connection.
pub fn decode_request_on(listener: ListenerType, mut frame: Bytes) -> Result<Decoded, DecodeError> {
    if frame.len() < 8 {
        return Err(DecodeError::TooShort { len: frame.len() });
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let api_key = ApiKey::try_from(raw_key)
        .ok()
        .filter(|k| listener.supported(*k).is_some())
        .ok_or(DecodeError::UnknownApiKey {
            api_key: raw_key,
            correlation_id,
        })?;
    if !listener.is_supported(api_key, version) {
        let newest = listener.supported(api_key).map_or(i16::MAX, |a| a.max);
        if api_key == ApiKey::ApiVersions && version > newest {
            return Ok(Decoded::ApiVersionsTooNew { correlation_id });
        }
        return Err(DecodeError::UnsupportedVersion {
            api_key,
            version,
            correlation_id,
        });
    }
    let malformed = |source: BoxError| DecodeError::Malformed {
        api_key,
        version,
        correlation_id,
        source,
    };
    let header = RequestHeader::decode(&mut frame, api_key.request_header_version(version))
        .map_err(|e| malformed(e.into()))?;
    // The codec preallocates arrays from wire counts; prove the counts first (see `shape`).
    crate::shape::check(api_key, version, &frame).map_err(|e| malformed(e.into()))?;
    let body = if legacy::is_legacy(api_key, version) {
        legacy::decode_request(api_key, version, frame).map_err(malformed)?
    } else {
        RequestKind::decode(api_key, &mut frame, version).map_err(|e| malformed(e.into()))?
    };
    Ok(Decoded::Request(Box::new(Request {
        api_key,
        header,
        body,
    })))
}

/// Encodes a request frame, size prefix included, for a peer's controller listener: what a
/// node sends as a Raft voter, a broker registering or heartbeating, or an AlterPartition
/// caller.
///
/// # Errors
///
/// [`EncodeError`] when a field does not fit the version (a caller bug).
pub fn encode_request(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &RequestKind,
) -> Result<Bytes, EncodeError> {
    let err = |source: BoxError| EncodeError {
        api_key,
        version,
        source,
    };
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(kafka_protocol::protocol::StrBytes::from_string(
            client_id.to_owned(),
        )))
        .encode(&mut buf, api_key.request_header_version(version))
        .map_err(|e| err(e.into()))?;
    body.encode(&mut buf, version).map_err(|e| err(e.into()))?;
    finish_frame(buf, api_key, version)
}

/// A response read from a peer: its correlation id (to match the request) and its body.
#[derive(Debug)]
pub struct Response {
    /// From the response header.
    pub correlation_id: i32,
    /// The typed body.
    pub body: ResponseKind,
}

/// Decodes one response frame body (without its size prefix) to a request this node sent
/// to a peer's controller listener at `api_key` and `version`. The body's counts and
/// lengths are checked before the codec allocates (`shape::check_response`), since a peer is
/// trusted no more than a client.
///
/// # Errors
///
/// [`DecodeError::UnknownApiKey`] or [`DecodeError::UnsupportedVersion`] when the request
/// was not one of the controller listener's; [`DecodeError::Malformed`] when the frame does
/// not parse. The caller closes the connection to the peer.
pub fn decode_response(
    api_key: ApiKey,
    version: i16,
    frame: Bytes,
) -> Result<Response, DecodeError> {
    check_sent(
        ListenerType::Controller.supported(api_key),
        api_key,
        version,
    )?;
    decode_response_body(api_key, version, frame)
}

/// The client-listener APIs a node that is not the active controller forwards to it whole
/// (KIP-590), and whose responses it reads back with [`decode_forwarded_response`]. An old
/// version that [`legacy`] translates is forwarded at [`legacy::codec_version`].
pub const FORWARDED_APIS: [ApiKey; 12] = [
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::CreatePartitions,
    ApiKey::ElectLeaders,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::AlterClientQuotas,
    ApiKey::AlterUserScramCredentials,
];

/// Decodes one response frame body (without its size prefix) to a request this node
/// forwarded to the active controller's client listener at `api_key` and `version` (one of
/// [`FORWARDED_APIS`], at a version the client listener serves). The same checks as
/// [`decode_response`] run before the codec allocates.
///
/// # Errors
///
/// [`DecodeError::UnknownApiKey`] or [`DecodeError::UnsupportedVersion`] when the request
/// was not a forwarded one; [`DecodeError::Malformed`] when the frame does not parse. The
/// caller closes the connection to the controller.
pub fn decode_forwarded_response(
    api_key: ApiKey,
    version: i16,
    frame: Bytes,
) -> Result<Response, DecodeError> {
    // Forwarded at the controller listener's versions: an old client version is forwarded
    // as the codec's oldest (`legacy::codec_version`).
    let served = FORWARDED_APIS
        .contains(&api_key)
        .then(|| ListenerType::Controller.supported(api_key))
        .flatten();
    check_sent(served, api_key, version)?;
    decode_response_body(api_key, version, frame)
}

/// Decodes one response frame body (without its size prefix) to a request an admin client
/// sent to a broker's client listener at `api_key` and `version` (the `strata admin`
/// subcommands). The API must be one of [`SUPPORTED_APIS`](crate::versions::SUPPORTED_APIS)
/// at a version of its range, or DescribeQuorum, AddRaftVoter or RemoveRaftVoter, which an
/// admin tool asks of a controller listener (KIP-919's `--bootstrap-controller`, KIP-853). Where the response has a
/// schema in [`crate::shape`] its counts are walked before the codec allocates; the others
/// (Metadata, ListOffsets, the group reads) are decoded from a frame the caller has already
/// capped in size, from the broker the operator named.
///
/// # Errors
///
/// [`DecodeError::UnknownApiKey`] or [`DecodeError::UnsupportedVersion`] when the request
/// was not a client one; [`DecodeError::Malformed`] when the frame does not parse.
pub fn decode_client_response(
    api_key: ApiKey,
    version: i16,
    mut frame: Bytes,
) -> Result<Response, DecodeError> {
    let served = ListenerType::Broker.supported(api_key).or_else(|| {
        ListenerType::Controller.supported(api_key).filter(|_| {
            matches!(
                api_key,
                ApiKey::DescribeQuorum | ApiKey::AddRaftVoter | ApiKey::RemoveRaftVoter
            )
        })
    });
    check_sent(served, api_key, version)?;
    if crate::shape::response_schema_known(api_key) {
        return decode_response_body(api_key, version, frame);
    }
    let malformed = |correlation_id: i32, source: BoxError| DecodeError::Malformed {
        api_key,
        version,
        correlation_id,
        source,
    };
    let header = ResponseHeader::decode(&mut frame, api_key.response_header_version(version))
        .map_err(|e| malformed(-1, e.into()))?;
    let correlation_id = header.correlation_id;
    let body = ResponseKind::decode(api_key, &mut frame, version)
        .map_err(|e| malformed(correlation_id, e.into()))?;
    Ok(Response {
        correlation_id,
        body,
    })
}

/// Whether a response to `api_key` at `version` may be read: the API is in the table the
/// request was sent from (`served`), at a version of its range.
fn check_sent(
    served: Option<&crate::versions::SupportedApi>,
    api_key: ApiKey,
    version: i16,
) -> Result<(), DecodeError> {
    let Some(api) = served else {
        return Err(DecodeError::UnknownApiKey {
            api_key: api_key as i16,
            correlation_id: -1,
        });
    };
    if !(api.min..=api.max).contains(&version) {
        return Err(DecodeError::UnsupportedVersion {
            api_key,
            version,
            correlation_id: -1,
        });
    }
    Ok(())
}

fn decode_response_body(
    api_key: ApiKey,
    version: i16,
    mut frame: Bytes,
) -> Result<Response, DecodeError> {
    let malformed = |correlation_id: i32, source: BoxError| DecodeError::Malformed {
        api_key,
        version,
        correlation_id,
        source,
    };
    let header = ResponseHeader::decode(&mut frame, api_key.response_header_version(version))
        .map_err(|e| malformed(-1, e.into()))?;
    let correlation_id = header.correlation_id;
    crate::shape::check_response(api_key, version, &frame)
        .map_err(|e| malformed(correlation_id, e.into()))?;
    let body = ResponseKind::decode(api_key, &mut frame, version)
        .map_err(|e| malformed(correlation_id, e.into()))?;
    Ok(Response {
        correlation_id,
        body,
    })
}

/// Encodes a response frame, size prefix included.
///
/// # Errors
///
/// [`EncodeError`] when a field does not fit the version (a broker bug).
pub fn encode_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<Bytes, EncodeError> {
    let err = |source: BoxError| EncodeError {
        api_key,
        version,
        source,
    };
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(&mut buf, api_key.response_header_version(version))
        .map_err(|e| err(e.into()))?;
    if legacy::is_legacy(api_key, version) {
        legacy::encode_response(api_key, version, body, &mut buf).map_err(err)?;
    } else {
        body.encode(&mut buf, version).map_err(|e| err(e.into()))?;
    }
    finish_frame(buf, api_key, version)
}

fn finish_frame(mut buf: BytesMut, api_key: ApiKey, version: i16) -> Result<Bytes, EncodeError> {
    let len = i32::try_from(buf.len() - SIZE_PREFIX_LEN).map_err(|e| EncodeError {
        api_key,
        version,
        source: e.into(),
    })?;
    buf[..SIZE_PREFIX_LEN].copy_from_slice(&len.to_be_bytes());
    Ok(buf.freeze())
}

/// The ApiVersions body listing [`SUPPORTED_APIS`](crate::versions::SUPPORTED_APIS), with the given error code.
#[must_use]
pub fn api_versions_body(error_code: i16) -> ApiVersionsResponse {
    api_versions_body_for(ListenerType::Broker, error_code)
}

/// The ApiVersions body listing the APIs of a `listener` of the given type, with the given
/// error code.
#[must_use]
pub fn api_versions_body_for(listener: ListenerType, error_code: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(
            listener
                .apis()
                .iter()
                .map(|a| {
                    ApiVersion::default()
                        .with_api_key(a.key as i16)
                        .with_min_version(a.advertised_min)
                        .with_max_version(a.max)
                })
                .collect(),
        )
}

/// The KIP-511 fallback: UNSUPPORTED_VERSION with our ranges, in a v0 body and a v0 header.
#[must_use]
pub fn encode_api_versions_fallback(correlation_id: i32) -> Bytes {
    encode_api_versions_fallback_for(ListenerType::Broker, correlation_id)
}

/// [`encode_api_versions_fallback`] with the ranges of a `listener` of the given type.
#[must_use]
pub fn encode_api_versions_fallback_for(listener: ListenerType, correlation_id: i32) -> Bytes {
    let body = ResponseKind::ApiVersions(api_versions_body_for(listener, UNSUPPORTED_VERSION));
    // A v0 ApiVersions body holds only an error code and an array of three int16s; it cannot
    // fail to encode.
    encode_response(ApiKey::ApiVersions, 0, correlation_id, &body)
        .unwrap_or_else(|_| Bytes::from_static(&[]))
}

pub mod legacy;

#[cfg(test)]
mod controller_tests;
#[cfg(test)]
mod forward_tests;
#[cfg(test)]
mod tests;
