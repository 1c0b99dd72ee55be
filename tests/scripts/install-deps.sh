#!/usr/bin/env bash
# Installs every system package the tests and the simulator need, from the
# machine's own Debian package sources. Idempotent: a second run does nothing.
set -euo pipefail

PKGS=(
  docker-registry      # the real OCI registry the tests push to
  apache2-utils        # htpasswd, for the registry's basic auth
  skopeo               # pushes test images with a real registry client
  umoci                # builds the operator's OCI image without a container engine (./dev image)
  openssl              # certificates for the API server and the registry
  util-linux           # unshare, nsenter (tests only; the product uses setns)
  strace               # syscall inventory for the seccomp allow-list
  python3-jsonschema   # validates the fake bootc's status against bootc's JSON schema
  ca-certificates
  prometheus           # promtool checks the alert rules; a real Prometheus scrapes the controller
  prometheus-alertmanager # a real Alertmanager receives the rollout's silences (spec.rollout.silences)
  # The real-node suite (tests/src/nodes/): no container runtime or systemd
  # is installed on the machine itself, they run inside the node containers.
  mmdebstrap           # builds the nodes' root filesystem (tests/scripts/build-node-rootfs.sh)
  busybox-static       # the pause and workload image the nodes run
  iproute2             # the cluster's network namespaces, bridge and veths
  iptables             # stands in for kube-proxy inside each node's namespace
)
# etcd, kube-apiserver and kubectl are built from Go modules by
# build-control-plane.sh, not installed from here.

have_all() {
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
  done
}

if have_all; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null
# The Debian registry, Prometheus and Alertmanager packages start a system
# service on install; the tests run their own instances on their own ports
# (Alertmanager's on loopback, without gossip), so keep the system ones quiet.
for unit in docker-registry prometheus prometheus-alertmanager; do
  if command -v systemctl >/dev/null && systemctl is-active --quiet "$unit" 2>/dev/null; then
    $SUDO systemctl stop "$unit" || true
  fi
done
