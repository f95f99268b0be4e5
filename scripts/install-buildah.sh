#!/usr/bin/env bash
# Installs Debian's buildah, which `make image` uses to build Catena's image
# FROM scratch without a registry or a daemon. Idempotent: apt runs only when
# the package is missing.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"

log() { printf 'install-buildah: %s\n' "$*" >&2; }

ensure_apt_pkgs buildah
