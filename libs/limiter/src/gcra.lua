-- GCRA on one key: KEYS[1] holds the theoretical arrival time in ms (Redis' own clock, so
-- every instance decides on one clock). ARGV: units, limit, period in ms.
-- Returns 0 when the units are spent, else the ms to wait until they fit (nothing spent).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n, limit, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local interval = period / limit
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + n * interval
local allowed_at = new_tat - period
if allowed_at > now then
  return math.ceil(allowed_at - now)
end
redis.call('SET', KEYS[1], tostring(new_tat), 'PX', math.ceil(new_tat - now) + 1)
return 0
