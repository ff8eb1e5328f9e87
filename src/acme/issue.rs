//! One issuance: an order for a bundle's names, each name proved by HTTP-01 (the token published in the
//! challenge map for the plain-HTTP listeners to answer) or by TLS-ALPN-01 (a validation certificate published
//! for the TLS listeners to present), a new key and its CSR, and the chain the CA signs, checked as any uploaded
//! bundle is before it is handed to the engine.

use std::time::Duration;

use instant_acme::{
    Account, AuthorizationStatus, ChallengeType, Identifier, NewOrder, Order, OrderStatus,
    RetryPolicy,
};

use super::AcmeError;
use std::sync::Arc;

use rustls::pki_types::PrivateKeyDer;
use rustls::sign::CertifiedKey;

use super::challenge::{self, Challenges};
use super::config::{KeyKind, Managed, Proof};
use crate::fleet::Fleet;
use crate::tls::{Bundle, validation};

/// How long the CA may take to validate the challenges, and then to sign.
const VALIDATION_TIMEOUT: Duration = Duration::from_secs(120);

/// Obtains a new bundle for `managed` from the CA `account` is registered with.
/// In a fleet, each HTTP-01 token is also shared with the other nodes, which the CA may reach instead.
pub async fn issue(
    account: &Account,
    managed: &Managed,
    challenges: &Challenges,
    fleet: Option<&Fleet>,
) -> Result<Bundle, AcmeError> {
    let identifiers: Vec<Identifier> = managed
        .names
        .iter()
        .map(|n| Identifier::Dns(n.clone()))
        .collect();
    let mut order = account.new_order(&NewOrder::new(&identifiers)).await?;
    // Held until the order is settled: the CA may look at a token more than once (from several vantage points).
    let mut shared = Vec::new();
    let proved = prove(
        &mut order,
        managed.challenge,
        challenges,
        fleet,
        &mut shared,
    )
    .await;
    let retries = RetryPolicy::new()
        .initial_delay(Duration::from_millis(250))
        .timeout(VALIDATION_TIMEOUT);
    let status = match &proved {
        Ok(_) => order.poll_ready(&retries).await.map_err(AcmeError::from),
        Err(_) => Ok(OrderStatus::Invalid),
    };
    if let Some(fleet) = fleet {
        for token in &shared {
            fleet.share_challenge(token, None).await;
        }
    }
    drop(proved?);
    let status = status?;
    if status != OrderStatus::Ready {
        return Err(AcmeError::Refused(why_invalid(&mut order).await));
    }
    let (csr, key_pem) = csr(managed)?;
    order.finalize_csr(&csr).await?;
    let chain = order.poll_certificate(&retries).await?;
    let pem = format!("{}\n{key_pem}", chain.trim_end());
    Bundle::parse(pem.as_bytes(), Some(crate::tls::now())).map_err(AcmeError::Bundle)
}

/// An answer being shown to the CA; dropping it withdraws it. Held for that drop only, never read.
#[derive(Debug)]
#[allow(dead_code)]
enum Published {
    Http01(challenge::Published),
    TlsAlpn01(validation::Published),
}

/// Publishes the answer of each pending authorization and tells the CA to look.
async fn prove(
    order: &mut Order,
    proof: Proof,
    challenges: &Challenges,
    fleet: Option<&Fleet>,
    shared: &mut Vec<String>,
) -> Result<Vec<Published>, AcmeError> {
    let mut published = Vec::new();
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let mut authz = authz?;
        match authz.status {
            AuthorizationStatus::Valid => continue,
            AuthorizationStatus::Pending => {}
            other => {
                return Err(AcmeError::Refused(format!(
                    "the authorization for {} is {other:?}",
                    authz.identifier()
                )));
            }
        }
        let name = authz.identifier().to_string();
        let (kind, label) = match proof {
            Proof::Http01 => (ChallengeType::Http01, "http-01"),
            Proof::TlsAlpn01 => (ChallengeType::TlsAlpn01, "tls-alpn-01"),
        };
        let mut challenge = authz
            .challenge(kind)
            .ok_or_else(|| AcmeError::NoChallenge {
                kind: label,
                name: name.clone(),
            })?;
        let key_authorization = challenge.key_authorization();
        published.push(match proof {
            Proof::Http01 => {
                let token = challenge.token.clone();
                let guard = challenges.publish(&token, key_authorization.as_str());
                if let Some(fleet) = fleet {
                    fleet
                        .share_challenge(&token, Some(key_authorization.as_str()))
                        .await;
                    shared.push(token);
                }
                Published::Http01(guard)
            }
            Proof::TlsAlpn01 => {
                let key = validation_key(&name, key_authorization.digest().as_ref())?;
                Published::TlsAlpn01(validation::publish(&name, key))
            }
        });
        challenge.set_ready().await?;
    }
    Ok(published)
}

/// What the CA said about the challenges of an order that became invalid.
async fn why_invalid(order: &mut Order) -> String {
    let mut reasons = Vec::new();
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let Ok(authz) = authz else { continue };
        let name = authz.identifier().to_string();
        for c in authz.challenges.iter().filter_map(|c| c.error.as_ref()) {
            reasons.push(format!("{name}: {c}"));
        }
    }
    if reasons.is_empty() {
        "the order became invalid".to_owned()
    } else {
        reasons.join("; ")
    }
}

/// The self-signed certificate a TLS-ALPN-01 validation handshake for `name` is shown: that name only, and the
/// critical acmeIdentifier extension holding the SHA-256 of the key authorization (RFC 8737 §3).
fn validation_key(name: &str, digest: &[u8]) -> Result<Arc<CertifiedKey>, AcmeError> {
    let key = rcgen::KeyPair::generate().map_err(AcmeError::Key)?;
    let mut params =
        rcgen::CertificateParams::new(vec![name.to_owned()]).map_err(AcmeError::Key)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
    let cert = params.self_signed(&key).map_err(AcmeError::Key)?;
    let der = PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let signing = rustls::crypto::aws_lc_rs::sign::any_supported_type(&der)
        .map_err(|e| AcmeError::Validation(e.to_string()))?;
    Ok(Arc::new(CertifiedKey::new(
        vec![cert.der().clone()],
        signing,
    )))
}

/// A new private key of `managed`'s kind (PEM) and a CSR (DER) for its names.
fn csr(managed: &Managed) -> Result<(Vec<u8>, String), AcmeError> {
    let alg = match managed.key {
        KeyKind::Ecdsa => &rcgen::PKCS_ECDSA_P256_SHA256,
        KeyKind::Rsa => &rcgen::PKCS_RSA_SHA256,
    };
    let key = match managed.key {
        KeyKind::Ecdsa => rcgen::KeyPair::generate_for(alg),
        KeyKind::Rsa => rcgen::KeyPair::generate_rsa_for(alg, rcgen::RsaKeySize::_2048),
    }
    .map_err(AcmeError::Key)?;
    let mut params =
        rcgen::CertificateParams::new(managed.names.clone()).map_err(AcmeError::Key)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    let csr = params.serialize_request(&key).map_err(AcmeError::Key)?;
    Ok((csr.der().to_vec(), key.serialize_pem()))
}
