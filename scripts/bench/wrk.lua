-- The request and the summary of one wrk run (harness.ts starts wrk with it).
--
--   wrk -t1 -c<n> -d<s>s --latency -s wrk.lua -H 'name: value'… <url> -- <method> <body> <key prefix>
--
-- <body> and <key prefix> may be empty. With a key prefix every request carries a new
-- Idempotency-Key (<prefix>-1, <prefix>-2, …); without one, wrk sends the same bytes each time
-- (it builds them once when no request() is defined, its cheapest path).
-- done() prints one line, `wrk-summary {…}`, for harness.ts to read: latencies in µs.

-- Answers other than 2xx, counted per thread (wrk itself counts only statuses above 399).
non2xx = 0

function response(status)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  end
end

local PLACEHOLDER = "@IDEMPOTENCY-KEY@"

function init(args)
  wrk.method = args[1]
  if args[2] ~= "" then
    wrk.body = args[2]
  end
  local prefix = args[3]
  if prefix ~= "" then
    -- The fixed bytes around the key are built once; each request only joins three strings.
    local headers = {}
    for name, value in pairs(wrk.headers) do
      headers[name] = value
    end
    headers["Idempotency-Key"] = PLACEHOLDER
    local bytes = wrk.format(nil, nil, headers, nil)
    local at = string.find(bytes, PLACEHOLDER, 1, true)
    local head = string.sub(bytes, 1, at - 1) .. prefix .. "-"
    local tail = string.sub(bytes, at + #PLACEHOLDER)
    local sent = 0
    request = function()
      sent = sent + 1
      return head .. sent .. tail
    end
  end
end

-- setup() runs in the main Lua state, one call per thread: done() reads their counts from there.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function done(summary, latency)
  local others = 0
  for _, thread in ipairs(threads) do
    others = others + thread:get("non2xx")
  end
  local e = summary.errors
  io.write(string.format(
    'wrk-summary {"requests":%d,"durationUs":%d,"connectErrors":%d,"readErrors":%d,"writeErrors":%d,"statusErrors":%d,"timeouts":%d,"non2xx":%d,"p50Us":%d,"p99Us":%d,"maxUs":%d}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout, others,
    latency:percentile(50), latency:percentile(99), latency.max))
end
