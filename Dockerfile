# The Petstore service as an image (D22; docs/container.md). `docker build .` and
# `podman build .` both find this file.
#
# BASE is an official Node.js image of the line the project runs on, pinned by tag; pin it by
# digest too with `--build-arg BASE=node:26.10.0-trixie-slim@sha256:<digest>`.
ARG BASE=node:26.10.0-trixie-slim

# ---- Production dependencies, installed where no development tool can reach the image ----
FROM ${BASE} AS dependencies
WORKDIR /app
COPY package.json package-lock.json ./
COPY client/package.json client/
# --omit=dev: no development tools. --omit=optional: no second Node.js (the npm registry's
# builds are optional dependencies); the base image's Node.js runs the service. A build that
# reaches the registry through a TLS-inspecting proxy passes that proxy's CA bundle as the
# secret `npm_ca` (`--secret id=npm_ca,src=<bundle>`); it is read during this step only and
# never stored in a layer. Source maps and TypeScript declarations are for editors and
# debuggers, never loaded by the service: they go (40% of what the dependencies hold).
# A registry that cannot be reached fails the build within about two minutes rather than
# npm's default of a quarter of an hour (five minutes a request, three tries): 30 s a request,
# two more tries 2 and 10 s later. Raise --fetch-timeout on a link too slow for 30 s a package.
RUN --mount=type=secret,id=npm_ca \
    if [ -s /run/secrets/npm_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm_ca; fi \
 && npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund \
      --fetch-timeout=30000 --fetch-retries=2 --fetch-retry-mintimeout=2000 \
      --fetch-retry-maxtimeout=10000 \
 && rm -rf node_modules/.package-lock.json \
 && find node_modules -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \) -delete

# ---- The runtime: Node.js, the production dependencies and what `serve` reads ----
FROM ${BASE}
ARG VERSION=1.2.0
ARG SOURCE=
LABEL org.opencontainers.image.title="petstore" \
      org.opencontainers.image.description="The Petstore HTTP API: list, add and get animals." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.source="${SOURCE}"

# The API and the probes on every address of the container; /metrics stays on its loopback, as
# everywhere (D17: it needs no key), until METRICS_HOST says otherwise.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    PROBE_HOST=0.0.0.0 \
    PROBE_PORT=8081 \
    DATABASE_URL=sqlite:/data/petstore.db
WORKDIR /app
COPY --from=dependencies /app/node_modules node_modules
COPY package.json LICENSE ./
COPY bin bin
COPY src src
COPY client/package.json client/
COPY client/src client/src
# The SQLite file's folder, the one place the service writes (with /tmp): owned by the user,
# open to no one else, as the service makes its own data folders.
RUN mkdir -m 0700 /data && chown 1000:1000 /data \
 && ln -s /app/bin/petstore.js /usr/local/bin/petstore
VOLUME ["/data"]
# The official image's `node` user (uid and gid 1000), by number so that a runtime's
# runAsNonRoot can check it.
USER 1000:1000
EXPOSE 8080 8081

# node itself as PID 1 (or under --init's tini), never npm or a shell: SIGTERM reaches the server,
# which drains within 10 s and exits 0 (D11): give a stop more than that (--stop-timeout 15).
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "/app/bin/petstore.js"]
CMD ["serve"]
# The probe listener's /healthz, answered on a thread of its own (D20): no curl in the image.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "/app/bin/healthcheck.js"]
