#!/usr/bin/env bash
# Builds what the real-node suite boots, from this machine's own Debian
# package sources, and caches it outside the repository:
#   $CACHE/node-rootfs-<suite>-<hash>/   a Debian root filesystem with systemd,
#                                        containerd, runc and the CNI plugins
#                                        (the node containers' lower layer)
#   $CACHE/nspawn-<version>/             systemd-nspawn, unpacked from the
#                                        systemd-container package of the
#                                        host's own systemd version (not
#                                        installed: a newer candidate would
#                                        upgrade the host's systemd)
# <hash> covers this script, so a changed package list builds anew. Each build
# happens once per machine (about 2.5 minutes for the rootfs); progress goes to
# stderr. Prints `rootfs <dir>` and `nspawn <binary>` on stdout.
set -euo pipefail
CACHE="${BOOTC_OPERATOR_CACHE:-$HOME/.cache/bootc-operator}"
log() { echo "[node rootfs] $*" >&2; }

# Only what a node runs: systemd as PID 1, the container runtime, the CNI
# plugins the kubelet's pod network uses, and the tools the node's units call.
PACKAGES=systemd-sysv,dbus,containerd,runc,containernetworking-plugins,iproute2,iptables,ca-certificates,procps,util-linux

# The machine's own sources, deb822 or one-line, for the rootfs's apt.
host_sources() {
  cat /etc/apt/sources.list.d/*.sources 2>/dev/null || true
  grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true
}

build_rootfs() {
  local suite hash out tmp start
  suite="$(. /etc/os-release && echo "$VERSION_CODENAME")"
  hash="$(sha256sum "$0" | cut -c1-12)"
  out="$CACHE/node-rootfs-$suite-$hash"
  if [ ! -x "$out/lib/systemd/systemd" ]; then
    log "building the node root filesystem ($suite) with mmdebstrap (about 2.5 minutes, once per machine)"
    start=$SECONDS
    tmp="$out.tmp"
    rm -rf "$tmp"
    mkdir -p "$CACHE"
    # The machine's own Debian sources (mmdebstrap reads them on stdin).
    host_sources | mmdebstrap --mode=root --variant=minbase --include="$PACKAGES" \
      --skip=output/dev "$suite" "$tmp" - >&2
    rm -rf "$out"
    mv "$tmp" "$out"
    log "built $out in $((SECONDS - start)) s"
  fi
  echo "rootfs $out"
}

build_nspawn() {
  local version out tmp
  version="$(dpkg-query -W -f='${Version}' libsystemd-shared)"
  out="$CACHE/nspawn-$version"
  if [ ! -x "$out/usr/bin/systemd-nspawn" ]; then
    log "unpacking systemd-container $version"
    tmp="$(mktemp -d)"
    (cd "$tmp" && apt-get download -qq "systemd-container=$version" >&2)
    rm -rf "$out"
    dpkg -x "$tmp"/systemd-container_*.deb "$out"
    rm -rf "$tmp"
  fi
  echo "nspawn $out/usr/bin/systemd-nspawn"
}

build_rootfs
build_nspawn
