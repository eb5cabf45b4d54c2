-- redisgcra's decide script (GCRA) from before the give-back epoch: the
-- script of commit e19e908, with corrupt states repaired (ErrCorrupt).
-- TestUpgradeFromRedisgcra runs it on the values this module writes.

if redis.replicate_commands then redis.replicate_commands() end
local now
if ARGV[5] and ARGV[5] ~= '' then
  now = tonumber(ARGV[5])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local T = tonumber(ARGV[1])
local span = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local v = redis.pcall('GET', KEYS[1])
local tat, bad = 0, nil
if type(v) == 'table' then
  if not v.err or string.sub(v.err, 1, 10) ~= 'WRONGTYPE ' then return v end
  bad = 'a value of type ' .. redis.call('TYPE', KEYS[1]).ok
elseif v then
  local digits = #v >= 1 and #v <= 16 and not string.find(v, '%D')
  if digits then tat = tonumber(v) end
  if not digits or tat >= 9007199254740992 then
    tat, bad = 0, string.format('%q', string.sub(v, 1, 40))
  elseif tat - now > span and redis.call('PTTL', KEYS[1]) < 0 then
    bad = v .. ' with no expiry'
  end
end
if bad then
  tat = now + span
  redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil(span / 1000) + 1)
end
local debt = 0
if tat > now then debt = tat - now end
local ok = 0
local stored = 0
if n == 0 then
  ok = 1
elseif ARGV[4] == '3' then
  local k = math.floor((span - debt) / T)
  if debt + k * T > span then k = k - 1 end
  if k > n then k = n end
  if k >= tonumber(ARGV[6]) then
    ok = 1
    local ahead = debt + k * T
    stored = k
    redis.call('SET', KEYS[1], string.format('%.0f', now + ahead), 'PX', math.ceil(ahead / 1000) + 1)
  end
elseif n >= 1 and debt + n * T <= span then
  ok = 1
  if ARGV[4] ~= '0' then
    local ahead = debt + n * T
    stored = now + ahead
    redis.call('SET', KEYS[1], string.format('%.0f', stored), 'PX', math.ceil(ahead / 1000) + 1)
  end
end
if bad then return {debt * 2 + ok, stored, bad} end
if ARGV[4] == '2' or ARGV[4] == '3' then return {debt * 2 + ok, stored} end
return debt * 2 + ok
