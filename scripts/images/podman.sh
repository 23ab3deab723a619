# Shared by scripts/images/*.sh (sourced): how podman runs on our machines, and what is missing
# when it cannot. Works with Docker's CLI too where noted; podman is what the machines have.
#
# - runc, not crun: Debian's crun refuses the machines' hybrid cgroups.
# - CONTAINERS_CONF with `default_ulimits = []`: containers may not raise limits here.
# - --network host everywhere: there is no bridge/CNI networking on the machines.

IMAGE_REPO="${IMAGE_REPO:-localhost/dataset-export}"
PODMAN_STATE_DIR="${PODMAN_STATE_DIR:-${TMPDIR:-/tmp}/dataset-export-podman}"

die() { printf 'images: %s\n' "$*" >&2; exit 1; }
note() { printf '\n=== %s\n' "$*"; }

# Prints what is missing for podman to build and run containers here (empty when nothing is).
podman_missing() {
  local missing=()
  command -v podman >/dev/null 2>&1 || missing+=("podman (apt-get install podman)")
  command -v buildah >/dev/null 2>&1 || missing+=("buildah (apt-get install buildah)")
  command -v runc >/dev/null 2>&1 || missing+=("runc (apt-get install runc)")
  [ "${#missing[@]}" -eq 0 ] || { printf '%s\n' "${missing[@]}"; return; }
  # Installed but unable to start a container (no user namespaces, no cgroups, not root…).
  local out
  if ! out="$(pm info --format '{{.Host.OCIRuntime.Name}}' 2>&1)"; then
    printf 'a working podman (podman --runtime runc info failed: %s)\n' "$(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"
  fi
}

podman_conf() {
  mkdir -p "$PODMAN_STATE_DIR"
  local conf="$PODMAN_STATE_DIR/containers.conf"
  if [ ! -f "$conf" ]; then
    cat >"$conf" <<'CONF'
[containers]
# Raising RLIMIT_NOFILE/NPROC is not permitted on our machines; keep the caller's limits.
default_ulimits = []
[engine]
runtime = "runc"
CONF
  fi
  printf '%s' "$conf"
}

pm() { CONTAINERS_CONF="$(podman_conf)" podman --runtime runc "$@"; }

require_podman() {
  local missing
  missing="$(podman_missing)"
  if [ -n "$missing" ]; then
    printf 'images: cannot build or run containers here; missing:\n' >&2
    while IFS= read -r line; do printf '  - %s\n' "$line" >&2; done <<<"$missing"
    printf 'On Debian/Ubuntu (as root): apt-get update && apt-get install -y podman buildah runc debootstrap\n' >&2
    exit 3
  fi
}

# The commit the images are tagged with: the short hash, "-dirty" when tracked files of the build
# context have uncommitted changes (the context is the work tree, so it would not be the commit's
# code). Paths that .dockerignore leaves out of the context do not count.
image_tag() {
  local sha
  sha="$(git rev-parse --short=12 HEAD)"
  if [ -n "$(git status --porcelain --untracked-files=no -- . ':(exclude)test' ':(exclude)docs' ':(exclude)charts' \
    ':(exclude)k8s' ':(exclude).ci' ':(glob,exclude)**/test/**' 2>/dev/null)" ]; then
    sha="$sha-dirty"
  fi
  printf '%s' "$sha"
}

# Removes this project's service images of other tags (each commit adds four) and build-cache
# layers unused for three days; the base image and recent layers stay, so the next build reuses them.
prune_old_images() {
  local keep="$1" service ref
  for service in gateway catalog export schema; do
    pm images --format '{{.Repository}}:{{.Tag}}' --filter "reference=$IMAGE_REPO-$service" | while read -r ref; do
      [ "${ref##*:}" = "$keep" ] || pm rmi "$ref" >/dev/null 2>&1 || true
    done
  done
  pm image prune --force --filter until=72h >/dev/null 2>&1 || true
}
