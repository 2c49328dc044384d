"""Files between two stock Telethon users through oxigram's MTProto door: Alice adds Bob as a
contact (contacts.getContacts lists him, and a second call with Telegram's own hash of the
list is not modified), then sends him a 1.5 MiB document in parts, a JPEG photo and a voice note with
send_file; Bob receives each through his event handler and downloads it with download_media.
Then an album: send_file of a list of three photos, each with its caption (Telethon uploads each
with messages.uploadMedia and sends them by id with messages.sendMultiMedia); Bob gets three
messages of one group.

Usage: python media.py PUBLIC_KEY_PEM PORT PHONE_A PHONE_B CODE JPEG_PATH
Prints one JSON line with what it saw; exits non-zero on any error."""

import asyncio
import hashlib
import json
import os
import sys
import tempfile

from telethon import events, functions, types

from common import add_server_key, client, sign_up, wait_for


def telegram_hash(values):
    """Telegram's cache hash of a list (the "usual algorithm" of its API documentation)."""
    mask = (1 << 64) - 1
    h = 0
    for value in values:
        h ^= h >> 21
        h ^= (h << 35) & mask
        h ^= h >> 4
        h = (h + value) & mask
    return h - (1 << 64) if h >= 1 << 63 else h


async def main(pem_path, port, phone_a, phone_b, code, jpeg_path):
    add_server_key(pem_path)
    alice = client(port)
    bob = client(port)
    seen = {}
    await sign_up(alice, phone_a, code, "Alice")
    me_b = await sign_up(bob, phone_b, code, "Bob")

    got = []

    async def on_message(event):
        got.append(event.message)

    bob.add_event_handler(on_message, events.NewMessage(incoming=True))

    # Alice keeps Bob under her own name for him.
    imported = await alice(functions.contacts.ImportContactsRequest([types.InputPhoneContact(
        client_id=1, phone=phone_b, first_name="Bobby", last_name="")]))
    bob_for_alice = imported.users[0]
    # (Telethon 1.45 has no get_contacts helper: the raw request, as its docs show it.)
    listed = await alice(functions.contacts.GetContactsRequest(hash=0))
    seen["contacts"] = [[u.id, u.contact, u.first_name] for u in listed.users]
    seen["mutual"] = [c.mutual for c in listed.contacts]
    same = await alice(functions.contacts.GetContactsRequest(
        hash=telegram_hash([listed.saved_count] + sorted(c.user_id for c in listed.contacts))))
    seen["contacts_not_modified"] = isinstance(same, types.contacts.ContactsNotModified)

    # A document of 1.5 MiB (Telethon uploads it in 128 KiB parts).
    data = os.urandom(1536 * 1024)
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "report.bin")
    with open(path, "wb") as out:
        out.write(data)
    sent = await alice.send_file(bob_for_alice, path, caption="the report", force_document=True)
    seen["sent_document"] = [sent.file.name, sent.file.size]
    await wait_for(lambda: got, "the document")
    message = got[0]
    downloaded = await bob.download_media(message, file=bytes)
    seen["document"] = {
        "caption": message.raw_text,
        "name": message.file.name,
        "size": message.file.size,
        "mime": message.file.mime_type,
        "same_bytes": hashlib.sha256(downloaded).hexdigest() == hashlib.sha256(data).hexdigest(),
    }

    # A photo: Bob gets its sizes and downloads the largest (a JPEG the server made).
    await alice.send_file(bob_for_alice, jpeg_path, caption="a photo")
    await wait_for(lambda: len(got) >= 2, "the photo")
    photo = got[1]
    largest = max((s for s in photo.photo.sizes if isinstance(s, types.PhotoSize)),
                  key=lambda s: s.size)
    picture = await bob.download_media(photo, file=bytes)
    seen["photo"] = {
        "caption": photo.raw_text,
        "kinds": [type(s).__name__ for s in photo.photo.sizes],
        "jpeg": picture[:3] == b"\xff\xd8\xff",
        "largest": len(picture) == largest.size,
    }

    # A voice note with its duration and waveform.
    voice_path = os.path.join(folder, "note.ogg")
    voice = os.urandom(5000)
    with open(voice_path, "wb") as out:
        out.write(voice)
    await alice.send_file(bob_for_alice, voice_path, voice_note=True, attributes=[
        types.DocumentAttributeAudio(duration=3, voice=True, waveform=bytes([1, 2, 3, 4]))])
    await wait_for(lambda: len(got) >= 3, "the voice note")
    note = got[2]
    audio = next(a for a in note.document.attributes
                 if isinstance(a, types.DocumentAttributeAudio))
    seen["voice"] = {
        "voice": bool(note.voice),
        "duration": audio.duration,
        "waveform": list(audio.waveform or b""),
        "same_bytes": await bob.download_media(note, file=bytes) == voice,
    }

    # History shows each file as its kind of media.
    history = await bob.get_messages(await message.get_input_sender(), limit=3)

    # An album of three photos, a caption each.
    sent_album = await alice.send_file(bob_for_alice, [jpeg_path] * 3,
                                       caption=["first", "second", "third"])
    await wait_for(lambda: len(got) >= 6, "the album")
    album = got[3:6]
    group = album[0].grouped_id
    seen["album"] = {
        "sent": [m.raw_text for m in sent_album],
        "captions": [m.raw_text for m in album],
        "grouped": group is not None and all(m.grouped_id == group for m in album),
        "sent_grouped": all(m.grouped_id == group for m in sent_album),
        "kinds": [type(m.media).__name__ for m in album],
    }
    seen["history"] = [type(m.media).__name__ for m in history]

    seen["ids"] = [message.sender_id, me_b.id]
    await alice.disconnect()
    await bob.disconnect()
    print(json.dumps(seen))


asyncio.run(main(*sys.argv[1:]))
