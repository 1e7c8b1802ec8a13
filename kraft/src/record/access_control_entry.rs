//! `AccessControlEntryRecord` (type 23) and `RemoveAccessControlEntryRecord` (type 24): one
//! ACL binding added to or removed from the cluster (KIP-801's StandardAuthorizer keeps its
//! bindings in the metadata log).

use uuid::Uuid;

use super::compact::{DecodeError, Reader, Writer};
use crate::acl::{AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType};

/// An ACL binding was created. Kafka's `AccessControlEntryRecord`, version 0.
///
/// Value layout after the metadata frame header:
///
/// ```text
/// id               uuid (16 bytes)
/// resource_type    int8 (Kafka's ResourceType code)
/// resource_name    compact string
/// pattern_type     int8 (3 = LITERAL, 4 = PREFIXED)
/// principal        compact string (`User:alice`)
/// host             compact string (an IP address or `*`)
/// operation        int8 (Kafka's AclOperation code)
/// permission_type  int8 (2 = DENY, 3 = ALLOW)
/// tagged           uvarint 0
/// ```
///
/// The codes are kept as written: a code this version does not know decodes to `Unknown`
/// and is written back as `Unknown` in a snapshot, which matches nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessControlEntryRecord {
    /// The binding's id: DeleteAcls removes by id, so a binding created again after a
    /// delete is a new one.
    pub id: Uuid,
    /// The binding.
    pub binding: AclBinding,
}

impl AccessControlEntryRecord {
    /// The record creating `binding` under `id`.
    #[must_use]
    pub fn new(id: Uuid, binding: &AclBinding) -> Self {
        AccessControlEntryRecord {
            id,
            binding: binding.clone(),
        }
    }

    pub(crate) fn encode(&self, w: &mut Writer) {
        let b = &self.binding;
        w.uuid(self.id);
        w.i8(b.resource_type.code());
        w.string(&b.resource_name);
        w.i8(b.pattern_type.code());
        w.string(&b.principal);
        w.string(&b.host);
        w.i8(b.operation.code());
        w.i8(b.permission_type.code());
        w.empty_tagged_fields();
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let id = r.uuid("AccessControlEntryRecord.id")?;
        let binding = AclBinding {
            resource_type: ResourceType::from_code(r.i8("AccessControlEntryRecord.resource_type")?),
            resource_name: r.string("AccessControlEntryRecord.resource_name")?,
            pattern_type: PatternType::from_code(r.i8("AccessControlEntryRecord.pattern_type")?),
            principal: r.string("AccessControlEntryRecord.principal")?,
            host: r.string("AccessControlEntryRecord.host")?,
            operation: AclOperation::from_code(r.i8("AccessControlEntryRecord.operation")?),
            permission_type: AclPermissionType::from_code(
                r.i8("AccessControlEntryRecord.permission_type")?,
            ),
        };
        r.skip_tagged_fields()?;
        Ok(AccessControlEntryRecord { id, binding })
    }
}

/// An ACL binding was deleted. Kafka's `RemoveAccessControlEntryRecord`, version 0.
///
/// Value layout after the metadata frame header:
///
/// ```text
/// id      uuid (16 bytes), the binding's AccessControlEntryRecord id
/// tagged  uvarint 0
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoveAccessControlEntryRecord {
    /// The id of the binding removed.
    pub id: Uuid,
}

impl RemoveAccessControlEntryRecord {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.uuid(self.id);
        w.empty_tagged_fields();
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let id = r.uuid("RemoveAccessControlEntryRecord.id")?;
        r.skip_tagged_fields()?;
        Ok(RemoveAccessControlEntryRecord { id })
    }
}
