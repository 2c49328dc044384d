-- The keys a batch of sends found used before, as their first send wrote them (primary key of
-- idempotency_keys): a read after the claim, so it sees a key whose transaction the claim
-- waited for.
SELECT k.sender_id, k.random_id, k.body_id, k.request_hash
FROM {keys} AS r(sender_id, random_id)
JOIN idempotency_keys k ON k.sender_id = r.sender_id AND k.random_id = r.random_id
