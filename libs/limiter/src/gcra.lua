-- GCRA on one key: KEYS[1] holds the theoretical arrival time in ms (Redis' own clock, so
-- every instance decides on one clock). ARGV: units, extra, limit, period in ms.
-- Spends `units + extra` when they fit, else `units` alone when they fit: the extra are a
-- lease the calling instance grants from without asking again. Returns the units spent, and
-- when none were, the ms to wait until `units` fit.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local units, extra = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit, period = tonumber(ARGV[3]), tonumber(ARGV[4])
local interval = period / limit
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
for _, n in ipairs({units + extra, units}) do
  local new_tat = tat + n * interval
  if new_tat - period <= now then
    redis.call('SET', KEYS[1], tostring(new_tat), 'PX', math.ceil(new_tat - now) + 1)
    return {n, 0}
  end
end
return {0, math.ceil(tat + units * interval - period - now)}
