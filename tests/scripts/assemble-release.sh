#!/usr/bin/env bash
# Assembles one release folder from what `./dev release` built (the test in
# tests/tests/release.rs runs it on the test build's files):
#
#   assemble-release.sh OUT LAYOUT DIGEST REPOSITORY PLUGIN BASE_URL BIN_DIR
#
#   OUT         the folder to write (replaced)
#   LAYOUT      the image's OCI layout (build-image.sh's output), copied as
#               OUT/image
#   DIGEST      the image's manifest digest (sha256:...)
#   REPOSITORY  where the image will be pushed (registry/path, no tag)
#   PLUGIN      the kubectl-bootc binary
#   BASE_URL    where OUT's files will be published (the krew manifest's
#               download address is BASE_URL/<archive>)
#   BIN_DIR     the image's binaries (bootc-controller, bootc-daemon,
#               bootc-helper), for its SBOM
#
# It writes:
#   image/                             the OCI layout (push it with skopeo)
#   install.yaml                       `kubectl kustomize deploy/` with the
#                                      image pinned to REPOSITORY@DIGEST
#   bootc-operator-<version>.tgz       the packaged chart, pinned the same way
#   kubectl-bootc-linux-amd64.tar.gz   the plugin and the LICENSE
#   bootc.yaml                         its krew plugin manifest
#   sbom.spdx.json                     the image's SBOM (SPDX 2.3): the
#                                      crates its binaries link, the Debian
#                                      packages of its libraries
#   provenance.intoto.json             an in-toto Statement, SLSA v1
#                                      provenance: the image and the files
#                                      above by digest, the commit, the
#                                      command (RELEASE_COMMAND), the builder
#                                      (RELEASE_BUILDER, default
#                                      urn:bootc-operator:local:<hostname>),
#                                      the start (RELEASE_STARTED)
#   SHA256SUMS                         every file above (the layout's files
#                                      are checked by their own digests)
#
# RELEASE_TOOL is `bootc-release` (tests/src/bin/bootc-release/), which
# writes the SBOM and, with SIGNING_KEY (a PEM ECDSA P-256 private key),
# signs in cosign's formats:
#   image/ the tag sha256-<hex>.sig    the image's cosign signature (push it
#                                      beside the image)
#   SHA256SUMS.sig, <chart>.tgz.sig,   as `cosign sign-blob --key` writes them
#   provenance.intoto.json.sig
#   cosign.pub                         the public key
# Without it, it says the release is unsigned.
#
# helm and kubectl are $HELM and $KUBECTL, else the ones
# build-control-plane.sh caches.
set -euo pipefail
cd "$(dirname "$0")/../.."

out="$1" layout="$2" digest="$3" repo="$4" plugin="$5" base_url="$6" bin_dir="$7"
started="${RELEASE_STARTED:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}"
tool="${RELEASE_TOOL:?RELEASE_TOOL must name the bootc-release binary}"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
case "$digest" in
  sha256:????????????????????????????????????????????????????????????????) ;;
  *) echo "assemble-release.sh: DIGEST must be sha256:<64 hex>, not $digest" >&2; exit 2 ;;
esac

if [ -z "${HELM:-}" ] || [ -z "${KUBECTL:-}" ]; then
  tools="$(tests/scripts/build-control-plane.sh "$(ls -d tests/control-plane/kubernetes-* | sed 's|.*/kubernetes-||' | sort -t. -k2 -n | tail -n1)")"
  HELM="${HELM:-$(awk '$1 == "helm" {print $2}' <<<"$tools")/helm}"
  KUBECTL="${KUBECTL:-$(awk '$1 ~ /^1\./ {print $2}' <<<"$tools")/kubectl}"
fi

rm -rf "$out"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cp -r "$layout" "$out/image"

# install.yaml: deploy/ with the image by digest (an overlay in the
# repository's target/, since kustomize takes a base by relative path; one
# of its own per run, as tests assemble releases side by side).
mkdir -p target
overlay="$(mktemp -d target/release-overlay.XXXXXX)"
trap 'rm -rf "$work" "$overlay"' EXIT
cat >"$overlay/kustomization.yaml" <<EOF
resources:
  - ../../deploy
images:
  - name: bootc-operator
    newName: $repo
    digest: $digest
EOF
"$KUBECTL" kustomize "$overlay" >"$out/install.yaml"
rm -rf "$overlay"

# The chart, its symlinks resolved, its image pinned the same way.
cp -rL charts/bootc-operator "$work/bootc-operator"
python3 - "$work/bootc-operator/values.yaml" "$repo" "$version" "$digest" <<'PY'
import re, sys
path, repo, version, digest = sys.argv[1:]
text = open(path).read()
block = re.search(r"^image:\n(  .*\n)+", text, re.M)
pinned = f"image:\n  repository: {repo}\n  tag: \"{version}\"\n  digest: \"{digest}\"\n  pullPolicy: \"\"\n"
open(path, "w").write(text[: block.start()] + pinned + text[block.end():])
PY
"$HELM" package "$work/bootc-operator" --version "$version" --app-version "$version" \
  --destination "$out" >/dev/null

# The plugin, and its krew manifest.
archive="kubectl-bootc-linux-amd64.tar.gz"
mkdir -p "$work/plugin"
cp "$plugin" "$work/plugin/kubectl-bootc"
cp LICENSE "$work/plugin/LICENSE"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
  -C "$work/plugin" -czf "$out/$archive" .
sha="$(sha256sum "$out/$archive" | cut -d' ' -f1)"
cat >"$out/bootc.yaml" <<EOF
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: bootc
spec:
  version: v$version
  shortDescription: Watch and steer bootc-operator OS rollouts
  description: |
    Answers the questions a bootc-operator rollout raises, from the objects
    kubectl get reads: status, why a node is not updating, pause and resume,
    retry of a failed reboot, history.
  platforms:
    - selector:
        matchLabels:
          os: linux
          arch: amd64
      uri: $base_url/$archive
      sha256: $sha
      bin: kubectl-bootc
      files:
        - from: kubectl-bootc
          to: .
        - from: LICENSE
          to: .
EOF

# The SBOM, dated by the commit (the same commit, the same bytes).
created="$(date -u -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}" +%Y-%m-%dT%H:%M:%SZ)"
"$tool" sbom --bin-dir "$bin_dir" --digest "$digest" --repository "$repo" \
  --created "$created" >"$out/sbom.spdx.json"

# The provenance: what was built, from which commit, by which command.
files=(install.yaml "bootc-operator-$version.tgz" "$archive" bootc.yaml sbom.spdx.json)
"$tool" provenance --digest "$digest" --repository "$repo" \
  --command "${RELEASE_COMMAND:-tests/scripts/assemble-release.sh $*}" \
  --builder "${RELEASE_BUILDER:-urn:bootc-operator:local:$(hostname)}" \
  --started "$started" --finished "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  "${files[@]/#/$out/}" >"$out/provenance.intoto.json"

(cd "$out" && sha256sum "${files[@]}" provenance.intoto.json >SHA256SUMS)
if [ -n "${SIGNING_KEY:-}" ]; then
  "$tool" sign \
    --key "$SIGNING_KEY" --layout "$out/image" --digest "$digest" --repository "$repo" \
    --public-key "$out/cosign.pub" "$out/SHA256SUMS" "$out/bootc-operator-$version.tgz" \
    "$out/provenance.intoto.json"
  echo "signed: the image (tag sha256-${digest#sha256:}.sig), SHA256SUMS, the chart and the provenance; public key cosign.pub" >&2
else
  echo "UNSIGNED release: no signing key (./dev release --signing-key FILE signs it)" >&2
fi
echo "$out"
