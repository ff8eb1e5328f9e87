//! Certificates made by the tests: a private CA and leaves signed by it (RSA or ECDSA, any names, any
//! validity), and a TLS client that trusts that CA.

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, RsaKeySize,
};
use rustls::pki_types::{CertificateDer, ServerName};

use crate::harness::{Response, read_response};

pub enum Alg {
    Ecdsa,
    Rsa,
}

pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    pub fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "rein test CA");
        let key = KeyPair::generate().unwrap();
        Ca {
            issuer: CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A bundle (leaf, CA, key) for `names`, valid from a day ago for a year.
    pub fn bundle(&self, names: &[&str], alg: Alg) -> String {
        self.bundle_valid(names, alg, (-1, 365))
    }

    /// A bundle valid from `days.0` to `days.1` days from now.
    pub fn bundle_valid(&self, names: &[&str], alg: Alg, days: (i64, i64)) -> String {
        let (leaf, key) = self.leaf(names, alg, days);
        format!("{leaf}{}{}", self.pem(), key.serialize_pem())
    }

    pub fn leaf(&self, names: &[&str], alg: Alg, days: (i64, i64)) -> (String, KeyPair) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names.clone()).unwrap();
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        params
            .distinguished_name
            .push(DnType::OrganizationName, "rein tests");
        let today = time::OffsetDateTime::now_utc();
        params.not_before = today + time::Duration::days(days.0);
        params.not_after = today + time::Duration::days(days.1);
        let key = match alg {
            Alg::Ecdsa => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap(),
            Alg::Rsa => {
                KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_2048).unwrap()
            }
        };
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key)
    }

    /// A TLS client configuration that trusts only this CA, offering `alpn`.
    pub fn client(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(self.issuer.der().to_vec()))
            .unwrap();
        let mut config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }
}

/// A TLS connection to rein, HTTP/1.1 on it.
pub struct TlsConn {
    stream: BufReader<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>,
}

impl TlsConn {
    pub fn open(addr: SocketAddr, sni: &str, config: Arc<rustls::ClientConfig>) -> TlsConn {
        let name = ServerName::try_from(sni.to_owned()).unwrap();
        let conn = rustls::ClientConnection::new(config, name).unwrap();
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(crate::harness::DEADLINE))
            .unwrap();
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .expect("TLS handshake");
        }
        TlsConn {
            stream: BufReader::new(stream),
        }
    }

    /// Tries a handshake; the error text if it fails.
    pub fn try_open(
        addr: SocketAddr,
        sni: &str,
        config: Arc<rustls::ClientConfig>,
    ) -> Result<(), String> {
        let name = ServerName::try_from(sni.to_owned()).unwrap();
        let mut conn = rustls::ClientConnection::new(config, name).unwrap();
        let mut tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(crate::harness::DEADLINE))
            .unwrap();
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The names of the certificate the server presented.
    pub fn peer_names(&self) -> Vec<String> {
        let certs = self.stream.get_ref().conn.peer_certificates().unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&certs[0]).unwrap();
        cert.subject_alternative_name()
            .unwrap()
            .map(|san| {
                san.value
                    .general_names
                    .iter()
                    .map(|n| n.to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The certificate the server presented (its leaf), DER.
    pub fn peer_leaf(&self) -> Vec<u8> {
        let certs = self.stream.get_ref().conn.peer_certificates().unwrap();
        certs[0].to_vec()
    }

    pub fn alpn(&self) -> Option<Vec<u8>> {
        self.stream
            .get_ref()
            .conn
            .alpn_protocol()
            .map(<[u8]>::to_vec)
    }

    /// Sends `bytes` and reads one answer's head.
    pub fn exchange_head(&mut self, bytes: &[u8]) -> Response {
        self.stream.get_mut().write_all(bytes).unwrap();
        self.stream.get_mut().flush().unwrap();
        read_response(&mut self.stream, true).expect("a response")
    }

    pub fn get(&mut self, path: &str, host: &str) -> Response {
        let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n");
        self.stream.get_mut().write_all(req.as_bytes()).unwrap();
        self.stream.get_mut().flush().unwrap();
        read_response(&mut self.stream, false).expect("a response")
    }
}
