#!/usr/bin/env bash
# Writes (or rewrites) the wrapper module that pins one Kubernetes release for
# the test control plane: tests/control-plane/kubernetes-<minor>/go.mod and
# go.sum. Run it to add a release or move to a newer patch, then commit both
# files (they are our pins, like Cargo.lock):
#   tests/scripts/new-kubernetes-wrapper.sh 1.37.2
#
# Why a wrapper: k8s.io/kubernetes replaces every k8s.io/* staging module with
# a path inside its own tree (./staging/src/...), which a module outside that
# tree cannot follow, and `go install pkg@version` refuses modules with replace
# directives. The wrapper requires k8s.io/kubernetes and points each staging
# module at its published v0.<minor>.<patch>, and copies kubernetes' own go and
# godebug lines so the binaries behave as the release's own build.
set -euo pipefail
VERSION="${1:?usage: $0 MAJOR.MINOR.PATCH}"
VERSION="${VERSION#v}"
MINOR="$(echo "$VERSION" | cut -d. -f2)"
PATCH="$(echo "$VERSION" | cut -d. -f3)"
DIR="$(cd "$(dirname "$0")/../control-plane" && pwd)/kubernetes-1.$MINOR"

GOMOD="$(go mod download -json "k8s.io/kubernetes@v$VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
[ -f "$GOMOD" ] || { echo "could not download k8s.io/kubernetes@v$VERSION" >&2; exit 1; }

mkdir -p "$DIR"
{
  echo "// The test control plane's Kubernetes $VERSION: kube-apiserver and kubectl."
  echo "// Written by tests/scripts/new-kubernetes-wrapper.sh; edit that, not this."
  echo "module bootc-operator.test/control-plane/kubernetes"
  echo
  grep -E '^(go|godebug) ' "$GOMOD"
  echo
  echo "require k8s.io/kubernetes v$VERSION"
  echo
  echo "replace ("
  grep -E '=> \./staging/src/' "$GOMOD" | awk -v v="v0.$MINOR.$PATCH" '{print "\t" $1 " => " $1 " " v}'
  echo ")"
  echo
  echo "tool ("
  echo "	k8s.io/kubernetes/cmd/kube-apiserver"
  echo "	k8s.io/kubernetes/cmd/kubectl"
  echo ")"
} > "$DIR/go.mod"
rm -f "$DIR/go.sum"
(cd "$DIR" && go mod tidy)
echo "wrote $DIR/go.mod and go.sum" >&2
