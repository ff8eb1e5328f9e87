//! A network namespace per rein node, so that each is a "machine" of its own: the fleet's document names the
//! same listeners (`*:8080`) on every node, which only works with a network stack each.
//!
//! A veth pair links the namespace to the host: the host side is 10.A.B.1/30, the namespace side 10.A.B.2/30.
//! The node reaches etcd at the host side's address; the test reaches the node's listeners at the namespace
//! side's. Names and subnets come from the test process's pid and a counter, so parallel tests (and test runs)
//! never collide; everything is deleted on drop. Needs root.

use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Prefix of the namespaces' names, `rein-fleet-PID-N`.
const PREFIX: &str = "rein-fleet-";

pub(crate) struct Netns {
    pub(crate) name: String,
    host_if: String,
    /// The host side of the veth pair: where the node reaches etcd.
    pub(crate) host: Ipv4Addr,
    /// The namespace side: where the test reaches the node's listeners.
    pub(crate) inside: Ipv4Addr,
}

impl Netns {
    pub(crate) fn new() -> Netns {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        assert!(n < 128, "at most 128 namespaces per test process");
        let pid = std::process::id();
        if n == 0 {
            remove_stale();
        }
        // 15 bits of pid and 7 of counter: one /30 of 10.0.0.0/8 each.
        let subnet = ((pid & 0x7fff) << 7) | n;
        let base = u32::from(Ipv4Addr::new(10, 0, 0, 0)) | (subnet << 2);
        let ns = Netns {
            name: format!("{PREFIX}{pid}-{n}"),
            host_if: format!("rfh{pid}n{n}"),
            host: Ipv4Addr::from(base | 1),
            inside: Ipv4Addr::from(base | 2),
        };
        let inside_if = format!("rfi{pid}n{n}");
        let (host_cidr, inside_cidr) = (format!("{}/30", ns.host), format!("{}/30", ns.inside));
        ip(&["netns", "add", &ns.name]);
        // From here on, a failure still removes what was made (ns is dropped).
        ip(&[
            "link",
            "add",
            &ns.host_if,
            "type",
            "veth",
            "peer",
            "name",
            &inside_if,
        ]);
        ip(&["link", "set", &inside_if, "netns", &ns.name]);
        ip(&["addr", "add", &host_cidr, "dev", &ns.host_if]);
        ip(&["link", "set", &ns.host_if, "up"]);
        ns.ip(&["addr", "add", &inside_cidr, "dev", &inside_if]);
        ns.ip(&["link", "set", &inside_if, "up"]);
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// The start of a command line that runs a program in the namespace.
    pub(crate) fn wrapper(&self) -> [&str; 4] {
        ["ip", "netns", "exec", &self.name]
    }

    /// Holds `port` on every address in the namespace (a listening socket of another program), until dropped.
    pub(crate) fn hold_port(&self, port: u16) -> PortHolder {
        let script = format!(
            "import socket, sys\n\
             s = socket.socket()\n\
             s.bind(('0.0.0.0', {port}))\n\
             s.listen()\n\
             print('ready', flush=True)\n\
             sys.stdin.read()\n"
        );
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, "python3", "-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 in the namespace");
        let mut line = String::new();
        let stdout: &mut ChildStdout = child.stdout.as_mut().expect("piped");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the port holder's output");
        assert_eq!(
            line.trim(),
            "ready",
            "the port holder could not bind {port}"
        );
        PortHolder { child }
    }

    fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting one side of the pair deletes both.
        let _ = quiet_ip(&["link", "del", &self.host_if]);
        let _ = quiet_ip(&["netns", "del", &self.name]);
    }
}

/// A program listening on a port in a namespace; killed on drop.
pub(crate) struct PortHolder {
    child: Child,
}

impl Drop for PortHolder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Deletes the namespaces a test process that no longer runs left (killed before its drops ran).
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
        if !alive {
            let _ = quiet_ip(&["netns", "del", name]);
        }
    }
}

fn ip(args: &[&str]) {
    let out = quiet_ip(args).expect("run ip (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn quiet_ip(args: &[&str]) -> std::io::Result<std::process::Output> {
    Command::new("ip").args(args).stdin(Stdio::null()).output()
}
