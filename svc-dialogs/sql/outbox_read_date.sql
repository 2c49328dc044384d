-- When the peer first read the owner's message $3 (primary key of outbox_reads).
SELECT min(read_at)
FROM outbox_reads
WHERE owner_id = $1 AND peer_user_id = $2 AND max_id >= $3
