-- The two clients of `npm run bench -- auth-flood` (auth-flood.ts starts wrk with it, -t1):
--
--   wrk … -s auth-flood.lua <url> -- flood <per second> <path> <tokens file> <first address>
--   wrk … -s auth-flood.lua <url> -- client <per second> <path> <key>
--
-- flood: every request a token read from the file (well-formed keys the store does not know, so
-- each is hashed and looked up) and an X-Forwarded-For address no request has sent before
-- (11.x.y.z counted up from <first address>), as from clients behind a trusted balancer.
-- client: the legitimate client, its own key on every request and no X-Forwarded-For.
-- <per second>: requests a second in all, each connection sending when its turn on a fixed
-- schedule comes (so the rate offered does not fall as answers slow, as far as the connections
-- allow); 0 sends back to back. done() prints one line, `auth-flood-summary {…}`: latencies in µs.

local ffi = require("ffi")
ffi.cdef([[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock, bench_timespec *ts);
]])
local CLOCK_MONOTONIC = 1
local clock = ffi.new("bench_timespec")
local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, clock)
  return tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1e6
end

-- Answers by status, per thread (globals, so that done() can read them through thread:get).
s2xx, s401, s429, other = 0, 0, 0, 0

function response(status)
  if status >= 200 and status < 300 then
    s2xx = s2xx + 1
  elseif status == 401 then
    s401 = s401 + 1
  elseif status == 429 then
    s429 = s429 + 1
  else
    other = other + 1
  end
end

local interval = 0 -- ms between two requests of this thread; 0: back to back
local next_at = nil

function init(args)
  local mode, rate, path = args[1], tonumber(args[2]), args[3]
  if rate > 0 then
    interval = 1000 / rate
  end
  local head = "GET " .. path .. " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
  if mode == "client" then
    local bytes = head .. args[4] .. "\r\n\r\n"
    request = function()
      return bytes
    end
    return
  end
  local tokens = {}
  for line in io.lines(args[4]) do
    tokens[#tokens + 1] = line
  end
  local sent = tonumber(args[5])
  request = function()
    sent = sent + 1
    local a = sent
    local address = string.format(
      "11.%d.%d.%d",
      math.floor(a / 65536) % 256,
      math.floor(a / 256) % 256,
      a % 256
    )
    return head .. tokens[sent % #tokens + 1] .. "\r\nX-Forwarded-For: " .. address .. "\r\n\r\n"
  end
end

-- The wait before a connection's next request: until the schedule's next turn. A schedule more
-- than a second behind (every connection busy) starts again from now rather than bursting.
function delay()
  if interval == 0 then
    return 0
  end
  local now = now_ms()
  if next_at == nil or next_at < now - 1000 then
    next_at = now
  end
  next_at = next_at + interval
  return math.max(0, math.floor(next_at - now))
end

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function done(summary, latency)
  local sum = { s2xx = 0, s401 = 0, s429 = 0, other = 0 }
  for _, thread in ipairs(threads) do
    for name in pairs(sum) do
      sum[name] = sum[name] + thread:get(name)
    end
  end
  local e = summary.errors
  io.write(string.format(
    'auth-flood-summary {"requests":%d,"durationUs":%d,"errors":%d,"s2xx":%d,"s401":%d,"s429":%d,"other":%d,"p50Us":%d,"p99Us":%d,"maxUs":%d}\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout,
    sum.s2xx, sum.s401, sum.s429, sum.other,
    latency:percentile(50), latency:percentile(99), latency.max))
end
