-- The last statement of an edit: the locked body's new text, edit_date and version (primary
-- key of message_bodies). The outbox rows follow this item in the same statement.
edited AS (
    UPDATE message_bodies SET text = $1, edit_date = $2, edit_version = $3
    WHERE id = $4
)
