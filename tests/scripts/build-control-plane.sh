#!/usr/bin/env bash
# Builds the test control plane from published Go modules, with the ordinary
# `go` client, and caches the binaries outside the repository by version:
#   $CACHE/kubernetes-v<version>/{kube-apiserver,kubectl}
#     and, for the newest minor only (the real-node suite runs on it),
#     {kubelet,kube-controller-manager,kube-scheduler}, built in the same
#     `go build` so the packages they share compile once
#   $CACHE/etcd-v<version>/{etcd,etcdctl}
#   $CACHE/helm-v<version>/helm   (the chart tests and `./dev release`)
#   $CACHE/krew-v<version>/krew   (the release test installs the plugin)
# The pins are the wrapper modules in tests/control-plane/ (go.mod and go.sum
# committed, like Cargo.lock). Each build happens once per machine; progress
# and times go to stderr.
#
#   build-control-plane.sh [MINOR ...]   e.g. `1.37 1.34`; default: every
#                                        minor in tests/control-plane/
#
# Prints one line per Kubernetes minor on stdout: `<minor> <bin dir>`, after
# the lines `etcd <bin dir>`, `helm <bin dir>` and `krew <bin dir>`.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../control-plane" && pwd)"
CACHE="${BOOTC_OPERATOR_CACHE:-$HOME/.cache/bootc-operator}"

log() { echo "[control plane] $*" >&2; }

need_go() {
  if ! command -v go >/dev/null; then
    echo "go not found: the test control plane is built with the Go toolchain (>= 1.21, which fetches the release a module asks for through the module proxy)" >&2
    exit 1
  fi
}

# The version a wrapper module pins for `module`.
pinned() { # go.mod module
  awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$1"
}

# go build, CGO off, from inside the wrapper module (its replaces apply).
build() { # wrapper-dir out-dir ldflags packages...
  local dir="$1" out="$2" ldflags="$3"
  shift 3
  local tmp="$out.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  local start=$SECONDS
  (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$tmp/" "$@")
  rm -rf "$out"
  mv "$tmp" "$out"
  log "built $out in $((SECONDS - start)) s"
}

build_etcd() {
  local version
  version="$(pinned "$ROOT/etcd/go.mod" go.etcd.io/etcd/server/v3)"
  local out="$CACHE/etcd-$version"
  if [ ! -x "$out/etcd" ] || [ ! -x "$out/etcdctl" ]; then
    log "building etcd $version from Go modules (about 2 minutes on 2 cores, once per machine)"
    build "$ROOT/etcd" "$out" "-s -w" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/etcdctl/v3
    # The server's package is go.etcd.io/etcd/server/v3, so go names it `server`.
    mv "$out/server" "$out/etcd"
  fi
  echo "etcd $out"
}

# A tool built from the wrapper module tests/control-plane/NAME, which pins
# MODULE; VERSION_VAR gets the version, so that `NAME version` is right.
build_tool() { # name module package version-var [more ldflags]
  local name="$1" module="$2" package="$3" version_var="$4" extra="${5:-}" version
  version="$(pinned "$ROOT/$name/go.mod" "$module")"
  local out="$CACHE/$name-$version"
  if [ ! -x "$out/$name" ]; then
    log "building $name $version from Go modules (helm about 3 minutes on 2 cores, krew then seconds; once per machine)"
    build "$ROOT/$name" "$out" "-s -w -X $version_var=$version $extra" "$package"
  fi
  echo "$name $out"
}

build_kubernetes() { # minor, e.g. 1.37
  local dir="$ROOT/kubernetes-$1"
  [ -f "$dir/go.mod" ] || { echo "no wrapper module for Kubernetes $1 in $dir (tests/scripts/new-kubernetes-wrapper.sh makes one)" >&2; exit 1; }
  local version
  version="$(pinned "$dir/go.mod" k8s.io/kubernetes)"
  local out="$CACHE/kubernetes-$version"
  local cmds=(kube-apiserver kubectl)
  if [ "$1" = "$(newest_minor)" ]; then
    cmds+=(kubelet kube-controller-manager kube-scheduler)
  fi
  local missing="" c
  for c in "${cmds[@]}"; do [ -x "$out/$c" ] || missing+=" $c"; done
  if [ -n "$missing" ]; then
    log "building ${cmds[*]} $version from Go modules (about 10 minutes on 2 cores, more with the node binaries; once per machine)"
    local major minor
    major="$(echo "${version#v}" | cut -d. -f1)"
    minor="$(echo "${version#v}" | cut -d. -f2)"
    # What kubernetes' own build stamps, so /version and `kubectl version` are right.
    local ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
      ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    build "$dir" "$out" "$ldflags" "${cmds[@]/#/k8s.io/kubernetes/cmd/}"
  fi
  echo "$1 $out"
}

# The newest minor the wrapper modules pin.
newest_minor() {
  ls -d "$ROOT"/kubernetes-* | sed 's|.*/kubernetes-||' | sort -t. -k2 -n | tail -n1
}

need_go
minors=("$@")
if [ "${#minors[@]}" -eq 0 ]; then
  for d in "$ROOT"/kubernetes-*; do minors+=("${d##*/kubernetes-}"); done
fi
build_etcd
build_tool helm helm.sh/helm/v3 helm.sh/helm/v3/cmd/helm helm.sh/helm/v3/internal/version.version \
  "-X helm.sh/helm/v3/internal/version.gitTreeState=clean"
build_tool krew sigs.k8s.io/krew sigs.k8s.io/krew/cmd/krew sigs.k8s.io/krew/internal/version.gitTag
for m in "${minors[@]}"; do build_kubernetes "$m"; done
