"""A stock Telethon user chats with a user of the `oxictl` binary (the test drives that one).

Usage: python with_oxictl.py PUBLIC_KEY_PEM PORT PHONE CODE USERNAME
Signs up, finds the oxictl user by the USERNAME she set there (get_entity('@…'), which is
contacts.resolveUsername), tries a username nobody has, sends her "hello from telethon" and
prints {"ready": own id, "peer": her id, "peer_username", "unknown": [number, Telethon's
error class] of the refusal}; then waits for her answer "hello from oxictl" on its event handler and prints one
JSON line with what it saw (the messages got and their senders, the history with her). Exits
non-zero on any error."""

import asyncio
import json
import sys

from telethon import errors, events

from common import add_server_key, client, sign_up, wait_for


async def main(pem_path, port, phone, code, username):
    add_server_key(pem_path)
    tom = client(port)
    me = await sign_up(tom, phone, code, "Tom")
    got = []

    async def on_message(event):
        got.append(event.message)

    tom.add_event_handler(on_message, events.NewMessage(incoming=True))
    olga = await tom.get_entity("@" + username)
    # Telethon raises a ValueError from the error it made of the server's rpc_error: its class
    # is Telethon's for that error's name (UsernameNotOccupiedError for USERNAME_NOT_OCCUPIED).
    try:
        await tom.get_entity("@nobody_has_this_name")
        unknown = "resolved"
    except ValueError as error:
        cause = error.__cause__
        unknown = ([cause.code, type(cause).__name__] if isinstance(cause, errors.RPCError)
                   else repr(error))
    await tom.send_message(olga, "hello from telethon")
    print(json.dumps({"ready": me.id, "peer": olga.id, "peer_username": olga.username,
                      "unknown": unknown}), flush=True)
    await wait_for(lambda: len(got) >= 1, "the oxictl user's answer")
    history = [m.raw_text async for m in tom.iter_messages(olga)]
    await tom.disconnect()
    print(json.dumps({
        "got": [[m.raw_text, m.sender_id] for m in got],
        "history": history,
    }), flush=True)


asyncio.run(main(*sys.argv[1:]))
