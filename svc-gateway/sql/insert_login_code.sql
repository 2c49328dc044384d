-- A login code for a phone, valid for $4 seconds (primary key of login_codes).
INSERT INTO login_codes (phone_code_hash, phone, code, expires_at)
VALUES ($1, $2, $3, now() + $4 * interval '1 second')
