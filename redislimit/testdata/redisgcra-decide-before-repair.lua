-- redisgcra's decide script (GCRA) from before corrupt states were
-- repaired: the script of commit c0ae158, which had no ErrCorrupt.
-- TestUpgradeFromRedisgcra runs it on the values this module writes.

if redis.replicate_commands then redis.replicate_commands() end
local now
if ARGV[5] then
  now = tonumber(ARGV[5])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local T = tonumber(ARGV[1])
local span = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]))
local debt = 0
if tat and tat > now then debt = tat - now end
local ok = 0
local stored = 0
if n == 0 then
  ok = 1
elseif n >= 1 and debt + n * T <= span then
  ok = 1
  if ARGV[4] ~= '0' then
    local ahead = debt + n * T
    stored = now + ahead
    redis.call('SET', KEYS[1], string.format('%.0f', stored), 'PX', math.ceil(ahead / 1000) + 1)
  end
end
if ARGV[4] == '2' then return {debt * 2 + ok, stored} end
return debt * 2 + ok
