-- A contact update of the owner's log ($1 owner, $2 peer, $3 whether the peer is her contact
-- now): the dialog_contacts row made or removed, and the dialog's flag set to match (both by primary
-- key; the dialog's change moves it between rows of dialog_counts).
WITH kept AS (
    INSERT INTO dialog_contacts (owner_id, peer_user_id) SELECT $1, $2 WHERE $3
    ON CONFLICT DO NOTHING
), dropped AS (
    DELETE FROM dialog_contacts WHERE owner_id = $1 AND peer_user_id = $2 AND NOT $3
)
UPDATE dialogs SET contact = $3
WHERE owner_id = $1 AND peer_user_id = $2 AND contact <> $3
