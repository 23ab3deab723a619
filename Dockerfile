# syntax=docker/dockerfile:1
#
# One image per service from one Dockerfile:
#   docker build --target service --build-arg SERVICE=gateway|catalog|export|schema \
#     --build-arg IMAGE_TAG=1.4.0 --build-arg GIT_COMMIT=$(git rev-parse HEAD) \
#     --build-arg BUILD_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ) -t dataset-export-<service>:1.4.0 .
# Every image also carries the operator CLI (dist/exportctl.js) and the SQL migrations, so the
# Helm pre-upgrade Job can run `node dist/exportctl.js migrate` from the image being deployed.
# See docs/deployment.md. `npm run images` builds all four with podman (scripts/images/), where
# only NODE_IMAGE differs: a locally made stand-in for node:20-bookworm-slim.

ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS base
WORKDIR /src
ENV npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
# The lockfile is installed with npm 10.9.2, as in CI (.ci/run): npm 11's `ci` refuses it (it wants
# lock entries for other platforms' optional packages). Both npm ci stages below derive from here.
RUN --mount=type=cache,target=/root/.npm npm install -g npm@10.9.2 && npm --version

# Workspace manifests only, so dependency layers are reused until a manifest or the lockfile
# changes. Every workspace must be listed (test/deploy/dockerfile.test.ts checks it).
FROM base AS manifests
COPY package.json package-lock.json ./
COPY packages/common/package.json packages/common/
COPY packages/datasets/package.json packages/datasets/
COPY packages/db/package.json packages/db/
COPY packages/exportctl/package.json packages/exportctl/
COPY packages/form-datasets/package.json packages/form-datasets/
COPY packages/naming/package.json packages/naming/
COPY packages/proto/package.json packages/proto/
COPY packages/rpc/package.json packages/rpc/
COPY packages/sync-client/package.json packages/sync-client/
COPY services/catalog/package.json services/catalog/
COPY services/export/package.json services/export/
COPY services/gateway/package.json services/gateway/
COPY services/schema/package.json services/schema/

# All dependencies, for building.
FROM manifests AS deps
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit

# esbuild bundles of the four services and exportctl (each workspace's own build script; only
# what the images ship), with source maps without the sources' text: `--enable-source-maps` turns
# stack traces into TypeScript file:line, and no source code ships.
FROM deps AS build
COPY . .
RUN npm run build -w services/gateway -w services/catalog -w services/export -w services/schema -w packages/exportctl \
    -- --sourcemap --sources-content=false

# Runtime dependencies only: the bundles keep @mikro-orm/* and a few others external. Optional
# packages are the embedded-PostgreSQL binaries used by tests (hundreds of MB) and pg-cloudflare.
# (npm ci here runs before the bundles are copied in, so its layer survives source changes.)
FROM manifests AS prod-deps
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --omit=optional --ignore-scripts --no-audit \
 && rm -rf node_modules/@exportsvc
# Only what the bundles require at run time (and its dependencies) stays; no type declarations,
# source maps, TypeScript sources or docs (scripts/images/prune-node-modules.js).
COPY --from=build /src/services/gateway/dist/main.js /bundles/gateway.js
COPY --from=build /src/services/gateway/dist/tracing.js /bundles/gateway-tracing.js
COPY --from=build /src/services/catalog/dist/main.js /bundles/catalog.js
COPY --from=build /src/services/catalog/dist/tracing.js /bundles/catalog-tracing.js
COPY --from=build /src/services/export/dist/main.js /bundles/export.js
COPY --from=build /src/services/export/dist/tracing.js /bundles/export-tracing.js
COPY --from=build /src/services/schema/dist/main.js /bundles/schema.js
COPY --from=build /src/services/schema/dist/tracing.js /bundles/schema-tracing.js
COPY --from=build /src/packages/exportctl/dist/exportctl.js /bundles/exportctl.js
COPY scripts/images/prune-node-modules.js /bundles/
RUN node /bundles/prune-node-modules.js node_modules /bundles/*.js

FROM ${NODE_IMAGE} AS runtime
WORKDIR /app
# --enable-source-maps also for exportctl (the migrations Job's `node dist/exportctl.js migrate`).
ENV NODE_ENV=production NODE_OPTIONS=--enable-source-maps
COPY --from=prod-deps --chown=0:0 /src/node_modules ./node_modules
# migrate() reads <dir of the bundle>/../migrations.
COPY --from=build --chown=0:0 /src/packages/db/migrations ./migrations
COPY --from=build --chown=0:0 /src/packages/exportctl/dist/exportctl.js /src/packages/exportctl/dist/exportctl.js.map ./dist/
ARG IMAGE_TAG=dev
ARG GIT_COMMIT=unknown
ARG BUILD_DATE=unknown
# A RUN that reads the build arguments, so that builders whose layer cache ignores build-argument
# values in ENV (buildah/podman 4.3 reused a previous build's IMAGE_TAG) rebuild the layers below.
RUN test -n "$IMAGE_TAG" && test -n "$GIT_COMMIT" && test -n "$BUILD_DATE"
# Served by GET /build and exported as build_info{image_tag,commit}.
ENV IMAGE_TAG=${IMAGE_TAG} GIT_COMMIT=${GIT_COMMIT} BUILD_DATE=${BUILD_DATE}
LABEL org.opencontainers.image.title="dataset-export" \
      org.opencontainers.image.description="Read-only multi-tenant dataset export API (CSV datasets with resumable cursors)" \
      org.opencontainers.image.version="${IMAGE_TAG}" \
      org.opencontainers.image.revision="${GIT_COMMIT}" \
      org.opencontainers.image.created="${BUILD_DATE}"
# Numeric uid/gid (the image's `node` user) so Kubernetes can verify runAsNonRoot. Files are
# root-owned and read-only to it: the root filesystem can be mounted read-only.
USER 1000:1000
# node is PID 1: the services handle SIGTERM themselves (graceful drain, SHUTDOWN_GRACE_MS).
# dist/tracing.js is preloaded so that tracing runs before main.js loads what it instruments.
# --heap-growing-percent=100 for gateway, export and schema; the catalog's image has its own CMD
# below. V8 flags per service: SERVICE_NODE_FLAGS in scripts/lib/stack.ts (docs/deployment.md, "Node flags").
CMD ["node", "--enable-source-maps", "--heap-growing-percent=100", "--import", "./dist/tracing.js", "dist/main.js"]

# Every service image, from this one stage: SERVICE (gateway, catalog, export or schema) picks the
# bundle; a SERVICE without a bundle fails the COPY. The ports a service listens on are its
# configuration (PORT, GRPC_PORT, METRICS_PORT; the chart's containerPorts), not the image's.
FROM runtime AS service
ARG SERVICE
COPY --from=build --chown=0:0 /src/services/${SERVICE}/dist/main.js /src/services/${SERVICE}/dist/main.js.map /src/services/${SERVICE}/dist/tracing.js /src/services/${SERVICE}/dist/tracing.js.map ./dist/
LABEL org.opencontainers.image.title="dataset-export-${SERVICE}"

# The catalog (scripts/images/build.sh picks this target for it): the same image with its own V8
# flags, a young generation capped at 4 MB and V8's own old-generation growth (docs/deployment.md,
# "Node flags").
FROM service AS catalog-service
CMD ["node", "--enable-source-maps", "--max-semi-space-size=4", "--import", "./dist/tracing.js", "dist/main.js"]
