#!/usr/bin/env bash
# The shared libraries the image carries for its binaries: what ldd says
# each of BIN... links (the dynamic loader included), one path a line,
# sorted. build-image.sh copies them; the release's SBOM names the Debian
# package of each (bootc-release sbom).
#
#   image-libraries.sh BIN...
set -euo pipefail
for b in "$@"; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
done | sort -u
