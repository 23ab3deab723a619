# syntax=docker/dockerfile:1
#
# One image per service from one Dockerfile:
#   docker build --target gateway|catalog|export|schema \
#     --build-arg IMAGE_TAG=1.4.0 --build-arg GIT_COMMIT=$(git rev-parse HEAD) \
#     --build-arg BUILD_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ) -t dataset-export-<service>:1.4.0 .
# Every image also carries the operator CLI (dist/exportctl.js) and the SQL migrations, so the
# Helm pre-upgrade Job can run `node dist/exportctl.js migrate` from the image being deployed.
# See docs/deployment.md.

ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS base
WORKDIR /src
ENV npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false

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
COPY services/catalog/package.json services/catalog/
COPY services/export/package.json services/export/
COPY services/gateway/package.json services/gateway/
COPY services/schema/package.json services/schema/

# All dependencies, for building.
FROM manifests AS deps
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit

# esbuild bundles of the four services and exportctl (each workspace's own build script).
FROM deps AS build
COPY . .
RUN npm run build --workspaces --if-present

# Runtime dependencies only: the bundles keep @mikro-orm/* and a few others external. Optional
# packages are the embedded-PostgreSQL binaries used by tests (hundreds of MB) and pg-cloudflare.
FROM manifests AS prod-deps
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --omit=optional --ignore-scripts --no-audit \
 && rm -rf node_modules/@exportsvc

FROM ${NODE_IMAGE} AS runtime
WORKDIR /app
ENV NODE_ENV=production
COPY --from=prod-deps --chown=0:0 /src/node_modules ./node_modules
# migrate() reads <dir of the bundle>/../migrations.
COPY --from=build --chown=0:0 /src/packages/db/migrations ./migrations
COPY --from=build --chown=0:0 /src/packages/exportctl/dist/exportctl.js ./dist/exportctl.js
ARG IMAGE_TAG=dev
ARG GIT_COMMIT=unknown
ARG BUILD_DATE=unknown
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
# Prometheus scrape port of every service (METRICS_PORT).
EXPOSE 9464
CMD ["node", "dist/main.js"]

FROM runtime AS gateway
COPY --from=build --chown=0:0 /src/services/gateway/dist/main.js ./dist/main.js
LABEL org.opencontainers.image.title="dataset-export-gateway"
EXPOSE 8080

FROM runtime AS catalog
COPY --from=build --chown=0:0 /src/services/catalog/dist/main.js ./dist/main.js
LABEL org.opencontainers.image.title="dataset-export-catalog"
EXPOSE 50052

FROM runtime AS export
COPY --from=build --chown=0:0 /src/services/export/dist/main.js ./dist/main.js
LABEL org.opencontainers.image.title="dataset-export-export"
EXPOSE 50053

FROM runtime AS schema
COPY --from=build --chown=0:0 /src/services/schema/dist/main.js ./dist/main.js
LABEL org.opencontainers.image.title="dataset-export-schema"
EXPOSE 50054
