//! Media messages end to end through the gateway: upload, SendMedia, the recipient downloads
//! the exact bytes (whole and ranged) through the message on the local blob store and on an
//! S3-compatible server the test starts (moto); a third user is refused; a forward gives the
//! new recipient the file; albums are all or nothing; instant upload by hash only for content
//! the caller may see; file references expire and a re-read refreshes them; bad ranges get
//! their codes; a 200 MiB file up and down keeps the media process within a memory bound.

use std::time::{Duration, Instant};

use oxigram_proto::{
    api::v1::{
        CompleteUploadRequest, ForwardMessagesRequest, GetFileRequest, GetMessageFileRequest,
        GetMessagesRequest, InputMedia, InputSingleMedia, SaveFilePartRequest, SendMediaRequest,
        SendMessageRequest, UploadByHashRequest, media_client::MediaClient,
        messages_client::MessagesClient,
    },
    types::v1::{
        EditMessageRequest, File, InputPeer, Message, MessageEntity, message_entity,
        message_media::Kind,
    },
};
use oxigram_testkit::s3::S3Server;
use oxigram_tests::{Mode, System, TestClient, client::code, rss_kib};
use sha2::{Digest, Sha256};

const MIB: usize = 1024 * 1024;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ seed ^ (i / 4096) as u8)
        .collect()
}

fn png(w: u32, h: u32) -> anyhow::Result<Vec<u8>> {
    let image = image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, 120])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    image.write_to(&mut out, image::ImageFormat::Png)?;
    Ok(out.into_inner())
}

fn document(file: &File, random_id: i64, caption: &str) -> InputSingleMedia {
    InputSingleMedia {
        media: Some(InputMedia {
            kind: Kind::Document as i32,
            file_id: file.id,
            mime_type: "application/octet-stream".into(),
            ..InputMedia::default()
        }),
        random_id,
        caption: caption.into(),
        entities: vec![],
    }
}

fn photo(file: &File, random_id: i64) -> InputSingleMedia {
    InputSingleMedia {
        media: Some(InputMedia {
            kind: Kind::Photo as i32,
            file_id: file.id,
            ..InputMedia::default()
        }),
        random_id,
        caption: String::new(),
        entities: vec![],
    }
}

async fn send_media(
    device: &TestClient,
    to: i64,
    items: Vec<InputSingleMedia>,
) -> Result<Vec<Message>, tonic::Status> {
    let sent = MessagesClient::new(device.channel())
        .send_media(SendMediaRequest {
            peer: Some(InputPeer::user(to)),
            multi_media: items,
            ..SendMediaRequest::default()
        })
        .await?
        .into_inner();
    Ok(sent.sent.into_iter().filter_map(|s| s.message).collect())
}

/// `device`'s message `id`, read again (a fresh file reference).
async fn reread(device: &TestClient, id: i64) -> anyhow::Result<Message> {
    let list = MessagesClient::new(device.channel())
        .get_messages(GetMessagesRequest { ids: vec![id] })
        .await?
        .into_inner();
    list.messages
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("message {id} is not in the box"))
}

fn location(m: &Message, offset: i64, limit: i32) -> GetMessageFileRequest {
    GetMessageFileRequest {
        peer: m.peer_id.and_then(|p| p.user_id()).map(InputPeer::user),
        msg_id: m.id,
        file_reference: m
            .media
            .as_ref()
            .map(|x| x.file_reference.clone())
            .unwrap_or_default(),
        thumb_size: String::new(),
        offset,
        limit,
    }
}

/// The whole file of message `m` in `device`'s box, 1 MiB a call.
async fn download(device: &TestClient, m: &Message) -> Result<Vec<u8>, tonic::Status> {
    let mut media = MediaClient::new(device.channel());
    let mut out = Vec::new();
    loop {
        let chunk = media
            .get_message_file(location(m, out.len() as i64, MIB as i32))
            .await?
            .into_inner();
        out.extend_from_slice(&chunk.bytes);
        if chunk.bytes.is_empty() || out.len() as i64 >= chunk.size {
            return Ok(out);
        }
    }
}

fn refused<T>(r: Result<T, tonic::Status>) -> Option<String> {
    r.err().and_then(|s| code(&s))
}

/// Alice sends Bob a document; Bob reads it whole and in ranges; Carol cannot; Bob forwards it
/// to Carol, who then can.
async fn round_trip(system: &System) -> anyhow::Result<()> {
    let [alice, bob, carol] = system
        .users([
            ("15557001", "Alice"),
            ("15557002", "Bob"),
            ("15557003", "Carol"),
        ])
        .await?;
    let (alice_id, bob_id, carol_id) = (alice.user_id()?, bob.user_id()?, carol.user_id()?);
    let bytes = pattern(2 * MIB + 300 * 1024, 3);
    let file = alice.upload(1, &bytes, "report.bin").await?;
    let mut item = document(&file, 41, "the report");
    item.entities = vec![MessageEntity {
        kind: message_entity::Kind::Bold as i32,
        offset: 4,
        length: 6,
        ..MessageEntity::default()
    }];
    let sent = send_media(&alice, bob_id, vec![item]).await?;
    assert_eq!(sent.len(), 1);
    let mine = &sent[0];
    let media = mine
        .media
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("no media"))?;
    assert_eq!(
        (media.size, media.sha256.as_str(), media.file_name.as_str()),
        (bytes.len() as i64, file.sha256.as_str(), "report.bin")
    );
    assert_eq!(mine.text, "the report");

    let inbox = bob.history(alice_id).await?;
    let received = inbox
        .first()
        .ok_or_else(|| anyhow::anyhow!("Bob got nothing"))?;
    assert_eq!(received.text, "the report");
    assert_eq!(received.entities.len(), 1);
    assert!(
        download(&bob, received).await? == bytes,
        "Bob's download differs"
    );
    // Ranged: a 4 KiB window at 1 MiB, and the short tail.
    let mut bobs = MediaClient::new(bob.channel());
    for (offset, limit) in [(MIB, 4096), (2 * MIB, MIB)] {
        let chunk = bobs
            .get_message_file(location(received, offset as i64, limit as i32))
            .await?
            .into_inner();
        let end = (offset + limit).min(bytes.len());
        assert!(chunk.bytes == bytes[offset..end], "offset {offset}");
    }
    // The sender reads her own message's file the same way.
    assert!(download(&alice, mine).await? == bytes);

    // Carol holds no such message: neither Bob's location nor Alice's opens it for her.
    let mut carols = MediaClient::new(carol.channel());
    let as_bob = GetMessageFileRequest {
        peer: Some(InputPeer::user(alice_id)),
        ..location(received, 0, 4096)
    };
    assert_eq!(
        refused(carols.get_message_file(as_bob).await).as_deref(),
        Some("MESSAGE_ID_INVALID")
    );
    let as_alice = GetMessageFileRequest {
        peer: Some(InputPeer::user(bob_id)),
        ..location(mine, 0, 4096)
    };
    assert_eq!(
        refused(carols.get_message_file(as_alice).await).as_deref(),
        Some("MESSAGE_ID_INVALID")
    );
    let by_upload = carols
        .get_file(GetFileRequest {
            id: file.id,
            offset: 0,
            limit: 4096,
        })
        .await;
    assert_eq!(refused(by_upload).as_deref(), Some("FILE_ID_INVALID"));
    // Bob with a reference that is not his message's.
    let forged = GetMessageFileRequest {
        file_reference: vec![0; 24],
        ..location(received, 0, 4096)
    };
    assert_eq!(
        refused(bobs.get_message_file(forged).await).as_deref(),
        Some("FILE_REFERENCE_INVALID")
    );

    // Bob forwards it to Carol: her box holds it now, so she may read it.
    MessagesClient::new(bob.channel())
        .forward_messages(ForwardMessagesRequest {
            from_peer: Some(InputPeer::user(alice_id)),
            ids: vec![received.id],
            random_ids: vec![77],
            to_peer: Some(InputPeer::user(carol_id)),
            ..ForwardMessagesRequest::default()
        })
        .await?;
    let carol_inbox = carol.history(bob_id).await?;
    let forwarded = carol_inbox
        .first()
        .ok_or_else(|| anyhow::anyhow!("Carol got nothing"))?;
    assert_eq!(forwarded.fwd_from.map(|f| f.from_user_id), Some(alice_id));
    assert!(
        download(&carol, forwarded).await? == bytes,
        "Carol's download differs"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recipient_downloads_a_media_message_on_the_local_store() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    round_trip(&system).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recipient_downloads_a_media_message_on_s3() -> anyhow::Result<()> {
    let s3 = S3Server::start().await?;
    let (mut config, ground) = System::config().await?;
    config.media.s3.bucket = s3.bucket.clone();
    config.media.s3.endpoint = s3.endpoint.clone();
    config.media.s3.allow_http = true;
    // Its own processes: the store's credentials come from their environment.
    let system = System::start_with(config, ground, Mode::Processes).await?;
    round_trip(&system).await?;
    // The blobs went to the S3 server, none to the local folder.
    let local = system.dir.join("media");
    let files = std::fs::read_dir(&local).map(|d| d.count()).unwrap_or(0);
    assert_eq!(files, 0, "{} holds blobs", local.display());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn albums_are_sent_whole_or_not_at_all() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15557001", "Alice"), ("15557002", "Bob")])
        .await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    let p1 = alice.upload(1, &png(1400, 900)?, "1.png").await?;
    let p2 = alice.upload(2, &png(300, 500)?, "2.png").await?;
    let doc = alice.upload(3, &pattern(9000, 1), "notes.txt").await?;
    let bobs_file = bob.upload(1, &pattern(100, 2), "b.bin").await?;

    // One bad item refuses the whole album: nothing is stored.
    let bad = [
        (
            vec![photo(&p1, 1), photo(&p2, 2), document(&bobs_file, 3, "")],
            "FILE_ID_INVALID",
        ),
        (vec![photo(&p1, 1), photo(&p2, 1)], "RANDOM_ID_DUPLICATE"),
        (vec![photo(&p1, 1), photo(&doc, 2)], "MEDIA_INVALID"),
        (
            (1..=11).map(|i| photo(&p1, i)).collect(),
            "MULTI_MEDIA_TOO_LONG",
        ),
        (vec![], "MEDIA_EMPTY"),
        (
            vec![InputSingleMedia {
                caption: "x".repeat(1025),
                ..photo(&p1, 1)
            }],
            "MEDIA_CAPTION_TOO_LONG",
        ),
    ];
    for (items, expected) in bad {
        let n = items.len();
        let answer = send_media(&alice, bob_id, items).await;
        assert_eq!(refused(answer).as_deref(), Some(expected), "{n} items");
    }
    assert!(
        alice.history(bob_id).await?.is_empty(),
        "a refused album left messages"
    );
    // A client's SendMessage cannot carry a file.
    let forged = MessagesClient::new(alice.channel())
        .send_message(SendMessageRequest {
            peer: Some(InputPeer::user(bob_id)),
            random_id: 9,
            text: "x".into(),
            grouped_id: 5,
            ..SendMessageRequest::default()
        })
        .await;
    assert_eq!(refused(forged).as_deref(), Some("MEDIA_INVALID"));

    let items = vec![
        photo(&p1, 11),
        photo(&p2, 12),
        document(&doc, 13, "and notes"),
    ];
    let sent = send_media(&alice, bob_id, items.clone()).await?;
    assert_eq!(sent.len(), 3);
    let grouped = sent[0].grouped_id;
    assert!(grouped != 0 && sent.iter().all(|m| m.grouped_id == grouped));
    // The same call again (a retry) is the same album.
    let again = send_media(&alice, bob_id, items).await?;
    assert_eq!(
        again.iter().map(|m| m.id).collect::<Vec<_>>(),
        sent.iter().map(|m| m.id).collect::<Vec<_>>()
    );
    let inbox = bob.history(alice_id).await?;
    assert_eq!(inbox.len(), 3);
    assert!(inbox.iter().all(|m| m.grouped_id == grouped));
    // The first photo's sizes: every tier, each readable by Bob.
    let first = inbox
        .iter()
        .find(|m| m.media.as_ref().is_some_and(|x| x.w == 1400))
        .ok_or_else(|| anyhow::anyhow!("no 1400 px photo"))?;
    let media = first.media.clone().unwrap_or_default();
    let tiers: Vec<&str> = media.sizes.iter().map(|s| s.r#type.as_str()).collect();
    assert_eq!(tiers, ["s", "m", "x", "y"]);
    assert!(!media.stripped_thumb.is_empty());
    let m_size = &media.sizes[1];
    let chunk = MediaClient::new(bob.channel())
        .get_message_file(GetMessageFileRequest {
            thumb_size: "m".into(),
            ..location(first, 0, MIB as i32)
        })
        .await?
        .into_inner();
    assert_eq!(chunk.bytes.len() as i32, m_size.size);
    let decoded = image::load_from_memory(&chunk.bytes)?;
    assert_eq!(
        (decoded.width() as i32, decoded.height() as i32),
        (m_size.w, m_size.h)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instant_upload_only_for_content_the_caller_may_see() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob, carol] = system
        .users([
            ("15557001", "Alice"),
            ("15557002", "Bob"),
            ("15557003", "Carol"),
        ])
        .await?;
    let bob_id = bob.user_id()?;
    let bytes = pattern(600_000, 5);
    let sha256 = hex::encode(Sha256::digest(&bytes));
    let file = alice.upload(1, &bytes, "a.bin").await?;
    let ask = |name: &str| UploadByHashRequest {
        sha256: sha256.clone(),
        size: bytes.len() as i64,
        name: name.into(),
    };
    // Alice has it herself.
    let hers = MediaClient::new(alice.channel())
        .upload_by_hash(ask("again"))
        .await?
        .into_inner();
    assert_eq!(
        (hers.sha256.as_str(), hers.size),
        (file.sha256.as_str(), file.size)
    );
    // Bob holds no message with it yet: the same answer as for a hash nobody has.
    let mut bobs = MediaClient::new(bob.channel());
    assert_eq!(
        refused(bobs.upload_by_hash(ask("b")).await).as_deref(),
        Some("FILE_HASH_UNKNOWN")
    );

    send_media(&alice, bob_id, vec![document(&file, 1, "")]).await?;
    // Now he does: he gets a file of his own without sending the bytes, and may send it on.
    let his = bobs.upload_by_hash(ask("b")).await?.into_inner();
    assert_eq!(his.sha256, sha256);
    let carol_id = carol.user_id()?;
    send_media(&bob, carol_id, vec![document(&his, 2, "")]).await?;
    let carol_inbox = carol.history(bob_id).await?;
    let m = carol_inbox
        .first()
        .ok_or_else(|| anyhow::anyhow!("Carol got nothing"))?;
    assert!(download(&carol, m).await? == bytes);
    // A third user who never saw it is refused.
    let [dave] = system.users([("15557004", "Dave")]).await?;
    let refused_dave = MediaClient::new(dave.channel())
        .upload_by_hash(ask("d"))
        .await;
    assert_eq!(refused(refused_dave).as_deref(), Some("FILE_HASH_UNKNOWN"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_references_expire_and_a_reread_refreshes_them() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    config.media.file_reference_ttl_seconds = 3;
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15557001", "Alice"), ("15557002", "Bob")])
        .await?;
    let file = alice.upload(1, &pattern(10_000, 6), "a.bin").await?;
    send_media(&alice, bob.user_id()?, vec![document(&file, 1, "")]).await?;
    let inbox = bob.history(alice.user_id()?).await?;
    let old = inbox
        .first()
        .ok_or_else(|| anyhow::anyhow!("Bob got nothing"))?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut bobs = MediaClient::new(bob.channel());
    assert_eq!(
        refused(bobs.get_message_file(location(old, 0, 4096)).await).as_deref(),
        Some("FILE_REFERENCE_EXPIRED")
    );
    let fresh = reread(&bob, old.id).await?;
    let chunk = bobs
        .get_message_file(location(&fresh, 0, 4096))
        .await?
        .into_inner();
    assert_eq!(chunk.bytes, pattern(10_000, 6)[..4096]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_ranges_and_edits_of_media_get_their_codes() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15557001", "Alice"), ("15557002", "Bob")])
        .await?;
    let bob_id = bob.user_id()?;
    let file = alice.upload(1, &pattern(3 * MIB, 7), "a.bin").await?;
    let sent = send_media(&alice, bob_id, vec![document(&file, 1, "v1")]).await?;
    let m = &sent[0];
    let mut media = MediaClient::new(alice.channel());
    let mib = MIB as i64;
    // (offset, limit) -> code
    for ((offset, limit), expected) in [
        ((-4096, 4096), "OFFSET_INVALID"),
        ((1000, 4096), "OFFSET_INVALID"),
        ((0, 0), "LIMIT_INVALID"),
        ((0, 1000), "LIMIT_INVALID"),
        ((0, 2 * MIB as i32), "LIMIT_INVALID"),
        ((mib - 4096, 8192), "LIMIT_INVALID"),
        ((4096, MIB as i32), "LIMIT_INVALID"),
    ] {
        let answer = media.get_message_file(location(m, offset, limit)).await;
        assert_eq!(
            refused(answer).as_deref(),
            Some(expected),
            "offset {offset}, limit {limit}"
        );
    }

    // An edit replaces the caption, then the file; both owners see it.
    let new_file = alice.upload(2, &pattern(5000, 8), "b.bin").await?;
    let mut messages = MessagesClient::new(alice.channel());
    let edited = messages
        .edit_message(EditMessageRequest {
            peer: Some(InputPeer::user(bob_id)),
            id: m.id,
            text: "v2".into(),
            new_media: document(&new_file, 0, "").media,
            ..EditMessageRequest::default()
        })
        .await?
        .into_inner();
    let now = edited
        .message
        .ok_or_else(|| anyhow::anyhow!("no message"))?;
    assert_eq!(now.text, "v2");
    assert_eq!(now.media.as_ref().map(|x| x.size), Some(5000));
    let inbox = bob.history(alice.user_id()?).await?;
    let his = inbox
        .first()
        .ok_or_else(|| anyhow::anyhow!("Bob has nothing"))?;
    assert_eq!(
        his.media.as_ref().map(|x| x.sha256.clone()),
        Some(new_file.sha256.clone())
    );
    assert!(download(&bob, his).await? == pattern(5000, 8));
    // Another user's upload is no file for Alice's edit.
    let bobs_file = bob.upload(1, &pattern(100, 9), "x").await?;
    let stolen = messages
        .edit_message(EditMessageRequest {
            peer: Some(InputPeer::user(bob_id)),
            id: m.id,
            text: "v3".into(),
            new_media: document(&bobs_file, 0, "").media,
            ..EditMessageRequest::default()
        })
        .await;
    assert_eq!(refused(stolen).as_deref(), Some("FILE_ID_INVALID"));
    // An edit without a file may empty the caption (the file stays), not past 1024 characters.
    let uncaptioned = messages
        .edit_message(EditMessageRequest {
            peer: Some(InputPeer::user(bob_id)),
            id: m.id,
            text: String::new(),
            ..EditMessageRequest::default()
        })
        .await?
        .into_inner()
        .message
        .ok_or_else(|| anyhow::anyhow!("no message"))?;
    assert_eq!(uncaptioned.text, "");
    assert_eq!(uncaptioned.media.map(|x| x.sha256), Some(new_file.sha256));
    let too_long = messages
        .edit_message(EditMessageRequest {
            peer: Some(InputPeer::user(bob_id)),
            id: m.id,
            text: "é".repeat(1025),
            ..EditMessageRequest::default()
        })
        .await;
    assert_eq!(refused(too_long).as_deref(), Some("MEDIA_CAPTION_TOO_LONG"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_mib_file_goes_up_and_down_within_a_memory_bound() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    // Assembling 200 MiB reads and hashes every byte once: more than the suites' usual wait.
    config.rpc_timeout_ms = 120_000;
    let system = System::start_with(config, ground, Mode::Processes).await?;
    system.wait_serving(oxigram::Target::Media).await?;
    let pid = system
        .pid(oxigram::Target::Media)
        .ok_or_else(|| anyhow::anyhow!("media runs in no process"))?;
    let [alice, bob] = system
        .users([("15557001", "Alice"), ("15557002", "Bob")])
        .await?;
    let (before, _) = rss_kib(pid)?;
    let len = 200 * MIB;
    let part = pattern(512 * 1024, 11);
    // Every part is the same pattern but the first, so the content is one of its own.
    let mut media = MediaClient::new(alice.channel());
    let parts = len / part.len();
    let started = Instant::now();
    let mut hasher = Sha256::new();
    for p in 0..parts {
        let mut bytes = part.clone();
        bytes[..8].copy_from_slice(&(p as u64).to_le_bytes());
        hasher.update(&bytes);
        media
            .save_file_part(SaveFilePartRequest {
                file_id: 5,
                part: p as i32,
                bytes: bytes.into(),
            })
            .await?;
    }
    let file = media
        .complete_upload(CompleteUploadRequest {
            file_id: 5,
            parts: parts as i32,
            name: "big".into(),
        })
        .await?
        .into_inner();
    let up = started.elapsed();
    assert_eq!(file.sha256, hex::encode(hasher.finalize()));
    let sent = send_media(&alice, bob.user_id()?, vec![document(&file, 1, "")]).await?;
    let inbox = bob.history(alice.user_id()?).await?;
    let m = inbox
        .first()
        .ok_or_else(|| anyhow::anyhow!("Bob got nothing"))?;
    assert_eq!(sent[0].media.as_ref().map(|x| x.size), Some(len as i64));
    let started = Instant::now();
    let mut bobs = MediaClient::new(bob.channel());
    let mut check = Sha256::new();
    let mut got = 0usize;
    while got < len {
        let chunk = bobs
            .get_message_file(location(m, got as i64, MIB as i32))
            .await?
            .into_inner();
        anyhow::ensure!(!chunk.bytes.is_empty(), "the download stopped at {got}");
        got += chunk.bytes.len();
        check.update(&chunk.bytes);
    }
    let down = started.elapsed();
    assert_eq!(hex::encode(check.finalize()), file.sha256);
    let (after, peak) = rss_kib(pid)?;
    eprintln!(
        "200 MiB: up {:.1} s, down {:.1} s; media RSS before {} MiB, after {} MiB, peak {} MiB",
        up.as_secs_f64(),
        down.as_secs_f64(),
        before / 1024,
        after / 1024,
        peak / 1024
    );
    // The file never sits in the media process whole: its peak stays far below 200 MiB.
    assert!(
        peak < 120 * 1024,
        "media's peak RSS was {} MiB",
        peak / 1024
    );
    Ok(())
}
