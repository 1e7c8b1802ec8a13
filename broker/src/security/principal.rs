//! Principals: who a connection is, as Kafka's `DefaultKafkaPrincipalBuilder` decides it.
//!
//! - SASL: `User:<the authenticated user>`.
//! - TLS with a client certificate: `User:<the subject's distinguished name>`, in RFC 2253
//!   form (`CN=client,OU=eng,O=Example`, most specific first, as Java's
//!   `X500Principal.getName()` prints it), rewritten by `ssl.principal.mapping.rules`
//!   (Kafka's `SslPrincipalMapper`).
//! - Anything else: `User:ANONYMOUS`.

use regex::Regex;

/// Kafka's `KafkaPrincipal.ANONYMOUS`.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// The principal of a user name.
#[must_use]
pub fn user(name: &str) -> String {
    format!("User:{name}")
}

/// The subject of a DER certificate as an RFC 2253 distinguished name; `None` where it does
/// not parse.
#[must_use]
pub fn subject_dn(cert_der: &[u8]) -> Option<String> {
    use x509_parser::prelude::*;
    let (_, cert) = X509Certificate::from_der(cert_der).ok()?;
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter() {
        let mut parts = Vec::new();
        for attr in rdn.iter() {
            let oid = attr.attr_type();
            let name = match oid.to_id_string().as_str() {
                "2.5.4.3" => "CN".to_owned(),
                "2.5.4.6" => "C".to_owned(),
                "2.5.4.7" => "L".to_owned(),
                "2.5.4.8" => "ST".to_owned(),
                "2.5.4.10" => "O".to_owned(),
                "2.5.4.11" => "OU".to_owned(),
                "2.5.4.9" => "STREET".to_owned(),
                "0.9.2342.19200300.100.1.25" => "DC".to_owned(),
                "0.9.2342.19200300.100.1.1" => "UID".to_owned(),
                other => other.to_owned(),
            };
            let value = attr.as_str().map_or_else(
                |_| format!("#{}", hex(attr.attr_value().data)),
                escape_rfc2253,
            );
            parts.push(format!("{name}={value}"));
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// RFC 2253 §2.4's escapes.
fn escape_rfc2253(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `ssl.principal.mapping.rules`: `RULE:<pattern>/<replacement>/[LU]` entries and
/// `DEFAULT`, tried in order; the first whose pattern matches the whole name decides.
#[derive(Debug, Clone)]
pub struct SslPrincipalMapper {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        pattern: Regex,
        replacement: String,
        case: Option<char>,
    },
}

impl SslPrincipalMapper {
    /// Parses the rules.
    ///
    /// # Errors
    ///
    /// A rule that does not parse, or whose pattern is not a regular expression.
    pub fn parse(rules: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        let mut rest = rules.trim();
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("DEFAULT") {
                out.push(Rule::Default);
                rest = r;
            } else if let Some(r) = rest.strip_prefix("RULE:") {
                let (pattern, r) = until_slash(r).ok_or_else(|| format!("Invalid rule: {rest}"))?;
                let (replacement, r) =
                    until_slash(r).ok_or_else(|| format!("Invalid rule: {rest}"))?;
                let (case, r) = match r.chars().next() {
                    Some(c @ ('L' | 'U')) => (Some(c), &r[1..]),
                    _ => (None, r),
                };
                let pattern = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| format!("Invalid rule pattern {pattern}: {e}"))?;
                out.push(Rule::Replace {
                    pattern,
                    replacement: java_replacement(&replacement),
                    case,
                });
                rest = r;
            } else {
                return Err(format!("Invalid rule: {rest}"));
            }
            rest = rest.trim_start();
            match rest.strip_prefix(',') {
                Some(r) => rest = r.trim_start(),
                None if rest.is_empty() => {}
                None => return Err(format!("Invalid rule: {rest}")),
            }
        }
        if out.is_empty() {
            out.push(Rule::Default);
        }
        Ok(SslPrincipalMapper { rules: out })
    }

    /// The short name of distinguished name `dn`; `None` when no rule matches (Kafka
    /// refuses the connection then).
    #[must_use]
    pub fn map(&self, dn: &str) -> Option<String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Some(dn.to_owned()),
                Rule::Replace {
                    pattern,
                    replacement,
                    case,
                } => {
                    if pattern.is_match(dn) {
                        let mapped = pattern.replace(dn, replacement.as_str()).into_owned();
                        return Some(match case {
                            Some('L') => mapped.to_lowercase(),
                            Some('U') => mapped.to_uppercase(),
                            _ => mapped,
                        });
                    }
                }
            }
        }
        None
    }
}

/// The text up to the first `/` not escaped by `\`, and what follows it.
fn until_slash(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                let (_, n) = chars.next()?;
                if n != '/' {
                    out.push('\\');
                }
                out.push(n);
            }
            '/' => return Some((out, &s[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// Java's `$1` group references become the regex crate's `${1}`.
fn java_replacement(r: &str) -> String {
    let mut out = String::new();
    let mut chars = r.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            let mut n = String::new();
            while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                n.push(*d);
                chars.next();
            }
            out.push_str(&format!("${{{n}}}"));
        } else if c == '$' {
            out.push_str("$$");
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_documented_rules_map_names() {
        // The examples of Kafka's documentation (security.html, "Customizing SSL User Name").
        let m = SslPrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT",
        )
        .unwrap();
        assert_eq!(
            m.map("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
                .unwrap(),
            "serviceuser"
        );
        assert_eq!(
            m.map("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
                .unwrap(),
            "adminuser@admin"
        );
        assert_eq!(m.map("OU=x,cn=Bob.Smith,O=y").unwrap(), "bob.smith");
        assert_eq!(m.map("O=nothing").unwrap(), "O=nothing");
        let strict = SslPrincipalMapper::parse("RULE:^CN=(.*)$/$1/U").unwrap();
        assert_eq!(strict.map("CN=abc").unwrap(), "ABC");
        assert_eq!(strict.map("O=abc"), None);
        assert_eq!(
            SslPrincipalMapper::parse("DEFAULT")
                .unwrap()
                .map("CN=a,O=b")
                .unwrap(),
            "CN=a,O=b"
        );
        assert!(SslPrincipalMapper::parse("RULE:abc").is_err());
        assert!(SslPrincipalMapper::parse("NONSENSE").is_err());
        assert!(SslPrincipalMapper::parse("RULE:(/x/").is_err());
    }

    #[test]
    fn rfc2253_escapes() {
        assert_eq!(escape_rfc2253("a,b"), "a\\,b");
        assert_eq!(escape_rfc2253(" lead"), "\\ lead");
        assert_eq!(escape_rfc2253("#x"), "\\#x");
        assert_eq!(escape_rfc2253("plain"), "plain");
    }
}
