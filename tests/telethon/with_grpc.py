"""A stock Telethon user chats with a user of oxigram's gRPC door (the test drives that one).

Usage: python with_grpc.py PUBLIC_KEY_PEM PORT PHONE CODE GRPC_PHONE
Signs up, finds the gRPC user by phone, sends her "from telethon", prints {"ready": own id}
and waits for her answer "from grpc" and a file on its event handler, downloads the file; then
prints one JSON line with what it saw (the file's name and SHA-256, the history with her
included). Exits non-zero on any error."""

import asyncio
import hashlib
import json
import sys

from telethon import events, functions, types

from common import add_server_key, client, sign_up, wait_for


async def main(pem_path, port, phone, code, grpc_phone):
    add_server_key(pem_path)
    tom = client(port)
    me = await sign_up(tom, phone, code, "Tom")
    got = []

    async def on_message(event):
        got.append(event.message)

    tom.add_event_handler(on_message, events.NewMessage(incoming=True))
    imported = await tom(functions.contacts.ImportContactsRequest([types.InputPhoneContact(
        client_id=1, phone=grpc_phone, first_name="Gina", last_name="")]))
    gina = imported.users[0]
    await tom.send_message(gina, "from telethon")
    print(json.dumps({"ready": me.id, "peer": gina.id}), flush=True)
    await wait_for(lambda: len(got) >= 2, "the gRPC user's message and file")
    downloaded = await tom.download_media(got[1], file=bytes)
    history = [m.raw_text async for m in tom.iter_messages(gina)]
    await tom.disconnect()
    print(json.dumps({
        "got": [m.raw_text for m in got],
        "file": [got[1].file.name, hashlib.sha256(downloaded).hexdigest()],
        "history": history,
    }), flush=True)


asyncio.run(main(*sys.argv[1:]))
