//! The live state of one `__consumer_offsets` partition, rebuilt from its log: the latest
//! committed offset per (group, topic, partition) and the latest group metadata per group.
//!
//! Sans-IO: records go in through [`PartitionState::apply`] (on replay and after each append),
//! and the decisions that keep the log bounded (compaction, expiry) are answered from here
//! with the time passed in. The driver in `super` does the disk work.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use super::records::{CommittedOffset, CoordinatorRecord, OffsetKey};

/// Record framing that [`CoordinatorRecord::encoded_len`] does not count: attributes, the
/// varint length, timestamp and offset deltas, key and value lengths, header count.
const RECORD_OVERHEAD: u64 = 12;

/// Offsets of one group, by (topic, partition).
pub type GroupOffsets = BTreeMap<(String, i32), CommittedOffset>;

/// The live records of one `__consumer_offsets` partition.
#[derive(Debug, Default)]
pub struct PartitionState {
    /// Committed offsets by group: the unit every request works on.
    offsets: HashMap<String, GroupOffsets>,
    /// Encoded GroupMetadataValue by group, owned by the group coordinator.
    group_metadata: BTreeMap<String, Bytes>,
    /// KIP-848 consumer-group records by encoded key: (group id, encoded value), owned by the
    /// consumer-group coordinator.
    consumer_groups: BTreeMap<Bytes, (String, Bytes)>,
    /// What the live records would take if rewritten: the compaction baseline.
    live_bytes: u64,
    /// Offset commits applied so far: the log order of a commit, for the rule that a
    /// transaction's offset counts on COMMIT only if no commit of the same key came later
    /// in the log (Kafka's `recordOffset` comparison).
    commits: u64,
    /// The order of the commit each committed offset came from.
    committed_at: HashMap<OffsetKey, u64>,
    /// Transactional offsets (TxnOffsetCommit) waiting for their producer's marker, by
    /// producer id, each with its commit's order (Kafka's `pendingTransactionalOffsets`).
    pending_txn: HashMap<i64, Vec<(OffsetKey, CommittedOffset, u64)>>,
}

impl PartitionState {
    /// Applies one record of a transactional batch of `producer_id`: an offset commit waits
    /// for the producer's marker ([`PartitionState::complete_transaction`]); anything else
    /// applies at once.
    pub fn apply_transactional(&mut self, producer_id: i64, record: CoordinatorRecord) {
        match record {
            CoordinatorRecord::OffsetCommit {
                key,
                value: Some(v),
            } => {
                self.commits += 1;
                let order = self.commits;
                self.pending_txn
                    .entry(producer_id)
                    .or_default()
                    .push((key, v, order));
            }
            other => self.apply(other),
        }
    }

    /// The marker of `producer_id`'s transaction: on COMMIT its offsets count, each unless a
    /// commit of the same key came after it in the log; on ABORT they go
    /// (`OffsetMetadataManager.replayEndTransactionMarker`).
    pub fn complete_transaction(&mut self, producer_id: i64, commit: bool) {
        let Some(pending) = self.pending_txn.remove(&producer_id) else {
            return;
        };
        if !commit {
            return;
        }
        for (key, value, order) in pending {
            if self.committed_at.get(&key).is_some_and(|&at| at > order) {
                continue;
            }
            self.committed_at.insert(key.clone(), order);
            self.put_offset(key, Some(value));
        }
    }

    /// Whether a transaction holds an offset of `group`'s `topic`-`partition` not yet
    /// committed or aborted (OffsetFetch's UNSTABLE_OFFSET_COMMIT).
    #[must_use]
    pub fn has_pending_offset(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.pending_txn
            .values()
            .flatten()
            .any(|(k, _, _)| k.group == group && k.topic == topic && k.partition == partition)
    }

    /// Whether any transaction holds offsets here.
    #[cfg(test)]
    #[must_use]
    pub fn has_pending_transactions(&self) -> bool {
        !self.pending_txn.is_empty()
    }

    /// Applies one record: the latest value per key wins, a tombstone removes the key (and
    /// the offsets transactions hold for it, as Kafka's replay does).
    pub fn apply(&mut self, record: CoordinatorRecord) {
        if let CoordinatorRecord::OffsetCommit { key, value } = record {
            self.commits += 1;
            if value.is_some() {
                self.committed_at.insert(key.clone(), self.commits);
            } else {
                self.committed_at.remove(&key);
                for pending in self.pending_txn.values_mut() {
                    pending.retain(|(k, _, _)| *k != key);
                }
            }
            self.put_offset(key, value);
            return;
        }
        self.store_record(record);
    }

    /// Sets (or, with `None`, removes) one committed offset, keeping the live size.
    fn put_offset(&mut self, key: OffsetKey, value: Option<CommittedOffset>) {
        self.store_record(CoordinatorRecord::OffsetCommit { key, value });
    }

    /// The state change of one record, with its live size.
    fn store_record(&mut self, record: CoordinatorRecord) {
        let size = record.encoded_len() + RECORD_OVERHEAD;
        match record {
            CoordinatorRecord::OffsetCommit { key, value } => {
                let OffsetKey {
                    group,
                    topic,
                    partition,
                } = key;
                let old = match value {
                    Some(v) => {
                        let group_offsets = self.offsets.entry(group.clone()).or_default();
                        let old = group_offsets.insert((topic.clone(), partition), v);
                        self.live_bytes += size;
                        old
                    }
                    None => {
                        let Some(group_offsets) = self.offsets.get_mut(&group) else {
                            return;
                        };
                        let old = group_offsets.remove(&(topic.clone(), partition));
                        if group_offsets.is_empty() {
                            self.offsets.remove(&group);
                        }
                        old
                    }
                };
                if let Some(old) = old {
                    let old = CoordinatorRecord::OffsetCommit {
                        key: OffsetKey {
                            group,
                            topic,
                            partition,
                        },
                        value: Some(old),
                    };
                    self.live_bytes -= old.encoded_len() + RECORD_OVERHEAD;
                }
            }
            CoordinatorRecord::GroupMetadata { group, value } => {
                let old = match value {
                    Some(v) => {
                        self.live_bytes += size;
                        self.group_metadata.insert(group.clone(), v)
                    }
                    None => self.group_metadata.remove(&group),
                };
                if let Some(old) = old {
                    let old = CoordinatorRecord::GroupMetadata {
                        group,
                        value: Some(old),
                    };
                    self.live_bytes -= old.encoded_len() + RECORD_OVERHEAD;
                }
            }
            CoordinatorRecord::ConsumerGroup { key, group, value } => {
                let old = match value {
                    Some(v) => {
                        self.live_bytes += size;
                        self.consumer_groups.insert(key.clone(), (group, v))
                    }
                    None => self.consumer_groups.remove(&key),
                };
                if let Some((_, old)) = old {
                    self.live_bytes -= (key.len() + old.len()) as u64 + RECORD_OVERHEAD;
                }
            }
        }
    }

    /// Every KIP-848 consumer-group record: (encoded key, encoded value).
    pub fn consumer_group_records(&self) -> impl Iterator<Item = (&Bytes, &Bytes)> {
        self.consumer_groups.iter().map(|(k, (_, v))| (k, v))
    }

    /// The keys of `group`'s KIP-848 consumer-group records.
    #[must_use]
    pub fn consumer_group_keys(&self, group: &str) -> Vec<Bytes> {
        self.consumer_groups
            .iter()
            .filter(|(_, (g, _))| g == group)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The (group, partition)s with a committed offset for `topic`.
    #[must_use]
    pub fn offsets_of_topic(&self, topic: &str) -> Vec<OffsetKey> {
        let mut out = Vec::new();
        for (group, offsets) in &self.offsets {
            for (t, partition) in offsets.keys() {
                if t == topic {
                    out.push(OffsetKey {
                        group: group.clone(),
                        topic: t.clone(),
                        partition: *partition,
                    });
                }
            }
        }
        out.sort();
        out
    }

    /// The committed offset of one partition for `group`.
    #[must_use]
    pub fn offset(&self, group: &str, topic: &str, partition: i32) -> Option<&CommittedOffset> {
        self.offsets.get(group)?.get(&(topic.to_owned(), partition))
    }

    /// Every committed offset of `group`.
    #[must_use]
    pub fn group_offsets(&self, group: &str) -> Option<&GroupOffsets> {
        self.offsets.get(group)
    }

    /// Every group with group metadata, and its encoded value.
    pub fn group_metadata(&self) -> impl Iterator<Item = (&String, &Bytes)> {
        self.group_metadata.iter()
    }

    /// Every group with committed offsets or classic group metadata in this partition.
    pub fn group_ids(&self) -> impl Iterator<Item = &String> {
        self.offsets.keys().chain(
            self.group_metadata
                .keys()
                .filter(|g| !self.offsets.contains_key(*g)),
        )
    }

    /// Whether `group` has group metadata stored.
    #[must_use]
    pub fn has_group_metadata(&self, group: &str) -> bool {
        self.group_metadata.contains_key(group)
    }

    /// The live records: group metadata first, then offsets (what a fully cleaned log holds).
    #[cfg(test)]
    #[must_use]
    pub fn live_records(&self) -> Vec<CoordinatorRecord> {
        let mut out: Vec<CoordinatorRecord> = self
            .group_metadata
            .iter()
            .map(|(group, v)| CoordinatorRecord::GroupMetadata {
                group: group.clone(),
                value: Some(v.clone()),
            })
            .chain(self.consumer_groups.iter().map(|(key, (group, v))| {
                CoordinatorRecord::ConsumerGroup {
                    key: key.clone(),
                    group: group.clone(),
                    value: Some(v.clone()),
                }
            }))
            .collect();
        let mut groups: Vec<&String> = self.offsets.keys().collect();
        groups.sort();
        for group in groups {
            for ((topic, partition), v) in &self.offsets[group] {
                out.push(CoordinatorRecord::OffsetCommit {
                    key: OffsetKey {
                        group: group.clone(),
                        topic: topic.clone(),
                        partition: *partition,
                    },
                    value: Some(v.clone()),
                });
            }
        }
        out
    }

    /// Bytes the live records take in a fully cleaned log (approximately: batch headers
    /// excluded); the load reports it beside the log's size.
    #[must_use]
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// The offsets that have expired at `now_ms`, as tombstones. Kafka's
    /// `OffsetMetadataManager.cleanupExpiredOffsets`: an offset is a candidate when
    /// `expirable(group, topic)` says its group no longer needs it (the group is empty or
    /// unknown, or no longer subscribes to the topic), and it has expired when its explicit
    /// expire timestamp has passed or, without one, `retention_ms` has passed since the commit
    /// (`OffsetExpirationConditionImpl`).
    pub fn expired(
        &self,
        now_ms: i64,
        retention_ms: i64,
        mut expirable: impl FnMut(&str, &str) -> bool,
    ) -> Vec<CoordinatorRecord> {
        let mut out = Vec::new();
        for (group, offsets) in &self.offsets {
            for ((topic, partition), v) in offsets {
                let expired = match v.expire_timestamp {
                    Some(at) => now_ms >= at,
                    None => now_ms.saturating_sub(v.commit_timestamp) >= retention_ms,
                };
                if expired && expirable(group, topic) {
                    out.push(CoordinatorRecord::OffsetCommit {
                        key: OffsetKey {
                            group: group.clone(),
                            topic: topic.clone(),
                            partition: *partition,
                        },
                        value: None,
                    });
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(group: &str, topic: &str, p: i32, offset: i64, ts: i64) -> CoordinatorRecord {
        CoordinatorRecord::OffsetCommit {
            key: OffsetKey {
                group: group.into(),
                topic: topic.into(),
                partition: p,
            },
            value: Some(CommittedOffset {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: ts,
                expire_timestamp: None,
            }),
        }
    }

    fn tombstone(group: &str, topic: &str, p: i32) -> CoordinatorRecord {
        CoordinatorRecord::OffsetCommit {
            key: OffsetKey {
                group: group.into(),
                topic: topic.into(),
                partition: p,
            },
            value: None,
        }
    }

    #[test]
    fn latest_value_wins_and_tombstones_delete() {
        let mut s = PartitionState::default();
        s.apply(commit("g", "t", 0, 5, 1));
        s.apply(commit("g", "t", 0, 9, 2));
        s.apply(commit("g", "t", 1, 3, 2));
        assert_eq!(s.offset("g", "t", 0).map(|v| v.offset), Some(9));
        s.apply(tombstone("g", "t", 0));
        assert_eq!(s.offset("g", "t", 0), None);
        s.apply(tombstone("g", "t", 0)); // a repeated tombstone is harmless
        s.apply(tombstone("g", "t", 1));
        assert!(s.group_offsets("g").is_none());
        assert_eq!(s.live_bytes(), 0);
        assert!(s.live_records().is_empty());
    }

    #[test]
    fn live_bytes_track_the_live_records() {
        let mut s = PartitionState::default();
        for i in 0..1000 {
            s.apply(commit("g", "t", i % 3, i64::from(i), 0));
        }
        let rewrite: u64 = s
            .live_records()
            .iter()
            .map(|r| r.encoded_len() + RECORD_OVERHEAD)
            .sum();
        assert_eq!(s.live_bytes(), rewrite);
        assert_eq!(s.live_records().len(), 3);
    }

    #[test]
    fn group_metadata_is_kept_and_deleted() {
        let mut s = PartitionState::default();
        s.apply(CoordinatorRecord::GroupMetadata {
            group: "g".into(),
            value: Some(Bytes::from_static(b"v1")),
        });
        s.apply(CoordinatorRecord::GroupMetadata {
            group: "g".into(),
            value: Some(Bytes::from_static(b"v2")),
        });
        assert_eq!(
            s.group_metadata().collect::<Vec<_>>(),
            vec![(&"g".to_owned(), &Bytes::from_static(b"v2"))]
        );
        s.apply(CoordinatorRecord::GroupMetadata {
            group: "g".into(),
            value: None,
        });
        assert!(!s.has_group_metadata("g"));
        assert_eq!(s.live_bytes(), 0);
    }

    #[test]
    fn expiry_needs_both_age_and_an_expirable_group() {
        let mut s = PartitionState::default();
        s.apply(commit("empty", "t", 0, 1, 1_000));
        s.apply(commit("empty", "t", 1, 1, 5_000));
        s.apply(commit("active", "t", 0, 1, 1_000));
        s.apply(commit("active", "gone", 0, 1, 1_000));
        let mut explicit = commit("empty", "u", 0, 1, 1_000);
        if let CoordinatorRecord::OffsetCommit { value: Some(v), .. } = &mut explicit {
            v.expire_timestamp = Some(2_000);
        }
        s.apply(explicit);
        // "active" subscribes to "t" only.
        let expirable = |g: &str, t: &str| g == "empty" || t != "t";
        let mut got: Vec<_> = s
            .expired(4_000, 3_000, expirable)
            .into_iter()
            .map(|r| match r {
                CoordinatorRecord::OffsetCommit { key, value: None } => {
                    (key.group, key.topic, key.partition)
                }
                other => panic!("not a tombstone: {other:?}"),
            })
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                ("active".into(), "gone".into(), 0),
                ("empty".into(), "t".into(), 0),
                ("empty".into(), "u".into(), 0),
            ]
        );
        assert!(s.expired(3_999, 3_000, |_, _| false).is_empty());
    }

    fn offset_of(s: &PartitionState, p: i32) -> Option<i64> {
        s.offset("g", "t", p).map(|o| o.offset)
    }

    #[test]
    fn transactional_offsets_count_on_commit_and_go_on_abort() {
        let mut s = PartitionState::default();
        s.apply(commit("g", "t", 0, 5, 1));
        s.apply_transactional(7, commit("g", "t", 0, 10, 2));
        s.apply_transactional(8, commit("g", "t", 1, 20, 2));
        assert_eq!(offset_of(&s, 0), Some(5), "pending until the marker");
        assert!(s.has_pending_offset("g", "t", 0) && s.has_pending_transactions());
        s.complete_transaction(7, true);
        s.complete_transaction(8, false);
        assert_eq!(offset_of(&s, 0), Some(10));
        assert_eq!(offset_of(&s, 1), None, "aborted");
        assert!(!s.has_pending_transactions());
        // A marker for a producer with nothing pending changes nothing.
        s.complete_transaction(9, true);
        assert_eq!(offset_of(&s, 0), Some(10));
    }

    #[test]
    fn the_commit_later_in_the_log_wins() {
        let mut s = PartitionState::default();
        // A plain commit after the transactional one: the transaction's offset loses.
        s.apply_transactional(7, commit("g", "t", 0, 10, 1));
        s.apply(commit("g", "t", 0, 3, 2));
        s.complete_transaction(7, true);
        assert_eq!(offset_of(&s, 0), Some(3));
        // Two transactions: the one written later wins, whichever commits first.
        s.apply_transactional(1, commit("g", "t", 1, 100, 3));
        s.apply_transactional(2, commit("g", "t", 1, 50, 4));
        s.complete_transaction(2, true);
        s.complete_transaction(1, true);
        assert_eq!(offset_of(&s, 1), Some(50));
        // A tombstone drops the key's pending offsets too.
        s.apply_transactional(3, commit("g", "t", 2, 9, 5));
        s.apply(tombstone("g", "t", 2));
        s.complete_transaction(3, true);
        assert_eq!(offset_of(&s, 2), None);
        assert!(!s.has_pending_transactions());
    }
}
