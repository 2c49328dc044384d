-- Deletes, as the owner's log reports them. A delete event names the newest message left in
-- a dialog as svc-messages saw it, which holds for the owner's box ids up to the event's
-- boundary (later ones were committed after it): the highest boundary applied is kept, so an
-- older delete applied late, or a new message with an id at or below it, never moves the top.
ALTER TABLE dialogs ADD COLUMN delete_boundary BIGINT NOT NULL DEFAULT 0;
-- An incoming message deleted stops counting as unread. Its row stays, marked, also when the
-- delete is applied before the message itself (it then arrives to find it deleted).
ALTER TABLE dialog_incoming ADD COLUMN deleted BOOLEAN NOT NULL DEFAULT false;
