//! Fuzz target: arbitrary bodies at the request versions Kafka 4.0 removed and Strata still
//! serves by translation (`codec::legacy`). The first byte picks the API and version, the
//! second is spare; the rest is the body after a well-formed header. Decoding must never panic or
//! over-allocate, and for every body that decodes, the response the broker would send (the
//! decoded request's API at the same old version, in its default shape) must encode.
#![no_main]

use bytes::{BufMut, Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use strata_protocol::codec::{self, Decoded};
use strata_protocol::messages::{self as m, ApiKey, ResponseKind};

const OLD: [(ApiKey, i16); 9] = [
    (ApiKey::ListOffsets, 0),
    (ApiKey::OffsetCommit, 0),
    (ApiKey::OffsetCommit, 1),
    (ApiKey::OffsetFetch, 0),
    (ApiKey::CreateTopics, 0),
    (ApiKey::CreateTopics, 1),
    (ApiKey::DeleteTopics, 0),
    (ApiKey::DescribeConfigs, 0),
    (ApiKey::JoinGroup, 0),
];

fn response(key: ApiKey) -> ResponseKind {
    match key {
        ApiKey::ListOffsets => ResponseKind::ListOffsets(m::ListOffsetsResponse::default()),
        ApiKey::OffsetCommit => ResponseKind::OffsetCommit(m::OffsetCommitResponse::default()),
        ApiKey::OffsetFetch => ResponseKind::OffsetFetch(m::OffsetFetchResponse::default()),
        ApiKey::CreateTopics => ResponseKind::CreateTopics(m::CreateTopicsResponse::default()),
        ApiKey::DeleteTopics => ResponseKind::DeleteTopics(m::DeleteTopicsResponse::default()),
        ApiKey::DescribeConfigs => {
            ResponseKind::DescribeConfigs(m::DescribeConfigsResponse::default())
        }
        _ => ResponseKind::JoinGroup(m::JoinGroupResponse::default()),
    }
}

fuzz_target!(|data: &[u8]| {
    let [pick, _, body @ ..] = data else { return };
    let (key, version) = OLD[usize::from(*pick) % OLD.len()];
    let mut frame = BytesMut::new();
    frame.put_i16(key as i16);
    frame.put_i16(version);
    frame.put_i32(1);
    frame.put_i16(-1); // client id: null
    frame.put_slice(body);
    if let Ok(Decoded::Request(_)) = codec::decode_request(frame.freeze()) {
        codec::encode_response(key, version, 1, &response(key))
            .expect("a default response encodes at every served version");
    }
    let _ = codec::decode_request(Bytes::copy_from_slice(data));
});
