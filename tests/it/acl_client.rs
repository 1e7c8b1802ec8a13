//! Raw requests encoded by the protocol crate ([`call`], [`try_call`]), shared by the test
//! modules for APIs the Kafka clients do not expose; and CreateAcls, DescribeAcls and
//! DeleteAcls on top of them (the rdkafka crate does not expose librdkafka's ACL admin API;
//! confluent-kafka's is driven in tests/python/test_acls.py and by the kafka-acls.sh
//! stand-in).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use strata_protocol::StrBytes;
use strata_protocol::codec::encode_request;
use strata_protocol::messages::{
    ApiKey, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest, RequestKind, ResponseKind,
    create_acls_request, delete_acls_request,
};

/// Kafka's codes for the bindings the tests write.
pub const TOPIC: i8 = 2;
pub const GROUP: i8 = 3;
pub const CLUSTER: i8 = 4;
pub const ANY: i8 = 1;
pub const MATCH: i8 = 2;
pub const LITERAL: i8 = 3;
pub const PREFIXED: i8 = 4;
pub const ALL: i8 = 2;
pub const READ: i8 = 3;
pub const WRITE: i8 = 4;
pub const DESCRIBE: i8 = 8;
pub const DENY: i8 = 2;
pub const ALLOW: i8 = 3;

/// One binding: resource type, name, pattern type, principal, host, operation, permission.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Acl {
    pub resource_type: i8,
    pub name: String,
    pub pattern: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

/// A binding for `User:ANONYMOUS` (every PLAINTEXT client) from any host.
pub fn acl(resource_type: i8, name: &str, pattern: i8, operation: i8, permission: i8) -> Acl {
    Acl {
        resource_type,
        name: name.to_owned(),
        pattern,
        principal: "User:ANONYMOUS".to_owned(),
        host: "*".to_owned(),
        operation,
        permission,
    }
}

/// A filter: `None` matches every name, principal or host.
#[derive(Debug, Clone)]
pub struct Filter {
    pub resource_type: i8,
    pub name: Option<String>,
    pub pattern: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

/// The filter that matches every binding.
pub fn any() -> Filter {
    Filter {
        resource_type: ANY,
        name: None,
        pattern: ANY,
        principal: None,
        host: None,
        operation: ANY,
        permission: ANY,
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// Sends one request at `version` to 127.0.0.1:`port` and decodes the answer.
///
/// # Panics
///
/// If the node does not answer in 30 s or the answer does not decode.
pub fn call(port: u16, key: ApiKey, version: i16, body: RequestKind) -> ResponseKind {
    try_call(port, key, version, &body, Duration::from_secs(30)).expect("call")
}

/// One request at `version` to 127.0.0.1:`port` on a new connection, encoded by the
/// protocol crate, its answer read within `timeout` and decoded: the raw client that the
/// test modules share for APIs the Kafka clients do not expose.
///
/// # Errors
///
/// The connection fails or closes, the answer is late, too large (16 MiB), carries another
/// correlation id, or does not decode.
pub fn try_call(
    port: u16,
    key: ApiKey,
    version: i16,
    body: &RequestKind,
    timeout: Duration,
) -> anyhow::Result<ResponseKind> {
    const CORR: i32 = 0x5711;
    let frame = encode_request(key, version, CORR, "strata-tests", body)?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(&frame)?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(|e| {
        anyhow::anyhow!("the broker closed the connection instead of answering: {e}")
    })?;
    let len = usize::try_from(i32::from_be_bytes(len))?;
    anyhow::ensure!((4..16 << 20).contains(&len), "answer of {len} bytes");
    let mut resp = vec![0u8; len];
    stream.read_exact(&mut resp)?;
    anyhow::ensure!(
        i32::from_be_bytes(resp[..4].try_into()?) == CORR,
        "correlation id"
    );
    // Response header v1 (flexible versions) has a tagged-field byte after the correlation id.
    let start = if key.response_header_version(version) >= 1 {
        anyhow::ensure!(
            resp.get(4) == Some(&0),
            "tagged fields in the response header"
        );
        5
    } else {
        4
    };
    let mut body = Bytes::copy_from_slice(&resp[start..]);
    ResponseKind::decode(key, &mut body, version)
}

/// CreateAcls v3: each binding's (error code, message).
pub fn create(port: u16, acls: &[Acl]) -> Vec<(i16, Option<String>)> {
    let creations = acls
        .iter()
        .map(|a| {
            create_acls_request::AclCreation::default()
                .with_resource_type(a.resource_type)
                .with_resource_name(s(&a.name))
                .with_resource_pattern_type(a.pattern)
                .with_principal(s(&a.principal))
                .with_host(s(&a.host))
                .with_operation(a.operation)
                .with_permission_type(a.permission)
        })
        .collect();
    let req = RequestKind::CreateAcls(CreateAclsRequest::default().with_creations(creations));
    match call(port, ApiKey::CreateAcls, 3, req) {
        ResponseKind::CreateAcls(r) => r
            .results
            .into_iter()
            .map(|r| (r.error_code, r.error_message.map(|m| m.to_string())))
            .collect(),
        other => panic!("unexpected {other:?}"),
    }
}

/// DescribeAcls v3: the top-level error code and the matching bindings, sorted.
pub fn describe(port: u16, f: &Filter) -> (i16, Vec<Acl>) {
    let req = RequestKind::DescribeAcls(
        DescribeAclsRequest::default()
            .with_resource_type_filter(f.resource_type)
            .with_resource_name_filter(f.name.as_deref().map(s))
            .with_pattern_type_filter(f.pattern)
            .with_principal_filter(f.principal.as_deref().map(s))
            .with_host_filter(f.host.as_deref().map(s))
            .with_operation(f.operation)
            .with_permission_type(f.permission),
    );
    match call(port, ApiKey::DescribeAcls, 3, req) {
        ResponseKind::DescribeAcls(r) => {
            let mut acls: Vec<Acl> = r
                .resources
                .iter()
                .flat_map(|res| {
                    res.acls.iter().map(|a| Acl {
                        resource_type: res.resource_type,
                        name: res.resource_name.to_string(),
                        pattern: res.pattern_type,
                        principal: a.principal.to_string(),
                        host: a.host.to_string(),
                        operation: a.operation,
                        permission: a.permission_type,
                    })
                })
                .collect();
            acls.sort();
            (r.error_code, acls)
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// DeleteAcls v3: each filter's (error code, bindings deleted, sorted).
pub fn delete(port: u16, filters: &[Filter]) -> Vec<(i16, Vec<Acl>)> {
    let filters = filters
        .iter()
        .map(|f| {
            delete_acls_request::DeleteAclsFilter::default()
                .with_resource_type_filter(f.resource_type)
                .with_resource_name_filter(f.name.as_deref().map(s))
                .with_pattern_type_filter(f.pattern)
                .with_principal_filter(f.principal.as_deref().map(s))
                .with_host_filter(f.host.as_deref().map(s))
                .with_operation(f.operation)
                .with_permission_type(f.permission)
        })
        .collect();
    let req = RequestKind::DeleteAcls(DeleteAclsRequest::default().with_filters(filters));
    match call(port, ApiKey::DeleteAcls, 3, req) {
        ResponseKind::DeleteAcls(r) => r
            .filter_results
            .into_iter()
            .map(|fr| {
                let mut acls: Vec<Acl> = fr
                    .matching_acls
                    .iter()
                    .map(|m| Acl {
                        resource_type: m.resource_type,
                        name: m.resource_name.to_string(),
                        pattern: m.pattern_type,
                        principal: m.principal.to_string(),
                        host: m.host.to_string(),
                        operation: m.operation,
                        permission: m.permission_type,
                    })
                    .collect();
                acls.sort();
                (fr.error_code, acls)
            })
            .collect(),
        other => panic!("unexpected {other:?}"),
    }
}
