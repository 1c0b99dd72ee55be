#!/usr/bin/env bash
# Installs every system package the tests and the simulator need, from the
# machine's own Debian package sources. Idempotent: a second run does nothing.
set -euo pipefail

PKGS=(
  etcd-server          # etcd 3.4 for the test control plane
  etcd-client          # etcdctl: the disruption recorder replays etcd's history
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
  # to build kube-apiserver from Debian's source package:
  golang-go make rsync dpkg-dev golang-github-modern-go-reflect2-dev
)

have_all() {
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
  done
  command -v kubectl >/dev/null
}

if have_all; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null
if ! command -v kubectl >/dev/null; then
  $SUDO apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null
fi
# The Debian registry package starts a system service on install; the tests
# run their own instances on their own ports, so keep the system one quiet.
for unit in docker-registry prometheus; do
  if command -v systemctl >/dev/null && systemctl is-active --quiet "$unit" 2>/dev/null; then
    $SUDO systemctl stop "$unit" || true
  fi
done
