"""Telethon 1.45's own protocol habits against oxigram's MTProto door, with every
bad_msg_notification it gets counted: Telethon answers those silently (it corrects its seq_no
or clock and sends the message again), so a scenario can pass while the server refuses its
messages. The habits: many calls at once (sent in containers, with msgs_ack among them), a
request large enough that Telethon gzips it, requests chained with invokeAfterMsg, the same
session over a new connection (disconnect, then connect), and a new session after the server
closed the connection (ping_delay_disconnect, then Telethon's automatic reconnect).

Telethon is not changed: a logging handler reads what it logs, and a wrapper around its gzip
helper counts the requests it packed (the wrapper returns what the helper returns).

Usage: python protocol.py PUBLIC_KEY_PEM PORT PHONE CODE
Prints one JSON line with what it saw; exits non-zero on any error."""

import asyncio
import json
import logging
import sys

from telethon import functions, types
from telethon.tl.core.gzippacked import GzipPacked

from common import add_server_key, client, sign_up, wait_for


class Seen(logging.Handler):
    """Counts what Telethon's sender and state log about the server's messages."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.bad_msgs = []
        self.ignored = 0
        self.containers = 0
        self.acks = 0
        self.reconnects = 0
        self.answers_without_request = 0

    def emit(self, record):
        text = record.getMessage()
        if text.startswith("Handling bad msg"):
            self.bad_msgs.append(record.args[0].error_code)
        elif "ignoring" in text or "Security error" in text:
            self.ignored += 1
        elif text.startswith("Encrypting") and record.args[0] > 1:
            self.containers += 1
        elif text.startswith("Assigned msg_id") and "MsgsAck" in text:
            self.acks += 1
        elif text.startswith("Closing current connection to begin reconnect"):
            self.reconnects += 1
        elif text.startswith("Received response without parent request"):
            self.answers_without_request += 1


gzipped = 0
plain_gzip_if_smaller = GzipPacked.gzip_if_smaller


def counting_gzip_if_smaller(content_related, data):
    global gzipped
    packed = plain_gzip_if_smaller(content_related, data)
    if packed is not data:
        gzipped += 1
    return packed


GzipPacked.gzip_if_smaller = staticmethod(counting_gzip_if_smaller)


async def history_texts(made, limit):
    history = await made(functions.messages.GetHistoryRequest(
        peer=types.InputPeerSelf(), offset_id=0, offset_date=None, add_offset=0,
        limit=limit, max_id=0, min_id=0, hash=0))
    return [m.message for m in reversed(history.messages)]


async def many_at_once(made, label):
    """Twenty calls and five sends at once; every answer is the caller's."""
    me = (await made.get_me()).id
    calls = [made(functions.users.GetUsersRequest([types.InputUserSelf()]))
             for _ in range(20)]
    sends = [made.send_message("me", f"{label} {i}") for i in range(5)]
    answers = await asyncio.gather(*calls, *sends)
    users = answers[:20]
    assert all(u[0].id == me for u in users), users
    return sorted(m.message for m in answers[20:])


# How long one step of the scenario may take: a call whose answer never comes fails it.
STEP = 60


async def step(what, coroutine):
    try:
        return await asyncio.wait_for(coroutine, STEP)
    except asyncio.TimeoutError:
        raise TimeoutError(f"{what}: no answer within {STEP} s") from None


async def main(pem_path, port, phone, code):
    add_server_key(pem_path)
    seen = Seen()
    telethon_log = logging.getLogger("telethon")
    telethon_log.setLevel(logging.DEBUG)
    telethon_log.addHandler(seen)

    made = client(port)
    me = await step("sign-up", sign_up(made, phone, code, "Proto"))
    told = {"id": me.id}
    # Once it knows its own id, Telethon resolves "me" from its entity cache, which keeps only
    # users with an access hash.
    told["me_resolved"] = await step("'me'", made.get_peer_id("me")) == me.id

    told["first"] = await step("calls at once", many_at_once(made, "first"))
    long_text = " ".join(["oxigram"] * 500)
    sent = await step("a gzipped send", made.send_message("me", long_text))
    kept = await step("reading it back", made.get_messages("me", ids=sent.id))
    told["long_text_kept"] = kept.message == long_text
    # Telethon chains these with invokeAfterMsg.
    await step("chained sends", made([functions.messages.SendMessageRequest(
        peer=types.InputPeerSelf(), message=f"chained {i}", random_id=1000 + i)
        for i in range(3)], ordered=True))
    told["chained"] = await step("history", history_texts(made, 3))

    # The same session on a new connection.
    session_id = made._sender._state.id
    await made.disconnect()
    await step("connecting again", made.connect())
    told["same_session"] = made._sender._state.id == session_id
    told["resumed"] = await step("calls at once, resumed", many_at_once(made, "resumed"))

    # The server closes the connection; Telethon reconnects by itself, in a new session.
    await step("ping_delay_disconnect", made(
        functions.PingDelayDisconnectRequest(ping_id=7, disconnect_delay=1)))
    await wait_for(lambda: seen.reconnects > 0, "Telethon to reconnect")
    told["reconnected"] = await step(
        "calls at once, reconnected", many_at_once(made, "reconnected"))
    told["new_session"] = made._sender._state.id != session_id

    await made.disconnect()
    told.update(
        bad_msgs=seen.bad_msgs, ignored=seen.ignored, containers=seen.containers,
        acks=seen.acks, gzipped=gzipped, reconnects=seen.reconnects,
        answers_without_request=seen.answers_without_request)
    print(json.dumps(told))


asyncio.run(main(*sys.argv[1:]))
