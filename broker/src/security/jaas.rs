//! Kafka's `sasl.jaas.config` values: one JAAS login-module entry, as Kafka's
//! `JaasConfig` parses it (`<LoginModuleClass> <flag> key="value" key2=value2;`).
//!
//! Only the options matter to the broker: PLAIN's `user_<name>="<password>"` entries are the
//! users it accepts (Kafka's `PlainServerCallbackHandler`), and `username` / `password` are
//! the node's own credentials.

use std::collections::BTreeMap;

/// One parsed login-module entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasEntry {
    /// The login module's class, e.g. `org.apache.kafka.common.security.plain.PlainLoginModule`.
    pub module: String,
    /// `required`, `requisite`, `sufficient` or `optional`.
    pub flag: String,
    /// The options, in the order given (a repeated key keeps its last value).
    pub options: BTreeMap<String, String>,
}

/// Why a value does not parse, in the words of Kafka's `JaasConfig`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JaasError {
    #[error("JAAS config entry not terminated by semi-colon")]
    Unterminated,
    #[error("JAAS config has no login module")]
    NoModule,
    #[error("Invalid JAAS config flag {0:?}: expected required, requisite, sufficient or optional")]
    BadFlag(String),
    #[error("Invalid JAAS config option {0:?}: expected key=value")]
    BadOption(String),
    #[error("JAAS config property does not contain exactly one login module")]
    NotOneModule,
}

/// Parses a `sasl.jaas.config` value, which Kafka requires to hold exactly one entry.
///
/// # Errors
///
/// The value is not one well-formed login-module entry.
pub fn parse(value: &str) -> Result<JaasEntry, JaasError> {
    let tokens = tokenize(value)?;
    let mut it = tokens.into_iter().peekable();
    let module = match it.next() {
        Some(Token::Word(w)) => w,
        Some(Token::Semicolon) | None => return Err(JaasError::NoModule),
    };
    let flag = match it.next() {
        Some(Token::Word(w)) => w,
        _ => return Err(JaasError::Unterminated),
    };
    if !matches!(
        flag.to_ascii_lowercase().as_str(),
        "required" | "requisite" | "sufficient" | "optional"
    ) {
        return Err(JaasError::BadFlag(flag));
    }
    let mut options = BTreeMap::new();
    loop {
        match it.next() {
            Some(Token::Semicolon) => break,
            Some(Token::Word(w)) => {
                let (k, v) = w.split_once('=').ok_or(JaasError::BadOption(w.clone()))?;
                if k.is_empty() {
                    return Err(JaasError::BadOption(w.clone()));
                }
                options.insert(k.to_owned(), v.to_owned());
            }
            None => return Err(JaasError::Unterminated),
        }
    }
    if it.next().is_some() {
        return Err(JaasError::NotOneModule);
    }
    Ok(JaasEntry {
        module,
        flag,
        options,
    })
}

enum Token {
    /// A word: a module name, a flag, or `key=value` with the value's quotes removed.
    Word(String),
    Semicolon,
}

/// Splits on white space and `;`, keeping a double-quoted stretch (with `\"` and `\\`
/// escapes) inside its word.
fn tokenize(value: &str) -> Result<Vec<Token>, JaasError> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e) => word.push(e),
                            None => return Err(JaasError::Unterminated),
                        },
                        Some(ch) => word.push(ch),
                        None => return Err(JaasError::Unterminated),
                    }
                }
            }
            ';' => {
                if in_word {
                    tokens.push(Token::Word(std::mem::take(&mut word)));
                    in_word = false;
                }
                tokens.push(Token::Semicolon);
            }
            c if c.is_whitespace() => {
                if in_word {
                    tokens.push(Token::Word(std::mem::take(&mut word)));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        tokens.push(Token::Word(word));
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_users_parse_as_kafka_documents_them() {
        let e = parse(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required
               username="admin" password="admin-secret"
               user_admin="admin-secret" user_alice="al;ice \"q\"";"#,
        )
        .unwrap();
        assert_eq!(
            e.module,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(e.flag, "required");
        assert_eq!(e.options["username"], "admin");
        assert_eq!(e.options["user_admin"], "admin-secret");
        assert_eq!(e.options["user_alice"], "al;ice \"q\"");
    }

    #[test]
    fn malformed_values_are_refused() {
        assert_eq!(parse(""), Err(JaasError::NoModule));
        assert_eq!(parse("M required a=\"b\""), Err(JaasError::Unterminated));
        assert_eq!(parse("M maybe;"), Err(JaasError::BadFlag("maybe".into())));
        assert_eq!(
            parse("M required novalue;"),
            Err(JaasError::BadOption("novalue".into()))
        );
        assert_eq!(
            parse("M required; N required;"),
            Err(JaasError::NotOneModule)
        );
        assert_eq!(parse("M required a=\"b;"), Err(JaasError::Unterminated));
        let e = parse("M optional k=v;").unwrap();
        assert_eq!(e.options["k"], "v");
    }
}
