//! The JSON that Unit's `GET /certificates/NAME` shows for a bundle: `key` (`"RSA (2048 bits)"`,
//! `"ECDH (256 bits)"`), and for each certificate of the chain its `subject` and `issuer` (`common_name`,
//! `alt_names`, `country`, `state_or_province`, `locality`, `organization`, `department`) and `validity`
//! (`since`, `until`, written as OpenSSL prints times: `Sep 18 19:46:19 2022 GMT`). The same field names and
//! order as Unit, so scripts that read Unit's answers read rein's.

use rustls_pki_types::CertificateDer;
use serde_json::{Map, Value, json};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;
use x509_parser::public_key::PublicKey;
use x509_parser::x509::X509Name;

/// Why a certificate's DER does not parse.
pub type CertificateError = x509_parser::nom::Err<x509_parser::error::X509Error>;

/// What SNI and the validity check need of the leaf.
pub struct Leaf {
    pub names: Vec<String>,
    pub not_before: i64,
    pub not_after: i64,
}

impl Leaf {
    pub fn read(der: &CertificateDer<'_>) -> Result<Leaf, CertificateError> {
        let (_, cert) = X509Certificate::from_der(der)?;
        let mut names: Vec<String> = dns_names(&cert).map(str::to_ascii_lowercase).collect();
        if names.is_empty() {
            names = first(&cert.subject().iter_common_name().collect::<Vec<_>>())
                .map(|cn| vec![cn.to_ascii_lowercase()])
                .unwrap_or_default();
        }
        let validity = cert.validity();
        Ok(Leaf {
            names,
            not_before: validity.not_before.timestamp(),
            not_after: validity.not_after.timestamp(),
        })
    }
}

/// Unit's `key` text for the leaf's public key.
pub fn key(leaf: &CertificateDer<'_>) -> String {
    let Ok((_, cert)) = X509Certificate::from_der(leaf) else {
        return "unknown".into();
    };
    match cert.public_key().parsed() {
        Ok(PublicKey::RSA(k)) => format!("RSA ({} bits)", k.key_size()),
        Ok(PublicKey::EC(k)) => format!("ECDH ({} bits)", k.key_size()),
        Ok(other) => format!("unknown ({} bits)", other.key_size()),
        Err(_) => "unknown".into(),
    }
}

/// The whole description of a bundle.
pub fn bundle(chain: &[CertificateDer<'_>], key: &str) -> Value {
    let chain: Vec<Value> = chain
        .iter()
        .filter_map(|der| X509Certificate::from_der(der).ok())
        .map(|(_, cert)| element(&cert))
        .collect();
    json!({"key": key, "chain": chain})
}

fn element(cert: &X509Certificate<'_>) -> Value {
    let validity = cert.validity();
    json!({
        "subject": name(cert.subject(), dns_names(cert).collect()),
        "issuer": name(cert.issuer(), issuer_dns_names(cert)),
        "validity": {
            "since": date(validity.not_before.timestamp()),
            "until": date(validity.not_after.timestamp()),
        },
    })
}

/// A subject or issuer in Unit's order, `alt_names` right after `common_name` when there are any.
fn name(n: &X509Name<'_>, alt_names: Vec<&str>) -> Value {
    let mut out = Map::new();
    let fields: [(&str, Vec<_>); 6] = [
        ("common_name", n.iter_common_name().collect()),
        ("country", n.iter_country().collect()),
        ("state_or_province", n.iter_state_or_province().collect()),
        ("locality", n.iter_locality().collect()),
        ("organization", n.iter_organization().collect()),
        ("department", n.iter_organizational_unit().collect()),
    ];
    for (i, (field, values)) in fields.iter().enumerate() {
        if i == 1 && !alt_names.is_empty() {
            out.insert("alt_names".into(), json!(alt_names));
        }
        if let Some(v) = first(values) {
            out.insert((*field).into(), Value::String(v.to_owned()));
        }
    }
    if fields[0].1.is_empty() && !alt_names.is_empty() && !out.contains_key("alt_names") {
        out.insert("alt_names".into(), json!(alt_names));
    }
    Value::Object(out)
}

fn first<'a>(values: &[&'a x509_parser::x509::AttributeTypeAndValue<'a>]) -> Option<&'a str> {
    values.first().and_then(|v| v.as_str().ok())
}

fn dns_names<'a>(cert: &'a X509Certificate<'_>) -> impl Iterator<Item = &'a str> {
    cert.subject_alternative_name()
        .ok()
        .flatten()
        .into_iter()
        .flat_map(|ext| ext.value.general_names.iter())
        .filter_map(|g| match g {
            GeneralName::DNSName(n) => Some(*n),
            _ => None,
        })
}

fn issuer_dns_names<'a>(cert: &'a X509Certificate<'_>) -> Vec<&'a str> {
    cert.extensions()
        .iter()
        .filter_map(|e| match e.parsed_extension() {
            x509_parser::extensions::ParsedExtension::IssuerAlternativeName(ian) => {
                Some(ian.general_names.iter())
            }
            _ => None,
        })
        .flatten()
        .filter_map(|g| match g {
            GeneralName::DNSName(n) => Some(*n),
            _ => None,
        })
        .collect()
}

/// A time as OpenSSL's `ASN1_TIME_print` writes it: `Sep  8 19:46:19 2022 GMT`.
pub fn date(unix: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    // Certificates dated before 1970 are written as 1970: no CA issues them.
    let unix = unix.max(0) as u64;
    let (y, m, d) = crate::vars::civil_from_days(unix / 86_400);
    let secs = unix % 86_400;
    format!(
        "{} {:>2} {:02}:{:02}:{:02} {} GMT",
        MONTHS[(m - 1) as usize],
        d,
        secs / 3600,
        secs % 3600 / 60,
        secs % 60,
        y
    )
}

#[cfg(test)]
mod tests {
    use super::date;

    #[test]
    fn dates_read_as_openssl_prints_them() {
        assert_eq!(date(0), "Jan  1 00:00:00 1970 GMT");
        assert_eq!(date(1_663_530_379), "Sep 18 19:46:19 2022 GMT");
        assert_eq!(date(951_782_400), "Feb 29 00:00:00 2000 GMT");
    }
}
