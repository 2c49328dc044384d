//! Playing voice and video notes (ReadMessageContents) through the gateway: a note starts
//! unplayed in both boxes; when its recipient plays it, both boxes stop being unplayed and
//! every other device of both owners is told, each in its owner's ids and at a pts of its
//! log (by push and by getDifference); a repeat, a sender's own call, a deleted box and
//! messages without a note move no pts; bad requests get their codes.

use oxigram_proto::{
    api::v1::{
        CompleteUploadRequest, InputMedia, InputSingleMedia, SaveFilePartRequest, SendMediaRequest,
        media_client::MediaClient, messages_client::MessagesClient,
    },
    types::v1::{InputPeer, Message, PtsUpdate, message_media::Kind, update},
};
use oxigram_tests::{
    Mode, System, TestClient,
    client::{in_history, next_update_where},
};

/// Uploads `bytes` as one part and sends them to `to` as a message of `kind`.
async fn send_note(
    device: &TestClient,
    to: i64,
    upload_id: i64,
    kind: Kind,
    random_id: i64,
) -> anyhow::Result<Message> {
    let mut media = MediaClient::new(device.channel());
    let bytes: Vec<u8> = (0..20_000u32).map(|i| (i % 241) as u8).collect();
    media
        .save_file_part(SaveFilePartRequest {
            file_id: upload_id,
            part: 0,
            bytes: bytes.into(),
        })
        .await?;
    let file = media
        .complete_upload(CompleteUploadRequest {
            file_id: upload_id,
            parts: 1,
            name: "note.ogg".into(),
        })
        .await?
        .into_inner();
    let voice = kind == Kind::Voice;
    let item = InputSingleMedia {
        media: Some(InputMedia {
            kind: kind as i32,
            file_id: file.id,
            mime_type: if voice {
                "audio/ogg"
            } else {
                "application/pdf"
            }
            .into(),
            duration: if voice { 3 } else { 0 },
            waveform: if voice { vec![1, 5, 9, 5, 1] } else { vec![] },
            ..InputMedia::default()
        }),
        random_id,
        caption: String::new(),
        entities: vec![],
    };
    let sent = MessagesClient::new(device.channel())
        .send_media(SendMediaRequest {
            peer: Some(InputPeer::user(to)),
            multi_media: vec![item],
            ..SendMediaRequest::default()
        })
        .await?
        .into_inner();
    sent.sent
        .into_iter()
        .find_map(|s| s.message)
        .ok_or_else(|| anyhow::anyhow!("no message sent"))
}

/// The played ids of a read-contents update, if it is one.
fn played(kind: update::Kind) -> Option<Vec<i64>> {
    match kind {
        update::Kind::ReadMessageContents(r) => Some(r.messages),
        _ => None,
    }
}

/// The read-contents updates of `device`'s log after `pts`.
async fn played_in_log(
    device: &TestClient,
    pts: i32,
) -> anyhow::Result<Vec<(PtsUpdate, Vec<i64>)>> {
    let (slices, _) = device.full_difference(pts).await?;
    Ok(slices
        .into_iter()
        .flat_map(|s| s.updates)
        .filter_map(|u| {
            let ids = played(u.update.clone()?.kind?)?;
            Some((u, ids))
        })
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn playing_a_note_reaches_every_device_of_both_owners_once() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let ([alice, alice_laptop], alice_id) = system.user_on_devices("15558101", "Alice").await?;
    let ([bob, bob_laptop], bob_id) = system.user_on_devices("15558102", "Bob").await?;

    let voice = send_note(&alice, bob_id, 1, Kind::Voice, 11).await?;
    let video_note = send_note(&alice, bob_id, 2, Kind::VideoNote, 12).await?;
    let document = send_note(&alice, bob_id, 3, Kind::Document, 13).await?;
    assert!(
        voice.media_unread,
        "a sent voice note shows unplayed to its sender"
    );
    assert!(video_note.media_unread);
    assert!(!document.media_unread, "a document is never unplayed");

    // Bob's ids of the three, oldest first.
    let bobs: Vec<Message> = bob.history(alice_id).await?.into_iter().rev().collect();
    let [bob_voice, bob_video_note, bob_document] = bobs.as_slice() else {
        anyhow::bail!("Bob holds {} messages, not 3", bobs.len());
    };
    assert!(bob_voice.media_unread && bob_video_note.media_unread);
    assert!(!bob_document.media_unread);

    // The sender playing her own note changes nothing.
    let own = alice.read_message_contents(vec![voice.id]).await?;
    assert_eq!(
        own.pts_count, 0,
        "a sender cannot play her note for its recipient"
    );
    assert!(in_history(&alice, bob_id, voice.id).await?.media_unread);

    let alice_pts = alice.get_state().await?.pts;
    let bob_pts = bob.get_state().await?.pts;
    let mut alice_stream = alice_laptop.stream(alice_pts).await?;
    let mut bob_stream = bob_laptop.stream(bob_pts).await?;

    // Bob plays the voice note; the document, a missing id and bad ids are skipped.
    let read = bob
        .read_message_contents(vec![bob_voice.id, bob_document.id, 999_999, 0, -4])
        .await?;
    assert_eq!(read.pts_count, 1);
    assert_eq!(read.pts, bob_pts + 1);

    let pushed = next_update_where(&mut bob_stream, played).await?;
    assert_eq!(
        pushed,
        vec![bob_voice.id],
        "Bob's other device, in Bob's ids"
    );
    let pushed = next_update_where(&mut alice_stream, played).await?;
    assert_eq!(pushed, vec![voice.id], "Alice's devices, in Alice's ids");
    assert!(!in_history(&bob, alice_id, bob_voice.id).await?.media_unread);
    assert!(!in_history(&alice, bob_id, voice.id).await?.media_unread);
    assert!(
        in_history(&bob, alice_id, bob_video_note.id)
            .await?
            .media_unread,
        "only the note played"
    );

    // Once: a repeat moves no pts and answers the current one.
    let again = bob.read_message_contents(vec![bob_voice.id]).await?;
    assert_eq!((again.pts, again.pts_count), (read.pts, 0));

    // A deleted box cannot be played.
    bob.delete(&[bob_video_note.id], false).await?;
    let gone = bob.read_message_contents(vec![bob_video_note.id]).await?;
    assert_eq!(gone.pts_count, 0, "a deleted box is not played");
    assert!(
        in_history(&alice, bob_id, video_note.id)
            .await?
            .media_unread,
        "Alice's note stays unplayed: Bob deleted it unplayed"
    );

    // Each log holds one read-contents update, the calling device's included.
    let bob_log = played_in_log(&bob, bob_pts).await?;
    assert_eq!(bob_log.len(), 1, "one update in Bob's log");
    assert_eq!(bob_log[0].0.pts, read.pts);
    assert_eq!(bob_log[0].1, vec![bob_voice.id]);
    let alice_log = played_in_log(&alice, alice_pts).await?;
    assert_eq!(alice_log.len(), 1, "one update in Alice's log");
    assert_eq!(alice_log[0].1, vec![voice.id]);
    assert_eq!(alice_log[0].0.pts_count, 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_read_contents_requests_get_their_codes() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice] = system.users([("15558201", "Alice")]).await?;
    // (ids, the code; None: accepted, nothing to play)
    let table: [(Vec<i64>, Option<&str>); 4] = [
        ((1..=1001).collect(), Some("MESSAGE_IDS_TOO_MANY")),
        ((1..=1000).collect(), None),
        (vec![], None),
        (vec![0, -1, i64::MAX], None),
    ];
    for (i, (ids, want)) in table.into_iter().enumerate() {
        let got = alice.read_message_contents(ids).await;
        match want {
            Some(want) => {
                assert_eq!(
                    got.err().map(|e| e.code()).as_deref(),
                    Some(want),
                    "row {i}"
                );
            }
            None => assert_eq!(got?.pts_count, 0, "row {i}"),
        }
    }
    let anonymous = system.device().await?;
    let refused = anonymous.read_message_contents(vec![1]).await;
    assert_eq!(
        refused.err().map(|e| e.code()).as_deref(),
        Some("AUTH_KEY_UNREGISTERED"),
        "a device without an account is refused"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_client_plays_a_note_sent_over_grpc() -> anyhow::Result<()> {
    use oxigram_tests::mtproto::sign_up;
    use oxigram_tl::{enums, functions, types};

    let (system, key, port) = crate::mtproto::system_with_door().await?;
    let [alice] = system.users([("15558301", "Alice")]).await?;
    let mut bob = crate::mtproto::connect(&key, port).await?;
    let bob_user = sign_up(&mut bob, "15558302", "Bob").await?;
    let voice = send_note(&alice, bob_user.id, 1, Kind::Voice, 21).await?;
    let mut alice_stream = alice.stream(alice.get_state().await?.pts).await?;

    let history = bob
        .invoke(&crate::mtproto::latest(enums::InputPeer::User(
            types::InputPeerUser {
                user_id: alice.user_id()?,
                access_hash: 0,
            },
        )))
        .await?;
    let messages = match history {
        enums::messages::Messages::Messages(m) => m.messages,
        enums::messages::Messages::Slice(m) => m.messages,
        other => anyhow::bail!("history: {other:?}"),
    };
    let [enums::Message::Message(note)] = messages.as_slice() else {
        anyhow::bail!("Bob's history: {messages:?}");
    };
    assert!(
        note.media_unread,
        "the note shows unplayed on the MTProto door"
    );

    let read = functions::messages::ReadMessageContents { id: vec![note.id] };
    let enums::messages::AffectedMessages::Messages(first) = bob.invoke(&read).await?;
    assert_eq!(first.pts_count, 1);
    let pushed = next_update_where(&mut alice_stream, played).await?;
    assert_eq!(pushed, vec![voice.id], "the gRPC sender learns it");
    let enums::messages::AffectedMessages::Messages(again) = bob.invoke(&read).await?;
    assert_eq!(
        (again.pts, again.pts_count),
        (first.pts, 0),
        "a repeat moves no pts"
    );
    Ok(())
}
