//! The embedded consumer protocol: the bytes a consumer puts in JoinGroup's protocol metadata
//! when `protocol_type` is "consumer" (Kafka's `ConsumerProtocol`).
//!
//! The group coordinator treats protocol metadata as opaque, with one exception Kafka also
//! makes: it reads the subscribed topics (`ClassicGroup.computeSubscribedTopics`), so that
//! offset expiry and OffsetDelete can tell which topics a group still consumes. Like Kafka, it
//! parses the version-0 prefix whatever the version, since every later version extends it.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::ConsumerProtocolSubscription;
use kafka_protocol::protocol::Decodable;

/// The topics of a serialized `ConsumerProtocolSubscription` (a 2-byte version, then the
/// version-0 fields: an array of topic names and nullable user data).
///
/// Returns `None` when the bytes are not a subscription. The topic count is checked against
/// the bytes present before the codec sees it, because the codec preallocates from it.
#[must_use]
pub fn subscription_topics(metadata: &Bytes) -> Option<Vec<String>> {
    let mut buf = metadata.clone();
    if buf.remaining() < 2 + 4 {
        return None;
    }
    let _version = buf.get_i16();
    // Walk the topic array (int32 count, then int16-length strings) before decoding.
    let mut probe = &buf[..];
    let count = probe.get_i32();
    if count < 0 || usize::try_from(count).ok()? > probe.remaining() / 2 {
        return None;
    }
    for _ in 0..count {
        if probe.remaining() < 2 {
            return None;
        }
        let len = usize::try_from(probe.get_i16()).ok()?;
        if probe.remaining() < len {
            return None;
        }
        probe.advance(len);
    }
    let sub = ConsumerProtocolSubscription::decode(&mut buf, 0).ok()?;
    Some(sub.topics.iter().map(|t| t.to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn encoded(version: i16, topics: &[&str]) -> Bytes {
        let sub = ConsumerProtocolSubscription::default().with_topics(
            topics
                .iter()
                .map(|t| StrBytes::from_string((*t).to_owned()))
                .collect(),
        );
        let mut b = BytesMut::new();
        b.put_i16(version);
        sub.encode(&mut b, version).unwrap();
        b.freeze()
    }

    #[test]
    fn reads_topics_of_every_version() {
        for v in 0..=3 {
            assert_eq!(
                subscription_topics(&encoded(v, &["a", "b"])),
                Some(vec!["a".to_owned(), "b".to_owned()])
            );
        }
    }

    #[test]
    fn refuses_lying_counts_and_garbage() {
        let mut b = BytesMut::new();
        b.put_i16(0);
        b.put_i32(i32::MAX);
        assert_eq!(subscription_topics(&b.freeze()), None);
        assert_eq!(subscription_topics(&Bytes::from_static(b"\x00")), None);
        let mut b = BytesMut::new();
        b.put_i16(0);
        b.put_i32(1);
        b.put_i16(50);
        b.put_slice(b"short");
        assert_eq!(subscription_topics(&b.freeze()), None);
    }
}
