//! A fleet on an etcd that protects itself: one member serving TLS only, asking for a client certificate
//! signed by its CA (`--client-cert-auth`), with authentication enabled (a `root` user with a password). Nodes
//! given the CA, a client certificate and the password share changes; a node given a wrong password says etcd
//! is unreachable and serves its own document.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::cluster::free_port;
use super::netns::Netns;
use super::node::Node;
use super::{cannot_run, doc, names};
use crate::harness::{DEADLINE, wait_for};
use crate::tls::pki::{Alg, Ca};

const PASSWORD: &str = "s3cret-fleet";

/// One etcd member over TLS with client certificates and users; killed when dropped.
struct SecureEtcd {
    dir: tempfile::TempDir,
    child: Child,
    port: u16,
}

impl SecureEtcd {
    /// Starts the member with a server certificate for 127.0.0.1 and each of `hosts` (where nodes in
    /// namespaces reach it), then creates the `root` user and enables authentication.
    fn start(ca: &Ca, hosts: &[Ipv4Addr]) -> SecureEtcd {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        names.extend(hosts.iter().map(ToString::to_string));
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let (cert, key) = ca.leaf(&names, Alg::Ecdsa, (-1, 30));
        let (client, client_key) = ca.leaf(&["rein-node"], Alg::Ecdsa, (-1, 30));
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write("ca.pem", &ca.pem());
        write("server.pem", &cert);
        write("server-key.pem", &key.serialize_pem());
        write("client.pem", &client);
        write("client-key.pem", &client_key.serialize_pem());
        write("password", &format!("{PASSWORD}\n"));
        write("wrong-password", "not-the-password\n");

        let (port, peer) = (free_port(), free_port());
        let log = std::fs::File::create(dir.path().join("etcd.log")).expect("etcd log");
        let file = |name: &str| dir.path().join(name).display().to_string();
        let child = Command::new("etcd")
            .args(["--name", "m0", "--data-dir", &file("data")])
            .arg(format!("--listen-client-urls=https://0.0.0.0:{port}"))
            .arg(format!("--advertise-client-urls=https://127.0.0.1:{port}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{peer}"
            ))
            .arg(format!("--initial-cluster=m0=http://127.0.0.1:{peer}"))
            .args(["--cert-file", &file("server.pem")])
            .args(["--key-file", &file("server-key.pem")])
            .args(["--client-cert-auth", "--trusted-ca-file", &file("ca.pem")])
            .args(["--logger=zap", "--log-level=warn"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("etcd log"))
            .stderr(log)
            .spawn()
            .expect("spawn etcd (Debian's etcd-server)");
        let mut etcd = SecureEtcd { dir, child, port };
        etcd.wait_healthy();
        for args in [
            &["user", "add", &format!("root:{PASSWORD}")][..],
            &["role", "add", "root"],
            &["user", "grant-role", "root", "root"],
            &["auth", "enable"],
        ] {
            etcd.etcdctl_ok(args, false);
        }
        etcd
    }

    /// The client URL as a host reaches it at `host`.
    fn url(&self, host: Ipv4Addr) -> String {
        format!("https://{host}:{}", self.port)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `rein run`'s options for etcd's TLS and user, with the password file `password`.
    fn rein_args(&self, password: &str) -> Vec<String> {
        let file = |name: &str| self.file(name).display().to_string();
        vec![
            "--etcd-ca".into(),
            file("ca.pem"),
            "--etcd-cert".into(),
            file("client.pem"),
            "--etcd-key".into(),
            file("client-key.pem"),
            "--etcd-user".into(),
            "root".into(),
            "--etcd-password-file".into(),
            file(password),
        ]
    }

    /// `etcdctl` over TLS with the client certificate, as `root` once `auth` is true.
    fn etcdctl(&self, args: &[&str], auth: bool) -> Output {
        let file = |name: &str| self.file(name).display().to_string();
        let mut command = Command::new("etcdctl");
        command
            .arg(format!("--endpoints={}", self.url(Ipv4Addr::LOCALHOST)))
            .args(["--cacert", &file("ca.pem")])
            .args([
                "--cert",
                &file("client.pem"),
                "--key",
                &file("client-key.pem"),
            ])
            .args(["--dial-timeout=1s", "--command-timeout=3s"]);
        if auth {
            command.arg(format!("--user=root:{PASSWORD}"));
        }
        command
            .args(args)
            .env("ETCDCTL_API", "3")
            .stdin(Stdio::null())
            .output()
            .expect("run etcdctl (Debian's etcd-client)")
    }

    fn etcdctl_ok(&self, args: &[&str], auth: bool) -> Output {
        let out = self.etcdctl(args, auth);
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        out
    }

    fn wait_healthy(&mut self) {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let exited = self.child.try_wait().ok().flatten();
            assert!(exited.is_none(), "etcd exited\n{}", self.log());
            if self
                .etcdctl(&["endpoint", "health"], false)
                .status
                .success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "etcd did not become healthy\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        let text = std::fs::read_to_string(self.file("etcd.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            "--- etcd log (end) ---\n{}",
            lines[lines.len().saturating_sub(30)..].join("\n")
        )
    }
}

impl Drop for SecureEtcd {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.log());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts node `name` of fleet "secured" in `ns`, with the password file `password` and `extra` arguments.
fn node(etcd: &SecureEtcd, name: &str, ns: Netns, password: &str, extra: &[&str]) -> Node {
    let mut args = etcd.rein_args(password);
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let url = etcd.url(ns.host);
    Node::start(name, "secured", ns, &[url], &args)
}

/// Two nodes with the CA, a client certificate and root's password share a change, and it is in etcd (read
/// over TLS as root). A third, with a wrong password, reports etcd unreachable in `/fleet` with why, refuses
/// writes, and serves the document of its own `--config`; the other two never see it.
#[test]
fn nodes_share_a_change_through_etcd_over_tls_with_a_user_and_a_wrong_password_is_unreachable() {
    if let Some(why) = cannot_run() {
        eprintln!("\n*** SKIPPED: {why} ***\n");
        return;
    }
    let spaces = [Netns::new(), Netns::new(), Netns::new()];
    let hosts: Vec<Ipv4Addr> = spaces.iter().map(|ns| ns.host).collect();
    let etcd = SecureEtcd::start(&Ca::new(), &hosts);
    let [ns_a, ns_b, ns_c] = spaces;

    let a = node(&etcd, "a", ns_a, "password", &["--config", "EMPTY"]);
    let b = node(&etcd, "b", ns_b, "password", &[]);
    // `?wait=fleet` waits for the nodes live in etcd: b's report must be there first.
    for n in [&a, &b] {
        wait_for(&format!("{} to see a and b live", n.name), || {
            let view = n.fleet();
            ["a", "b"].iter().all(|m| view["nodes"][m]["live"] == true)
        });
    }
    let (status, body) = a.put(&doc("v1"), None, "?wait=fleet");
    assert_eq!(status, 200, "{body}");
    assert_eq!(names(&body["fleet"]["applied"]), ["a", "b"], "{body}");
    for n in [&a, &b] {
        wait_for(&format!("{} to serve v1", n.name), || {
            n.served().as_deref() == Some("v1")
        });
        assert_eq!(n.fleet()["etcd"]["connected"], true, "on {}", n.name);
    }
    let stored = etcd.etcdctl_ok(&["get", "/rein/secured/config", "--print-value-only"], true);
    let stored: serde_json::Value =
        serde_json::from_slice(&stored.stdout).expect("the document in etcd");
    assert_eq!(stored, doc("v1"));

    let own = tempfile::tempdir().expect("temp dir");
    let own_config = own.path().join("own.json");
    std::fs::write(&own_config, doc("own").to_string()).expect("c's --config");
    let own_config = own_config.display().to_string();
    let c = node(
        &etcd,
        "c",
        ns_c,
        "wrong-password",
        &["--config", &own_config],
    );
    wait_for("c to serve its own document", || {
        c.served().as_deref() == Some("own")
    });
    let mut view = serde_json::Value::Null;
    wait_for("c to report etcd unreachable", || {
        view = c.fleet();
        view["etcd"]["connected"] == false && view["etcd"]["error"].is_string()
    });
    eprintln!("c's view: {view}");
    assert_eq!(view["revision"], serde_json::Value::Null, "{view}");
    let (status, body) = c.put(&doc("from-c"), None, "");
    assert_eq!(status, 503, "a write through c: {body}");
    assert_eq!(c.served().as_deref(), Some("own"));
    for n in [&a, &b] {
        assert_eq!(n.served().as_deref(), Some("v1"), "on {}", n.name);
        let view = n.fleet();
        assert!(
            view["nodes"]["c"].is_null(),
            "c is not in the fleet: {view}"
        );
    }
}
