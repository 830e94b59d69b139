#!/usr/bin/env bash
# The package as a stranger gets it: `npm pack` (prepack builds dist/), installed into a
# throwaway project in a temp dir with ioredis 5 and none of the optional peers, then
#   - type-checked with skipLibCheck: false, moduleResolution nodenext and bundler, under the
#     lowest TypeScript we support (5.0) and the latest 5.x (test/consumer/consumer.ts);
#   - with ioredis uninstalled (an optional peer), every .d.ts still compiles and an in-process
#     cache runs;
#   - publint, and @arethetypeswrong/cli failing on anything but the ESM-only note
#     (cjs-resolves-to-esm: the package is ESM; require() works through Node's require(esm));
#   - run: import as ESM and require as CJS;
#     getOrLoad of a row with a Date, twice, against a redis-server started here on a free
#     loopback port (stopped by its pid): 1 load, and the second answer's field is a Date.
# Usage: bash scripts/consumer-check.sh (from .ci/run after the build). About a minute.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TS_LOWEST=5.0.4
TS_LATEST=5.9.3
IOREDIS=5.3.2

work="$(mktemp -d)"
redis_pid=''
cleanup() {
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
step() { printf '[consumer %3ss] %s\n' "$SECONDS" "$*"; }

step "npm pack"
tarball="$(cd "$root" && npm pack --silent --pack-destination "$work" | tail -1)"
tarball="$work/$tarball"
tar -tzf "$tarball" >"$work/contents.txt"
step "packed $(basename "$tarball"): $(wc -l <"$work/contents.txt") files, $(du -k "$tarball" | cut -f1) kB"
grep -q '^package/dist/index.js$' "$work/contents.txt" || {
  echo "dist/index.js is missing from the tarball"
  exit 1
}

app="$work/app"
mkdir -p "$app"
cp "$root"/test/consumer/* "$app/"
cat >"$app/package.json" <<'JSON'
{ "name": "consumer", "private": true, "type": "module" }
JSON
step "npm install the tarball, ioredis@$IOREDIS, @types/node@20, typescript $TS_LOWEST and $TS_LATEST (no optional peers)"
(cd "$app" && npm install --no-audit --no-fund --prefer-offline --loglevel=error \
  "$tarball" "ioredis@$IOREDIS" "@types/node@^20.19" \
  "ts-lowest@npm:typescript@$TS_LOWEST" "ts-latest@npm:typescript@$TS_LATEST" >/dev/null)
for peer in express @types/express fastify hono koa @types/koa @nestjs/common @nestjs/core rxjs reflect-metadata pg mysql2 etcd3 node-zookeeper-client @opentelemetry/api cron-parser; do
  if [ -e "$app/node_modules/$peer" ]; then
    echo "optional peer $peer got installed"
    exit 1
  fi
done
step "installed: stampede-guard $(node -p "require('$app/node_modules/stampede-guard/package.json').version"), ioredis $(node -p "require('$app/node_modules/ioredis/package.json').version"), lru-cache $(node -p "require('$app/node_modules/lru-cache/package.json').version")"

for resolution in nodenext bundler; do
  module=nodenext
  [ "$resolution" = bundler ] && module=esnext
  cat >"$app/tsconfig.$resolution.json" <<JSON
{
  "compilerOptions": {
    "target": "ES2022",
    "module": "$module",
    "moduleResolution": "$resolution",
    "strict": true,
    "skipLibCheck": false,
    "noEmit": true,
    "types": ["node"]
  },
  "files": ["consumer.ts", "cache-only.ts"]
}
JSON
  for ts in ts-lowest ts-latest; do
    version="$(node -p "require('$app/node_modules/$ts/package.json').version")"
    step "tsc $version, moduleResolution $resolution, skipLibCheck false"
    (cd "$app" && node "node_modules/$ts/bin/tsc" -p "tsconfig.$resolution.json")
  done
done

# ioredis is an optional peer: with it uninstalled, every .d.ts of the package must still
# compile, and a cache without Redis (and the middleware) must run.
mv "$app/node_modules/ioredis" "$work/ioredis-aside"
# The Fastify entry's .d.ts import fastify (its users have it); no other .d.ts may name an
# optional framework, so they compile without any installed.
dist="$app/node_modules/stampede-guard/dist"
leaks="$(grep -rlE "from '(fastify|hono|express|koa|rxjs|@nestjs/[a-z-]+)'|import\\('(fastify|hono|express|koa|rxjs|@nestjs/[a-z-]+)" "$dist" --include='*.d.ts' | grep -v '/dist/fastify/' || true)"
if [ -n "$leaks" ]; then
  echo "framework types leak into: $leaks"
  exit 1
fi
step "without ioredis: all $(find "$dist" -name '*.d.ts' -not -path '*/dist/fastify/*' | wc -l) .d.ts of the package but the Fastify entry's, and cache-only.ts, compile (tsc $TS_LATEST, skipLibCheck false)"
(cd "$app" && node node_modules/ts-latest/bin/tsc --noEmit --strict --skipLibCheck false --module nodenext \
  --moduleResolution nodenext --target ES2022 --types node cache-only.ts \
  $(find node_modules/stampede-guard/dist -name '*.d.ts' -not -path '*/dist/fastify/*'))
step "without ioredis: an in-process cache runs"
(cd "$app" && node no-ioredis.mjs)
mv "$work/ioredis-aside" "$app/node_modules/ioredis"

# Fastify 5's own types need TypeScript 5.4 (NoInfer): checked with the latest only.
step "fastify installed: the Fastify entry's .d.ts and fastify.ts compile (tsc $TS_LATEST, skipLibCheck false)"
(cd "$app" && npm install --no-audit --no-fund --prefer-offline --loglevel=error --no-save "fastify@^5" >/dev/null)
(cd "$app" && node node_modules/ts-latest/bin/tsc --noEmit --strict --skipLibCheck false --module nodenext \
  --moduleResolution nodenext --target ES2022 --types node fastify.ts \
  $(find node_modules/stampede-guard/dist/fastify -name '*.d.ts'))

step "publint"
(cd "$root" && node_modules/.bin/publint run "$tarball" --strict)
step "@arethetypeswrong/cli, profile esm-only (the package is ESM-only, see README: no node10 or CJS resolution)"
(cd "$root" && node_modules/.bin/attw "$tarball" --profile esm-only --format ascii)

step "CJS require"
(cd "$app" && node run.cjs)

port="$(node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close() })")"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --loglevel warning \
  >"$work/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 1 50); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
step "redis-server $(redis-server --version | grep -o 'v=[0-9.]*' | cut -c3-) on 127.0.0.1:$port (pid $redis_pid)"
(cd "$app" && REDIS_URL="redis://127.0.0.1:$port" node run.mjs)
kill "$redis_pid" && wait "$redis_pid" 2>/dev/null || true
redis_pid=''
step "ok"
