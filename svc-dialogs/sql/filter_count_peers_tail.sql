             , false) AS taken
      FROM dialogs
      WHERE owner_id = $1
        AND (peer_user_id = ANY($6::bigint[]) OR peer_user_id = ANY($7::bigint[])
             OR peer_user_id = ANY($8::bigint[]))
        AND (top_message_id > 0 OR top_message_date > 0)) AS d
