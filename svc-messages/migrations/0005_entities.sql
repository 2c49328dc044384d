-- A message's formatting and a reply's quote, one value for every owner, so on the body.
-- Both are stored as the protobuf encoding of what the API carries (a list of
-- MessageEntity; a ReplyQuote), empty for none: they are only ever written and read whole,
-- with their message, never filtered or joined on in SQL, and the encoding is compact,
-- costs a plain message nothing, and reads back unchanged whatever fields the API adds
-- (protobuf's rules for field numbers keep old rows readable). A forward copies them with
-- the body's text.
ALTER TABLE message_bodies
    ADD COLUMN entities BYTEA NOT NULL DEFAULT '',
    ADD COLUMN quote BYTEA NOT NULL DEFAULT '';
