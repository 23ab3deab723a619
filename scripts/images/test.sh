#!/usr/bin/env bash
# `npm run images:test`: the stack from its images (test/deploy/images): image hygiene, then the
# migrations Job and the four services as containers, a smoke subset of the conformance suite
# against the gateway container, and a graceful stop mid-stream. Builds the images of this commit
# first when they are missing (npm run images). Uses a fresh database on DATABASE_URL's server
# (default postgres://postgres@127.0.0.1:5432/postgres, dropped afterwards) and REDIS_URL
# (default redis://127.0.0.1:6379). Exits 3 naming what is missing where podman cannot run.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/images/podman.sh

require_podman
export DEPLOY_IMAGE_TAG="${IMAGE_TAG:-$(image_tag)}"
export DEPLOY_GIT_COMMIT="$(git rev-parse HEAD)"
missing=()
for service in gateway catalog export schema; do
  pm image exists "$IMAGE_REPO-$service:$DEPLOY_IMAGE_TAG" || missing+=("$service")
done
if [ "${#missing[@]}" -gt 0 ]; then
  note "building ${missing[*]} ($DEPLOY_IMAGE_TAG)"
  IMAGE_TAG="$DEPLOY_IMAGE_TAG" bash scripts/images/build.sh "${missing[@]}" >/dev/null
fi
export DEPLOY_BASE_IMAGE="$(bash scripts/images/base.sh)"
note "images $IMAGE_REPO-*:$DEPLOY_IMAGE_TAG against a stack of containers"
exec npx jest -c test/deploy/images/jest.config.js --runInBand "$@"
