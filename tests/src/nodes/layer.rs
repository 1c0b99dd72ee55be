//! What a node container's disk holds beyond Debian's packages: the shared
//! layer (one per cluster, below every node's own upper directory) and each
//! node's own files (its name, address, certificate, pod range and bootc
//! state). Every fix the node containers need on these machines is here, each
//! with its reason.

use std::path::Path;

use anyhow::Result;

use super::net::{BRIDGE_ADDRESS, node_address, pod_range};
use crate::fake_bootc::{BootcVersion, Deployment, Layout, State};

/// Where the fake bootc's binary is bind-mounted in the node.
pub const FAKE_BOOTC_IN_NODE: &str = "/usr/local/libexec/fake-bootc";
/// Where the kubelet's binary is bind-mounted in the node.
pub const KUBELET_IN_NODE: &str = "/usr/local/bin/kubelet";

/// PID 1 before systemd. nspawn mounts the cgroup v1 controllers read-only
/// (the kubelet and runc write them), and all of `/proc/sys`: the network
/// sysctls belong to the node's own network namespace and the CNI plugins
/// set them (forwarding), so those are made writable; the kubelet sets three
/// kernel-global sysctls, which get node-private files over them so the
/// machine's own values stay as they are.
const NODE_INIT: &str = r#"#!/bin/sh
set -e
mount -o remount,bind,rw /sys/fs/cgroup
for c in /sys/fs/cgroup/*/; do mount -o remount,bind,rw "$c"; done
mount --bind /proc/sys/net /proc/sys/net
mount -o remount,bind,rw /proc/sys/net
mkdir -p /run/node-sysctl
for f in vm/overcommit_memory kernel/panic kernel/panic_on_oops; do
  cat "/proc/sys/$f" > "/run/node-sysctl/${f##*/}"
  mount --bind "/run/node-sysctl/${f##*/}" "/proc/sys/$f"
done
exec /lib/systemd/systemd "$@"
"#;

const KUBELET_UNIT: &str = r#"[Unit]
Description=kubelet
Wants=containerd.service
After=containerd.service fake-bootc.service

[Service]
EnvironmentFile=/etc/default/kubelet
ExecStart=/usr/local/bin/kubelet --config=/var/lib/kubelet/config.yaml --kubeconfig=/etc/kubernetes/kubelet.kubeconfig --node-ip=${NODE_IP} --hostname-override=${NODE_NAME}
Restart=always
RestartSec=1

[Install]
WantedBy=multi-user.target
"#;

/// The fake bootc's boot and shutdown hooks (`fake_bootc::real_host`): the
/// stop runs at every orderly shutdown, after the kubelet's.
const FAKE_BOOTC_UNIT: &str = r#"[Unit]
Description=bootc (test double): the deployment this boot runs, finalized at shutdown
Before=kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/libexec/fake-bootc --fake-root / --node-boot
ExecStop=/usr/local/libexec/fake-bootc --fake-root / --node-shutdown

[Install]
WantedBy=multi-user.target
"#;

const BOOTC_WRAPPER: &str = "#!/bin/sh\nexec /usr/local/libexec/fake-bootc --fake-root / \"$@\"\n";

/// Units that make no sense in a node container: udev would act on the
/// machine's devices, the timers on a disk the node does not own.
const MASKED: [&str; 10] = [
    "systemd-udevd.service",
    "systemd-udevd-control.socket",
    "systemd-udevd-kernel.socket",
    "systemd-udev-trigger.service",
    "systemd-udev-settle.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "fstrim.timer",
    "e2scrub_all.timer",
    "systemd-tmpfiles-clean.timer",
];

/// What the shared layer needs to know about the cluster.
#[derive(Clone, Debug)]
pub struct LayerInputs<'a> {
    /// `<address>:<port>` of the registry.
    pub registry: &'a str,
    pub registry_ca: &'a [u8],
    pub registry_user: &'a str,
    pub registry_password: &'a str,
    /// The pause image (it must exit on SIGTERM: a pod's PID 1 that ignores
    /// it holds every reboot for 90 s).
    pub pause_image: &'a str,
    pub cluster_ca: &'a [u8],
    /// The nodes' registries.conf drop-in ([`HOSTS_REGISTRIES_CONF`]), as an
    /// admin's image carries it (`super::registries_conf`).
    pub registries_conf: &'a str,
}

/// Where the nodes' image carries its mirrors: a drop-in of
/// containers-registries.conf.d(5), which bootc's containers/image (and the
/// fake bootc, `crate::image_pull`) reads after `/etc/containers/registries.conf`.
pub const HOSTS_REGISTRIES_CONF: &str = "/etc/containers/registries.conf.d/50-os-mirror.conf";

fn write(root: &Path, path: &str, text: impl AsRef<[u8]>, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let file = root.join(path.trim_start_matches('/'));
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&file, text)?;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

fn link(root: &Path, path: &str, target: &str) -> Result<()> {
    let file = root.join(path.trim_start_matches('/'));
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let _ = std::fs::remove_file(&file);
    std::os::unix::fs::symlink(target, file)?;
    Ok(())
}

/// bootc's update timer as bootc ships it (an hour after boot, then 8 hours
/// after each run).
const BOOTC_TIMER_UNIT: &str = "[Unit]\nDescription=bootc's own update timer\n\n[Timer]\nOnBootSec=1h\nOnUnitInactiveSec=8h\n\n[Install]\nWantedBy=timers.target\n";
/// What it starts: an upgrade that reboots into what it finds.
const BOOTC_UPDATE_UNIT: &str = "[Unit]\nDescription=bootc's own update\n\n[Service]\nType=oneshot\nExecStart=/usr/bin/bootc upgrade --apply --quiet\n";

/// Writes the shared layer into `root`.
pub fn write_shared(root: &Path, inputs: &LayerInputs<'_>) -> Result<()> {
    write(root, "/usr/local/sbin/node-init", NODE_INIT, 0o755)?;
    write(root, "/usr/bin/bootc", BOOTC_WRAPPER, 0o755)?;
    write(root, "/etc/fstab", "", 0o644)?;
    write(
        root,
        "/etc/systemd/system/kubelet.service",
        KUBELET_UNIT,
        0o644,
    )?;
    write(
        root,
        "/etc/systemd/system/fake-bootc.service",
        FAKE_BOOTC_UNIT,
        0o644,
    )?;
    for unit in ["kubelet.service", "fake-bootc.service"] {
        link(
            root,
            &format!("/etc/systemd/system/multi-user.target.wants/{unit}"),
            &format!("/etc/systemd/system/{unit}"),
        )?;
    }
    for unit in MASKED {
        link(root, &format!("/etc/systemd/system/{unit}"), "/dev/null")?;
    }
    // bootc's own update timer, where Fedora's and CentOS Stream's bootc
    // images ship it, masked as a user's image for this operator masks it:
    // the node's real systemd answers the helper's `systemctl show`.
    let timer = api::host_updaters::BOOTC_TIMER;
    write(
        root,
        &format!("/usr/lib/systemd/system/{timer}"),
        BOOTC_TIMER_UNIT,
        0o644,
    )?;
    let service = timer.replace(".timer", ".service");
    write(
        root,
        &format!("/usr/lib/systemd/system/{service}"),
        BOOTC_UPDATE_UNIT,
        0o644,
    )?;
    link(root, &format!("/etc/systemd/system/{timer}"), "/dev/null")?;
    write(
        root,
        "/etc/containerd/config.toml",
        containerd_config(inputs),
        0o644,
    )?;
    let certs = format!("/etc/containerd/certs.d/{}", inputs.registry);
    write(root, &format!("{certs}/ca.crt"), inputs.registry_ca, 0o644)?;
    write(
        root,
        &format!("{certs}/hosts.toml"),
        hosts_toml(inputs.registry, &certs),
        0o644,
    )?;
    // What bootc trusts for the registry (the fake reads it like bootc).
    let bootc_certs = format!("/etc/containers/certs.d/{}/ca.crt", inputs.registry);
    write(root, &bootc_certs, inputs.registry_ca, 0o644)?;
    write(root, HOSTS_REGISTRIES_CONF, inputs.registries_conf, 0o644)?;
    write(root, "/etc/kubernetes/pki/ca.crt", inputs.cluster_ca, 0o644)?;
    write(root, "/var/lib/kubelet/config.yaml", KUBELET_CONFIG, 0o644)?;
    Ok(())
}

fn containerd_config(inputs: &LayerInputs<'_>) -> String {
    // restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE.
    format!(
        r#"version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
    [plugins."io.containerd.grpc.v1.cri".registry.configs."{registry}".auth]
      username = "{user}"
      password = "{password}"
"#,
        pause = inputs.pause_image,
        registry = inputs.registry,
        user = inputs.registry_user,
        password = inputs.registry_password,
    )
}

fn hosts_toml(registry: &str, certs: &str) -> String {
    format!(
        "server = \"https://{registry}\"\n\n[host.\"https://{registry}\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = \"{certs}/ca.crt\"\n"
    )
}

/// failCgroupV1: kubelet >= 1.35 refuses cgroup v1 otherwise (these machines
/// have nothing else). The graceful shutdown stops pods before systemd does,
/// and reports the Node NotReady at once.
const KUBELET_CONFIG: &str = r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
failCgroupV1: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
failSwapOn: false
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: /etc/kubernetes/pki/ca.crt}
authorization: {mode: AlwaysAllow}
serializeImagePulls: false
evictionHard: {memory.available: "100Mi", nodefs.available: "2%", imagefs.available: "2%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
shutdownGracePeriod: 10s
shutdownGracePeriodCriticalPods: 4s
"#;

/// What one node's own files need.
#[derive(Clone, Debug)]
pub struct NodeInputs<'a> {
    pub name: &'a str,
    pub index: usize,
    pub apiserver_port: u16,
    /// PEM of the node's client certificate and key (`system:node:<name>`).
    pub cert: &'a [u8],
    pub key: &'a [u8],
    /// The deployment the node boots first.
    pub booted: Deployment,
    pub bootc: BootcVersion,
}

/// Writes node `inputs.name`'s own files into its upper directory `root`.
pub fn write_node(root: &Path, inputs: &NodeInputs<'_>) -> Result<()> {
    write(root, "/etc/hostname", format!("{}\n", inputs.name), 0o644)?;
    write(
        root,
        "/etc/default/kubelet",
        format!(
            "NODE_IP={}\nNODE_NAME={}\n",
            node_address(inputs.index),
            inputs.name
        ),
        0o644,
    )?;
    write(root, "/etc/kubernetes/pki/kubelet.crt", inputs.cert, 0o644)?;
    write(root, "/etc/kubernetes/pki/kubelet.key", inputs.key, 0o600)?;
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://{BRIDGE_ADDRESS}:{port}\n    certificate-authority: /etc/kubernetes/pki/ca.crt\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\nusers:\n- name: u\n  user:\n    client-certificate: /etc/kubernetes/pki/kubelet.crt\n    client-key: /etc/kubernetes/pki/kubelet.key\n",
        port = inputs.apiserver_port
    );
    write(
        root,
        "/etc/kubernetes/kubelet.kubeconfig",
        kubeconfig,
        0o600,
    )?;
    write(
        root,
        "/etc/cni/net.d/10-bootc.conflist",
        cni_config(inputs.index),
        0o644,
    )?;
    let layout = Layout::new(root);
    layout.init(None)?;
    layout.set_version(inputs.bootc)?;
    std::fs::write(layout.real_host_marker(), "")?;
    std::fs::write(layout.pull_from_registry(), "")?;
    // systemd 252 has no soft-reboot: every reboot is a full one.
    std::fs::write(layout.no_soft_reboot(), "")?;
    layout.write_state(&State {
        booted: Some(inputs.booted.clone()),
        ..State::default()
    })?;
    Ok(())
}

fn cni_config(index: usize) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "bootc",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "ipMasq": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": pod_range(index)}]],
                    "routes": [{"dst": "0.0.0.0/0"}]
                }
            },
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]
    })
    .to_string()
}
