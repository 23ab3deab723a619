import { createHash } from "node:crypto";

/**
 * Lua scripts that make each limiter operation atomic in Redis. Time comes from the Redis server
 * (TIME), so replicas with skewed clocks still agree on lease expiry and window edges. The
 * in-process store (memory.ts) implements exactly the same rules.
 */
export interface LuaScript {
  source: string;
  sha1: string;
}

const script = (source: string): LuaScript => ({ source, sha1: createHash("sha1").update(source).digest("hex") });

const NOW_MS = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/**
 * KEYS: leases zset, window zset. ARGV: id, maxLeases, leaseMs, maxInWindow, windowMs.
 * The window is checked first and a rejection writes nothing, so a 429 consumes no budget.
 * Returns {1, leasesHeld, inWindow} or {0, 'window'|'concurrency', retryAfterMs}.
 */
export const ADMIT = script(`${NOW_MS}
local id = ARGV[1]
local maxLeases = tonumber(ARGV[2])
local leaseMs = tonumber(ARGV[3])
local maxInWindow = tonumber(ARGV[4])
local windowMs = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', now - windowMs))
local inWindow = redis.call('ZCARD', KEYS[2])
if inWindow >= maxInWindow then
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  return {0, 'window', math.max(1, tonumber(oldest[2]) + windowMs - now)}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
local held = redis.call('ZCARD', KEYS[1])
if held >= maxLeases then
  local earliest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, 'concurrency', math.max(1, tonumber(earliest[2]) - now)}
end
redis.call('ZADD', KEYS[1], string.format('%d', now + leaseMs), id)
redis.call('PEXPIRE', KEYS[1], leaseMs)
redis.call('ZADD', KEYS[2], string.format('%d', now), id)
redis.call('PEXPIRE', KEYS[2], windowMs)
return {1, held + 1, inWindow + 1}
`);

/**
 * KEYS: leases zset. ARGV: id, leaseMs. Extends a lease that is still live; an expired or released
 * lease is not revived (its slot may already have gone to another request). Returns 1 or 0.
 */
export const RENEW = script(`${NOW_MS}
local id = ARGV[1]
local leaseMs = tonumber(ARGV[2])
local expiry = redis.call('ZSCORE', KEYS[1], id)
if not expiry then
  return 0
end
if tonumber(expiry) <= now then
  redis.call('ZREM', KEYS[1], id)
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', string.format('%d', now + leaseMs), id)
if redis.call('PTTL', KEYS[1]) < leaseMs then
  redis.call('PEXPIRE', KEYS[1], leaseMs)
end
return 1
`);
