//! ACLs: Kafka's bindings (KIP-140), prefixed patterns (KIP-290), the filters DescribeAcls
//! and DeleteAcls take, the controller's checks on new bindings, and the decision of
//! Kafka's `StandardAuthorizer` over the bindings in a metadata image. The records that
//! CreateAcls and DeleteAcls write are `acl_control`'s.
//!
//! Everything here is pure: the image holds the bindings (applied from
//! `AccessControlEntryRecord`s), the broker passes in who asks, from where, for what.
//!
//! The enums carry Kafka's wire codes (`ResourceType`, `PatternType`, `AclOperation`,
//! `AclPermissionType` in `org.apache.kafka.common`); a code Kafka does not know decodes to
//! `Unknown`, as Kafka's `fromCode` does, and the checks below refuse it.

use std::collections::HashSet;

use thiserror::Error;

/// The name of the one cluster resource (Kafka's `Resource.CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// A literal resource name that matches every name (Kafka's `ResourcePattern.WILDCARD_RESOURCE`).
pub const WILDCARD_RESOURCE: &str = "*";
/// A host that matches every host (Kafka's `AclEntry.WILDCARD_HOST`).
pub const WILDCARD_HOST: &str = "*";

/// Defines an enum over Kafka's i8 codes with `code` and a total `from_code`.
macro_rules! kafka_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:literal => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vdoc])* $variant = $code),+
        }

        impl $name {
            /// Kafka's wire code.
            #[must_use]
            pub fn code(self) -> i8 {
                self as i8
            }

            /// The value of a wire code; a code Kafka does not define is `Unknown`.
            #[must_use]
            pub fn from_code(code: i8) -> Self {
                match code {
                    $($code => Self::$variant,)+
                    _ => Self::Unknown,
                }
            }

            /// Kafka's name for it (`TOPIC`, `PREFIXED`, `DESCRIBE_CONFIGS`).
            #[must_use]
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }
    };
}

kafka_enum!(
    /// What kind of resource a binding names (Kafka's `ResourceType`).
    ResourceType {
        /// Not a type Kafka knows.
        Unknown = 0 => "UNKNOWN",
        /// Filters only: every type.
        Any = 1 => "ANY",
        /// A topic.
        Topic = 2 => "TOPIC",
        /// A consumer group.
        Group = 3 => "GROUP",
        /// The cluster, always named [`CLUSTER_NAME`].
        Cluster = 4 => "CLUSTER",
        /// A transactional id.
        TransactionalId = 5 => "TRANSACTIONAL_ID",
        /// A delegation token.
        DelegationToken = 6 => "DELEGATION_TOKEN",
        /// A user (KIP-373).
        User = 7 => "USER",
    }
);

kafka_enum!(
    /// How a binding's resource name matches (Kafka's `PatternType`, KIP-290).
    PatternType {
        /// Not a type Kafka knows.
        Unknown = 0 => "UNKNOWN",
        /// Filters only: any pattern type, the name compared exactly.
        Any = 1 => "ANY",
        /// Filters only: the bindings that would apply to the named resource (literal,
        /// wildcard and prefixes of the name).
        Match = 2 => "MATCH",
        /// The name itself, or `*` for every name.
        Literal = 3 => "LITERAL",
        /// Every name that starts with it.
        Prefixed = 4 => "PREFIXED",
    }
);

kafka_enum!(
    /// What a binding allows or denies (Kafka's `AclOperation`).
    AclOperation {
        /// Not an operation Kafka knows.
        Unknown = 0 => "UNKNOWN",
        /// Filters only: every operation.
        Any = 1 => "ANY",
        /// Every operation.
        All = 2 => "ALL",
        /// Read.
        Read = 3 => "READ",
        /// Write.
        Write = 4 => "WRITE",
        /// Create.
        Create = 5 => "CREATE",
        /// Delete.
        Delete = 6 => "DELETE",
        /// Alter.
        Alter = 7 => "ALTER",
        /// Describe.
        Describe = 8 => "DESCRIBE",
        /// Inter-broker actions.
        ClusterAction = 9 => "CLUSTER_ACTION",
        /// DescribeConfigs.
        DescribeConfigs = 10 => "DESCRIBE_CONFIGS",
        /// AlterConfigs.
        AlterConfigs = 11 => "ALTER_CONFIGS",
        /// The idempotent producer.
        IdempotentWrite = 12 => "IDEMPOTENT_WRITE",
        /// Delegation tokens for other users.
        CreateTokens = 13 => "CREATE_TOKENS",
        /// Other users' delegation tokens.
        DescribeTokens = 14 => "DESCRIBE_TOKENS",
    }
);

kafka_enum!(
    /// Whether a binding allows or denies (Kafka's `AclPermissionType`).
    AclPermissionType {
        /// Not a permission type Kafka knows.
        Unknown = 0 => "UNKNOWN",
        /// Filters only: both.
        Any = 1 => "ANY",
        /// Denies; a matching DENY wins over every ALLOW.
        Deny = 2 => "DENY",
        /// Allows.
        Allow = 3 => "ALLOW",
    }
);

impl ResourceType {
    /// The operations a resource of this type has (Kafka's `AclEntry.supportedOperations`):
    /// what `authorized_operations` in Metadata, DescribeGroups and DescribeCluster ranges
    /// over.
    #[must_use]
    pub fn supported_operations(self) -> &'static [AclOperation] {
        use AclOperation as O;
        match self {
            ResourceType::Topic => &[
                O::Read,
                O::Write,
                O::Create,
                O::Describe,
                O::Delete,
                O::Alter,
                O::DescribeConfigs,
                O::AlterConfigs,
            ],
            ResourceType::Group => &[O::Read, O::Describe, O::Delete],
            ResourceType::Cluster => &[
                O::Create,
                O::ClusterAction,
                O::DescribeConfigs,
                O::AlterConfigs,
                O::IdempotentWrite,
                O::Alter,
                O::Describe,
            ],
            ResourceType::TransactionalId => &[O::Describe, O::Write],
            ResourceType::DelegationToken => &[O::Describe],
            ResourceType::User => &[O::CreateTokens, O::DescribeTokens],
            ResourceType::Unknown | ResourceType::Any => &[],
        }
    }
}

/// One ACL: a resource pattern and an access control entry (Kafka's `AclBinding`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    /// The kind of resource.
    pub resource_type: ResourceType,
    /// The resource's name, a prefix of names, or `*`.
    pub resource_name: String,
    /// LITERAL or PREFIXED.
    pub pattern_type: PatternType,
    /// `type:name`, e.g. `User:alice`; `User:*` is every user.
    pub principal: String,
    /// The client's IP address as text, or `*`.
    pub host: String,
    /// The operation allowed or denied.
    pub operation: AclOperation,
    /// ALLOW or DENY.
    pub permission_type: AclPermissionType,
}

/// Why the controller refuses a new binding: INVALID_REQUEST, with Kafka's messages
/// (`AclControlManager.validateNewAcl` and the broker's checks before it).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AclError {
    /// The resource type is UNKNOWN or ANY.
    #[error("Invalid resourceType {0}")]
    InvalidResourceType(&'static str),
    /// The pattern type is not LITERAL or PREFIXED.
    #[error("Invalid patternType {0}")]
    InvalidPatternType(&'static str),
    /// The operation is UNKNOWN or ANY.
    #[error("Invalid operation {0}")]
    InvalidOperation(&'static str),
    /// The permission type is not ALLOW or DENY.
    #[error("Invalid permissionType {0}")]
    InvalidPermissionType(&'static str),
    /// The resource name is empty.
    #[error("Resource name should not be empty")]
    EmptyResourceName,
    /// A cluster binding names something other than [`CLUSTER_NAME`].
    #[error("The only valid name for the CLUSTER resource is {CLUSTER_NAME}")]
    InvalidClusterName,
    /// The principal has no `type:` part.
    #[error(
        "Could not parse principal from `{0}` (no colon is present separating the principal type from the principal name)"
    )]
    InvalidPrincipal(String),
    /// A filter with an UNKNOWN field matches nothing Kafka could store.
    #[error("Unknown {0} in the filter")]
    UnknownInFilter(&'static str),
}

impl AclBinding {
    /// The checks Kafka makes before it stores a binding.
    ///
    /// # Errors
    ///
    /// The first [`AclError`] that applies, in Kafka's order.
    pub fn validate(&self) -> Result<(), AclError> {
        if self.resource_type == ResourceType::Cluster && self.resource_name != CLUSTER_NAME {
            return Err(AclError::InvalidClusterName);
        }
        match self.resource_type {
            ResourceType::Unknown | ResourceType::Any => {
                return Err(AclError::InvalidResourceType(self.resource_type.name()));
            }
            _ => {}
        }
        if !matches!(
            self.pattern_type,
            PatternType::Literal | PatternType::Prefixed
        ) {
            return Err(AclError::InvalidPatternType(self.pattern_type.name()));
        }
        if matches!(self.operation, AclOperation::Unknown | AclOperation::Any) {
            return Err(AclError::InvalidOperation(self.operation.name()));
        }
        if !matches!(
            self.permission_type,
            AclPermissionType::Allow | AclPermissionType::Deny
        ) {
            return Err(AclError::InvalidPermissionType(self.permission_type.name()));
        }
        if self.resource_name.is_empty() {
            return Err(AclError::EmptyResourceName);
        }
        if !self.principal.contains(':') {
            return Err(AclError::InvalidPrincipal(self.principal.clone()));
        }
        Ok(())
    }
}

/// A filter over bindings (Kafka's `AclBindingFilter`): `None` and the ANY codes match
/// everything; MATCH matches the patterns that apply to the named resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBindingFilter {
    /// A type, or ANY.
    pub resource_type: ResourceType,
    /// A name, or `None` for every name.
    pub resource_name: Option<String>,
    /// A pattern type, ANY or MATCH.
    pub pattern_type: PatternType,
    /// A principal, or `None`.
    pub principal: Option<String>,
    /// A host, or `None`.
    pub host: Option<String>,
    /// An operation, or ANY.
    pub operation: AclOperation,
    /// A permission type, or ANY.
    pub permission_type: AclPermissionType,
}

impl AclBindingFilter {
    /// Kafka's `AclControlManager.validateFilter`: a filter with an UNKNOWN field is
    /// refused rather than matched against nothing.
    ///
    /// # Errors
    ///
    /// [`AclError::UnknownInFilter`] naming the first such field.
    pub fn validate(&self) -> Result<(), AclError> {
        let unknown = [
            (self.resource_type == ResourceType::Unknown, "resourceType"),
            (self.pattern_type == PatternType::Unknown, "patternType"),
            (self.operation == AclOperation::Unknown, "operation"),
            (
                self.permission_type == AclPermissionType::Unknown,
                "permissionType",
            ),
        ];
        match unknown.iter().find(|(u, _)| *u) {
            Some((_, field)) => Err(AclError::UnknownInFilter(field)),
            None => Ok(()),
        }
    }

    /// Whether `b` passes the filter (Kafka's `ResourcePatternFilter.matches` and
    /// `AccessControlEntryFilter.matches`).
    #[must_use]
    pub fn matches(&self, b: &AclBinding) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != b.resource_type {
            return false;
        }
        let any_pattern = matches!(self.pattern_type, PatternType::Any | PatternType::Match);
        if !any_pattern && self.pattern_type != b.pattern_type {
            return false;
        }
        let name_matches = match &self.resource_name {
            None => true,
            Some(name)
                if self.pattern_type == PatternType::Any || self.pattern_type == b.pattern_type =>
            {
                *name == b.resource_name
            }
            // MATCH: the patterns that apply to `name`.
            Some(name) => match b.pattern_type {
                PatternType::Literal => {
                    *name == b.resource_name || b.resource_name == WILDCARD_RESOURCE
                }
                PatternType::Prefixed => name.starts_with(&b.resource_name),
                _ => false,
            },
        };
        name_matches
            && self.principal.as_ref().is_none_or(|p| *p == b.principal)
            && self.host.as_ref().is_none_or(|h| *h == b.host)
            && (self.operation == AclOperation::Any || self.operation == b.operation)
            && (self.permission_type == AclPermissionType::Any
                || self.permission_type == b.permission_type)
    }
}

/// The outcome of one binding of a CreateAcls.
pub type CreateAclResult = Result<(), AclError>;

/// The bindings one DeleteAcls filter removes, or why the filter is refused.
pub type DeleteAclsResult = Result<Vec<AclBinding>, AclError>;

/// Who asks: Kafka's `KafkaPrincipal` as `type:name` and the client's address.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    /// `User:ANONYMOUS` on a PLAINTEXT listener.
    pub principal: &'a str,
    /// The client's IP address as text (`127.0.0.1`).
    pub host: &'a str,
}

/// The authorizer's settings (`super.users`, `allow.everyone.if.no.acl.found`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// Principals allowed everything.
    pub super_users: HashSet<String>,
    /// What a resource without any binding answers: Kafka's default is `false`, deny.
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    /// Kafka's `StandardAuthorizerData.authorize` over `acls`: a super user is allowed;
    /// otherwise a matching DENY denies, else a matching ALLOW allows (READ, WRITE, DELETE
    /// and ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS, ALL implies
    /// everything); a resource no binding applies to at all answers
    /// `allow.everyone.if.no.acl.found`, and one with bindings none of which allows is
    /// denied. A binding applies to a resource when it is a LITERAL of its name, the
    /// LITERAL wildcard `*`, or a PREFIXED prefix of the name.
    #[must_use]
    pub fn authorize<'a>(
        &self,
        acls: impl IntoIterator<Item = &'a AclBinding>,
        who: Requester<'_>,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> bool {
        if self.super_users.contains(who.principal) {
            return true;
        }
        let wildcard_principal = who
            .principal
            .split_once(':')
            .map(|(kind, _)| format!("{kind}:*"));
        let mut has_resource_acls = false;
        let mut allowed = false;
        for acl in acls {
            if acl.resource_type != resource_type || !applies_to(acl, resource_name) {
                continue;
            }
            has_resource_acls = true;
            let principal_matches = acl.principal == who.principal
                || wildcard_principal.as_deref() == Some(acl.principal.as_str());
            if !principal_matches || (acl.host != WILDCARD_HOST && acl.host != who.host) {
                continue;
            }
            match acl.permission_type {
                AclPermissionType::Deny
                    if acl.operation == AclOperation::All || acl.operation == operation =>
                {
                    return false;
                }
                AclPermissionType::Allow if implies(acl.operation, operation) => allowed = true,
                _ => {}
            }
        }
        allowed || (!has_resource_acls && self.allow_everyone_if_no_acl_found)
    }

    /// Kafka's `authorizedOperations`: the operations of the resource's type that
    /// [`AuthorizerConfig::authorize`] allows, as the 32-bit field of `1 << code` that
    /// `authorized_operations` carries.
    #[must_use]
    pub fn authorized_operations(
        &self,
        acls: &[&AclBinding],
        who: Requester<'_>,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> i32 {
        resource_type
            .supported_operations()
            .iter()
            .filter(|op| {
                self.authorize(
                    acls.iter().copied(),
                    who,
                    **op,
                    resource_type,
                    resource_name,
                )
            })
            .fold(0, |bits, op| bits | (1 << op.code()))
    }
}

/// The bit field of every supported operation of a type: what a broker without an
/// authorizer reports as authorized, as Kafka's does.
#[must_use]
pub fn all_operations(resource_type: ResourceType) -> i32 {
    resource_type
        .supported_operations()
        .iter()
        .fold(0, |bits, op| bits | (1 << op.code()))
}

fn applies_to(acl: &AclBinding, name: &str) -> bool {
    match acl.pattern_type {
        PatternType::Literal => acl.resource_name == name || acl.resource_name == WILDCARD_RESOURCE,
        PatternType::Prefixed => name.starts_with(&acl.resource_name),
        _ => false,
    }
}

/// Whether an ALLOW of `granted` allows `wanted` (Kafka's `StandardAuthorizerData.findResult`).
fn implies(granted: AclOperation, wanted: AclOperation) -> bool {
    use AclOperation as O;
    granted == O::All
        || granted == wanted
        || (wanted == O::Describe && matches!(granted, O::Read | O::Write | O::Delete | O::Alter))
        || (wanted == O::DescribeConfigs && granted == O::AlterConfigs)
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    fn binding(
        rt: ResourceType,
        name: &str,
        pt: PatternType,
        op: AclOperation,
        perm: AclPermissionType,
    ) -> AclBinding {
        AclBinding {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pt,
            principal: "User:ANONYMOUS".into(),
            host: "*".into(),
            operation: op,
            permission_type: perm,
        }
    }

    const WHO: Requester<'static> = Requester {
        principal: "User:ANONYMOUS",
        host: "127.0.0.1",
    };

    #[test]
    fn deny_wins_and_allow_implies_describe() {
        use AclOperation as O;
        use AclPermissionType as P;
        use PatternType as PT;
        use ResourceType as RT;
        let cfg = AuthorizerConfig::default();
        let write = binding(RT::Topic, "orders", PT::Literal, O::Write, P::Allow);
        assert!(cfg.authorize([&write], WHO, O::Write, RT::Topic, "orders"));
        assert!(cfg.authorize([&write], WHO, O::Describe, RT::Topic, "orders"));
        assert!(!cfg.authorize([&write], WHO, O::Read, RT::Topic, "orders"));
        // A resource with bindings, none for this operation: denied whatever the default.
        let open = AuthorizerConfig {
            allow_everyone_if_no_acl_found: true,
            ..AuthorizerConfig::default()
        };
        assert!(!open.authorize([&write], WHO, O::Read, RT::Topic, "orders"));
        assert!(open.authorize([&write], WHO, O::Read, RT::Topic, "other"));
        assert!(!cfg.authorize([&write], WHO, O::Read, RT::Topic, "other"));
        let deny = binding(RT::Topic, "ord", PT::Prefixed, O::All, P::Deny);
        assert!(!cfg.authorize([&write, &deny], WHO, O::Write, RT::Topic, "orders"));
        // A DENY of READ does not deny DESCRIBE.
        let deny_read = binding(RT::Topic, "*", PT::Literal, O::Read, P::Deny);
        assert!(cfg.authorize([&write, &deny_read], WHO, O::Describe, RT::Topic, "orders"));
        let alter_configs = binding(RT::Topic, "*", PT::Literal, O::AlterConfigs, P::Allow);
        assert!(cfg.authorize([&alter_configs], WHO, O::DescribeConfigs, RT::Topic, "x"));
        let mut other_host = write.clone();
        other_host.host = "10.0.0.1".into();
        assert!(!cfg.authorize([&other_host], WHO, O::Write, RT::Topic, "orders"));
        let mut everyone = write.clone();
        everyone.principal = "User:*".into();
        assert!(cfg.authorize([&everyone], WHO, O::Write, RT::Topic, "orders"));
        let supers = AuthorizerConfig {
            super_users: ["User:ANONYMOUS".to_owned()].into(),
            ..AuthorizerConfig::default()
        };
        assert!(supers.authorize([&deny], WHO, O::Write, RT::Topic, "orders"));
        let bits = cfg.authorized_operations(&[&write], WHO, RT::Topic, "orders");
        assert_eq!(bits, (1 << 4) | (1 << 8));
    }

    #[test]
    fn filters_match_as_kafka_does() {
        use AclOperation as O;
        use AclPermissionType as P;
        use PatternType as PT;
        use ResourceType as RT;
        let prefixed = binding(RT::Topic, "ord", PT::Prefixed, O::Read, P::Allow);
        let literal = binding(RT::Topic, "orders", PT::Literal, O::Read, P::Allow);
        let wildcard = binding(RT::Topic, "*", PT::Literal, O::Read, P::Allow);
        let filter = |pt, name: Option<&str>| AclBindingFilter {
            resource_type: RT::Any,
            resource_name: name.map(Into::into),
            pattern_type: pt,
            principal: None,
            host: None,
            operation: O::Any,
            permission_type: P::Any,
        };
        let m = filter(PT::Match, Some("orders"));
        assert!(m.matches(&prefixed) && m.matches(&literal) && m.matches(&wildcard));
        let any = filter(PT::Any, Some("orders"));
        assert!(!any.matches(&prefixed) && any.matches(&literal) && !any.matches(&wildcard));
        let lit = filter(PT::Literal, None);
        assert!(!lit.matches(&prefixed) && lit.matches(&literal));
        assert!(filter(PT::Unknown, None).validate().is_err());
    }

    #[test]
    fn invalid_bindings_are_refused_and_duplicates_written_once() {
        use crate::acl_control::{create_acls_records, delete_acls_records};
        use crate::image::MetadataImage;
        use AclOperation as O;
        use AclPermissionType as P;
        use PatternType as PT;
        use ResourceType as RT;
        let ok = binding(RT::Topic, "t", PT::Literal, O::Read, P::Allow);
        let bad_pattern = binding(RT::Topic, "t", PT::Match, O::Read, P::Allow);
        let bad_cluster = binding(RT::Cluster, "c", PT::Literal, O::Alter, P::Allow);
        let mut bad_principal = ok.clone();
        bad_principal.principal = "alice".into();
        let img = MetadataImage::default();
        let mut n = 0u128;
        let (records, results) = create_acls_records(
            &img,
            &[
                ok.clone(),
                ok.clone(),
                bad_pattern,
                bad_cluster,
                bad_principal,
            ],
            || {
                n += 1;
                Uuid::from_u128(n)
            },
        );
        assert_eq!(records.len(), 1);
        assert!(results[0].is_ok() && results[1].is_ok());
        assert_eq!(results[2], Err(AclError::InvalidPatternType("MATCH")));
        assert_eq!(results[3], Err(AclError::InvalidClusterName));
        assert!(matches!(results[4], Err(AclError::InvalidPrincipal(_))));
        let mut img = img;
        for r in &records {
            img.apply(r).unwrap();
        }
        assert_eq!(img.acls.len(), 1);
        let (again, _) =
            create_acls_records(&img, std::slice::from_ref(&ok), || Uuid::from_u128(9));
        assert!(again.is_empty());
        let all = AclBindingFilter {
            resource_type: RT::Any,
            resource_name: None,
            pattern_type: PT::Any,
            principal: None,
            host: None,
            operation: O::Any,
            permission_type: P::Any,
        };
        let (removes, results) = delete_acls_records(&img, &[all.clone(), all]);
        assert_eq!(removes.len(), 1);
        assert_eq!(results[1].as_ref().unwrap(), &vec![ok]);
        for r in &removes {
            img.apply(r).unwrap();
        }
        assert!(img.acls.is_empty());
    }
}
