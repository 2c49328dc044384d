"""Telethon 1.45, unmodified, against oxigram's MTProto door: pointed at the server with
`session.set_dc` and `rsa.add_key` only. Signs a new user up (the raw auth.signUp request:
Telethon's own sign_up() refuses to run by design), then reads itself and its update state.

Usage: python sign_up.py PUBLIC_KEY_PEM PORT PHONE CODE
Prints one JSON line with what it saw; exits non-zero on any error."""

import asyncio
import json
import sys

from telethon import TelegramClient, errors, functions
from telethon.crypto import rsa
from telethon.sessions import MemorySession


async def main(pem_path, port, phone, code):
    with open(pem_path) as pem:
        rsa.add_key(pem.read(), old=False)
    client = TelegramClient(MemorySession(), 1, "oxigram")
    client.session.set_dc(1, "127.0.0.1", int(port))
    await client.connect()
    seen = {"authorized_before": await client.is_user_authorized()}
    sent = await client.send_code_request(phone)
    try:
        await client.sign_in(phone, code)
        seen["sign_in"] = "signed in"
    except errors.PhoneNumberUnoccupiedError:
        seen["sign_in"] = "sign up required"
        await client(functions.auth.SignUpRequest(
            phone_number=phone, phone_code_hash=sent.phone_code_hash,
            first_name="Telethon", last_name=""))
    me = await client.get_me()
    seen.update(id=me.id, first_name=me.first_name, phone=me.phone, is_self=me.is_self)
    state = await client(functions.updates.GetStateRequest())
    seen["pts"] = state.pts
    try:
        await client(functions.help.GetAppConfigRequest(hash=0))
        seen["unsupported"] = "answered"
    except errors.RPCError as error:
        seen["unsupported"] = [error.code, error.message]
    # The connection survived the error.
    seen["me_again"] = (await client.get_me()).id
    await client.disconnect()
    print(json.dumps(seen))


asyncio.run(main(*sys.argv[1:]))
