//! `strata admin acls`: list, add and remove ACL bindings (Kafka's `kafka-acls.sh`), with
//! DescribeAcls, CreateAcls and DeleteAcls v1 (KIP-290's pattern types).
//!
//! A binding names a principal (`--allow-principal` or `--deny-principal`), a host (`--host`,
//! `*` unless given), one operation (`--operation`, Kafka's names: Read, Write, Create,
//! Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite,
//! All) and one resource (`--topic`, `--group`, `--transactional-id` or `--cluster`), literal
//! unless `--prefixed`. `list` and `remove` take the same options as a filter, each one left
//! out matching anything.

use anyhow::bail;
use strata_kraft::acl::{AclOperation, ResourceType};
use strata_protocol::StrBytes;
use strata_protocol::messages::create_acls_request::AclCreation;
use strata_protocol::messages::delete_acls_request::DeleteAclsFilter;
use strata_protocol::messages::{
    ApiKey, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest, RequestKind, ResponseKind,
};

use super::args::Args;
use super::client::{Client, describe_error};
use super::table::Table;

pub const USAGE: &str = "\
strata admin acls list [RESOURCE] [--principal P]
strata admin acls add (--allow-principal P | --deny-principal P) [--host H] --operation OP RESOURCE [--prefixed]
strata admin acls remove [--allow-principal P | --deny-principal P] [--host H] [--operation OP] RESOURCE [--prefixed]
  RESOURCE: --topic T | --group G | --transactional-id ID | --cluster";

/// Kafka's codes: pattern types and permission types.
const PATTERN_ANY: i8 = 1;
const PATTERN_LITERAL: i8 = 3;
const PATTERN_PREFIXED: i8 = 4;
const PERMISSION_ANY: i8 = 1;
const PERMISSION_DENY: i8 = 2;
const PERMISSION_ALLOW: i8 = 3;

/// Runs `acls <action> ...`.
///
/// # Errors
///
/// A bad command line, an unreachable broker, or any error a broker answered.
pub fn run(client: &mut Client, args: &[String]) -> anyhow::Result<()> {
    let a = Args::parse(
        args,
        &[
            "--allow-principal",
            "--deny-principal",
            "--principal",
            "--host",
            "--operation",
            "--topic",
            "--group",
            "--transactional-id",
        ],
        &["--cluster", "--prefixed"],
    )?;
    match a.positional.first().map(String::as_str) {
        Some("list") => list(client, &a),
        Some("add") => add(client, &a),
        Some("remove") => remove(client, &a),
        _ => bail!("usage:\n{USAGE}"),
    }
}

/// The resource the options name, if any: type and name.
fn resource(a: &Args) -> anyhow::Result<Option<(ResourceType, String)>> {
    let named = [
        (ResourceType::Topic, a.value("--topic")),
        (ResourceType::Group, a.value("--group")),
        (ResourceType::TransactionalId, a.value("--transactional-id")),
        (
            ResourceType::Cluster,
            a.switch("--cluster")
                .then_some(strata_kraft::acl::CLUSTER_NAME),
        ),
    ];
    let mut found = named
        .into_iter()
        .filter_map(|(t, n)| n.map(|n| (t, n.to_owned())));
    let first = found.next();
    if found.next().is_some() {
        bail!("name one resource: --topic, --group, --transactional-id or --cluster");
    }
    Ok(first)
}

/// Kafka's operation of a name as `kafka-acls.sh` takes it (`Read`, `DescribeConfigs`,
/// `IDEMPOTENT_WRITE`).
fn operation(name: &str) -> anyhow::Result<AclOperation> {
    let wanted: String = name
        .chars()
        .filter(|c| *c != '_')
        .collect::<String>()
        .to_ascii_uppercase();
    (2..=14)
        .map(AclOperation::from_code)
        .find(|op| op.name().replace('_', "") == wanted)
        .ok_or_else(|| anyhow::anyhow!("unknown --operation {name:?}"))
}

/// The principal and permission the options name, if any.
fn principal(a: &Args) -> anyhow::Result<Option<(String, i8)>> {
    match (a.value("--allow-principal"), a.value("--deny-principal")) {
        (Some(_), Some(_)) => bail!("--allow-principal and --deny-principal exclude each other"),
        (Some(p), None) => Ok(Some((p.to_owned(), PERMISSION_ALLOW))),
        (None, Some(p)) => Ok(Some((p.to_owned(), PERMISSION_DENY))),
        (None, None) => Ok(None),
    }
}

fn list(client: &mut Client, a: &Args) -> anyhow::Result<()> {
    let res = resource(a)?;
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(res.as_ref().map_or(ResourceType::Any, |r| r.0).code())
        .with_resource_name_filter(res.map(|r| StrBytes::from_string(r.1)))
        .with_pattern_type_filter(if a.switch("--prefixed") {
            PATTERN_PREFIXED
        } else {
            PATTERN_ANY
        })
        .with_principal_filter(
            a.value("--principal")
                .map(|p| StrBytes::from_string(p.to_owned())),
        )
        .with_host_filter(None)
        .with_operation(AclOperation::Any.code())
        .with_permission_type(PERMISSION_ANY);
    let ResponseKind::DescribeAcls(r) =
        client.send_any(ApiKey::DescribeAcls, RequestKind::DescribeAcls(req))?
    else {
        bail!("DescribeAcls was not answered with DescribeAcls");
    };
    if r.error_code != 0 {
        bail!("{}", describe_error(r.error_code, r.error_message.as_ref()));
    }
    let mut table = Table::new(&[
        "PRINCIPAL",
        "HOST",
        "OPERATION",
        "PERMISSION",
        "RESOURCE-TYPE",
        "NAME",
        "PATTERN",
    ]);
    for res in r.resources {
        for acl in res.acls {
            table.row(vec![
                acl.principal.to_string(),
                acl.host.to_string(),
                AclOperation::from_code(acl.operation).name().to_owned(),
                if acl.permission_type == PERMISSION_DENY {
                    "DENY"
                } else {
                    "ALLOW"
                }
                .to_owned(),
                ResourceType::from_code(res.resource_type).name().to_owned(),
                res.resource_name.to_string(),
                if res.pattern_type == PATTERN_PREFIXED {
                    "PREFIXED"
                } else {
                    "LITERAL"
                }
                .to_owned(),
            ]);
        }
    }
    table.print();
    Ok(())
}

fn add(client: &mut Client, a: &Args) -> anyhow::Result<()> {
    let Some((principal, permission)) = principal(a)? else {
        bail!("add needs --allow-principal or --deny-principal");
    };
    let Some((rtype, name)) = resource(a)? else {
        bail!("add needs a resource: --topic, --group, --transactional-id or --cluster");
    };
    let op = operation(a.required("--operation")?)?;
    let creation = AclCreation::default()
        .with_resource_type(rtype.code())
        .with_resource_name(StrBytes::from_string(name.clone()))
        .with_resource_pattern_type(if a.switch("--prefixed") {
            PATTERN_PREFIXED
        } else {
            PATTERN_LITERAL
        })
        .with_principal(StrBytes::from_string(principal.clone()))
        .with_host(StrBytes::from_string(
            a.value("--host").unwrap_or("*").to_owned(),
        ))
        .with_operation(op.code())
        .with_permission_type(permission);
    let ResponseKind::CreateAcls(r) = client.send_any(
        ApiKey::CreateAcls,
        RequestKind::CreateAcls(CreateAclsRequest::default().with_creations(vec![creation])),
    )?
    else {
        bail!("CreateAcls was not answered with CreateAcls");
    };
    for result in r.results {
        if result.error_code != 0 {
            bail!(
                "{}",
                describe_error(result.error_code, result.error_message.as_ref())
            );
        }
    }
    eprintln!(
        "added: {principal} {} {} on {} {name}",
        if permission == PERMISSION_DENY {
            "DENY"
        } else {
            "ALLOW"
        },
        op.name(),
        rtype.name()
    );
    Ok(())
}

fn remove(client: &mut Client, a: &Args) -> anyhow::Result<()> {
    let Some((rtype, name)) = resource(a)? else {
        bail!("remove needs a resource: --topic, --group, --transactional-id or --cluster");
    };
    let who = principal(a)?;
    let op = a.value("--operation").map(operation).transpose()?;
    let filter = DeleteAclsFilter::default()
        .with_resource_type_filter(rtype.code())
        .with_resource_name_filter(Some(StrBytes::from_string(name)))
        .with_pattern_type_filter(if a.switch("--prefixed") {
            PATTERN_PREFIXED
        } else {
            PATTERN_LITERAL
        })
        .with_principal_filter(who.as_ref().map(|w| StrBytes::from_string(w.0.clone())))
        .with_host_filter(
            a.value("--host")
                .map(|h| StrBytes::from_string(h.to_owned())),
        )
        .with_operation(op.unwrap_or(AclOperation::Any).code())
        .with_permission_type(who.map_or(PERMISSION_ANY, |w| w.1));
    let ResponseKind::DeleteAcls(r) = client.send_any(
        ApiKey::DeleteAcls,
        RequestKind::DeleteAcls(DeleteAclsRequest::default().with_filters(vec![filter])),
    )?
    else {
        bail!("DeleteAcls was not answered with DeleteAcls");
    };
    let mut removed = 0;
    for result in r.filter_results {
        if result.error_code != 0 {
            bail!(
                "{}",
                describe_error(result.error_code, result.error_message.as_ref())
            );
        }
        removed += result.matching_acls.len();
    }
    eprintln!("removed {removed} binding(s)");
    Ok(())
}
