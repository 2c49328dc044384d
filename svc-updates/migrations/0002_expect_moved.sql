-- The one-statement append moves each user's pts only from the value its worker remembers;
-- this makes the whole statement fail (and write nothing) when another writer moved one first.
CREATE FUNCTION expect_moved(moved BIGINT, expected INT) RETURNS BOOLEAN
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF moved <> expected THEN
        RAISE EXCEPTION 'pts moved by another writer: % of % users moved', moved, expected
            USING ERRCODE = 'serialization_failure';
    END IF;
    RETURN true;
END
$$;
