//! One metadata operation as one entry of the Raft log.
//!
//! The controller turns each operation (create a topic, register a broker, fence one...)
//! into a list of records that must take effect together: a topic without its partitions,
//! or a fence without the leader elections it forces, is a state no broker may see. Kafka
//! gets this by appending the list as one record batch, which Raft replicates and commits
//! whole. Here an entry of the Raft log is the unit the core replicates and commits, so an
//! operation's records travel as one entry: its data is the records' values, each with a
//! 4-byte big-endian length, after a 4-byte count. The entry's offset is the operation's
//! offset (a registration's broker epoch, KIP-631, and the metadata offset brokers report).
//!
//! Decoding trusts no length: the count is capped by what the bytes can hold, and each
//! length by what is left.

use bytes::{BufMut, Bytes, BytesMut};

use crate::{MetadataError, MetadataRecord};

/// Encodes one operation's records as the data of one Raft entry.
#[must_use]
pub fn encode_entry(records: &[MetadataRecord]) -> Bytes {
    let values: Vec<Vec<u8>> = records.iter().map(MetadataRecord::encode).collect();
    let len = 4 + values.iter().map(|v| 4 + v.len()).sum::<usize>();
    let mut buf = BytesMut::with_capacity(len);
    buf.put_u32(u32::try_from(values.len()).unwrap_or(u32::MAX));
    for v in &values {
        buf.put_u32(u32::try_from(v.len()).unwrap_or(u32::MAX));
        buf.put_slice(v);
    }
    buf.freeze()
}

/// Decodes the data of one Raft entry into its records.
///
/// # Errors
///
/// [`MetadataError::CorruptEntry`] when a length runs past the data or bytes are left
/// over, [`MetadataError::CorruptRecord`] when a record does not decode. Never panics.
pub fn decode_entry(data: &[u8]) -> Result<Vec<MetadataRecord>, MetadataError> {
    let mut rest = data;
    let count = take_u32(&mut rest).ok_or(MetadataError::CorruptEntry("truncated count"))?;
    // Each record takes at least its 4-byte length.
    if usize::try_from(count).map_or(true, |c| c > rest.len() / 4) {
        return Err(MetadataError::CorruptEntry("count larger than the entry"));
    }
    let mut records = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let len = take_u32(&mut rest).ok_or(MetadataError::CorruptEntry("truncated length"))?;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len > rest.len() {
            return Err(MetadataError::CorruptEntry("record longer than the entry"));
        }
        let (value, tail) = rest.split_at(len);
        records.push(MetadataRecord::decode(value)?);
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(MetadataError::CorruptEntry("bytes after the last record"));
    }
    Ok(records)
}

fn take_u32(rest: &mut &[u8]) -> Option<u32> {
    let (head, tail) = rest.split_first_chunk::<4>()?;
    *rest = tail;
    Some(u32::from_be_bytes(*head))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{FenceBrokerRecord, RemoveTopicRecord};

    fn sample() -> Vec<MetadataRecord> {
        vec![
            MetadataRecord::FenceBroker(FenceBrokerRecord {
                broker_id: 2,
                broker_epoch: 17,
            }),
            MetadataRecord::RemoveTopic(RemoveTopicRecord {
                topic_id: uuid::Uuid::from_u128(7),
            }),
        ]
    }

    #[test]
    fn an_entry_round_trips() {
        let records = sample();
        assert_eq!(decode_entry(&encode_entry(&records)).unwrap(), records);
        assert_eq!(decode_entry(&encode_entry(&[])).unwrap(), vec![]);
    }

    #[test]
    fn every_truncation_and_extension_is_refused() {
        let data = encode_entry(&sample());
        for cut in 0..data.len() {
            assert!(decode_entry(&data[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = data.to_vec();
        longer.push(0);
        assert!(decode_entry(&longer).is_err());
        // A count no entry could hold is refused before anything is allocated.
        assert!(decode_entry(&[0xff, 0xff, 0xff, 0xff]).is_err());
    }
}
