//! Cluster identity: `<log_dir>/meta.properties`, in Kafka's format, so a log dir can
//! never be silently mounted under another node id or joined to another cluster.
//!
//! The file is Java-properties text (KIP-631, version 1 = KRaft):
//!
//! ```text
//! #Written by Strata. Kafka meta.properties format.
//! version=1
//! cluster.id=<22 characters of URL-safe base64, no padding>
//! node.id=<node.id>
//! directory.id=<22 characters of URL-safe base64, no padding>
//! ```
//!
//! Lines starting with `#` or `!` are comments; keys we don't know are ignored.
//! `directory.id` (KIP-858, written by Kafka 3.7+ and by Strata since dynamic quorums) is
//! new for every formatting of the directory: KIP-853 tells a voter that lost its disk from
//! the voter it was by it. A file written without one reads as the nil id. The file is
//! written once, atomically (temp file, fsync, rename, fsync of the directory), and only
//! read afterwards.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use uuid::Uuid;

use crate::{MetaPropertiesError, MetadataError};

/// The file name inside each log dir.
pub const META_PROPERTIES_FILE: &str = "meta.properties";

/// The identity a log dir belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    /// The cluster this dir was formatted for.
    pub cluster_id: String,
    /// The node this dir belongs to.
    pub node_id: i32,
    /// This formatting of the dir (KIP-858); the nil id when the file has none.
    pub directory_id: Uuid,
}

/// Kafka's string form of a UUID: its 16 bytes in URL-safe base64 without padding
/// (`org.apache.kafka.common.Uuid.toString`), 22 characters.
pub fn kafka_uuid_string(id: Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let n = id.as_u128();
    // 22 sextets cover 132 bits; the 128 bits are left-aligned, so the last sextet
    // carries 2 bits of data and 4 zero bits, exactly like padding-free base64.
    (0..22)
        .map(|i| {
            let shift = 128 - 6 * (i + 1);
            let sextet = if shift >= 0 {
                (n >> shift) & 0x3f
            } else {
                (n << -shift) & 0x3f
            };
            ALPHABET[sextet as usize] as char
        })
        .collect()
}

/// Parses Kafka's string form of a UUID ([`kafka_uuid_string`]'s inverse).
pub fn parse_kafka_uuid(s: &str) -> Option<Uuid> {
    if s.len() != 22 {
        return None;
    }
    let mut n: u128 = 0;
    for (i, c) in s.bytes().enumerate() {
        let sextet = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        if i < 21 {
            n = (n << 6) | u128::from(sextet);
        } else {
            // The last sextet carries the 2 low bits and 4 zero bits of padding.
            if sextet & 0x0f != 0 {
                return None;
            }
            n = (n << 2) | u128::from(sextet >> 4);
        }
    }
    Some(Uuid::from_u128(n))
}

/// A fresh cluster id, drawing UUIDs from `next_uuid` until one does not start with `-`
/// (Kafka's `Uuid.randomUuid` rule, so tools don't read the id as a flag).
pub fn generate_cluster_id(mut next_uuid: impl FnMut() -> Uuid) -> String {
    loop {
        let id = kafka_uuid_string(next_uuid());
        if !id.starts_with('-') {
            return id;
        }
    }
}

/// The cluster id of a multi-voter quorum started without `cluster.id`: every node derives
/// the same one from the static voter set, so an empty data directory can be formatted on
/// first start with no separate format step and no configured id.
///
/// The voters (`controller.quorum.voters`: id, host, port) are sorted by id and written
/// as `id@host:port` joined by `,` after a fixed label; the 128-bit FNV-1a hash of those
/// bytes, with the version and variant bits of an RFC 9562 version-8 (custom) UUID set,
/// is the id, in Kafka's string form. A hash that would print with a leading `-` is
/// hashed again with a counter appended (Kafka's `Uuid.randomUuid` refuses such ids too).
///
/// Its limit: two clusters whose voter strings are identical (same ids, hosts and ports)
/// get the same id and would accept each other's requests; such clusters must set
/// `cluster.id`. Nodes that spell a voter differently (`localhost` against `127.0.0.1`)
/// derive different ids and refuse each other, as with mismatched `cluster.id`s.
pub fn cluster_id_from_voters<'a>(voters: impl IntoIterator<Item = (i32, &'a str, u16)>) -> String {
    let mut voters: Vec<(i32, &str, u16)> = voters.into_iter().collect();
    voters.sort_unstable();
    let text = voters
        .iter()
        .map(|(id, host, port)| format!("{id}@{host}:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    derived_cluster_id(&format!(
        "strata cluster.id from controller.quorum.voters={text}"
    ))
}

/// The cluster id of a dynamic quorum (KIP-853) started without `cluster.id`: as
/// [`cluster_id_from_voters`], from `controller.quorum.bootstrap.servers` (sorted, as
/// `host:port`), which every node of the cluster lists alike.
pub fn cluster_id_from_bootstrap_servers<'a>(
    servers: impl IntoIterator<Item = (&'a str, u16)>,
) -> String {
    let mut servers: Vec<(&str, u16)> = servers.into_iter().collect();
    servers.sort_unstable();
    let text = servers
        .iter()
        .map(|(host, port)| format!("{host}:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    derived_cluster_id(&format!(
        "strata cluster.id from controller.quorum.bootstrap.servers={text}"
    ))
}

/// The id for a labelled text (see [`cluster_id_from_voters`]).
fn derived_cluster_id(label: &str) -> String {
    let mut input = label.as_bytes().to_vec();
    let label_len = input.len();
    for attempt in 0u32.. {
        input.truncate(label_len);
        if attempt > 0 {
            input.extend_from_slice(format!("#{attempt}").as_bytes());
        }
        let mut bytes = fnv1a_128(&input).to_be_bytes();
        bytes[6] = (bytes[6] & 0x0f) | 0x80; // version 8
        bytes[8] = (bytes[8] & 0x3f) | 0x80; // the RFC variant
        let id = kafka_uuid_string(Uuid::from_bytes(bytes));
        if !id.starts_with('-') {
            return id;
        }
    }
    unreachable!("some attempt prints without a leading '-'")
}

/// The 128-bit FNV-1a hash (Fowler, Noll and Vo's published offset basis and prime): a
/// fixed, dependency-free function, so every node and every release derives the same id.
fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET_BASIS: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    bytes.iter().fold(OFFSET_BASIS, |h, b| {
        (h ^ u128::from(*b)).wrapping_mul(PRIME)
    })
}

impl MetaProperties {
    /// Parses the file's text.
    ///
    /// # Errors
    ///
    /// [`MetadataError::InvalidMetaProperties`] for a missing key, a non-numeric
    /// `node.id` or a version other than 1.
    pub fn parse(text: &str, path: &Path) -> Result<Self, MetadataError> {
        let bad = |reason| MetadataError::InvalidMetaProperties {
            path: path.to_owned(),
            reason,
        };
        let mut version = None;
        let mut cluster_id = None;
        let mut node_id = None;
        let mut directory_id = Uuid::nil();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let Some((key, value)) = line.split_once(['=', ':']) else {
                continue;
            };
            let value = value.trim();
            match key.trim() {
                "version" => version = Some(value.to_owned()),
                "cluster.id" => cluster_id = Some(value.to_owned()),
                "node.id" => node_id = Some(value.to_owned()),
                "directory.id" => {
                    directory_id =
                        parse_kafka_uuid(value).ok_or(bad(MetaPropertiesError::InvalidValue {
                            key: "directory.id",
                            value: value.to_owned(),
                        }))?;
                }
                _ => {}
            }
        }
        let version = version.ok_or(bad(MetaPropertiesError::MissingKey("version")))?;
        if version != "1" {
            return Err(bad(MetaPropertiesError::UnsupportedVersion(version)));
        }
        let cluster_id = cluster_id
            .filter(|c| !c.is_empty())
            .ok_or(bad(MetaPropertiesError::MissingKey("cluster.id")))?;
        let node_id = node_id.ok_or(bad(MetaPropertiesError::MissingKey("node.id")))?;
        let node_id = node_id.parse().map_err(|_| {
            bad(MetaPropertiesError::InvalidValue {
                key: "node.id",
                value: node_id.clone(),
            })
        })?;
        Ok(MetaProperties {
            cluster_id,
            node_id,
            directory_id,
        })
    }

    /// The file's text.
    pub fn render(&self) -> String {
        let mut text = format!(
            "#Written by Strata. Kafka meta.properties format.\nversion=1\ncluster.id={}\nnode.id={}\n",
            self.cluster_id, self.node_id
        );
        if !self.directory_id.is_nil() {
            text.push_str(&format!(
                "directory.id={}\n",
                kafka_uuid_string(self.directory_id)
            ));
        }
        text
    }

    /// Reads `<log_dir>/meta.properties`, or on first start writes one with a new
    /// cluster id from `new_cluster_id`.
    ///
    /// # Errors
    ///
    /// [`MetadataError::NodeIdMismatch`] when the file belongs to another node;
    /// [`MetadataError::InvalidMetaProperties`] when it cannot be parsed;
    /// [`MetadataError::Io`] on file errors.
    pub fn load_or_create(
        log_dir: &Path,
        node_id: i32,
        new_cluster_id: impl FnOnce() -> String,
    ) -> Result<Self, MetadataError> {
        let path = log_dir.join(META_PROPERTIES_FILE);
        let io_err = |path: &Path| {
            let path = path.to_owned();
            move |source| MetadataError::Io { path, source }
        };
        match fs::read_to_string(&path) {
            Ok(text) => {
                let props = Self::parse(&text, &path)?;
                if props.node_id != node_id {
                    return Err(MetadataError::NodeIdMismatch {
                        path,
                        configured: node_id,
                        stored: props.node_id,
                    });
                }
                Ok(props)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let props = MetaProperties {
                    cluster_id: new_cluster_id(),
                    node_id,
                    directory_id: Uuid::new_v4(),
                };
                fs::create_dir_all(log_dir).map_err(io_err(log_dir))?;
                write_atomically(&path, props.render().as_bytes()).map_err(io_err(&path))?;
                tracing::info!(cluster_id = %props.cluster_id, node_id, path = %path.display(), "formatted log dir");
                Ok(props)
            }
            Err(e) => Err(io_err(&path)(e)),
        }
    }
}

/// Writes `bytes` so that a crash leaves either no file or the whole file.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp: PathBuf = path.with_extension("properties.tmp");
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        // The rename is durable only once the directory entry is.
        fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_128_matches_the_published_test_vectors() {
        assert_eq!(fnv1a_128(b""), 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d);
        assert_eq!(fnv1a_128(b"a"), 0xd228_cb69_6f1a_8caf_7891_2b70_4e4a_8964);
    }

    #[test]
    fn the_derived_cluster_id_depends_on_the_voter_set_only() {
        let a = cluster_id_from_voters([(1, "h1", 9093), (2, "h2", 9093), (3, "h3", 9093)]);
        let b = cluster_id_from_voters([(3, "h3", 9093), (1, "h1", 9093), (2, "h2", 9093)]);
        assert_eq!(a, b, "the order voters are listed in does not matter");
        assert_eq!(a.len(), 22);
        assert!(!a.starts_with('-'));
        // A valid Kafka UUID string: its last character carries 2 bits and 4 zero bits.
        let last = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
            .iter()
            .position(|c| *c == a.as_bytes()[21])
            .unwrap();
        assert_eq!(last & 0x0f, 0);
        for other in [
            cluster_id_from_voters([(1, "h1", 9093), (2, "h2", 9093), (3, "h3", 9094)]),
            cluster_id_from_voters([(1, "h1", 9093), (2, "h2", 9093), (4, "h3", 9093)]),
            cluster_id_from_voters([(1, "h1", 9093), (2, "h2", 9093)]),
            cluster_id_from_voters([(1, "h1", 9093), (2, "h2", 9093), (3, "h4", 9093)]),
        ] {
            assert_ne!(a, other);
        }
        let d = cluster_id_from_bootstrap_servers([("h1", 9093), ("h2", 9093)]);
        assert_eq!(
            d,
            cluster_id_from_bootstrap_servers([("h2", 9093), ("h1", 9093)])
        );
        assert_ne!(d, cluster_id_from_bootstrap_servers([("h1", 9093)]));
        assert_ne!(d, a);
        // Fixed across releases: a cluster formatted by one version must be joinable by the
        // next, whose nodes derive the id again for an empty data directory.
        assert_eq!(a, "HfQjQDVQiC2Hb6u2lNR9Aw");
    }

    #[test]
    fn kafka_uuid_strings_parse_back() {
        for n in [
            0,
            1,
            7,
            u128::MAX,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
        ] {
            let id = Uuid::from_u128(n);
            assert_eq!(parse_kafka_uuid(&kafka_uuid_string(id)), Some(id));
        }
        assert_eq!(parse_kafka_uuid("AAAAAAAAAAAAAAAAAAAAAB"), None); // padding bits set
        assert_eq!(parse_kafka_uuid("AAAA"), None);
        assert_eq!(parse_kafka_uuid("AAAAAAAAAAAAAAAAAAAA*A"), None);
    }

    #[test]
    fn kafka_uuid_string_matches_kafka() {
        // Kafka: new Uuid(0, 1).toString() == "AAAAAAAAAAAAAAAAAAAAAQ"
        assert_eq!(
            kafka_uuid_string(Uuid::from_u128(1)),
            "AAAAAAAAAAAAAAAAAAAAAQ"
        );
        assert_eq!(kafka_uuid_string(Uuid::nil()), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(
            kafka_uuid_string(Uuid::from_u128(u128::MAX)),
            "_____________________w"
        );
        assert_eq!(kafka_uuid_string(Uuid::from_u128(u128::MAX)).len(), 22);
    }

    #[test]
    fn generated_cluster_ids_never_start_with_a_dash() {
        let mut ids = [Uuid::from_bytes([0xf8; 16]), Uuid::from_u128(7)].into_iter();
        let id = generate_cluster_id(|| ids.next().unwrap());
        assert_eq!(id, kafka_uuid_string(Uuid::from_u128(7)));
    }

    #[test]
    fn parses_kafka_written_files() {
        let text = "#\n#Tue Jan 02 10:00:00 UTC 2024\nnode.id=3\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n";
        let p = MetaProperties::parse(text, Path::new("m")).unwrap();
        assert_eq!(
            p,
            MetaProperties {
                cluster_id: "MkU3OEVBNTcwNTJENDM2Qk".into(),
                node_id: 3,
                directory_id: parse_kafka_uuid("J8aAPcfLQt2bqs1JT_rMgQ").unwrap(),
            }
        );
        assert_eq!(
            MetaProperties::parse(&p.render(), Path::new("m")).unwrap(),
            p
        );
    }

    #[test]
    fn rejects_zk_era_and_incomplete_files() {
        let err = |t: &str| match MetaProperties::parse(t, Path::new("m")) {
            Err(MetadataError::InvalidMetaProperties { reason, .. }) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            err("version=0\nbroker.id=1\ncluster.id=x\n"),
            MetaPropertiesError::UnsupportedVersion("0".into())
        );
        assert_eq!(
            err("version=1\nnode.id=1\n"),
            MetaPropertiesError::MissingKey("cluster.id")
        );
        assert_eq!(
            err("version=1\ncluster.id=x\n"),
            MetaPropertiesError::MissingKey("node.id")
        );
        assert_eq!(
            err("version=1\ncluster.id=x\nnode.id=one\n"),
            MetaPropertiesError::InvalidValue {
                key: "node.id",
                value: "one".into()
            }
        );
    }

    #[test]
    fn first_start_writes_and_later_starts_check_node_id() {
        let dir = tempfile::tempdir().unwrap();
        let first = MetaProperties::load_or_create(dir.path(), 1, || "cid".into()).unwrap();
        let again = MetaProperties::load_or_create(dir.path(), 1, || unreachable!()).unwrap();
        assert_eq!(first, again);
        assert!(matches!(
            MetaProperties::load_or_create(dir.path(), 2, || unreachable!()),
            Err(MetadataError::NodeIdMismatch {
                configured: 2,
                stored: 1,
                ..
            })
        ));
    }
}
