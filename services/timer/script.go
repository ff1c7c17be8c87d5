package timer

import "github.com/redis/go-redis/v9"

// popScript takes due task IDs in lane order.
// KEYS[1] = generation key, KEYS[2..] = lanes in serve order.
// ARGV[1] = most IDs to take.
// Returns {-1} when the generation key is missing, else
// {now_ms, next_score_ms or -1, lane_index, id, score, lane_index, id, score, ...}.
var popScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local left = tonumber(ARGV[1])
local out = {now, -1}
for i = 2, #KEYS do
  if left <= 0 then break end
  local got = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', now, 'WITHSCORES', 'LIMIT', 0, left)
  if #got > 0 then
    local ids = {}
    for j = 1, #got, 2 do
      ids[#ids + 1] = got[j]
      out[#out + 1] = i - 2
      out[#out + 1] = got[j]
      out[#out + 1] = got[j + 1]
    end
    redis.call('ZREM', KEYS[i], unpack(ids))
    left = left - #ids
  end
end
local nxt = -1
for i = 2, #KEYS do
  local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
  if #first > 0 then
    local s = tonumber(first[2])
    if nxt < 0 or s < nxt then nxt = s end
  end
end
out[2] = nxt
return out
`)

// backlogScript reads, for each lane, how many members are due and the
// earliest score, on the Redis clock. It writes nothing.
// KEYS = lanes in serve order.
// Returns {now_ms, due_count, earliest_score or -1, due_count, ...}.
var backlogScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {now}
for i = 1, #KEYS do
  out[#out + 1] = redis.call('ZCOUNT', KEYS[i], '-inf', now)
  local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
  if #first > 0 then out[#out + 1] = first[2] else out[#out + 1] = -1 end
end
return out
`)
