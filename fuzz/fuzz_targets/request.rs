//! Fuzz target: arbitrary bytes as a stream of request frames. Framing and decoding must
//! never panic, never abort on allocation, and either decode or refuse each frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_protocol::{codec, frame};

fuzz_target!(|data: &[u8]| {
    let mut buf = data;
    // The same cap the broker uses by default would hide nothing here; a small one also
    // exercises the oversize path.
    while let Ok(Some(len)) = frame::check(buf, 1 << 20) {
        let body = bytes::Bytes::copy_from_slice(&buf[frame::SIZE_PREFIX_LEN..frame::SIZE_PREFIX_LEN + len]);
        let _ = codec::decode_request(body);
        buf = &buf[frame::SIZE_PREFIX_LEN + len..];
    }
    // A body without a frame around it.
    let _ = codec::decode_request(bytes::Bytes::copy_from_slice(data));
});
