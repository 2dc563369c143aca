# syntax=docker/dockerfile:1
# One image per service:  docker build --build-arg SERVICE=identity -t billing-platform/identity .
# docker-compose.yml builds all of them; the build stage is shared (SERVICE is only used after it).

FROM node:20-slim AS build
WORKDIR /app
COPY . .
RUN npm ci --no-audit --no-fund \
 && npx turbo run build \
 && npm prune --omit=dev --no-audit --no-fund \
 && rm -rf packages/*/src services/*/src .turbo

FROM node:20-slim AS runtime
ARG SERVICE
RUN test -n "$SERVICE" || { echo 'build with --build-arg SERVICE=<service name>' >&2; exit 1; }
# HOST is read by the gateway alone (its public HTTP listener defaults to 127.0.0.1, which
# nothing outside the container reaches); the other services bind by their own variables
# (*_GRPC_ADDRESS, SANDBOX_PROVIDER_HOST, METRICS_HOST), loopback unless told otherwise.
ENV NODE_ENV=production \
    NODE_MAX_SEMI_SPACE_MB=4 \
    HOST=0.0.0.0 \
    SERVICE=${SERVICE}
WORKDIR /app
# Production dependencies (workspace packages are symlinks into packages/ and services/).
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/packages ./packages
COPY --from=build /app/services/${SERVICE} ./services/${SERVICE}
# gRPC contracts are loaded at run time by path.
COPY --from=build /app/proto ./proto
# Container health check: node scripts/healthcheck.mjs grpc 127.0.0.1:50051 | http http://127.0.0.1:8080/health
COPY --from=build /app/scripts/healthcheck.mjs ./scripts/healthcheck.mjs
COPY --from=build /app/scripts/lib ./scripts/lib
# docker-compose's grpc-certs job: the installation's gRPC authority and service certificates.
COPY --from=build /app/scripts/grpc-certs.mjs ./scripts/grpc-certs.mjs
# File-based email/SMS channels and the sandbox provider's ledger write under DATA_DIR (default
# .data). The grpc-* and sandbox directories exist owned by node so the named volumes mounted on
# them start writable by node.
RUN mkdir -p .data/sandbox .data/grpc-ca .data/grpc-tls/identity .data/grpc-tls/billing .data/grpc-tls/checkout .data/grpc-tls/webhooks .data/grpc-tls/gateway \
 && chown -R node:node .data
USER node
# exec: node is PID 1 and receives SIGTERM from `docker stop` directly.
# V8's young generation capped at NODE_MAX_SEMI_SPACE_MB (0: V8's own size; see the README).
CMD ["/bin/sh", "-c", "exec node --max-semi-space-size=${NODE_MAX_SEMI_SPACE_MB:-4} services/${SERVICE}/dist/main.js"]
