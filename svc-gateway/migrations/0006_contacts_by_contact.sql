-- Who keeps a user as a contact: a change of her profile is pushed to them.
CREATE INDEX contacts_by_contact ON contacts (contact_user_id, owner_id);
