-- How many listed dialogs (with a message, or cleared with just_clear) each owner has per
-- folder, unread state (an unread message or her unread mark) and mute (0 none, 1 until a
-- date, 2 forever): a list's count is a sum of a few of these rows, never a scan of the list.
-- Kept by a trigger, so every statement that writes dialogs keeps it right.
CREATE TABLE dialog_counts (
    owner_id  BIGINT   NOT NULL,
    folder_id INT      NOT NULL,
    unread    BOOLEAN  NOT NULL,
    mute      SMALLINT NOT NULL,
    n         INT      NOT NULL,
    PRIMARY KEY (owner_id, folder_id, unread, mute)
) PARTITION BY HASH (owner_id);

DO $$
BEGIN
    FOR i IN 0..7 LOOP
        EXECUTE format('CREATE TABLE dialog_counts_p%s PARTITION OF dialog_counts FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
    END LOOP;
END $$;

-- A dialog's mute as dialog_counts keys it (2147483647 is MUTE_FOREVER).
CREATE FUNCTION dialog_mute(mute_until BIGINT) RETURNS SMALLINT
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN mute_until >= 2147483647 THEN 2 WHEN mute_until > 0 THEN 1 ELSE 0 END::SMALLINT
$$;

CREATE FUNCTION dialog_counts_keep() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    was_listed BOOLEAN := TG_OP <> 'INSERT'
        AND (OLD.top_message_id > 0 OR OLD.top_message_date > 0);
    is_listed BOOLEAN := TG_OP <> 'DELETE'
        AND (NEW.top_message_id > 0 OR NEW.top_message_date > 0);
BEGIN
    -- The common case, a message to a listed dialog that stays in its row of the counts.
    IF was_listed AND is_listed
       AND OLD.folder_id = NEW.folder_id
       AND (OLD.unread_count > 0 OR OLD.unread_mark) = (NEW.unread_count > 0 OR NEW.unread_mark)
       AND dialog_mute(OLD.mute_until) = dialog_mute(NEW.mute_until) THEN
        RETURN NULL;
    END IF;
    IF was_listed THEN
        UPDATE dialog_counts SET n = n - 1
        WHERE owner_id = OLD.owner_id AND folder_id = OLD.folder_id
          AND unread = (OLD.unread_count > 0 OR OLD.unread_mark)
          AND mute = dialog_mute(OLD.mute_until);
    END IF;
    IF is_listed THEN
        INSERT INTO dialog_counts (owner_id, folder_id, unread, mute, n)
        VALUES (NEW.owner_id, NEW.folder_id, NEW.unread_count > 0 OR NEW.unread_mark,
                dialog_mute(NEW.mute_until), 1)
        ON CONFLICT (owner_id, folder_id, unread, mute) DO UPDATE SET n = dialog_counts.n + 1;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER dialogs_counts AFTER INSERT OR UPDATE OR DELETE ON dialogs
    FOR EACH ROW EXECUTE FUNCTION dialog_counts_keep();

INSERT INTO dialog_counts (owner_id, folder_id, unread, mute, n)
SELECT owner_id, folder_id, unread_count > 0 OR unread_mark, dialog_mute(mute_until), count(*)
FROM dialogs
WHERE top_message_id > 0 OR top_message_date > 0
GROUP BY 1, 2, 3, 4;

-- A filter without muted dialogs: those muted until a date still ahead are counted apart.
CREATE INDEX dialogs_timed_mutes ON dialogs (owner_id, mute_until)
    WHERE mute_until > 0 AND mute_until < 2147483647;
