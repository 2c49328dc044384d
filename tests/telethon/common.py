"""What the Telethon scenarios share: a stock Telethon 1.45 client pointed at oxigram's MTProto
door with `session.set_dc` and `rsa.add_key` only, and a sign-up that uses only Telethon's
public API (Telethon's own sign_up() refuses to run by design, so the raw auth.signUp request
is sent; a reconnect then lets Telethon initialise its update state as after any login)."""

import asyncio

from telethon import TelegramClient, errors, functions
from telethon.crypto import rsa
from telethon.sessions import MemorySession

# How long a scenario waits for an update it expects.
WAIT = 15


def add_server_key(pem_path):
    with open(pem_path) as pem:
        rsa.add_key(pem.read(), old=False)


def client(port, **options):
    made = TelegramClient(MemorySession(), 1, "oxigram", **options)
    made.session.set_dc(1, "127.0.0.1", int(port))
    return made


async def sign_up(made, phone, code, first_name):
    """Signs a new user up; returns her user."""
    await made.connect()
    sent = await made.send_code_request(phone)
    try:
        await made.sign_in(phone, code)
        raise RuntimeError("a new phone signed in without a sign-up")
    except errors.PhoneNumberUnoccupiedError:
        pass
    await made(functions.auth.SignUpRequest(
        phone_number=phone, phone_code_hash=sent.phone_code_hash,
        first_name=first_name, last_name=""))
    # Reconnecting runs Telethon's own after-login steps (getState, getDifference).
    await made.disconnect()
    await made.connect()
    return await made.get_me()


async def wait_for(condition, what):
    """Polls `condition` until it is true; fails after WAIT seconds."""
    for _ in range(WAIT * 20):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"waited {WAIT} s for {what}")
