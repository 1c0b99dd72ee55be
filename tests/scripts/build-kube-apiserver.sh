#!/usr/bin/env bash
# Builds kube-apiserver from Debian bookworm's `kubernetes` source package
# (1.20.2, all Go dependencies vendored) and caches the binary outside the
# repository, keyed by version. Prints the binary's path on stdout.
set -euo pipefail

VERSION=1.20.2
# Bump when the patches below change, so cached binaries are rebuilt.
PATCHLEVEL=2
CACHE="${BOOTC_OPERATOR_CACHE:-$HOME/.cache/bootc-operator}"
OUT="$CACHE/kube-apiserver-$VERSION-p$PATCHLEVEL/kube-apiserver"

if [ -x "$OUT" ]; then
  echo "$OUT"
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

# apt-get source needs a deb-src entry: derive one from the machine's own
# Debian sources by switching the Types line (no host names written here).
SRC_LIST=/etc/apt/sources.list.d/bootc-operator-deb-src.sources
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: .*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | $SUDO tee "$SRC_LIST" >/dev/null
  elif [ -f /etc/apt/sources.list ]; then
    grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' | $SUDO tee /etc/apt/sources.list.d/bootc-operator-deb-src.list >/dev/null
  fi
  $SUDO apt-get update -qq >&2
fi

WORK="$CACHE/build-kube-apiserver"
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK"
apt-get source -qq "kubernetes=1.20.5+really1.20.2-1.1+deb12u1" >&2 2>/dev/null || apt-get source -qq kubernetes >&2
SRC="$(find . -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)"
cd "$SRC"

# The vendored reflect2 1.0.1 crashes the apiserver under Go >= 1.18 on the
# first custom-resource write; use Debian's 1.0.2 sources instead.
R2_VENDOR=vendor/github.com/modern-go/reflect2
R2_DEB=/usr/share/gocode/src/github.com/modern-go/reflect2
if [ ! -d "$R2_DEB" ]; then
  echo "missing $R2_DEB (package golang-github-modern-go-reflect2-dev)" >&2
  exit 1
fi
rm -f "$R2_VENDOR"/*.go "$R2_VENDOR"/*.s
cp "$R2_DEB"/*.go "$R2_DEB"/*.s "$R2_VENDOR"/ 2>/dev/null || cp "$R2_DEB"/*.go "$R2_VENDOR"/
rm -f "$R2_VENDOR"/*_test.go

# The OpenAPI type validator treats any zero value ("" , 0, false) as null:
# it compares two reflect.Value structs with DeepEqual, which Go >= 1.18
# answers differently from the Go 1.15 this release was built with. Under
# Debian's Go every custom resource with an empty string, a 0 or a false is
# then rejected ("must be of type string: null"). Only a real nil is null.
for f in vendor/github.com/go-openapi/validate/type.go vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go; do
  grep -q 'reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data))' "$f"
  sed -i 's/if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {/if data == nil {/' "$f"
done

export GOFLAGS=-mod=vendor GO111MODULE=on GOCACHE="$WORK/gocache" GOPATH="$WORK/gopath"
make WHAT=cmd/kube-apiserver >&2
mkdir -p "$(dirname "$OUT")"
cp _output/bin/kube-apiserver "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
cd "$CACHE"
rm -rf "$WORK"
echo "$OUT"
