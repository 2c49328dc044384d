-- The owner's contacts, as the contact updates of her log tell them, so that a dialog filter
-- of contacts or of non-contacts reads a column of the dialog and a row of the counts instead
-- of probing every contact: `dialog_contacts` holds who they are (a dialog made later learns it from
-- here), `dialogs.contact` whether a dialog's peer is one, and dialog_counts counts them apart.
CREATE TABLE dialog_contacts (
    owner_id     BIGINT NOT NULL,
    peer_user_id BIGINT NOT NULL,
    PRIMARY KEY (owner_id, peer_user_id)
) PARTITION BY HASH (owner_id);

DO $$
BEGIN
    FOR i IN 0..7 LOOP
        EXECUTE format('CREATE TABLE dialog_contacts_p%s PARTITION OF dialog_contacts FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
    END LOOP;
END $$;

ALTER TABLE dialogs ADD COLUMN contact BOOLEAN NOT NULL DEFAULT false;

-- Every statement that makes a dialog row (a message, a setting, a draft, …) gets its
-- contact flag from `dialog_contacts` here, one primary-key probe, so no insert path can forget it.
CREATE FUNCTION dialog_contact_of_new() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.contact := EXISTS (SELECT 1 FROM dialog_contacts
                           WHERE owner_id = NEW.owner_id AND peer_user_id = NEW.peer_user_id);
    RETURN NEW;
END $$;

CREATE TRIGGER dialogs_contact BEFORE INSERT ON dialogs
    FOR EACH ROW EXECUTE FUNCTION dialog_contact_of_new();

ALTER TABLE dialog_counts ADD COLUMN contact BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE dialog_counts DROP CONSTRAINT dialog_counts_pkey;
ALTER TABLE dialog_counts ADD PRIMARY KEY (owner_id, folder_id, unread, mute, contact);

CREATE OR REPLACE FUNCTION dialog_counts_keep() RETURNS trigger
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
       AND dialog_mute(OLD.mute_until) = dialog_mute(NEW.mute_until)
       AND OLD.contact = NEW.contact THEN
        RETURN NULL;
    END IF;
    IF was_listed THEN
        UPDATE dialog_counts SET n = n - 1
        WHERE owner_id = OLD.owner_id AND folder_id = OLD.folder_id
          AND unread = (OLD.unread_count > 0 OR OLD.unread_mark)
          AND mute = dialog_mute(OLD.mute_until) AND contact = OLD.contact;
    END IF;
    IF is_listed THEN
        INSERT INTO dialog_counts (owner_id, folder_id, unread, mute, contact, n)
        VALUES (NEW.owner_id, NEW.folder_id, NEW.unread_count > 0 OR NEW.unread_mark,
                dialog_mute(NEW.mute_until), NEW.contact, 1)
        ON CONFLICT (owner_id, folder_id, unread, mute, contact)
        DO UPDATE SET n = dialog_counts.n + 1;
    END IF;
    RETURN NULL;
END $$;
