-- A login code and whether it has expired, locked until the check commits (primary key of
-- login_codes).
SELECT phone, code, attempts, expires_at < now() AS expired
FROM login_codes
WHERE phone_code_hash = $1
FOR UPDATE
