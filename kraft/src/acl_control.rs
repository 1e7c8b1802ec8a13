//! The ACL writes on the controller (Kafka's `AclControlManager`): which metadata records a
//! CreateAcls or DeleteAcls becomes, given the bindings the image holds now.

use std::collections::HashSet;

use uuid::Uuid;

use crate::acl::{AclBinding, AclBindingFilter, CreateAclResult, DeleteAclsResult};
use crate::image::MetadataImage;
use crate::record::{AccessControlEntryRecord, MetadataRecord, RemoveAccessControlEntryRecord};

/// CreateAcls on the controller (Kafka's `AclControlManager.createAcls`): one
/// `AccessControlEntryRecord` per valid binding not already in the image (nor earlier in the
/// request), each with an id from `new_id`, and one result per binding. A binding that
/// exists already succeeds without a record, as in Kafka.
pub fn create_acls_records(
    image: &MetadataImage,
    bindings: &[AclBinding],
    mut new_id: impl FnMut() -> Uuid,
) -> (Vec<MetadataRecord>, Vec<CreateAclResult>) {
    let existing: HashSet<&AclBinding> = image.acls.values().collect();
    let mut added: HashSet<&AclBinding> = HashSet::new();
    let mut records = Vec::new();
    let results = bindings
        .iter()
        .map(|b| {
            b.validate()?;
            if !existing.contains(b) && added.insert(b) {
                let mut id = new_id();
                // An id already in use would replace another binding.
                while image.acls.contains_key(&id) {
                    id = new_id();
                }
                records.push(MetadataRecord::AccessControlEntry(
                    AccessControlEntryRecord::new(id, b),
                ));
            }
            Ok(())
        })
        .collect();
    (records, results)
}

/// DeleteAcls on the controller (Kafka's `AclControlManager.deleteAcls`): for each filter,
/// the bindings it matches, and one `RemoveAccessControlEntryRecord` per binding matched by
/// any filter (a binding two filters match is removed once, and reported by both).
#[must_use]
pub fn delete_acls_records(
    image: &MetadataImage,
    filters: &[AclBindingFilter],
) -> (Vec<MetadataRecord>, Vec<DeleteAclsResult>) {
    let mut removed: HashSet<Uuid> = HashSet::new();
    let mut records = Vec::new();
    let results = filters
        .iter()
        .map(|f| {
            f.validate()?;
            let mut matched = Vec::new();
            for (id, b) in &image.acls {
                if f.matches(b) {
                    if removed.insert(*id) {
                        records.push(MetadataRecord::RemoveAccessControlEntry(
                            RemoveAccessControlEntryRecord { id: *id },
                        ));
                    }
                    matched.push(b.clone());
                }
            }
            Ok(matched)
        })
        .collect();
    (records, results)
}
