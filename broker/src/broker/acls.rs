//! CreateAcls and DeleteAcls on the controller: the bindings become
//! `AccessControlEntryRecord`s and `RemoveAccessControlEntryRecord`s in the metadata log
//! (KIP-801), through the active controller, so they survive
//! restarts and reach every node's image, where the authorizer reads them.

use strata_kraft::MetadataError;
use strata_kraft::acl::{
    self, AclBinding, AclBindingFilter, CreateAclResult, DeleteAclsResult, Requester, ResourceType,
};
use uuid::Uuid;

use super::Broker;

impl Broker {
    /// CreateAcls: one result per binding, every new binding committed as one entry.
    ///
    /// # Errors
    ///
    /// Not the controller, or a storage error: the whole request fails.
    pub async fn create_acls(
        &self,
        bindings: &[AclBinding],
    ) -> Result<Vec<CreateAclResult>, MetadataError> {
        let bindings = bindings.to_vec();
        let op = move |image: &strata_kraft::MetadataImage| {
            strata_kraft::acl_control::create_acls_records(image, &bindings, Uuid::new_v4)
        };
        let results = self
            .controller_write(move |image, _, _| {
                let (records, results) = op(image);
                Ok::<_, MetadataError>((results, records))
            })
            .await?;
        let created = results.iter().filter(|r| r.is_ok()).count();
        tracing::info!(created, refused = results.len() - created, "CreateAcls");
        Ok(results)
    }

    /// DeleteAcls: for each filter the bindings it removed, all removals committed as one
    /// entry.
    ///
    /// # Errors
    ///
    /// Not the controller, or a storage error: the whole request fails.
    pub async fn delete_acls(
        &self,
        filters: &[AclBindingFilter],
    ) -> Result<Vec<DeleteAclsResult>, MetadataError> {
        let count = filters.len();
        let filters = filters.to_vec();
        let op = move |image: &strata_kraft::MetadataImage| {
            strata_kraft::acl_control::delete_acls_records(image, &filters)
        };
        let results = self
            .controller_write(move |image, _, _| {
                let (records, results) = op(image);
                Ok::<_, MetadataError>((results, records))
            })
            .await?;
        tracing::info!(filters = count, "DeleteAcls");
        Ok(results)
    }

    /// Whether `who` may perform `operation` on the resource, by Kafka's StandardAuthorizer
    /// over this node's image; always true without an authorizer.
    #[must_use]
    pub fn authorize(
        &self,
        who: Requester<'_>,
        operation: acl::AclOperation,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> bool {
        let Some(authorizer) = &self.config.authorizer else {
            return true;
        };
        let image = self.image();
        authorizer.authorize(
            image.acls.values(),
            who,
            operation,
            resource_type,
            resource_name,
        )
    }

    /// `authorized_operations` for a resource (Metadata, DescribeGroups, DescribeCluster):
    /// every supported operation without an authorizer, as Kafka answers.
    #[must_use]
    pub fn authorized_operations(
        &self,
        who: Requester<'_>,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> i32 {
        let Some(authorizer) = &self.config.authorizer else {
            return acl::all_operations(resource_type);
        };
        let image = self.image();
        let acls: Vec<&AclBinding> = image.acls.values().collect();
        authorizer.authorized_operations(&acls, who, resource_type, resource_name)
    }
}
