//! ListGroups (key 16): every group this node coordinates, optionally filtered by state
//! (v4+, KIP-518) and type (v5+, KIP-848: "classic" or "consumer").

use strata_protocol::StrBytes;
use strata_protocol::messages::list_groups_response::ListedGroup;
use strata_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::RequestContext;

/// The type of every group this coordinator runs.
const CLASSIC: &str = "classic";

/// Lists the groups.
#[must_use]
pub fn handle(ctx: &RequestContext, req: ListGroupsRequest) -> ListGroupsResponse {
    let v = ctx.api_version;
    let states: Vec<String> = req.states_filter.iter().map(ToString::to_string).collect();
    // Kafka parses the type names case-insensitively; only "classic" groups exist here.
    let types_match = req.types_filter.is_empty()
        || req
            .types_filter
            .iter()
            .any(|t| t.trim().eq_ignore_ascii_case(CLASSIC));
    let groups = if types_match {
        let mut groups = ctx.broker.groups.list(&states);
        // Groups that exist only through committed offsets are listed too, as Kafka does
        // (a KIP-848 group's offsets belong to that group, listed below).
        let consumer: Vec<String> = ctx
            .broker
            .consumer_groups
            .list(&[])
            .into_iter()
            .map(|g| g.group_id)
            .collect();
        let simple = ctx
            .broker
            .offsets
            .group_ids()
            .into_iter()
            .filter(|g| !consumer.contains(g))
            .collect();
        groups.extend(ctx.broker.groups.list_simple(&states, simple));
        groups
    } else {
        Vec::new()
    };
    // Kafka's handleListGroupsRequest: DESCRIBE on the cluster lists every group, else
    // only the groups the client may DESCRIBE.
    let every_group = ctx.authorize_cluster(strata_kraft::acl::AclOperation::Describe);
    let mut resp = ListGroupsResponse::default().with_groups(
        groups
            .into_iter()
            .filter(|g| {
                every_group
                    || ctx.authorize_group(strata_kraft::acl::AclOperation::Describe, &g.group_id)
            })
            .map(|g| {
                let mut out = ListedGroup::default()
                    .with_group_id(GroupId(StrBytes::from_string(g.group_id)))
                    .with_protocol_type(StrBytes::from_string(g.protocol_type));
                if v >= 4 {
                    out = out.with_group_state(StrBytes::from_static_str(g.state));
                }
                if v >= 5 {
                    out = out.with_group_type(StrBytes::from_static_str(CLASSIC));
                }
                out
            })
            .collect(),
    );
    // KIP-848 consumer groups, type "consumer".
    let consumer_wanted = req.types_filter.is_empty()
        || req
            .types_filter
            .iter()
            .any(|t| t.trim().eq_ignore_ascii_case("consumer"));
    if consumer_wanted {
        resp.groups.extend(
            ctx.broker
                .consumer_groups
                .list(&states)
                .into_iter()
                .map(|g| {
                    let mut out = ListedGroup::default()
                        .with_group_id(GroupId(StrBytes::from_string(g.group_id)))
                        .with_protocol_type(StrBytes::from_static_str("consumer"));
                    if v >= 4 {
                        out = out.with_group_state(StrBytes::from_static_str(g.state));
                    }
                    if v >= 5 {
                        out = out.with_group_type(StrBytes::from_static_str("consumer"));
                    }
                    out
                }),
        );
    }
    resp
}
