//! Fuzz target: arbitrary bytes as a stream of request frames. Framing and decoding must
//! never panic, never abort on allocation, and either decode or refuse each frame, on a
//! client listener and on the controller listener (whose table holds the KRaft RPCs). The
//! same bytes, after an API key and version, are also read as a peer's response.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_protocol::messages::ApiKey;
use strata_protocol::versions::ListenerType;
use strata_protocol::{codec, frame};

fuzz_target!(|data: &[u8]| {
    let mut buf = data;
    // The same cap the broker uses by default would hide nothing here; a small one also
    // exercises the oversize path.
    while let Ok(Some(len)) = frame::check(buf, 1 << 20) {
        let body = bytes::Bytes::copy_from_slice(&buf[frame::SIZE_PREFIX_LEN..frame::SIZE_PREFIX_LEN + len]);
        let _ = codec::decode_request(body.clone());
        let _ = codec::decode_request_on(ListenerType::Controller, body);
        buf = &buf[frame::SIZE_PREFIX_LEN + len..];
    }
    // A body without a frame around it.
    let _ = codec::decode_request(bytes::Bytes::copy_from_slice(data));
    let _ = codec::decode_request_on(ListenerType::Controller, bytes::Bytes::copy_from_slice(data));
    // A peer's response to a controller RPC: key and version first, then the frame body.
    if let [k0, k1, v0, v1, rest @ ..] = data {
        if let Ok(key) = ApiKey::try_from(i16::from_be_bytes([*k0, *k1])) {
            let version = i16::from_be_bytes([*v0, *v1]);
            let _ = codec::decode_response(key, version, bytes::Bytes::copy_from_slice(rest));
        }
    }
});
