-- The outbox rows of a producer's statement, as one of its WITH items. `${n}` is the number
-- of the first of its six parameters, whatever the producer's own use before it.
outbox_rows AS (
    INSERT INTO outbox (destination, event_id, payload, traceparent, items, framed, available_at)
    SELECT r.destination, r.event_id, r.payload, r.traceparent, r.items, true,
           now() + ${n+5} * interval '1 millisecond'
    FROM UNNEST(${n}::text[], ${n+1}::uuid[], ${n+2}::bytea[], ${n+3}::text[], ${n+4}::int[])
        WITH ORDINALITY AS r(destination, event_id, payload, traceparent, items, n)
    ORDER BY r.n
    RETURNING destination, event_id, id)
