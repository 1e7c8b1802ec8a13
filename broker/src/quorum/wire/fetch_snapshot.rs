//! FetchSnapshot (KIP-630) on the wire: the request for one page, the page cut from the
//! core's whole-snapshot answer, and the pages read back on the fetching side.

use bytes::Bytes;
use strata_kraft::raft::{Message, NodeId, ReplicaKey, Snapshot, SnapshotId};
use strata_protocol::messages::{
    BrokerId, FetchSnapshotRequest, RequestKind, ResponseKind, fetch_snapshot_request,
};
use strata_protocol::{ResponseError, StrBytes};

use super::{NONE, SNAPSHOT_PAGE_BYTES, fetch_error, leader_from, metadata_topic};
use crate::quorum::wire::refusal::{QuorumRefusal, quorum_refusal_code};

/// A FetchSnapshot request for the page of `snapshot_id` at `position`.
pub fn fetch_snapshot_request(
    epoch: i32,
    replica: ReplicaKey,
    snapshot_id: SnapshotId,
    position: i64,
    cluster_id: &str,
) -> RequestKind {
    let mut p = fetch_snapshot_request::PartitionSnapshot::default();
    p.partition = 0;
    p.current_leader_epoch = epoch;
    p.snapshot_id.end_offset = snapshot_id.end_offset;
    p.snapshot_id.epoch = snapshot_id.epoch;
    p.position = position;
    p.replica_directory_id = replica.directory_id;
    let mut t = fetch_snapshot_request::TopicSnapshot::default();
    t.name = metadata_topic();
    t.partitions = vec![p];
    let mut r = FetchSnapshotRequest::default();
    r.cluster_id = Some(StrBytes::from_string(cluster_id.to_owned()));
    r.replica_id = BrokerId(replica.id.0);
    r.max_bytes = SNAPSHOT_PAGE_BYTES;
    r.topics = vec![t];
    RequestKind::FetchSnapshot(r)
}

/// The page a FetchSnapshot request asks for: `(position, max_bytes)`.
pub fn snapshot_page(body: &RequestKind) -> Option<(i64, i32)> {
    match body {
        RequestKind::FetchSnapshot(r) => {
            let p = r.topics.first()?.partitions.first()?;
            Some((p.position, r.max_bytes))
        }
        _ => None,
    }
}

/// Cuts a whole-snapshot FetchSnapshot answer ([`response_to_wire`]) down to the page at
/// `position` of at most `max_bytes` (at least one byte, so a fetch always progresses);
/// `POSITION_OUT_OF_RANGE` past the end.
pub fn page_snapshot_response(body: &mut ResponseKind, position: i64, max_bytes: i32) {
    let ResponseKind::FetchSnapshot(r) = body else {
        return;
    };
    let Some(p) = r.topics.first_mut().and_then(|t| t.partitions.first_mut()) else {
        return;
    };
    if p.error_code != NONE {
        return;
    }
    let whole = std::mem::take(&mut p.unaligned_records);
    let start = usize::try_from(position).ok().filter(|&s| s <= whole.len());
    match start {
        Some(start) => {
            let len = usize::try_from(max_bytes).unwrap_or(0).max(1);
            let end = start.saturating_add(len).min(whole.len());
            p.position = position;
            p.unaligned_records = whole.slice(start..end);
        }
        None => {
            p.error_code = quorum_refusal_code(QuorumRefusal::PositionOutOfRange);
            p.position = -1;
        }
    }
}

/// One page of a FetchSnapshot answer, as the fetching side needs it.
#[derive(Debug, PartialEq)]
pub enum SnapshotPage {
    /// Bytes of the snapshot.
    Data {
        /// The responder's epoch.
        epoch: i32,
        /// The leader it knows.
        leader: Option<NodeId>,
        /// The snapshot's total size.
        size: i64,
        /// Where `bytes` start.
        position: i64,
        /// The page.
        bytes: Bytes,
    },
    /// Not served: the answer for the core (its snapshot is `None`).
    Refused(Message),
}

/// A FetchSnapshot answer as a [`SnapshotPage`]; `None` when it carries an error the core
/// has no word for, or is not about the metadata partition (the core retries on its timer).
pub fn snapshot_page_from_wire(body: ResponseKind) -> Option<SnapshotPage> {
    let ResponseKind::FetchSnapshot(r) = body else {
        return None;
    };
    if r.error_code != NONE {
        return None;
    }
    let p = r.topics.into_iter().next()?.partitions.into_iter().next()?;
    let epoch = p.current_leader.leader_epoch;
    let leader = leader_from(p.current_leader.leader_id);
    if matches!(
        ResponseError::try_from_code(p.error_code),
        Some(ResponseError::SnapshotNotFound | ResponseError::PositionOutOfRange)
    ) {
        // The leader moved to a newer snapshot: fetching again names it.
        return Some(SnapshotPage::Refused(Message::FetchSnapshotResponse {
            epoch,
            leader,
            error: None,
            snapshot: None,
        }));
    }
    let error = fetch_error(p.error_code).ok()?;
    if error.is_some() {
        return Some(SnapshotPage::Refused(Message::FetchSnapshotResponse {
            epoch,
            leader,
            error,
            snapshot: None,
        }));
    }
    Some(SnapshotPage::Data {
        epoch,
        leader,
        size: p.size,
        position: p.position,
        bytes: p.unaligned_records,
    })
}

/// A whole fetched snapshot as the core's answer; `None` (the core fetches again) when
/// its bytes are not a sound snapshot file: every batch and record is checked here, before
/// the core installs it and its log is emptied.
pub fn snapshot_response(
    epoch: i32,
    leader: Option<NodeId>,
    snapshot_id: SnapshotId,
    data: Bytes,
) -> Option<Message> {
    let checkpoint = match crate::quorum::snapshot::Checkpoint::decode(&data) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "a fetched metadata snapshot does not decode");
            return None;
        }
    };
    Some(Message::FetchSnapshotResponse {
        epoch,
        leader,
        error: None,
        snapshot: Some(Snapshot {
            id: snapshot_id,
            data,
            voters: checkpoint.voters,
        }),
    })
}

#[cfg(test)]
mod tests {
    use strata_kraft::Uuid;
    use strata_protocol::codec;
    use strata_protocol::messages::ApiKey;

    use strata_kraft::raft::FetchError;

    use super::super::tests::through_the_codec;
    use super::super::{FETCH_SNAPSHOT_VERSION, request_from_wire, response_to_wire};
    use super::*;

    fn key(id: i32) -> ReplicaKey {
        ReplicaKey {
            id: NodeId(id),
            directory_id: Uuid::nil(),
        }
    }

    /// KIP-630: the leader pages its whole-snapshot answer by position; the pages, through
    /// the codec, put the snapshot back together on the fetching side.
    #[test]
    fn a_snapshot_travels_in_pages() {
        use crate::quorum::snapshot::{Assembly, Checkpoint, Progress};
        use strata_kraft::MetadataRecord;
        use strata_kraft::record::TopicRecord;

        let voters = Some(strata_kraft::raft::VoterSet::of(vec![
            key(1),
            key(2),
            key(3),
        ]));
        let checkpoint = Checkpoint {
            voters: voters.clone(),
            records: (0..2000)
                .map(|i| {
                    MetadataRecord::Topic(TopicRecord {
                        name: format!("t{i}"),
                        topic_id: Uuid::from_u128(i + 1),
                    })
                })
                .collect(),
        };
        let id = SnapshotId {
            end_offset: 77,
            epoch: 4,
        };
        let snapshot = Snapshot {
            id,
            data: checkpoint.encode(4, 5),
            voters,
        };
        let whole = Message::FetchSnapshotResponse {
            epoch: 4,
            leader: Some(NodeId(1)),
            error: None,
            snapshot: Some(snapshot.clone()),
        };
        let page_bytes = 1000;
        let mut assembly = Assembly::default();
        let mut pages = 0;
        let done = loop {
            pages += 1;
            assert!(pages < 1000, "no progress");
            let request = fetch_snapshot_request(4, key(2), id, assembly.position(), "abc");
            let request =
                through_the_codec(ApiKey::FetchSnapshot, FETCH_SNAPSHOT_VERSION, &request);
            let (from, msg) = request_from_wire(&request, "abc").unwrap();
            assert_eq!(from, NodeId(2));
            assert!(
                matches!(msg, Message::FetchSnapshotRequest { snapshot_id, .. } if snapshot_id == id)
            );
            let (position, _) = snapshot_page(&request).unwrap();
            let mut body = response_to_wire(&whole, 0).unwrap();
            page_snapshot_response(&mut body, position, page_bytes);
            let frame =
                codec::encode_response(ApiKey::FetchSnapshot, FETCH_SNAPSHOT_VERSION, 3, &body)
                    .unwrap();
            let resp = codec::decode_response(
                ApiKey::FetchSnapshot,
                FETCH_SNAPSHOT_VERSION,
                frame.slice(4..),
            )
            .unwrap();
            let Some(SnapshotPage::Data {
                epoch,
                leader,
                size,
                position,
                bytes,
            }) = snapshot_page_from_wire(resp.body)
            else {
                panic!("not a page");
            };
            assert!(bytes.len() <= page_bytes as usize);
            match assembly.accept(size, position, &bytes) {
                Progress::Next(_) => {}
                Progress::Done(data) => break snapshot_response(epoch, leader, id, data),
                Progress::Refused => panic!("page refused"),
            }
        };
        assert!(pages > 10, "{pages} pages");
        assert_eq!(done, Some(whole));

        // Past the end: POSITION_OUT_OF_RANGE, which sends the core back to Fetch.
        let mut body = response_to_wire(
            &Message::FetchSnapshotResponse {
                epoch: 4,
                leader: Some(NodeId(1)),
                error: None,
                snapshot: Some(snapshot.clone()),
            },
            0,
        )
        .unwrap();
        page_snapshot_response(&mut body, snapshot.data.len() as i64 + 1, page_bytes);
        let refused = Message::FetchSnapshotResponse {
            epoch: 4,
            leader: Some(NodeId(1)),
            error: None,
            snapshot: None,
        };
        assert_eq!(
            snapshot_page_from_wire(body),
            Some(SnapshotPage::Refused(refused.clone()))
        );
        // No such snapshot (SNAPSHOT_NOT_FOUND) and a fenced epoch are refusals too.
        let body = response_to_wire(&refused, 0).unwrap();
        assert_eq!(
            snapshot_page_from_wire(body),
            Some(SnapshotPage::Refused(refused))
        );
        let fenced = Message::FetchSnapshotResponse {
            epoch: 6,
            leader: None,
            error: Some(FetchError::FencedLeaderEpoch),
            snapshot: None,
        };
        let body = response_to_wire(&fenced, 0).unwrap();
        assert_eq!(
            snapshot_page_from_wire(body),
            Some(SnapshotPage::Refused(fenced))
        );
        // Bytes that are not a snapshot never reach the core.
        assert_eq!(
            snapshot_response(4, None, id, Bytes::from_static(b"garbage")),
            None
        );
    }
}
