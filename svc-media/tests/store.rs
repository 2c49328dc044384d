//! svc-media's store against its own migrated schema, and the service over it with blobs in a
//! folder of the test's own: uploads, deduplicated files, owners' references, ranged reads,
//! and the codes bad requests get.

mod common;

use common::{local, schema};
use oxigram_errors::code_of;
use oxigram_proto::{
    media::v1::{CompleteUploadRequest, GetFileRequest, SaveFilePartRequest, media_server::Media},
    types::v1 as types,
};
use sha2::{Digest, Sha256};
use svc_media::store::{self as media, StoredFile};
use tonic::Request;

fn part(owner_id: i64, file_id: i64, part: i32, bytes: &[u8]) -> SaveFilePartRequest {
    SaveFilePartRequest {
        owner_id,
        request: Some(types::SaveFilePartRequest {
            file_id,
            part,
            bytes: bytes.to_vec().into(),
        }),
    }
}

fn complete(owner_id: i64, file_id: i64, parts: i32, name: &str) -> CompleteUploadRequest {
    CompleteUploadRequest {
        owner_id,
        request: Some(types::CompleteUploadRequest {
            file_id,
            parts,
            name: name.into(),
        }),
    }
}

fn get(owner_id: i64, id: i64, offset: i64, limit: i32) -> GetFileRequest {
    GetFileRequest {
        owner_id,
        request: Some(types::GetFileRequest { id, offset, limit }),
    }
}

#[tokio::test]
async fn parts_are_recorded_once_each_in_order_and_taken_by_their_content() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.pool;
    for (p, size) in [(2, 30), (0, 10), (1, 20)] {
        assert!(media::insert_part(pool, 1, 77, p, size, &format!("k{p}")).await?);
    }
    // A re-sent part is not inserted again; it replaces the stored one, whose key comes back.
    assert!(!media::insert_part(pool, 1, 77, 2, 31, "k2b").await?);
    assert_eq!(
        media::replace_part(pool, 1, 77, 2, 31, "k2b").await?,
        Some("k2".to_owned())
    );
    assert_eq!(media::replace_part(pool, 1, 78, 0, 1, "none").await?, None);
    assert!(media::insert_part(pool, 2, 77, 5, 1, "other").await?);
    let part = |part, size, key: &str| media::StoredPart {
        part,
        size,
        blob_key: key.into(),
    };
    let mine = vec![part(0, 10, "k0"), part(1, 20, "k1"), part(2, 31, "k2b")];
    assert_eq!(media::stored_parts(pool, 1, 77).await?, mine);
    assert_eq!(
        media::stored_parts(pool, 2, 77).await?,
        vec![part(5, 1, "other")]
    );
    assert!(media::stored_parts(pool, 1, 78).await?.is_empty());

    // Completion: the parts leave the upload and become the content's blobs at their offsets.
    let mut tx = pool.begin().await?;
    let file = media::insert_file(&mut tx, "cc", 61).await?;
    assert!(file.inserted);
    assert_eq!(
        media::take_parts(&mut tx, 1, 77, file.id, true).await?,
        mine
    );
    tx.commit().await?;
    assert!(media::stored_parts(pool, 1, 77).await?.is_empty());
    assert_eq!(
        media::stored_parts(pool, 2, 77).await?,
        vec![part(5, 1, "other")]
    );
    let blob = |byte_offset, size, key: &str| media::ContentBlob {
        byte_offset,
        size,
        blob_key: key.into(),
    };
    // (window) -> the blobs it spans
    for ((start, end), expected) in [
        (
            (0, 61),
            vec![blob(0, 10, "k0"), blob(10, 20, "k1"), blob(30, 31, "k2b")],
        ),
        ((0, 10), vec![blob(0, 10, "k0")]),
        ((9, 11), vec![blob(0, 10, "k0"), blob(10, 20, "k1")]),
        ((10, 30), vec![blob(10, 20, "k1")]),
        ((29, 61), vec![blob(10, 20, "k1"), blob(30, 31, "k2b")]),
        ((60, 61), vec![blob(30, 31, "k2b")]),
    ] {
        assert_eq!(
            media::blobs_in_window(pool, file.id, start, end).await?,
            expected,
            "{start}..{end}"
        );
    }
    // The same content again (a duplicate): the parts are taken but not placed.
    assert!(media::insert_part(pool, 1, 77, 0, 61, "dup").await?);
    let mut tx = pool.begin().await?;
    let again = media::insert_file(&mut tx, "cc", 61).await?;
    assert_eq!((again.id, again.inserted), (file.id, false));
    assert_eq!(
        media::take_parts(&mut tx, 1, 77, again.id, false).await?,
        vec![part(0, 61, "dup")]
    );
    tx.commit().await?;
    assert_eq!(media::blobs_in_window(pool, file.id, 0, 61).await?.len(), 3);
    Ok(())
}

#[tokio::test]
async fn files_are_stored_once_per_content_and_read_only_by_their_owners() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.pool;
    let mut tx = pool.begin().await?;
    assert_eq!(media::file_by_sha256(&mut tx, "aa").await?, None);
    let file = media::insert_file(&mut tx, "aa", 5).await?;
    assert!(file.inserted);
    media::insert_content_blob(&mut tx, file.id, 5, "blobs/first").await?;
    assert_eq!(media::file_by_sha256(&mut tx, "aa").await?, Some(file.id));
    // The same content again: the same file, not stored by this call.
    let again = media::insert_file(&mut tx, "aa", 5).await?;
    assert_eq!((again.id, again.inserted), (file.id, false));
    let other = media::insert_file(&mut tx, "bb", 9).await?;
    assert_ne!(other.id, file.id);
    let alice_ref = media::insert_file_ref(&mut tx, 1, file.id, "a.txt", false).await?;
    let bob_ref = media::insert_file_ref(&mut tx, 2, file.id, "b.txt", false).await?;
    assert_ne!(alice_ref, bob_ref);
    tx.commit().await?;

    let aa = |name: &str| {
        Some(StoredFile {
            file_id: file.id,
            sha256: "aa".into(),
            size: 5,
            name: name.into(),
        })
    };
    // (owner, reference) -> content
    for ((owner, reference), expected) in [
        ((1, alice_ref), aa("a.txt")),
        ((2, bob_ref), aa("b.txt")),
        ((2, alice_ref), None),
        ((1, bob_ref), None),
        ((1, 999_999), None),
    ] {
        assert_eq!(
            media::file_of_ref(pool, owner, reference).await?,
            expected,
            "owner {owner}, reference {reference}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn an_upload_completes_into_a_deduplicated_file_read_in_ranges() -> anyhow::Result<()> {
    let s = local().await?;
    // Three parts, the last one short: 1 MiB + 200 KiB.
    let content = pattern(1024 * 1024 + 200 * 1024);
    for (p, bytes) in content.chunks(512 * 1024).enumerate() {
        s.media
            .save_file_part(Request::new(part(1, 10, p as i32, bytes)))
            .await?;
    }
    let info = s
        .media
        .complete_upload(Request::new(complete(1, 10, 3, "hello.bin")))
        .await?
        .into_inner();
    assert_eq!(info.size, content.len() as i64);
    assert_eq!(info.sha256, hex::encode(Sha256::digest(&content)));
    assert_eq!(info.name, "hello.bin");

    // Another owner uploads the same bytes: a reference of her own to the same content.
    for (p, bytes) in content.chunks(512 * 1024).enumerate() {
        s.media
            .save_file_part(Request::new(part(2, 20, p as i32, bytes)))
            .await?;
    }
    let theirs = s
        .media
        .complete_upload(Request::new(complete(2, 20, 3, "copy.bin")))
        .await?
        .into_inner();
    assert_ne!(theirs.id, info.id);
    assert_eq!(theirs.sha256, info.sha256);
    let files: i64 = sqlx::query_scalar("SELECT count(*) FROM files")
        .fetch_one(&s.db.pool)
        .await?;
    assert_eq!(files, 1);
    assert!(media::stored_parts(&s.db.pool, 1, 10).await?.is_empty());
    // The content keeps the three blobs it was uploaded in; the duplicate's parts are gone.
    assert_eq!(blob_files(&s.dir), 3);

    const MIB: usize = 1024 * 1024;
    // (offset, limit) -> bytes
    for ((offset, limit), expected) in [
        ((0, 4096), &content[..4096]),
        ((4096, 8192), &content[4096..12288]),
        ((MIB - 4096, 4096), &content[MIB - 4096..MIB]),
        ((0, MIB), &content[..MIB]),
        ((MIB, MIB), &content[MIB..]),
        ((MIB + 196 * 1024, 8192), &content[MIB + 196 * 1024..]),
        ((2 * MIB, 4096), &[][..]),
        // Windows across the part boundaries (at 512 KiB and 1 MiB).
        (
            (512 * 1024 - 4096, 8192),
            &content[512 * 1024 - 4096..512 * 1024 + 4096],
        ),
        ((256 * 1024, 512 * 1024), &content[256 * 1024..768 * 1024]),
        ((MIB - 8192, 8192), &content[MIB - 8192..MIB]),
    ] {
        let chunk = s
            .media
            .get_file(Request::new(get(1, info.id, offset as i64, limit as i32)))
            .await?
            .into_inner();
        assert_eq!(chunk.size, content.len() as i64);
        assert!(
            chunk.bytes == expected,
            "offset {offset}, limit {limit}: {} bytes",
            chunk.bytes.len()
        );
    }
    Ok(())
}

/// Bytes that differ from one position to the next (so a misplaced range shows).
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i / 4096) as u8)
        .collect()
}

/// The files under a blob folder (a content, a part).
fn blob_files(dir: &std::path::Path) -> usize {
    fn walk(dir: &std::path::Path, n: &mut usize) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, n);
            } else {
                *n += 1;
            }
        }
    }
    let mut n = 0;
    walk(dir, &mut n);
    n
}

#[tokio::test]
async fn bad_requests_get_their_codes() -> anyhow::Result<()> {
    let s = local().await?;
    s.media
        .save_file_part(Request::new(part(1, 10, 0, b"x")))
        .await?;
    s.media
        .save_file_part(Request::new(part(1, 10, 2, b"z")))
        .await?;
    s.media
        .save_file_part(Request::new(part(1, 11, 0, b"y")))
        .await?;
    let file = s
        .media
        .complete_upload(Request::new(complete(1, 11, 1, "y")))
        .await?
        .into_inner();

    let too_big = vec![0u8; 512 * 1024 + 1];
    let saves = [
        (part(1, 0, 0, b"x"), "FILE_ID_INVALID"),
        (part(1, 10, -1, b"x"), "FILE_PART_INVALID"),
        (part(1, 10, 8000, b"x"), "FILE_PART_INVALID"),
        (part(1, 10, 1, b""), "FILE_PART_INVALID"),
        (part(1, 10, 1, &too_big), "FILE_PART_TOO_BIG"),
    ];
    for (request, code) in saves {
        let sent = request.request.as_ref().map(|r| (r.part, r.file_id));
        let label = format!("(part, file) {sent:?}");
        let err = s
            .media
            .save_file_part(Request::new(request))
            .await
            .err()
            .map(|e| code_of(&e));
        assert_eq!(err, Some(Some(code.to_owned())), "{label}");
    }

    // request -> (code, the first missing part it names)
    let completions = [
        (complete(1, 10, 0, "n"), ("FILE_PARTS_INVALID", None)),
        (complete(1, 10, 8001, "n"), ("FILE_PARTS_INVALID", None)),
        // Part 1 is missing.
        (complete(1, 10, 3, "n"), ("FILE_PART_MISSING", Some(1))),
        // Of five, only parts 0 and 2 are there: the first missing is named.
        (complete(1, 10, 5, "n"), ("FILE_PART_MISSING", Some(1))),
        // Part 2 is there, beyond the count: no part is missing, the count is wrong.
        (complete(1, 10, 1, "n"), ("FILE_PART_MISSING", None)),
        // Another owner's upload: she saved none of it.
        (complete(2, 10, 1, "n"), ("FILE_PART_MISSING", Some(0))),
        (complete(1, 10, 1, "a\0b"), ("INPUT_TEXT_INVALID", None)),
    ];
    for (request, (code, part)) in completions {
        let label = format!("{request:?}");
        let err = s
            .media
            .complete_upload(Request::new(request))
            .await
            .err()
            .map(|e| (code_of(&e), oxigram_errors::missing_part(&e)));
        assert_eq!(err, Some((Some(code.to_owned()), part)), "{label}");
    }

    let reads = [
        (get(1, file.id, -1, 4096), "OFFSET_INVALID"),
        (get(1, file.id, -4096, 4096), "OFFSET_INVALID"),
        (get(1, file.id, 100, 4096), "OFFSET_INVALID"),
        (get(1, file.id, 0, 0), "LIMIT_INVALID"),
        (get(1, file.id, 0, -4096), "LIMIT_INVALID"),
        (get(1, file.id, 0, 10), "LIMIT_INVALID"),
        (get(1, file.id, 0, 4097), "LIMIT_INVALID"),
        (get(1, file.id, 0, 1024 * 1024 + 4096), "LIMIT_INVALID"),
        // The window crosses a 1 MiB boundary.
        (get(1, file.id, 4096, 1024 * 1024), "LIMIT_INVALID"),
        (get(1, file.id, 1024 * 1024 - 4096, 8192), "LIMIT_INVALID"),
        (get(2, file.id, 0, 4096), "FILE_ID_INVALID"),
        (get(1, file.id + 1000, 0, 4096), "FILE_ID_INVALID"),
    ];
    for (request, code) in reads {
        let label = format!("{request:?}");
        let err = s
            .media
            .get_file(Request::new(request))
            .await
            .err()
            .map(|e| code_of(&e));
        assert_eq!(err, Some(Some(code.to_owned())), "{label}");
    }
    Ok(())
}

#[tokio::test]
async fn a_file_id_used_again_after_completion_leaves_the_first_content_alone() -> anyhow::Result<()>
{
    let s = local().await?;
    // Parts of uneven sizes (a client may cut them so): windows span several of them.
    let first = pattern(300_000);
    let cuts = [0, 100_000, 104_096, 250_000, 300_000];
    for (p, w) in cuts.windows(2).enumerate() {
        s.media
            .save_file_part(Request::new(part(1, 10, p as i32, &first[w[0]..w[1]])))
            .await?;
    }
    let info = s
        .media
        .complete_upload(Request::new(complete(1, 10, 4, "first")))
        .await?
        .into_inner();
    // The same file_id again, other bytes: a new upload, with blobs of its own.
    let second: Vec<u8> = pattern(200_000).iter().map(|b| b ^ 0x5a).collect();
    for (p, bytes) in second.chunks(100_000).enumerate() {
        s.media
            .save_file_part(Request::new(part(1, 10, p as i32, bytes)))
            .await?;
    }
    // Before it completes and after, the first content reads back as it was.
    let read = |id: i64| {
        let media = &s.media;
        async move {
            let mut out = Vec::new();
            for offset in (0..300_000i64).step_by(65_536) {
                let chunk = media
                    .get_file(Request::new(get(1, id, offset, 65_536)))
                    .await?
                    .into_inner();
                out.extend_from_slice(&chunk.bytes);
            }
            anyhow::Ok(out)
        }
    };
    assert!(read(info.id).await? == first);
    let other = s
        .media
        .complete_upload(Request::new(complete(1, 10, 2, "second")))
        .await?
        .into_inner();
    assert_eq!(other.sha256, hex::encode(Sha256::digest(&second)));
    assert!(read(info.id).await? == first);
    assert!(read(other.id).await?[..200_000] == second[..]);
    // Four blobs of the first content, two of the second.
    assert_eq!(blob_files(&s.dir), 6);
    Ok(())
}
