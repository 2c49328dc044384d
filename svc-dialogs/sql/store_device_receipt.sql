-- A device's DELIVERED watermark (primary key of device_receipts).
INSERT INTO device_receipts (owner_id, auth_key_id, max_id) VALUES ($1, $2, $3)
ON CONFLICT (owner_id, auth_key_id) DO UPDATE SET max_id = EXCLUDED.max_id, updated_at = now()
