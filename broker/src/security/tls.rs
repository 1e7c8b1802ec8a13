//! TLS on a listener: a rustls server configuration made from Kafka's `ssl.*` keys, and
//! its reload when the files it came from change.
//!
//! Keystores and truststores are read in the formats Kafka accepts that a Rust program can
//! read: `PEM` (files, or the `ssl.keystore.key` / `ssl.keystore.certificate.chain` /
//! `ssl.truststore.certificates` values themselves) and `PKCS12`. Java's `JKS` is refused
//! at start with a message that says so (convert with `keytool -importkeystore
//! -deststoretype PKCS12`). A keystore whose type is left at Kafka's default (`JKS`) is read
//! as PEM or PKCS12 by its content, since a JKS file is neither.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::config::BrokerConfig;

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// A listener's TLS keys, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub listener: String,
    keystore_type: Option<String>,
    keystore_location: Option<PathBuf>,
    keystore_password: String,
    key_password: Option<String>,
    keystore_key: Option<String>,
    keystore_chain: Option<String>,
    truststore_type: Option<String>,
    truststore_location: Option<PathBuf>,
    truststore_password: String,
    truststore_certificates: Option<String>,
    pub client_auth: ClientAuth,
    protocols: Vec<String>,
    cipher_suites: Vec<String>,
}

impl TlsSettings {
    /// The `ssl.*` keys of `listener` (its `listener.name.<l>.` overrides first).
    ///
    /// # Errors
    ///
    /// `ssl.client.auth` is not one of Kafka's values.
    pub fn from_config(config: &BrokerConfig, listener: &str) -> anyhow::Result<Self> {
        Self::from_lookup(
            listener,
            |k| config.listener_value(listener, k).map(str::to_owned),
            |k| config.listener_value_is_explicit(listener, k),
        )
    }

    /// The `ssl.*` keys of `listener` as `value` gives them (`None`: unset), `explicit`
    /// telling which were set rather than left at their defaults: the static configuration,
    /// or that with the listener's dynamic `listener.name.<l>.ssl.*` values over it.
    ///
    /// # Errors
    ///
    /// `ssl.client.auth` is not one of Kafka's values.
    pub fn from_lookup(
        listener: &str,
        v: impl Fn(&str) -> Option<String>,
        explicit: impl Fn(&str) -> bool,
    ) -> anyhow::Result<Self> {
        let client_auth = match v("ssl.client.auth").as_deref().unwrap_or("none") {
            "none" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            other => anyhow::bail!("invalid ssl.client.auth {other:?} on listener {listener}"),
        };
        let list = |k: &str| {
            v(k).map(|s| {
                s.split(',')
                    .map(|p| p.trim().to_owned())
                    .filter(|p| !p.is_empty())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
        };
        Ok(TlsSettings {
            listener: listener.to_owned(),
            keystore_type: v("ssl.keystore.type").filter(|_| explicit("ssl.keystore.type")),
            keystore_location: v("ssl.keystore.location").map(PathBuf::from),
            keystore_password: v("ssl.keystore.password").unwrap_or_default(),
            key_password: v("ssl.key.password"),
            keystore_key: v("ssl.keystore.key"),
            keystore_chain: v("ssl.keystore.certificate.chain"),
            truststore_type: v("ssl.truststore.type").filter(|_| explicit("ssl.truststore.type")),
            truststore_location: v("ssl.truststore.location").map(PathBuf::from),
            truststore_password: v("ssl.truststore.password").unwrap_or_default(),
            truststore_certificates: v("ssl.truststore.certificates"),
            client_auth,
            protocols: list("ssl.enabled.protocols"),
            cipher_suites: list("ssl.cipher.suites"),
        })
    }

    /// The files the configuration is read from (watched for reloads).
    fn files(&self) -> Vec<PathBuf> {
        self.keystore_location
            .iter()
            .chain(&self.truststore_location)
            .cloned()
            .collect()
    }

    /// Builds the rustls configuration.
    ///
    /// # Errors
    ///
    /// A file cannot be read or parsed, a format is not supported, or the keys do not make
    /// a configuration (no private key, no certificate, no protocol or cipher suite left).
    pub fn server_config(&self) -> anyhow::Result<ServerConfig> {
        let l = &self.listener;
        let (certs, key) = self.keystore()?;
        let (provider, versions) = self.provider_and_versions()?;
        let builder = ServerConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(&versions)
            .map_err(|e| anyhow::anyhow!("listener {l}: {e}"))?;
        let builder = match self.client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            auth => {
                let roots = Arc::new(self.truststore("ssl.client.auth")?);
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(roots, Arc::new(ring_provider()));
                let verifier = if auth == ClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                builder.with_client_cert_verifier(
                    verifier
                        .build()
                        .map_err(|e| anyhow::anyhow!("listener {l}: truststore: {e}"))?,
                )
            }
        };
        let mut config = builder
            .with_single_cert(certs, key)
            .map_err(|e| anyhow::anyhow!("listener {l}: keystore: {e}"))?;
        // A session's keys may be handed to the kernel after the handshake (kTLS).
        config.enable_secret_extraction = super::ktls::support().any();
        Ok(config)
    }

    /// The ring provider narrowed to `ssl.cipher.suites`, and the versions of
    /// `ssl.enabled.protocols`.
    fn provider_and_versions(
        &self,
    ) -> anyhow::Result<(
        rustls::crypto::CryptoProvider,
        Vec<&'static rustls::SupportedProtocolVersion>,
    )> {
        let l = &self.listener;
        let mut provider = ring_provider();
        if !self.cipher_suites.is_empty() {
            provider.cipher_suites.retain(|s| {
                // rustls names TLS 1.3 suites `TLS13_*`; Java and Kafka, `TLS_*`.
                let name = format!("{:?}", s.suite()).replace("TLS13_", "TLS_");
                self.cipher_suites.contains(&name)
            });
            if provider.cipher_suites.is_empty() {
                anyhow::bail!(
                    "listener {l}: none of ssl.cipher.suites {:?} is supported",
                    self.cipher_suites
                );
            }
        }
        let mut versions = Vec::new();
        for p in &self.protocols {
            match p.as_str() {
                "TLSv1.3" => versions.push(&rustls::version::TLS13),
                "TLSv1.2" => versions.push(&rustls::version::TLS12),
                other => {
                    tracing::warn!(listener = %l, protocol = %other, "ssl.enabled.protocols: not supported, left out")
                }
            }
        }
        if versions.is_empty() {
            anyhow::bail!("listener {l}: ssl.enabled.protocols names neither TLSv1.2 nor TLSv1.3");
        }
        Ok((provider, versions))
    }

    /// The configuration this node connects to another node's `listener` with: the
    /// listener's truststore verifies the peer (and, unless `ssl.endpoint.identification.algorithm`
    /// is empty, that its certificate names the host connected to, Kafka's `https`), and
    /// its keystore, when it has one, is presented for `ssl.client.auth`.
    ///
    /// # Errors
    ///
    /// As [`TlsSettings::server_config`]; and a listener with no truststore.
    pub fn client_config(&self, verify_hostname: bool) -> anyhow::Result<rustls::ClientConfig> {
        let l = &self.listener;
        let (provider, versions) = self.provider_and_versions()?;
        let provider = Arc::new(provider);
        let roots = Arc::new(self.truststore("verifying the other nodes' certificates")?);
        let webpki =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| anyhow::anyhow!("listener {l}: truststore: {e}"))?;
        let verifier: Arc<dyn rustls::client::danger::ServerCertVerifier> = if verify_hostname {
            webpki
        } else {
            Arc::new(AnyHostName(webpki))
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(|e| anyhow::anyhow!("listener {l}: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let has_keystore = self.keystore_location.is_some()
            || (self.keystore_key.is_some() && self.keystore_chain.is_some());
        if has_keystore {
            let (certs, key) = self.keystore()?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| anyhow::anyhow!("listener {l}: keystore: {e}"))
        } else {
            Ok(builder.with_no_client_auth())
        }
    }

    fn keystore(&self) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
        let l = &self.listener;
        if let (Some(key), Some(chain)) = (&self.keystore_key, &self.keystore_chain) {
            return Ok((pem_certs(chain.as_bytes())?, self.pem_key(key.as_bytes())?));
        }
        let Some(path) = &self.keystore_location else {
            anyhow::bail!(
                "listener {l}: TLS needs ssl.keystore.location (or ssl.keystore.key and ssl.keystore.certificate.chain)"
            );
        };
        let data = std::fs::read(path)
            .map_err(|e| anyhow::anyhow!("listener {l}: cannot read {}: {e}", path.display()))?;
        match store_format(self.keystore_type.as_deref(), &data) {
            StoreFormat::Pem => Ok((pem_certs(&data)?, self.pem_key(&data)?)),
            StoreFormat::Pkcs12 => {
                let store = p12(&data, &self.keystore_password, path)?;
                let (_, chain) = store.private_key_chain().ok_or_else(|| {
                    anyhow::anyhow!("{}: no private key in the PKCS12 keystore", path.display())
                })?;
                let certs = chain
                    .certs()
                    .iter()
                    .map(|c| CertificateDer::from(c.as_der().to_vec()))
                    .collect();
                let key =
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()));
                Ok((certs, key))
            }
            StoreFormat::Jks => anyhow::bail!(
                "listener {l}: {}: JKS keystores are not supported; convert it with `keytool -importkeystore -deststoretype PKCS12`, or use PEM",
                path.display()
            ),
        }
    }

    fn pem_key(&self, data: &[u8]) -> anyhow::Result<PrivateKeyDer<'static>> {
        if String::from_utf8_lossy(data).contains("ENCRYPTED PRIVATE KEY") {
            anyhow::bail!(
                "listener {}: encrypted PEM private keys are not supported (ssl.key.password{}); store the key unencrypted with restricted file permissions, or use PKCS12",
                self.listener,
                if self.key_password.is_some() {
                    " is set"
                } else {
                    ""
                }
            );
        }
        PrivateKeyDer::from_pem_slice(data).map_err(|e| {
            anyhow::anyhow!(
                "listener {}: no private key in the keystore: {e}",
                self.listener
            )
        })
    }

    /// The truststore's certificates; `purpose` names what needs them, for the error when
    /// none is configured.
    fn truststore(&self, purpose: &str) -> anyhow::Result<RootCertStore> {
        let l = &self.listener;
        let certs = if let Some(pem) = &self.truststore_certificates {
            pem_certs(pem.as_bytes())?
        } else if let Some(path) = &self.truststore_location {
            trusted_certificates(
                path,
                self.truststore_type.as_deref(),
                &self.truststore_password,
            )
            .map_err(|e| anyhow::anyhow!("listener {l}: {e}"))?
        } else {
            anyhow::bail!(
                "listener {l}: {purpose} needs ssl.truststore.location or ssl.truststore.certificates"
            );
        };
        let mut roots = RootCertStore::empty();
        for c in certs {
            roots
                .add(c)
                .map_err(|e| anyhow::anyhow!("listener {l}: truststore certificate: {e}"))?;
        }
        if roots.is_empty() {
            anyhow::bail!("listener {l}: the truststore holds no certificate");
        }
        Ok(roots)
    }
}

/// rustls's ring provider. rustls marks it deprecated because ring has no post-quantum key
/// exchange; the aws-lc-rs provider that has one needs cmake and a much longer C build,
/// which this project's machines and CI budget do not carry. Kafka's Java clients do not
/// offer post-quantum key exchange either.
#[allow(deprecated)]
fn ring_provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// `ssl.endpoint.identification.algorithm=` (empty): the peer's chain and signatures are
/// verified as usual, but not that its certificate names the host connected to.
#[derive(Debug)]
struct AnyHostName(Arc<rustls::client::WebPkiServerVerifier>);

impl rustls::client::danger::ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls_pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        use rustls::CertificateError;
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

enum StoreFormat {
    Pem,
    Pkcs12,
    Jks,
}

/// The store's format: the configured type, or by content where the type is left at
/// Kafka's default.
fn store_format(configured: Option<&str>, data: &[u8]) -> StoreFormat {
    match configured.map(str::to_ascii_uppercase).as_deref() {
        Some("PEM") => StoreFormat::Pem,
        Some("PKCS12") => StoreFormat::Pkcs12,
        Some(_) => StoreFormat::Jks,
        None if data.starts_with(&[0xfe, 0xed, 0xfe, 0xed]) => StoreFormat::Jks,
        None if String::from_utf8_lossy(&data[..data.len().min(4096)]).contains("-----BEGIN") => {
            StoreFormat::Pem
        }
        None => StoreFormat::Pkcs12,
    }
}

fn p12(
    data: &[u8],
    password: &str,
    path: &std::path::Path,
) -> anyhow::Result<p12_keystore::KeyStore> {
    p12_keystore::KeyStore::from_pkcs12(data, password, p12_keystore::Pkcs12ImportPolicy::Relaxed)
        .map_err(|e| {
            anyhow::anyhow!(
                "{}: not a PKCS12 store this password opens: {e}",
                path.display()
            )
        })
}

/// The certificates of a truststore file (`ssl.truststore.location`, `.type`, `.password`).
///
/// # Errors
///
/// The file cannot be read, is JKS, or holds no certificate this password opens.
pub fn trusted_certificates(
    path: &std::path::Path,
    store_type: Option<&str>,
    password: &str,
) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let data =
        std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    match store_format(store_type, &data) {
        StoreFormat::Pem => pem_certs(&data),
        StoreFormat::Pkcs12 => Ok(p12(&data, password, path)?
            .entries()
            .filter_map(|(_, e)| match e {
                p12_keystore::KeyStoreEntry::Certificate(c) => {
                    Some(CertificateDer::from(c.as_der().to_vec()))
                }
                _ => None,
            })
            .collect()),
        StoreFormat::Jks => anyhow::bail!(
            "{}: JKS truststores are not supported; use PKCS12 or PEM",
            path.display()
        ),
    }
}

fn pem_certs(data: &[u8]) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(data)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("bad PEM certificate: {e}"))?;
    if certs.is_empty() {
        anyhow::bail!("no certificate in the PEM data");
    }
    Ok(certs)
}

/// A listener's TLS configuration, replaced when its files change, or when its settings do
/// (Kafka's dynamic `listener.name.<l>.ssl.keystore.*` and `ssl.truststore.*` updates,
/// which AlterConfigs stores and `reload` is handed).
pub struct ReloadingConfig {
    current: RwLock<Loaded>,
}

/// The configuration in use, the settings and file times it was built from, and the last
/// settings and times tried (equal unless the last change did not load).
struct Loaded {
    config: Arc<ServerConfig>,
    tried: (TlsSettings, Vec<Option<SystemTime>>),
}

impl ReloadingConfig {
    /// Builds the first configuration.
    ///
    /// # Errors
    ///
    /// As [`TlsSettings::server_config`].
    pub fn new(settings: TlsSettings) -> anyhow::Result<Arc<Self>> {
        let config = Arc::new(settings.server_config()?);
        let stamps = mtimes(&settings.files());
        Ok(Arc::new(ReloadingConfig {
            current: RwLock::new(Loaded {
                config,
                tried: (settings, stamps),
            }),
        }))
    }

    /// The configuration new connections get.
    #[must_use]
    pub fn current(&self) -> Arc<ServerConfig> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .config
            .clone()
    }

    /// Rebuilds the configuration from `settings` if they, or a file they name, changed
    /// since the last try. Settings or files that no longer load keep the previous
    /// configuration (logged once), as Kafka refuses a dynamic keystore update that fails
    /// validation. True when it was replaced.
    pub fn reload(&self, settings: TlsSettings) -> bool {
        let stamps = mtimes(&settings.files());
        let listener = settings.listener.clone();
        let settings_changed = {
            let cur = self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if cur.tried.0 == settings && cur.tried.1 == stamps {
                return false;
            }
            cur.tried.0 != settings
        };
        let built = settings.server_config();
        let mut cur = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cur.tried = (settings, stamps);
        match built {
            Ok(c) => {
                cur.config = Arc::new(c);
                tracing::info!(%listener, settings_changed, "TLS keystore and truststore reloaded");
                true
            }
            Err(e) => {
                tracing::warn!(%listener, error = %e, settings_changed, "TLS settings or files changed but do not load; keeping the previous ones");
                false
            }
        }
    }
}

fn mtimes(files: &[PathBuf]) -> Vec<Option<SystemTime>> {
    files
        .iter()
        .map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
        .collect()
}
