-- The blobs of a content that bytes $2..$3 span, in order (primary key of content_blobs): the
-- last one starting at or before $2, and every one after it starting before $3.
SELECT byte_offset, size, blob_key
FROM content_blobs
WHERE file_id = $1
  AND byte_offset < $3
  AND byte_offset >= (
      SELECT coalesce(max(byte_offset), 0) FROM content_blobs
      WHERE file_id = $1 AND byte_offset <= $2
  )
ORDER BY byte_offset
