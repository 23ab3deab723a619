#!/usr/bin/env bash
# `npm run images`: builds the four service images from the Dockerfile with podman, tagged with the
# commit (<short hash>, "-dirty" when the work tree has uncommitted changes), after making the base
# image when it is missing (scripts/images/base.sh). The Dockerfile is the one a CI with a registry
# uses; only NODE_IMAGE differs. Exits 3 naming what is missing where podman cannot run.
#
#   npm run images                      # all four: localhost/dataset-export-<service>:<tag>
#   npm run images -- gateway export    # some of them
#   IMAGE_TAG=1.4.0 npm run images      # another tag (GIT_COMMIT stays the commit)
#
# Prints the image names, one a line, on stdout (progress goes to stderr).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/images/podman.sh

SERVICES=(gateway catalog export schema)
[ "$#" -gt 0 ] && SERVICES=("$@")
for service in "${SERVICES[@]}"; do
  case "$service" in gateway|catalog|export|schema) ;; *) die "unknown service '$service' (gateway, catalog, export, schema)";; esac
done

require_podman
base_image="$(bash scripts/images/base.sh)"
tag="${IMAGE_TAG:-$(image_tag)}"
commit="$(git rev-parse HEAD)"
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# The Dockerfile's target for a service: the catalog runs with its own V8 flags (SERVICE_NODE_FLAGS
# in scripts/lib/stack.ts; docs/deployment.md, "Node flags").
target_of() {
  case "$1" in catalog) echo catalog-service;; *) echo service;; esac
}

for service in "${SERVICES[@]}"; do
  image="$IMAGE_REPO-$service:$tag"
  note "$image (FROM $base_image)" >&2
  start=$SECONDS
  # Layers are cached (podman's default): the stages all four images share are built once.
  pm build --network host --layers \
    --target "$(target_of "$service")" --build-arg SERVICE="$service" \
    --build-arg NODE_IMAGE="$base_image" \
    --build-arg IMAGE_TAG="$tag" \
    --build-arg GIT_COMMIT="$commit" \
    --build-arg BUILD_DATE="$build_date" \
    -t "$image" -f Dockerfile . >&2
  printf '%s built in %ss\n' "$image" "$((SECONDS - start))" >&2
  printf '%s\n' "$image"
done
