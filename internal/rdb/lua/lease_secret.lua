-- lease_secret: the deployment's lease token secret, stored once. Every API
-- process of a deployment offers a fresh random secret; the first one stored
-- wins and every process uses it, so a lease token one process issued is
-- verified by any other. Sent again, it answers the stored secret again.
--
-- KEYS[1] secret: lease secret string
-- ARGV[1] offer: the secret to store when none is
--
-- Returns: string
-- the stored secret.

redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
