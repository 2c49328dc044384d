"""Two stock Telethon users chat through oxigram's MTProto door: both sign up, find each other
by phone, send each other messages and receive them through event handlers, edit and delete;
the server drops one's connection (ping_delay_disconnect), the other writes meanwhile, and the
first reconnects and catches up (catch_up); then history, dialogs, search, getMessages,
forwarding, a full user, peer dialogs, read receipts and the authorizations list.

Usage: python chat.py PUBLIC_KEY_PEM PORT PHONE_A PHONE_B CODE
Prints one JSON line with what it saw; exits non-zero on any error."""

import asyncio
import json
import sys

from telethon import events, functions, types

from common import add_server_key, client, sign_up, wait_for


async def main(pem_path, port, phone_a, phone_b, code):
    add_server_key(pem_path)
    # Ann does not reconnect by herself: the test reconnects her after the server drops her.
    ann = client(port, auto_reconnect=False)
    bob = client(port)
    seen = {}
    me_a = await sign_up(ann, phone_a, code, "Ann")
    me_b = await sign_up(bob, phone_b, code, "Bob")

    got_a, got_b, edits_a, deletes_a, reads_b = [], [], [], [], []

    def handler(record):
        async def handle(event):
            record(event)
        return handle

    ann.add_event_handler(handler(lambda e: got_a.append((e.message.id, e.raw_text))),
                          events.NewMessage(incoming=True))
    bob.add_event_handler(handler(lambda e: got_b.append((
        e.message.id, e.raw_text, [[type(x).__name__, x.offset, x.length]
                                   for x in e.message.entities or []]))),
        events.NewMessage(incoming=True))
    ann.add_event_handler(handler(lambda e: edits_a.append((e.message.id, e.raw_text))),
                          events.MessageEdited())
    ann.add_event_handler(handler(lambda e: deletes_a.extend(e.deleted_ids)),
                          events.MessageDeleted())
    bob.add_event_handler(handler(lambda e: reads_b.append(e.max_id)),
                          events.MessageRead(inbox=False))

    # Bob finds Ann by her phone.
    imported = await bob(functions.contacts.ImportContactsRequest([types.InputPhoneContact(
        client_id=7, phone=phone_a, first_name="Ann", last_name="")]))
    seen["imported"] = [[c.client_id, c.user_id] for c in imported.imported]
    ann_for_bob = imported.users[0]

    # Messages both ways, each received by the other's handler.
    sent_b = await bob.send_message(ann_for_bob, "hello Ann")
    await wait_for(lambda: got_a, "Ann's first message")
    seen["ann_got"] = got_a[0][1]
    bob_for_ann = await ann.get_entity(me_b.id)
    await ann.send_message(bob_for_ann, "hi Bob")
    await wait_for(lambda: got_b, "Bob's first message")
    seen["bob_got"] = got_b[0][1]
    # Formatting (Telethon's markdown) arrives as entities.
    await ann.send_message(bob_for_ann, "**bold** move")
    await wait_for(lambda: len(got_b) >= 2, "the formatted message")
    seen["formatted"] = [got_b[1][1], got_b[1][2]]

    # Bob edits his message, then deletes it for both: Ann sees both, in her own ids.
    ann_id_of_hello = got_a[0][0]
    await bob.edit_message(ann_for_bob, sent_b.id, "hello Ann (edited)")
    await wait_for(lambda: edits_a, "the edit")
    seen["edit"] = [edits_a[0][0] == ann_id_of_hello, edits_a[0][1]]
    second = await bob.send_message(ann_for_bob, "to be deleted")
    await wait_for(lambda: len(got_a) >= 2, "the second message")
    await bob.delete_messages(ann_for_bob, [second.id], revoke=True)
    await wait_for(lambda: deletes_a, "the delete")
    seen["deleted"] = deletes_a == [got_a[1][0]]

    # The server drops Ann (she asks it to close her connection after a second of silence);
    # Bob writes meanwhile; Ann reconnects and catches up.
    await ann(functions.PingDelayDisconnectRequest(ping_id=1, disconnect_delay=1))
    try:
        await asyncio.wait_for(ann.disconnected, 30)
    except (OSError, asyncio.IncompleteReadError):
        pass  # how Telethon reports a connection the server closed
    seen["dropped"] = not ann.is_connected()
    await bob.send_message(ann_for_bob, "while you were away 1")
    await bob.send_message(ann_for_bob, "while you were away 2")
    await ann.connect()
    await ann.catch_up()
    await wait_for(lambda: len(got_a) >= 4, "the missed messages")
    seen["caught_up"] = [text for _, text in got_a[2:]]

    # History (newest first), dialogs, search, getMessages.
    history = [m.raw_text async for m in ann.iter_messages(bob_for_ann)]
    seen["history"] = history
    seen["dialogs"] = [[d.entity.id, d.message.raw_text if d.message else None]
                       async for d in ann.iter_dialogs()]
    seen["search"] = [m.raw_text async for m in ann.iter_messages(bob_for_ann, search="away")]
    ids = [got_a[2][0], got_a[1][0]]
    fetched = await ann.get_messages(bob_for_ann, ids=ids)
    seen["get_messages"] = [m.raw_text if m else None for m in fetched]

    # Ann forwards a message to her Saved Messages.
    forwarded = await ann.forward_messages("me", got_a[2][0], bob_for_ann)
    seen["forwarded"] = [forwarded.raw_text, forwarded.fwd_from.from_id.user_id]

    # A full user, peer dialogs, the authorizations list.
    full = await ann(functions.users.GetFullUserRequest(bob_for_ann))
    seen["full_user"] = full.full_user.id
    peer_dialogs = await ann(functions.messages.GetPeerDialogsRequest(
        [types.InputDialogPeer(bob_for_ann)]))
    seen["peer_dialog_unread"] = peer_dialogs.dialogs[0].unread_count
    authorizations = await ann(functions.account.GetAuthorizationsRequest())
    seen["authorizations"] = [a.current for a in authorizations.authorizations]

    # Ann reads the chat: Bob's handler hears of it.
    await ann.send_read_acknowledge(bob_for_ann)
    await wait_for(lambda: reads_b, "the read receipt")
    seen["read_up_to_latest"] = reads_b[-1] == (await bob.get_messages(ann_for_bob, limit=1))[0].id
    peer_dialogs = await ann(functions.messages.GetPeerDialogsRequest(
        [types.InputDialogPeer(bob_for_ann)]))
    seen["unread_after_read"] = peer_dialogs.dialogs[0].unread_count

    seen["ids"] = [me_a.id, me_b.id]
    await ann.disconnect()
    await bob.disconnect()
    print(json.dumps(seen))


asyncio.run(main(*sys.argv[1:]))
