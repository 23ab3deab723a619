#!/usr/bin/env bash
# Builds the local stand-in for `node:20-bookworm-slim` when it is not in podman's storage yet:
# no image can be pulled here, so the base is Debian bookworm (debootstrap --variant=minbase) plus
# this machine's Node 20 and npm and its CA bundle (NODE_EXTRA_CA_CERTS, without which npm inside
# the build cannot reach the registry through the machines' TLS proxy). Prints the image name.
#
# The image name carries the Node version, so a machine keeps reusing it across runs (CI caches it
# in podman's own storage) until its Node changes. FORCE_BASE=1 rebuilds it.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/images/podman.sh

NODE_BIN="$(command -v node)"
NODE_VERSION="$("$NODE_BIN" --version)"
case "$NODE_VERSION" in v20.*) ;; *) die "the base image needs Node 20 on this machine (found $NODE_VERSION at $NODE_BIN)";; esac
BASE_IMAGE="${BASE_IMAGE:-$IMAGE_REPO-base:node-${NODE_VERSION#v}-bookworm}"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
SUITE_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

require_podman
if [ "${FORCE_BASE:-0}" != 1 ] && pm image exists "$BASE_IMAGE"; then
  printf '%s\n' "$BASE_IMAGE"
  exit 0
fi
command -v debootstrap >/dev/null 2>&1 || die "the base image $BASE_IMAGE is missing and debootstrap is not installed (apt-get install debootstrap)"
[ -f "$CA_BUNDLE" ] || die "no CA bundle at $CA_BUNDLE (apt-get install ca-certificates, or set CA_BUNDLE)"
NPM_DIR="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"
[ -f "$NPM_DIR/package.json" ] || die "cannot find this machine's npm package (looked in $NPM_DIR)"
[ "$(id -u)" = 0 ] || die "debootstrap needs root to build the base image $BASE_IMAGE"

note "base image $BASE_IMAGE (debootstrap bookworm + Node $NODE_VERSION from $NODE_BIN)" >&2
work="$(mktemp -d "${TMPDIR:-/tmp}/dataset-export-base.XXXXXX")"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
mkdir -p "$PODMAN_STATE_DIR/debootstrap-cache"
debootstrap --variant=minbase --cache-dir="$PODMAN_STATE_DIR/debootstrap-cache" bookworm "$rootfs" "$SUITE_MIRROR" >&2

# Node and npm where the official image has them.
install -m 0755 "$NODE_BIN" "$rootfs/usr/local/bin/node"
mkdir -p "$rootfs/usr/local/lib/node_modules"
cp -a "$NPM_DIR" "$rootfs/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
# The machine's CA bundle, where Debian's ca-certificates keeps it.
mkdir -p "$rootfs/etc/ssl/certs"
install -m 0644 "$CA_BUNDLE" "$rootfs/etc/ssl/certs/ca-certificates.crt"
# The official image's `node` user (uid/gid 1000); the Dockerfile uses the numbers.
grep -q '^node:' "$rootfs/etc/group" || echo 'node:x:1000:' >>"$rootfs/etc/group"
grep -q '^node:' "$rootfs/etc/passwd" || echo 'node:x:1000:1000::/home/node:/bin/sh' >>"$rootfs/etc/passwd"
mkdir -p "$rootfs/home/node" && chown 1000:1000 "$rootfs/home/node"
# What a slim image leaves out.
rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
  "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log

tar --numeric-owner -C "$rootfs" -c . | pm import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
  --change "ENV NODE_VERSION=${NODE_VERSION#v}" \
  --change 'CMD ["node"]' \
  --message "debootstrap bookworm minbase + node $NODE_VERSION" - "$BASE_IMAGE" >&2
printf '%s\n' "$BASE_IMAGE"
