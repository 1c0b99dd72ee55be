//! The real-node cluster's network, all of it inside network namespaces this
//! process creates (nothing is added to the machine's own interfaces or
//! routes, and no traffic leaves the machine):
//!
//! - the cluster's namespace, which this process joins before it starts any
//!   thread: a bridge `br0` at [`BRIDGE_ADDRESS`]/24 where the API server and
//!   the registry listen, with a route to each node's pod range;
//! - one namespace per node, joined to the bridge by a veth pair, at
//!   `10.77.0.(10+i)`; it outlives the node's boots, as a network card does.
//!   kube-proxy is absent: a DNAT in each node's namespace stands in for it,
//!   sending the `kubernetes` Service's address to the API server.
//!
//! Each namespace is held by a `sleep` process that dies with this one
//! (`setpriv --pdeathsig`), so nothing outlives a killed test.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::control_plane::KUBERNETES_SERVICE_IP;

/// The cluster side of the bridge: the API server's and the registry's
/// address as the nodes see them.
pub const BRIDGE_ADDRESS: &str = "10.77.0.1";

/// A network namespace held by a process of its own.
#[derive(Debug)]
pub struct Netns {
    holder: Child,
}

impl Netns {
    /// A new, empty namespace (loopback up).
    pub fn create() -> Result<Netns> {
        let mut holder = Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--", "unshare", "--net", "--"])
            .args([
                "sh",
                "-c",
                "ip link set lo up && echo ready && exec sleep infinity",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting a network namespace's holder (unshare)")?;
        let stdout = holder.stdout.take().context("holder's stdout")?;
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        if line.trim() != "ready" {
            bail!("the network namespace's holder did not start: {line:?}");
        }
        Ok(Netns { holder })
    }

    /// `/proc/<holder>/ns/net`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", self.holder.id()))
    }

    pub fn pid(&self) -> u32 {
        self.holder.id()
    }

    /// Joins the namespace: this thread, and every thread and process it
    /// starts afterwards.
    pub fn enter(&self) -> Result<()> {
        let file = std::fs::File::open(self.path())?;
        nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET)
            .context("setns into the cluster's network namespace")
    }

    /// Runs `args` (an `ip` or `iptables` command line) inside.
    pub fn run(&self, args: &[&str]) -> Result<()> {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net={}", self.path().display()))
            .args(args);
        crate::pki::run(&mut cmd)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// Runs `args` in the namespace this process is in.
fn here(args: &[&str]) -> Result<()> {
    let (program, rest) = args.split_first().context("empty command")?;
    crate::pki::run(Command::new(program).args(rest))
}

/// The cluster's namespace; this process is inside it once created.
#[derive(Debug)]
pub struct ClusterNet {
    ns: Netns,
}

impl ClusterNet {
    /// Creates the namespace with its bridge and joins it. Call it before the
    /// async runtime starts, so that every thread of the test is inside.
    pub fn enter() -> Result<ClusterNet> {
        let ns = Netns::create()?;
        ns.enter()?;
        here(&["ip", "link", "add", "br0", "type", "bridge"])?;
        here(&[
            "ip",
            "addr",
            "add",
            &format!("{BRIDGE_ADDRESS}/24"),
            "dev",
            "br0",
        ])?;
        here(&["ip", "link", "set", "br0", "up"])?;
        Ok(ClusterNet { ns })
    }

    /// The holder's pid (for `nsenter --net=/proc/<pid>/ns/net` by hand).
    pub fn pid(&self) -> u32 {
        self.ns.pid()
    }

    /// A node's namespace, joined to the bridge, with the API server's
    /// Service address sent to `apiserver_port`.
    pub fn add_node(&self, index: usize, apiserver_port: u16) -> Result<Netns> {
        let ns = Netns::create()?;
        let veth = format!("veth{index}");
        let ip = node_address(index);
        let pid = ns.pid().to_string();
        here(&[
            "ip", "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &pid,
        ])?;
        here(&["ip", "link", "set", &veth, "master", "br0", "up"])?;
        here(&["ip", "route", "add", &pod_range(index), "via", &ip])?;
        ns.run(&["ip", "addr", "add", &format!("{ip}/24"), "dev", "eth0"])?;
        ns.run(&["ip", "link", "set", "eth0", "up"])?;
        ns.run(&["ip", "route", "add", "default", "via", BRIDGE_ADDRESS])?;
        let target = format!("{BRIDGE_ADDRESS}:{apiserver_port}");
        for chain in ["PREROUTING", "OUTPUT"] {
            ns.run(&[
                "iptables",
                "-t",
                "nat",
                "-A",
                chain,
                "-d",
                KUBERNETES_SERVICE_IP,
                "-p",
                "tcp",
                "--dport",
                "443",
                "-j",
                "DNAT",
                "--to-destination",
                &target,
            ])?;
        }
        Ok(ns)
    }
}

/// Node `index`'s address (1-based).
pub fn node_address(index: usize) -> String {
    format!("10.77.0.{}", 10 + index)
}

/// Node `index`'s pod range.
pub fn pod_range(index: usize) -> String {
    format!("10.244.{index}.0/24")
}
