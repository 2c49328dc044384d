-- The owner's $2 contacts (every fifth of her peers from 1001), as her log's contact updates
-- leave them; filled before her dialogs, whose contact flags follow from these rows.
INSERT INTO dialog_contacts (owner_id, peer_user_id)
SELECT $1, 1001 + 5 * k FROM generate_series(0, $2::bigint - 1) AS k
