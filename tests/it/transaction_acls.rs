//! The transaction APIs under the StandardAuthorizer (KIP-801) on the real `strata` binary,
//! over raw frames: each refuses as Kafka's `KafkaApis` does when the client (here
//! `User:ANONYMOUS`, the principal of a PLAINTEXT connection) lacks the ACL it needs.
//!
//! - WRITE on the transactional id: InitProducerId, AddPartitionsToTxn v0-3,
//!   AddOffsetsToTxn, EndTxn and TxnOffsetCommit answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//!   without it; DESCRIBE: FindCoordinator (key type 1) and DescribeTransactions do, and
//!   ListTransactions leaves the id out.
//! - With WRITE on the id: a topic without WRITE is TOPIC_AUTHORIZATION_FAILED in
//!   AddPartitionsToTxn and in a transactional Produce, and a group without READ
//!   GROUP_AUTHORIZATION_FAILED in AddOffsetsToTxn and TxnOffsetCommit.
//! - CLUSTER_ACTION: a broker's AddPartitionsToTxn (v4+) and WriteTxnMarkers answer
//!   CLUSTER_AUTHORIZATION_FAILED without it.
//!
//! Nothing refused is written: the partition's log end does not move.

use strata_tests::{Broker, serial, wire};

use crate::acl_client::{ALLOW, DESCRIBE, LITERAL, TOPIC, WRITE, acl, create};
use crate::transactions::{
    add_offsets_v0, add_partitions_v0, end_txn_v0, first_init, init_v4, latest, list_transactions,
    roundtrip, txn_batch, txn_offset_commit_v2, verify_v4, write_marker,
};

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
/// Kafka's `ResourceType.TRANSACTIONAL_ID`.
const TRANSACTIONAL_ID: i8 = 5;

#[test]
fn the_transaction_apis_refuse_without_their_acls() {
    const GRANTED: &str = "acl-tx-granted";
    const DENIED: &str = "acl-tx-denied";
    const OUT: &str = "acl-tx-out";
    const GROUP: &str = "acl-tx-group";
    let _serial = serial();
    // The first start makes the client a super user: it creates the topic, both ids and
    // the bindings; the restart takes that away.
    let mut b = Broker::start(&[
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        ("allow.everyone.if.no.acl.found", "false"),
        ("super.users", "User:ANONYMOUS"),
    ])
    .unwrap();
    roundtrip(&b, &wire::metadata_request(1, OUT)).unwrap();
    strata_tests::wait_until(
        "the topic is served",
        crate::transactions::WAIT,
        std::time::Duration::from_millis(50),
        || Ok(latest(&b, OUT).is_ok()),
    )
    .unwrap();
    let (code, pid, epoch) = first_init(&b, GRANTED).unwrap();
    assert_eq!(code, 0, "InitProducerId as a super user");
    let (code, dpid, depoch) = first_init(&b, DENIED).unwrap();
    assert_eq!(code, 0, "InitProducerId as a super user");
    let anonymous = |resource: i8, name: &str, op: i8| {
        let mut a = acl(resource, name, LITERAL, op, ALLOW);
        a.principal = "User:ANONYMOUS".into();
        a
    };
    let made = create(
        b.port(),
        &[
            anonymous(TRANSACTIONAL_ID, GRANTED, WRITE),
            anonymous(TRANSACTIONAL_ID, GRANTED, DESCRIBE),
            anonymous(TOPIC, OUT, DESCRIBE),
        ],
    );
    assert!(made.iter().all(|r| r.0 == 0), "{made:?}");
    b.set_override("super.users", None);
    b.restart().unwrap();
    let end = latest(&b, OUT).unwrap();
    let b = &b;
    let producer = (pid, epoch);
    let denied = (dpid, depoch);

    // WRITE on the id.
    assert_eq!(
        init_v4(b, DENIED, 60_000, denied).unwrap().0,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "InitProducerId"
    );
    let codes = add_partitions_v0(b, DENIED, denied, &[(OUT, 0)]).unwrap();
    assert_eq!(
        codes,
        vec![(OUT.to_owned(), 0, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)],
        "AddPartitionsToTxn"
    );
    assert_eq!(
        add_offsets_v0(b, DENIED, denied, GROUP).unwrap(),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "AddOffsetsToTxn"
    );
    assert_eq!(
        end_txn_v0(b, DENIED, denied, true).unwrap(),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "EndTxn"
    );
    assert_eq!(
        txn_offset_commit_v2(b, DENIED, GROUP, denied, (OUT, 0, 1)).unwrap(),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "TxnOffsetCommit"
    );
    // DESCRIBE on the id.
    let (code, _) = strata_tests::cluster::find_coordinator_of(b.port(), DENIED, 1).unwrap();
    assert_eq!(
        code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "FindCoordinator"
    );
    assert_eq!(
        crate::transactions_v2::describe_code(b.port(), DENIED).unwrap(),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "DescribeTransactions"
    );
    let (code, _, listed) = list_transactions(b, &[], &[]).unwrap();
    assert_eq!(code, 0);
    let ids: Vec<&str> = listed.iter().map(|(id, ..)| id.as_str()).collect();
    assert_eq!(
        ids,
        vec![GRANTED],
        "ListTransactions lists what may be described"
    );
    assert_eq!(
        init_v4(b, GRANTED, 60_000, producer).unwrap().0,
        0,
        "InitProducerId with WRITE on the id"
    );
    let producer = (pid, epoch + 1);

    // WRITE on the id, but not on the topic, nor READ on the group.
    let codes = add_partitions_v0(b, GRANTED, producer, &[(OUT, 0)]).unwrap();
    assert_eq!(
        codes,
        vec![(OUT.to_owned(), 0, TOPIC_AUTHORIZATION_FAILED)],
        "AddPartitionsToTxn"
    );
    let r = roundtrip(
        b,
        &wire::transactional_produce_request(5, Some(GRANTED), OUT, &txn_batch(producer, 0, 1)),
    )
    .unwrap();
    assert_eq!(
        wire::produce_result(&r, OUT).0,
        TOPIC_AUTHORIZATION_FAILED,
        "a transactional Produce"
    );
    assert_eq!(
        add_offsets_v0(b, GRANTED, producer, GROUP).unwrap(),
        GROUP_AUTHORIZATION_FAILED,
        "AddOffsetsToTxn"
    );
    assert_eq!(
        txn_offset_commit_v2(b, GRANTED, GROUP, producer, (OUT, 0, 1)).unwrap(),
        GROUP_AUTHORIZATION_FAILED,
        "TxnOffsetCommit"
    );

    // CLUSTER_ACTION: the requests only brokers send.
    assert_eq!(
        verify_v4(b, GRANTED, producer, OUT).unwrap().0,
        CLUSTER_AUTHORIZATION_FAILED,
        "AddPartitionsToTxn v4"
    );
    assert_eq!(
        write_marker(b, OUT, 0, (pid, epoch + 1, 0), true).unwrap(),
        CLUSTER_AUTHORIZATION_FAILED,
        "WriteTxnMarkers"
    );
    assert_eq!(latest(b, OUT).unwrap(), end, "nothing refused was written");
}
