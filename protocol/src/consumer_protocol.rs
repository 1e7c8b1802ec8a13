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

/// The partitions of a serialized `ConsumerProtocolAssignment` (a 2-byte version, then the
/// version-0 fields: an array of topics, each a name and an array of int32 partitions,
/// then nullable user data), as a group's SyncGroup assignment or DescribeGroups'
/// `member_assignment` carries them. Every later version extends the version-0 prefix, so
/// it is read whatever the version, as Kafka's `ConsumerProtocol` does.
///
/// Returns `None` when the bytes are not an assignment. It is walked by hand, every count
/// checked against the bytes left, so a lying count allocates nothing. An empty assignment
/// (no bytes, as a member between rebalances has) is no partitions.
#[must_use]
pub fn assignment_partitions(assignment: &[u8]) -> Option<Vec<(String, Vec<i32>)>> {
    if assignment.is_empty() {
        return Some(Vec::new());
    }
    let mut buf = assignment;
    if buf.remaining() < 2 + 4 {
        return None;
    }
    let _version = buf.get_i16();
    let topics = usize::try_from(buf.get_i32()).ok()?;
    // Each topic takes at least a 2-byte name length and a 4-byte partition count.
    if topics > buf.remaining() / 6 {
        return None;
    }
    let mut out = Vec::with_capacity(topics);
    for _ in 0..topics {
        if buf.remaining() < 2 {
            return None;
        }
        let len = usize::try_from(buf.get_i16()).ok()?;
        if buf.remaining() < len + 4 {
            return None;
        }
        let name = String::from_utf8(buf[..len].to_vec()).ok()?;
        buf.advance(len);
        let count = usize::try_from(buf.get_i32()).ok()?;
        if count > buf.remaining() / 4 {
            return None;
        }
        let partitions = (0..count).map(|_| buf.get_i32()).collect();
        out.push((name, partitions));
    }
    Some(out)
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
    fn reads_assignments_and_refuses_lying_counts() {
        use kafka_protocol::messages::ConsumerProtocolAssignment;
        use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
        for v in 0..=3 {
            let a = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
                TopicPartition::default()
                    .with_topic(kafka_protocol::messages::TopicName(
                        StrBytes::from_static_str("t"),
                    ))
                    .with_partitions(vec![0, 2]),
            ]);
            let mut b = BytesMut::new();
            b.put_i16(v);
            a.encode(&mut b, v).unwrap();
            assert_eq!(
                assignment_partitions(&b),
                Some(vec![("t".to_owned(), vec![0, 2])])
            );
        }
        assert_eq!(assignment_partitions(&[]), Some(Vec::new()));
        let mut b = BytesMut::new();
        b.put_i16(0);
        b.put_i32(1);
        b.put_i16(1);
        b.put_slice(b"t");
        b.put_i32(i32::MAX);
        assert_eq!(assignment_partitions(&b), None);
        assert_eq!(assignment_partitions(b"\x00\x00\xff\xff\xff\xff"), None);
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
