//! Client quotas (KIP-13, KIP-546) in the metadata image: the quotas of each entity, the
//! controller's checks that turn an AlterClientQuotas entry into `ClientQuotaRecord`s, and
//! the DescribeClientQuotas filter, all sans-IO.
//!
//! An entity is a set of (type, name) pairs, each type at most once: `{user=alice}`,
//! `{user=alice, client-id=app}`, `{client-id=None}` (the default client id). The rules are
//! Kafka's `ClientQuotaControlManager` (what may be written) and `ClientQuotasImage.describe`
//! (what a filter matches); the error messages are theirs too.

use std::collections::{BTreeMap, BTreeSet};

use crate::record::{ClientQuotaRecord, MetadataRecord, QuotaEntityPart};

/// Kafka's `ClientQuotaEntity.USER`.
pub const ENTITY_USER: &str = "user";
/// Kafka's `ClientQuotaEntity.CLIENT_ID`.
pub const ENTITY_CLIENT_ID: &str = "client-id";
/// Kafka's `ClientQuotaEntity.IP`.
pub const ENTITY_IP: &str = "ip";

/// `producer_byte_rate`: bytes per second a producer may append (type LONG).
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// `consumer_byte_rate`: bytes per second a consumer may fetch (type LONG).
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// `request_percentage`: the share of request-handler time (type DOUBLE).
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// `controller_mutation_rate`: topic partitions created or deleted per second, KIP-599
/// (type DOUBLE).
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
/// `connection_creation_rate`: an IP entity's only key, KIP-612 (type INT).
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// The keys of user and client-id entities and whether each is a LONG (a whole number).
const CLIENT_KEYS: &[(&str, bool)] = &[
    (PRODUCER_BYTE_RATE, true),
    (CONSUMER_BYTE_RATE, true),
    (REQUEST_PERCENTAGE, false),
    (CONTROLLER_MUTATION_RATE, false),
];

/// A quota entity: each entity type with its name, `None` for the type's default.
pub type QuotaEntity = BTreeMap<String, Option<String>>;

/// The quotas of every entity that has any. An entity whose last quota is removed is
/// dropped, as Kafka's image drops it.
#[derive(Debug, Clone, Default)]
pub struct ClientQuotas {
    /// Entity → key → value.
    pub entities: BTreeMap<QuotaEntity, BTreeMap<String, f64>>,
}

/// Two images are equal when their quotas are bit for bit (values are never NaN: the
/// controller refuses them).
impl PartialEq for ClientQuotas {
    fn eq(&self, other: &Self) -> bool {
        self.entities.len() == other.entities.len()
            && self
                .entities
                .iter()
                .zip(&other.entities)
                .all(|((ea, qa), (eb, qb))| {
                    ea == eb
                        && qa.len() == qb.len()
                        && qa
                            .iter()
                            .zip(qb)
                            .all(|((ka, va), (kb, vb))| ka == kb && va.to_bits() == vb.to_bits())
                })
    }
}

impl Eq for ClientQuotas {}

impl ClientQuotas {
    /// Applies one record (Kafka's `ClientQuotaControlManager.replay`). Never fails: a
    /// removal of a key that is not there changes nothing.
    pub fn apply(&mut self, r: &ClientQuotaRecord) {
        let entity: QuotaEntity = r
            .entity
            .iter()
            .map(|p| (p.entity_type.clone(), p.entity_name.clone()))
            .collect();
        if r.remove {
            if let Some(quotas) = self.entities.get_mut(&entity) {
                quotas.remove(&r.key);
                if quotas.is_empty() {
                    self.entities.remove(&entity);
                }
            }
        } else {
            self.entities
                .entry(entity)
                .or_default()
                .insert(r.key.clone(), r.value);
        }
    }

    /// The records that rebuild these quotas, for a snapshot.
    #[must_use]
    pub fn records(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for (entity, quotas) in &self.entities {
            for (key, value) in quotas {
                out.push(MetadataRecord::ClientQuota(ClientQuotaRecord {
                    entity: entity_parts(entity),
                    key: key.clone(),
                    value: *value,
                    remove: false,
                }));
            }
        }
        out
    }

    /// The value of `key` set on exactly `entity`.
    #[must_use]
    pub fn get(&self, entity: &QuotaEntity, key: &str) -> Option<f64> {
        self.entities.get(entity).and_then(|q| q.get(key)).copied()
    }
}

fn entity_parts(entity: &QuotaEntity) -> Vec<QuotaEntityPart> {
    entity
        .iter()
        .map(|(t, n)| QuotaEntityPart {
            entity_type: t.clone(),
            entity_name: n.clone(),
        })
        .collect()
}

/// Why an AlterClientQuotas entry or a DescribeClientQuotas filter is refused. Every
/// variant but [`ClientQuotaError::UnsupportedEntityType`] is Kafka's INVALID_REQUEST.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientQuotaError {
    /// An entity with no (type, name) pair.
    #[error("Invalid empty client quota entity")]
    EmptyEntity,
    /// The same entity type twice in one entity.
    #[error("Invalid empty client quota entity, duplicate entity entry {entity_type}")]
    DuplicateEntityType { entity_type: String },
    /// An entity type other than `user`, `client-id` and `ip`.
    #[error("Unhandled client quota entity type: {entity_type}")]
    UnknownEntityType { entity_type: String },
    /// A name that is the empty string (the default is a null name, not an empty one).
    #[error("Empty {entity_type} not supported")]
    EmptyName { entity_type: String },
    /// A combination of types Kafka does not allow (`ip` with another type).
    #[error("Invalid quota entity combination")]
    InvalidCombination,
    /// IP entities exist in Kafka (KIP-612); Strata has no connection-rate quotas.
    #[error("ip quotas (connection_creation_rate) are not supported")]
    IpNotSupported,
    /// A key the entity's type does not have.
    #[error("Invalid configuration key {key}")]
    UnknownKey { key: String },
    /// A LONG key with a fractional value.
    #[error("Configuration {key} must be a Long value")]
    NotALong { key: String },
    /// A value that is not a finite positive number.
    #[error("Invalid value {value} for configuration {key}: must be a positive number")]
    InvalidValue { key: String, value: String },
    /// The same key twice in one entry.
    #[error("Duplicate quota key {key} not updating quota for this entity")]
    DuplicateKey { key: String },
    /// The same entity twice in one request.
    #[error("Ignoring duplicate entity")]
    DuplicateEntity,
    /// A describe filter component with an empty entity type.
    #[error("Invalid empty entity type.")]
    EmptyFilterType,
    /// A describe filter naming a type twice.
    #[error("Entity type {entity_type} cannot appear more than once in the filter.")]
    DuplicateFilterType { entity_type: String },
    /// A describe filter of a type Kafka does not know: UNSUPPORTED_VERSION, as Kafka
    /// answers it.
    #[error("Unsupported entity type {entity_type}")]
    UnsupportedEntityType { entity_type: String },
    /// MATCH_TYPE_EXACT with a null match.
    #[error("Request specified MATCH_TYPE_EXACT, but set match string to null.")]
    ExactWithoutMatch,
    /// MATCH_TYPE_DEFAULT with a match string.
    #[error("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")]
    DefaultWithMatch,
    /// MATCH_TYPE_SPECIFIED with a match string.
    #[error("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")]
    SpecifiedWithMatch,
    /// A match type other than 0, 1, 2.
    #[error("Unknown match type {match_type}")]
    UnknownMatchType { match_type: i8 },
    /// An IP filter component with a user or client-id one.
    #[error(
        "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."
    )]
    IpFilterCombination,
}

/// Checks one entity (Kafka's `validateEntity` and `configKeysForEntityType`).
///
/// # Errors
///
/// What is wrong with it.
pub fn validate_entity(
    parts: &[(String, Option<String>)],
) -> Result<QuotaEntity, ClientQuotaError> {
    if parts.is_empty() {
        return Err(ClientQuotaError::EmptyEntity);
    }
    let mut entity = QuotaEntity::new();
    for (entity_type, name) in parts {
        if entity.contains_key(entity_type) {
            return Err(ClientQuotaError::DuplicateEntityType {
                entity_type: entity_type.clone(),
            });
        }
        if ![ENTITY_USER, ENTITY_CLIENT_ID, ENTITY_IP].contains(&entity_type.as_str()) {
            return Err(ClientQuotaError::UnknownEntityType {
                entity_type: entity_type.clone(),
            });
        }
        if name.as_deref() == Some("") {
            return Err(ClientQuotaError::EmptyName {
                entity_type: entity_type.clone(),
            });
        }
        entity.insert(entity_type.clone(), name.clone());
    }
    if entity.contains_key(ENTITY_IP) {
        return Err(if entity.len() > 1 {
            ClientQuotaError::InvalidCombination
        } else {
            ClientQuotaError::IpNotSupported
        });
    }
    Ok(entity)
}

/// Checks one key and value for a user or client-id entity (Kafka's
/// `validateQuotaKeyValue`; a LONG is whole to within 1e-6, as Kafka's check allows).
/// Kafka's `QuotaConfigs` give the rates no lower bound at this point; a zero, negative,
/// infinite or NaN rate could never be met, so it is refused here.
///
/// # Errors
///
/// An unknown key or a bad value.
pub fn validate_quota(key: &str, value: f64) -> Result<(), ClientQuotaError> {
    let Some((_, long)) = CLIENT_KEYS.iter().find(|(k, _)| *k == key) else {
        return Err(ClientQuotaError::UnknownKey {
            key: key.to_owned(),
        });
    };
    if !value.is_finite() || value <= 0.0 {
        return Err(ClientQuotaError::InvalidValue {
            key: key.to_owned(),
            value: value.to_string(),
        });
    }
    if *long && ((value + 1e-6).trunc() - value).abs() > 1e-6 {
        return Err(ClientQuotaError::NotALong {
            key: key.to_owned(),
        });
    }
    Ok(())
}

/// The records for one AlterClientQuotas entry: each op sets (`Some`) or removes (`None`)
/// a key of `entity`. A value equal to the current one, or a removal of a key that is not
/// set, writes nothing, as in Kafka. The entry is checked whole first: one bad key fails
/// the entry and nothing of it is written.
///
/// # Errors
///
/// The entity's or the first bad op's [`ClientQuotaError`].
pub fn alter_client_quota_records(
    quotas: &ClientQuotas,
    parts: &[(String, Option<String>)],
    ops: &[(String, Option<f64>)],
) -> Result<Vec<MetadataRecord>, ClientQuotaError> {
    let mut seen = BTreeSet::new();
    for (key, _) in ops {
        if !seen.insert(key.as_str()) {
            return Err(ClientQuotaError::DuplicateKey { key: key.clone() });
        }
    }
    let entity = validate_entity(parts)?;
    for (key, value) in ops {
        if let Some(v) = value {
            validate_quota(key, *v)?;
        }
    }
    let current = quotas.entities.get(&entity);
    let now = |key: &str| current.and_then(|q| q.get(key)).copied();
    let records = ops
        .iter()
        .filter(|(key, value)| match value {
            None => now(key).is_some(),
            Some(v) => now(key).is_none_or(|c| c.to_bits() != v.to_bits()),
        })
        .map(|(key, value)| {
            MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity: entity_parts(&entity),
                key: key.clone(),
                value: value.unwrap_or(0.0),
                remove: value.is_none(),
            })
        })
        .collect();
    Ok(records)
}

/// One AlterClientQuotas entry: the entity's (type, name) pairs and its ops (a key set to
/// `Some` value or removed with `None`).
pub type QuotaAlteration = (Vec<(String, Option<String>)>, Vec<(String, Option<f64>)>);

/// A whole AlterClientQuotas request (Kafka's `ClientQuotaControlManager.alterClientQuotas`):
/// the records of every entry that passes its checks, to be written as one batch, and each
/// entry's outcome in request order. An entity named by more than one entry fails in each
/// of them (INVALID_REQUEST), so which copy would win never matters.
#[must_use]
pub fn alter_client_quotas(
    quotas: &ClientQuotas,
    entries: &[QuotaAlteration],
) -> (Vec<MetadataRecord>, Vec<Result<(), ClientQuotaError>>) {
    let key = |parts: &[(String, Option<String>)]| -> Vec<(String, Option<String>)> {
        let mut k = parts.to_vec();
        k.sort();
        k
    };
    let mut times: BTreeMap<Vec<(String, Option<String>)>, usize> = BTreeMap::new();
    for (parts, _) in entries {
        *times.entry(key(parts)).or_default() += 1;
    }
    let mut records = Vec::new();
    let results = entries
        .iter()
        .map(|(parts, ops)| {
            if times.get(&key(parts)).is_some_and(|n| *n > 1) {
                return Err(ClientQuotaError::DuplicateEntity);
            }
            records.extend(alter_client_quota_records(quotas, parts, ops)?);
            Ok(())
        })
        .collect();
    (records, results)
}

/// A described entity with its quotas.
pub type DescribedQuotas<'a> = (&'a QuotaEntity, &'a BTreeMap<String, f64>);

/// One DescribeClientQuotas filter component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterComponent {
    /// The entity type it constrains.
    pub entity_type: String,
    /// Kafka's match type: 0 exact (`match` names the entity), 1 the default entity, 2 any
    /// entity of the type.
    pub match_type: i8,
    /// The name for an exact match.
    pub name: Option<String>,
}

/// Kafka's `MATCH_TYPE_EXACT`.
pub const MATCH_TYPE_EXACT: i8 = 0;
/// Kafka's `MATCH_TYPE_DEFAULT`.
pub const MATCH_TYPE_DEFAULT: i8 = 1;
/// Kafka's `MATCH_TYPE_SPECIFIED` (any entity of the type).
pub const MATCH_TYPE_SPECIFIED: i8 = 2;

/// DescribeClientQuotas: the entities `components` match (Kafka's
/// `ClientQuotasImage.describe`). Each component constrains one type: the entity must
/// have it, exactly named, the default, or any name. With `strict` the entity has no other
/// types; without, it may. No components and not strict: every entity; strict: none.
///
/// # Errors
///
/// What is wrong with the filter.
pub fn describe_client_quotas<'a>(
    quotas: &'a ClientQuotas,
    components: &[FilterComponent],
    strict: bool,
) -> Result<Vec<DescribedQuotas<'a>>, ClientQuotaError> {
    // Type → None for "any name", Some(name) for an exact name or the default.
    let mut wanted: BTreeMap<&str, Option<Option<&str>>> = BTreeMap::new();
    for c in components {
        if c.entity_type.is_empty() {
            return Err(ClientQuotaError::EmptyFilterType);
        }
        if wanted.contains_key(c.entity_type.as_str()) {
            return Err(ClientQuotaError::DuplicateFilterType {
                entity_type: c.entity_type.clone(),
            });
        }
        if ![ENTITY_USER, ENTITY_CLIENT_ID, ENTITY_IP].contains(&c.entity_type.as_str()) {
            return Err(ClientQuotaError::UnsupportedEntityType {
                entity_type: c.entity_type.clone(),
            });
        }
        let want = match (c.match_type, c.name.as_deref()) {
            (MATCH_TYPE_EXACT, None) => return Err(ClientQuotaError::ExactWithoutMatch),
            (MATCH_TYPE_EXACT, Some(n)) => Some(Some(n)),
            (MATCH_TYPE_DEFAULT, None) => Some(None),
            (MATCH_TYPE_DEFAULT, Some(_)) => return Err(ClientQuotaError::DefaultWithMatch),
            (MATCH_TYPE_SPECIFIED, None) => None,
            (MATCH_TYPE_SPECIFIED, Some(_)) => return Err(ClientQuotaError::SpecifiedWithMatch),
            (match_type, _) => return Err(ClientQuotaError::UnknownMatchType { match_type }),
        };
        wanted.insert(c.entity_type.as_str(), want);
    }
    if wanted.contains_key(ENTITY_IP)
        && (wanted.contains_key(ENTITY_USER) || wanted.contains_key(ENTITY_CLIENT_ID))
    {
        return Err(ClientQuotaError::IpFilterCombination);
    }
    if wanted.is_empty() && strict {
        return Ok(Vec::new());
    }
    Ok(quotas
        .entities
        .iter()
        .filter(|(entity, _)| {
            let each = wanted.iter().all(|(t, want)| match entity.get(*t) {
                None => false,
                Some(name) => want.is_none_or(|w| name.as_deref() == w),
            });
            each && (!strict || entity.len() == wanted.len())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(p: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        p.iter()
            .map(|(t, n)| ((*t).to_owned(), n.map(str::to_owned)))
            .collect()
    }

    fn set(q: &mut ClientQuotas, p: &[(&str, Option<&str>)], key: &str, v: Option<f64>) {
        for r in alter_client_quota_records(q, &parts(p), &[(key.to_owned(), v)]).unwrap() {
            let MetadataRecord::ClientQuota(r) = MetadataRecord::decode(&r.encode()).unwrap()
            else {
                panic!("not a quota record")
            };
            q.apply(&r);
        }
    }

    #[test]
    fn set_change_and_remove_write_only_what_changes() {
        let mut q = ClientQuotas::default();
        let e = [("client-id", Some("app"))];
        set(&mut q, &e, PRODUCER_BYTE_RATE, Some(1024.0));
        let entity = validate_entity(&parts(&e)).unwrap();
        assert_eq!(q.get(&entity, PRODUCER_BYTE_RATE), Some(1024.0));
        let same = alter_client_quota_records(
            &q,
            &parts(&e),
            &[(PRODUCER_BYTE_RATE.to_owned(), Some(1024.0))],
        )
        .unwrap();
        assert!(same.is_empty(), "an unchanged value writes nothing");
        let absent =
            alter_client_quota_records(&q, &parts(&e), &[(CONSUMER_BYTE_RATE.to_owned(), None)])
                .unwrap();
        assert!(absent.is_empty(), "removing an unset key writes nothing");
        set(&mut q, &e, PRODUCER_BYTE_RATE, None);
        assert!(q.entities.is_empty(), "an entity without quotas is dropped");
    }

    #[test]
    fn bad_entities_keys_and_values_are_refused() {
        let q = ClientQuotas::default();
        let alter = |p: &[(&str, Option<&str>)], key: &str, v: f64| {
            alter_client_quota_records(&q, &parts(p), &[(key.to_owned(), Some(v))]).unwrap_err()
        };
        let user = [("user", Some("u"))];
        assert_eq!(
            alter(&[], PRODUCER_BYTE_RATE, 1.0),
            ClientQuotaError::EmptyEntity
        );
        assert!(matches!(
            alter(
                &[("user", Some("a")), ("user", Some("b"))],
                PRODUCER_BYTE_RATE,
                1.0
            ),
            ClientQuotaError::DuplicateEntityType { .. }
        ));
        assert!(matches!(
            alter(&[("group", Some("g"))], PRODUCER_BYTE_RATE, 1.0),
            ClientQuotaError::UnknownEntityType { .. }
        ));
        assert!(matches!(
            alter(&[("user", Some(""))], PRODUCER_BYTE_RATE, 1.0),
            ClientQuotaError::EmptyName { .. }
        ));
        assert!(matches!(
            alter(&user, "retention.ms", 1.0),
            ClientQuotaError::UnknownKey { .. }
        ));
        assert!(matches!(
            alter(&user, PRODUCER_BYTE_RATE, 1.5),
            ClientQuotaError::NotALong { .. }
        ));
        assert!(matches!(
            alter(&user, CONSUMER_BYTE_RATE, -5.0),
            ClientQuotaError::InvalidValue { .. }
        ));
        assert!(matches!(
            alter(&user, REQUEST_PERCENTAGE, f64::NAN),
            ClientQuotaError::InvalidValue { .. }
        ));
        assert!(
            alter_client_quota_records(
                &q,
                &parts(&user),
                &[(REQUEST_PERCENTAGE.to_owned(), Some(12.5))]
            )
            .is_ok()
        );
        assert!(matches!(
            alter_client_quota_records(
                &q,
                &parts(&user),
                &[
                    (PRODUCER_BYTE_RATE.to_owned(), Some(1.0)),
                    (PRODUCER_BYTE_RATE.to_owned(), None)
                ]
            ),
            Err(ClientQuotaError::DuplicateKey { .. })
        ));
    }

    #[test]
    fn filters_match_exact_default_and_any() {
        let mut q = ClientQuotas::default();
        set(
            &mut q,
            &[("user", Some("alice"))],
            PRODUCER_BYTE_RATE,
            Some(1.0),
        );
        set(&mut q, &[("user", None)], PRODUCER_BYTE_RATE, Some(2.0));
        set(
            &mut q,
            &[("user", Some("alice")), ("client-id", Some("app"))],
            PRODUCER_BYTE_RATE,
            Some(3.0),
        );
        set(
            &mut q,
            &[("client-id", None)],
            CONSUMER_BYTE_RATE,
            Some(4.0),
        );
        let c = |t: &str, m: i8, n: Option<&str>| FilterComponent {
            entity_type: t.to_owned(),
            match_type: m,
            name: n.map(str::to_owned),
        };
        let count = |f: &[FilterComponent], strict: bool| {
            describe_client_quotas(&q, f, strict).unwrap().len()
        };
        assert_eq!(count(&[], false), 4);
        assert_eq!(count(&[], true), 0);
        assert_eq!(
            count(&[c("user", MATCH_TYPE_EXACT, Some("alice"))], false),
            2
        );
        assert_eq!(
            count(&[c("user", MATCH_TYPE_EXACT, Some("alice"))], true),
            1
        );
        assert_eq!(count(&[c("user", MATCH_TYPE_DEFAULT, None)], true), 1);
        assert_eq!(count(&[c("user", MATCH_TYPE_SPECIFIED, None)], false), 3);
        assert_eq!(count(&[c("user", MATCH_TYPE_SPECIFIED, None)], true), 2);
        assert_eq!(
            count(&[c("client-id", MATCH_TYPE_SPECIFIED, None)], false),
            2
        );
        assert_eq!(
            count(
                &[
                    c("user", MATCH_TYPE_SPECIFIED, None),
                    c("client-id", MATCH_TYPE_EXACT, Some("app"))
                ],
                true
            ),
            1
        );
        let err = |f: &[FilterComponent]| describe_client_quotas(&q, f, false).unwrap_err();
        assert_eq!(
            err(&[c("user", MATCH_TYPE_EXACT, None)]),
            ClientQuotaError::ExactWithoutMatch
        );
        assert!(matches!(
            err(&[c("user", 7, None)]),
            ClientQuotaError::UnknownMatchType { match_type: 7 }
        ));
        assert!(matches!(
            err(&[c("group", MATCH_TYPE_SPECIFIED, None)]),
            ClientQuotaError::UnsupportedEntityType { .. }
        ));
        assert!(matches!(
            err(&[
                c("user", MATCH_TYPE_SPECIFIED, None),
                c("user", MATCH_TYPE_DEFAULT, None)
            ]),
            ClientQuotaError::DuplicateFilterType { .. }
        ));
        assert_eq!(
            err(&[
                c("ip", MATCH_TYPE_SPECIFIED, None),
                c("user", MATCH_TYPE_DEFAULT, None)
            ]),
            ClientQuotaError::IpFilterCombination
        );
    }
}
