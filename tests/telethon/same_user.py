"""One user signed in on stock Telethon and on the `oxictl` binary at once (the test drives
oxictl and a third user).

Usage: python same_user.py PUBLIC_KEY_PEM PORT PHONE CODE OTHER_PHONE
Signs in to the existing account of PHONE (made with oxictl), finds the third user by
OTHER_PHONE and prints {"ready": own id, "peer": the third user's id}; waits for the third
user's two messages on its event handler, sends him "from vera on telethon" and prints
{"sent": its id}; waits for her own "from vera on oxictl", sent from oxictl, to arrive as an
outgoing message; then prints one JSON line with what it saw (the incoming texts, that message
and whether it is outgoing, the history with him). Exits non-zero on any error."""

import asyncio
import json
import sys

from telethon import events, functions, types

from common import add_server_key, client, wait_for

FROM_OXICTL = "from vera on oxictl"


async def main(pem_path, port, phone, code, other_phone):
    add_server_key(pem_path)
    vera = client(port)
    await vera.connect()
    await vera.send_code_request(phone)
    me = await vera.sign_in(phone, code)
    incoming, outgoing = [], []

    async def on_incoming(event):
        incoming.append(event.message)

    async def on_outgoing(event):
        outgoing.append(event.message)

    vera.add_event_handler(on_incoming, events.NewMessage(incoming=True))
    vera.add_event_handler(on_outgoing, events.NewMessage(outgoing=True))
    imported = await vera(functions.contacts.ImportContactsRequest([types.InputPhoneContact(
        client_id=1, phone=other_phone, first_name="Sam", last_name="")]))
    sam = imported.users[0]
    print(json.dumps({"ready": me.id, "peer": sam.id}), flush=True)
    await wait_for(lambda: len(incoming) >= 2, "the third user's two messages")
    sent = await vera.send_message(sam, "from vera on telethon")
    print(json.dumps({"sent": sent.id}), flush=True)
    await wait_for(lambda: any(m.raw_text == FROM_OXICTL for m in outgoing),
                   "her own message sent from oxictl")
    from_oxictl = next(m for m in outgoing if m.raw_text == FROM_OXICTL)
    history = [m.raw_text async for m in vera.iter_messages(sam)]
    await vera.disconnect()
    print(json.dumps({
        "incoming": [[m.raw_text, m.sender_id] for m in incoming],
        "from_oxictl": [from_oxictl.raw_text, from_oxictl.out, from_oxictl.peer_id.user_id],
        "history": history,
    }), flush=True)


asyncio.run(main(*sys.argv[1:]))
