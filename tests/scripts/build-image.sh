#!/usr/bin/env bash
# Builds the operator's OCI image without a container engine, with Debian's
# umoci: the three binaries in /usr/bin, the shared libraries they link
# (found with ldd) and the dynamic loader, the system CA bundle, passwd and
# group entries for the non-root users, labels. Same inputs, same digest:
# every file's time is SOURCE_DATE_EPOCH (default: the last commit's time),
# and the config carries no history and that time as its creation date.
#
#   build-image.sh BIN_DIR OUT_LAYOUT [TAG]
#
# BIN_DIR holds bootc-controller, bootc-daemon, bootc-helper; OUT_LAYOUT is
# an OCI layout directory (replaced); TAG defaults to the workspace version.
# Prints the manifest digest on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."

bin_dir="$1"
out="$2"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
tag="${3:-$version}"
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
created="$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
binaries=(bootc-controller bootc-daemon bootc-helper)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root/usr/bin" "$root/etc/ssl/certs" "$root/tmp"
chmod 1777 "$root/tmp"

for b in "${binaries[@]}"; do
  install -m 0755 "$bin_dir/$b" "$root/usr/bin/$b"
done
# Only the libraries the binaries need, at the paths their loader looks for.
tests/scripts/image-libraries.sh "${binaries[@]/#/$bin_dir/}" | while read -r lib; do
  mkdir -p "$root$(dirname "$lib")"
  install -m 0755 "$(readlink -f "$lib")" "$root$lib"
done
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
# The controller runs as 65532 (the image's user); the daemon starts as root
# (deploy/daemon.yaml's runAsUser) and drops to 41742, its own uid, which
# needs no entry here.
printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
  'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' \
  'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' >"$root/etc/passwd"
printf '%s\n' 'root:x:0:' 'nonroot:x:65532:' 'nogroup:x:65534:' >"$root/etc/group"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
chmod 0644 "$root/etc/passwd" "$root/etc/group" "$root/etc/nsswitch.conf"
find "$root" -type d -exec chmod go-w {} +
chmod 1777 "$root/tmp"
find "$root" -exec touch -h -d "@$epoch" {} +

rm -rf "$out"
umoci init --layout "$out"
umoci new --image "$out:$tag"
umoci insert --history.created "$created" --history.created_by "tests/scripts/build-image.sh" \
  --history.comment "bootc-operator $version" --image "$out:$tag" "$root" /
umoci config --no-history --image "$out:$tag" \
  --created "$created" \
  --os linux --architecture "$(dpkg --print-architecture 2>/dev/null || echo amd64)" \
  --config.user 65532:65532 \
  --config.entrypoint /usr/bin/bootc-controller \
  --config.workingdir / \
  --config.env PATH=/usr/bin \
  --config.label "org.opencontainers.image.title=bootc-operator" \
  --config.label "org.opencontainers.image.description=bootc-controller, bootc-daemon and bootc-helper" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.revision=$revision" \
  --config.label "org.opencontainers.image.licenses=Apache-2.0" \
  --config.label "org.opencontainers.image.created=$created"
umoci gc --layout "$out"
# The manifest digest of the tag.
python3 - "$out" "$tag" <<'PY'
import json, sys
index = json.load(open(f"{sys.argv[1]}/index.json"))
for m in index["manifests"]:
    if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == sys.argv[2]:
        print(m["digest"])
PY
