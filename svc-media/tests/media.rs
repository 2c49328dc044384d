//! svc-media's message-facing calls against its own migrated schema: the snapshot a message
//! keeps of an upload (a photo's sizes, a thumbnail), reads by content, instant upload by
//! hash, the collector, and the same upload and ranged reads on an S3-compatible server the
//! test starts (moto).

mod common;

use common::{Service, local, schema};
use oxigram_errors::code_of;
use oxigram_kit::config::S3Config;
use oxigram_proto::{
    media::v1::{
        CollectGarbageRequest, CompleteUploadRequest, GetFileRequest, ReadContentRequest,
        ResolveMediaRequest, SaveFilePartRequest, UploadByHashRequest, media_server::Media,
    },
    types::v1::{self as types, InputMedia, message_media::Kind},
};
use oxigram_testkit::s3::S3Server;
use sha2::{Digest, Sha256};
use svc_media::{MediaService, blobs::Blobs};
use tonic::Request;

/// Uploads `bytes` as `owner`'s upload `upload_id` in parts of 512 KiB; the File.
async fn upload(
    media: &MediaService,
    owner_id: i64,
    upload_id: i64,
    bytes: &[u8],
    name: &str,
) -> anyhow::Result<types::File> {
    let chunks: Vec<&[u8]> = bytes.chunks(512 * 1024).collect();
    let parts = chunks
        .iter()
        .enumerate()
        .map(|(p, c)| (p as i32, c.to_vec()));
    save_parts(media, owner_id, upload_id, parts).await?;
    Ok(media
        .complete_upload(Request::new(CompleteUploadRequest {
            owner_id,
            request: Some(types::CompleteUploadRequest {
                file_id: upload_id,
                parts: chunks.len() as i32,
                name: name.into(),
            }),
        }))
        .await?
        .into_inner())
}

/// Saves `parts` (part, bytes) of `owner`'s upload `upload_id`, in the order given.
async fn save_parts(
    media: &MediaService,
    owner_id: i64,
    upload_id: i64,
    parts: impl IntoIterator<Item = (i32, Vec<u8>)>,
) -> anyhow::Result<()> {
    for (part, bytes) in parts {
        media
            .save_file_part(Request::new(SaveFilePartRequest {
                owner_id,
                request: Some(types::SaveFilePartRequest {
                    file_id: upload_id,
                    part,
                    bytes: bytes.into(),
                }),
            }))
            .await?;
    }
    Ok(())
}

/// The whole content `file_id` read by content id, chunk by chunk of 1 MiB.
async fn read_whole(media: &MediaService, file_id: i64) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let chunk = media
            .read_content(Request::new(ReadContentRequest {
                file_id,
                offset: out.len() as i64,
                limit: 1024 * 1024,
            }))
            .await?
            .into_inner();
        if chunk.bytes.is_empty() {
            return Ok(out);
        }
        out.extend_from_slice(&chunk.bytes);
        if out.len() as i64 >= chunk.size {
            return Ok(out);
        }
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 253) as u8 ^ seed ^ (i / 8192) as u8)
        .collect()
}

/// A PNG of `w`×`h` pixels.
fn png(w: u32, h: u32) -> anyhow::Result<Vec<u8>> {
    let image = image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, 90])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    image.write_to(&mut out, image::ImageFormat::Png)?;
    Ok(out.into_inner())
}

fn input(kind: Kind, file_id: i64) -> InputMedia {
    InputMedia {
        kind: kind as i32,
        file_id,
        ..InputMedia::default()
    }
}

fn resolve(owner_id: i64, media: InputMedia) -> Request<ResolveMediaRequest> {
    Request::new(ResolveMediaRequest {
        owner_id,
        media: Some(media),
    })
}

/// How the parts of a four-part upload reach svc-media: (part, which version of its bytes).
/// The content is always version 1 of each part, sent last for that part.
type Order = &'static [(i32, u8)];

#[tokio::test]
async fn an_upload_hashes_right_whatever_its_parts_order_and_resends() -> anyhow::Result<()> {
    let s = local().await?;
    let cases: &[(&str, Order)] = &[
        ("in order", &[(0, 1), (1, 1), (2, 1), (3, 1)]),
        ("backwards", &[(3, 1), (2, 1), (1, 1), (0, 1)]),
        ("shuffled", &[(2, 1), (0, 1), (3, 1), (1, 1)]),
        // Part 0 hashed, then replaced: the running hash no longer holds.
        (
            "a hashed part re-sent",
            &[(0, 0), (1, 1), (2, 1), (3, 1), (0, 1)],
        ),
        // Part 2 waiting for part 1, then replaced while it waits.
        (
            "a waiting part re-sent",
            &[(0, 1), (2, 0), (3, 1), (2, 1), (1, 1)],
        ),
        // Part 1 re-sent after everything was hashed, its bytes the same: a new blob all the
        // same, so the upload is read back to hash.
        (
            "the same bytes re-sent",
            &[(0, 1), (1, 1), (2, 1), (3, 1), (1, 1)],
        ),
    ];
    let part = |p: i32, version: u8| pattern(300_000 + p as usize * 7, p as u8 * 40 + version);
    for (i, (case, order)) in cases.iter().enumerate() {
        let upload_id = 500 + i as i64;
        let sends = order.iter().map(|&(p, v)| (p, part(p, v)));
        save_parts(&s.media, 1, upload_id, sends).await?;
        let file = s
            .media
            .complete_upload(Request::new(CompleteUploadRequest {
                owner_id: 1,
                request: Some(types::CompleteUploadRequest {
                    file_id: upload_id,
                    parts: 4,
                    name: format!("{i}.bin"),
                }),
            }))
            .await?
            .into_inner();
        let content: Vec<u8> = (0..4).flat_map(|p| part(p, 1)).collect();
        assert_eq!(file.sha256, hex::encode(Sha256::digest(&content)), "{case}");
        assert_eq!(file.size, content.len() as i64, "{case}");
        let id = sha_file(&s, &file.sha256).await?;
        assert!(read_whole(&s.media, id).await? == content, "{case}");
    }
    Ok(())
}

#[tokio::test]
async fn a_photo_gets_its_size_tiers_and_an_inline_preview() -> anyhow::Result<()> {
    let s = local().await?;
    let photo = upload(&s.media, 1, 1, &png(1500, 1000)?, "p.png").await?;
    let media = s
        .media
        .resolve_media(resolve(1, input(Kind::Photo, photo.id)))
        .await?
        .into_inner();
    assert_eq!((media.w, media.h), (1500, 1000));
    assert_eq!(media.sha256, photo.sha256);
    assert_eq!(media.mime_type, "image/jpeg");
    // Every tier up to the photo's own size, by longest side.
    let tiers: Vec<(&str, i32, i32)> = media
        .sizes
        .iter()
        .map(|p| (p.r#type.as_str(), p.w, p.h))
        .collect();
    assert_eq!(
        tiers,
        vec![
            ("s", 100, 67),
            ("m", 320, 213),
            ("x", 800, 533),
            ("y", 1280, 853)
        ]
    );
    for size in &media.sizes {
        let bytes = read_whole(&s.media, size.file_id).await?;
        assert_eq!(bytes.len() as i32, size.size);
        let decoded = image::load_from_memory_with_format(&bytes, image::ImageFormat::Jpeg)?;
        assert_eq!(
            (decoded.width() as i32, decoded.height() as i32),
            (size.w, size.h)
        );
    }
    let preview =
        image::load_from_memory_with_format(&media.stripped_thumb, image::ImageFormat::Jpeg)?;
    assert_eq!(preview.width().max(preview.height()), 40);
    assert!(
        media.stripped_thumb.len() < 2048,
        "{}",
        media.stripped_thumb.len()
    );

    // A small photo gets the smallest tier only, never an upscaled one.
    let small = upload(&s.media, 1, 2, &png(90, 60)?, "s.png").await?;
    let media = s
        .media
        .resolve_media(resolve(1, input(Kind::Photo, small.id)))
        .await?
        .into_inner();
    let tiers: Vec<(&str, i32, i32)> = media
        .sizes
        .iter()
        .map(|p| (p.r#type.as_str(), p.w, p.h))
        .collect();
    assert_eq!(tiers, vec![("s", 90, 60)]);

    // A document of image type carries the client's thumbnail, made at most 320 px.
    let doc = upload(&s.media, 1, 3, &pattern(5000, 1), "a.pdf").await?;
    let thumb = upload(&s.media, 1, 4, &png(640, 320)?, "t.png").await?;
    let media = s
        .media
        .resolve_media(resolve(
            1,
            InputMedia {
                mime_type: "application/pdf".into(),
                thumb_file_id: thumb.id,
                ..input(Kind::Document, doc.id)
            },
        ))
        .await?
        .into_inner();
    assert_eq!(media.file_name, "a.pdf");
    assert_eq!(media.size, 5000);
    let thumbs: Vec<(&str, i32, i32)> = media
        .sizes
        .iter()
        .map(|p| (p.r#type.as_str(), p.w, p.h))
        .collect();
    assert_eq!(thumbs, vec![("t", 320, 160)]);
    Ok(())
}

#[tokio::test]
async fn media_is_resolved_only_from_the_owners_own_good_uploads() -> anyhow::Result<()> {
    let s = local().await?;
    let doc = upload(&s.media, 1, 1, &pattern(100, 2), "d.bin").await?;
    let not_an_image = upload(&s.media, 1, 2, &pattern(300, 3), "x.png").await?;
    let cases = [
        (resolve(2, input(Kind::Voice, doc.id)), "FILE_ID_INVALID"),
        (
            resolve(1, input(Kind::Voice, doc.id + 100)),
            "FILE_ID_INVALID",
        ),
        (resolve(1, input(Kind::Voice, 0)), "FILE_ID_INVALID"),
        (
            resolve(1, input(Kind::Unspecified, doc.id)),
            "MEDIA_INVALID",
        ),
        (
            resolve(
                1,
                InputMedia {
                    kind: 99,
                    ..input(Kind::Document, doc.id)
                },
            ),
            "MEDIA_INVALID",
        ),
        // A document needs a MIME type, and it must look like one.
        (resolve(1, input(Kind::Document, doc.id)), "MEDIA_INVALID"),
        (
            resolve(
                1,
                InputMedia {
                    mime_type: "pdf".into(),
                    ..input(Kind::Document, doc.id)
                },
            ),
            "MEDIA_INVALID",
        ),
        (
            resolve(
                1,
                InputMedia {
                    duration: -1,
                    ..input(Kind::Voice, doc.id)
                },
            ),
            "MEDIA_INVALID",
        ),
        (
            resolve(
                1,
                InputMedia {
                    waveform: vec![1; 101],
                    ..input(Kind::Voice, doc.id)
                },
            ),
            "MEDIA_INVALID",
        ),
        (
            resolve(
                1,
                InputMedia {
                    waveform: vec![1; 5],
                    ..input(Kind::Audio, doc.id)
                },
            ),
            "MEDIA_INVALID",
        ),
        (
            resolve(
                1,
                InputMedia {
                    file_name: "a\0b".into(),
                    ..input(Kind::Voice, doc.id)
                },
            ),
            "INPUT_TEXT_INVALID",
        ),
        (
            resolve(1, input(Kind::Photo, not_an_image.id)),
            "MEDIA_INVALID",
        ),
        (
            resolve(
                1,
                InputMedia {
                    thumb_file_id: doc.id,
                    ..input(Kind::Photo, not_an_image.id)
                },
            ),
            "MEDIA_INVALID",
        ),
        (
            resolve(
                1,
                InputMedia {
                    mime_type: "application/octet-stream".into(),
                    thumb_file_id: not_an_image.id,
                    ..input(Kind::Document, doc.id)
                },
            ),
            "MEDIA_INVALID",
        ),
    ];
    for (request, code) in cases {
        let label = format!("{:?}", request.get_ref());
        let err = s
            .media
            .resolve_media(request)
            .await
            .err()
            .map(|e| code_of(&e));
        assert_eq!(err, Some(Some(code.to_owned())), "{label}");
    }
    let voice = s
        .media
        .resolve_media(resolve(
            1,
            InputMedia {
                duration: 3,
                waveform: vec![7; 50],
                mime_type: "audio/ogg".into(),
                ..input(Kind::Voice, doc.id)
            },
        ))
        .await?
        .into_inner();
    assert_eq!(
        (
            voice.kind,
            voice.duration,
            voice.waveform.len(),
            voice.file_name.as_str()
        ),
        (Kind::Voice as i32, 3, 50, "d.bin")
    );
    Ok(())
}

fn by_hash(owner_id: i64, sha256: &str, size: i64, visible: bool) -> Request<UploadByHashRequest> {
    Request::new(UploadByHashRequest {
        owner_id,
        request: Some(types::UploadByHashRequest {
            sha256: sha256.into(),
            size,
            name: "again.bin".into(),
        }),
        visible,
    })
}

#[tokio::test]
async fn instant_upload_hits_only_content_the_caller_may_see() -> anyhow::Result<()> {
    let s = local().await?;
    let bytes = pattern(700_000, 4);
    let mine = upload(&s.media, 1, 1, &bytes, "orig.bin").await?;
    let sha = hex::encode(Sha256::digest(&bytes));
    assert_eq!(mine.sha256, sha);

    // Her own content: a new file of hers without the bytes, readable like the first.
    let again = s
        .media
        .upload_by_hash(by_hash(1, &sha, 700_000, false))
        .await?
        .into_inner();
    assert_ne!(again.id, mine.id);
    assert_eq!(
        (again.size, again.sha256.as_str(), again.name.as_str()),
        (700_000, sha.as_str(), "again.bin")
    );
    let first = s
        .media
        .get_file(Request::new(GetFileRequest {
            owner_id: 1,
            request: Some(types::GetFileRequest {
                id: again.id,
                offset: 0,
                limit: 4096,
            }),
        }))
        .await?
        .into_inner();
    assert_eq!(first.bytes, bytes[..4096]);

    // Someone else's content, a wrong size, an unknown or malformed hash: one answer alike.
    let unknown = hex::encode(Sha256::digest(b"nothing stored"));
    for (request, label) in [
        (by_hash(2, &sha, 700_000, false), "another owner's content"),
        (by_hash(1, &sha, 699_999, false), "a wrong size"),
        (by_hash(1, &unknown, 10, false), "an unknown hash"),
        (by_hash(1, &unknown, 10, true), "an unknown hash, visible"),
        (by_hash(1, "abc", 10, false), "a malformed hash"),
        (
            by_hash(1, &sha.to_uppercase(), 700_000, false),
            "an upper-case hash",
        ),
    ] {
        let err = s
            .media
            .upload_by_hash(request)
            .await
            .err()
            .map(|e| code_of(&e));
        assert_eq!(err, Some(Some("FILE_HASH_UNKNOWN".to_owned())), "{label}");
    }
    // The caller found it in a message she holds (the gateway asked svc-messages).
    let theirs = s
        .media
        .upload_by_hash(by_hash(2, &sha, 700_000, true))
        .await?
        .into_inner();
    assert_eq!(theirs.sha256, sha);
    Ok(())
}

#[tokio::test]
async fn the_collector_takes_what_no_message_took_and_shared_content_last() -> anyhow::Result<()> {
    let s = local().await?;
    let shared = pattern(10_000, 5);
    let a = upload(&s.media, 1, 1, &shared, "a").await?;
    let b = upload(&s.media, 2, 1, &shared, "b").await?;
    // A content of three parts: every one of its blobs goes with it.
    let lone = upload(&s.media, 1, 2, &pattern(1_100_000, 6), "lone").await?;
    // An unfinished upload.
    s.media
        .save_file_part(Request::new(SaveFilePartRequest {
            owner_id: 3,
            request: Some(types::SaveFilePartRequest {
                file_id: 9,
                part: 0,
                bytes: vec![1; 10].into(),
            }),
        }))
        .await?;
    // A message takes b's file.
    s.media
        .resolve_media(resolve(
            2,
            InputMedia {
                mime_type: "application/octet-stream".into(),
                ..input(Kind::Document, b.id)
            },
        ))
        .await?;

    // Within the grace period nothing goes.
    let kept = s
        .media
        .collect_garbage(Request::new(CollectGarbageRequest {
            grace_seconds: 3600,
        }))
        .await?
        .into_inner();
    assert_eq!((kept.parts_deleted, kept.contents_deleted), (0, 0));

    let done = s
        .media
        .collect_garbage(Request::new(CollectGarbageRequest { grace_seconds: 0 }))
        .await?
        .into_inner();
    // The part, and the lone content; the shared content stays for b's taken reference.
    assert_eq!((done.parts_deleted, done.contents_deleted), (1, 1));
    let refs: Vec<i64> = sqlx::query_scalar("SELECT id FROM file_refs ORDER BY id")
        .fetch_all(&s.db.pool)
        .await?;
    assert_eq!(refs, vec![b.id]);
    let files: i64 = sqlx::query_scalar("SELECT count(*) FROM files")
        .fetch_one(&s.db.pool)
        .await?;
    assert_eq!(files, 1);
    assert_eq!(
        read_whole(&s.media, sha_file(&s, &a.sha256).await?).await?,
        shared
    );
    assert!(
        sqlx::query_scalar::<_, i64>("SELECT id FROM files WHERE sha256 = $1")
            .bind(&lone.sha256)
            .fetch_optional(&s.db.pool)
            .await?
            .is_none()
    );
    // Only the shared content's blob is left in the store (the duplicate's part went when it
    // completed).
    let left = walk(&s.dir);
    assert_eq!(left, 1, "blobs left: {left}");
    Ok(())
}

async fn sha_file(s: &Service, sha256: &str) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar("SELECT id FROM files WHERE sha256 = $1")
        .bind(sha256)
        .fetch_one(&s.db.pool)
        .await?)
}

fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.path().is_dir() {
            true => walk(&e.path()),
            false => 1,
        })
        .sum()
}

#[tokio::test]
async fn uploads_and_ranged_reads_work_on_an_s3_compatible_server() -> anyhow::Result<()> {
    let server = S3Server::start().await?;
    let db = schema().await?;
    let config = S3Config {
        bucket: server.bucket.clone(),
        endpoint: server.endpoint.clone(),
        allow_http: true,
        ..S3Config::default()
    };
    let media = MediaService::new(db.pool.clone(), Blobs::s3(&config, Some(("test", "test")))?);
    // 12 MiB + 300 KiB: an assembly of two multipart chunks of 8 MiB... and a short one.
    let bytes = pattern(12 * 1024 * 1024 + 300 * 1024, 7);
    let file = upload(&media, 1, 1, &bytes, "big.bin").await?;
    assert_eq!(file.sha256, hex::encode(Sha256::digest(&bytes)));
    let content: i64 = sqlx::query_scalar("SELECT file_id FROM file_refs WHERE id = $1")
        .bind(file.id)
        .fetch_one(&db.pool)
        .await?;
    assert!(
        read_whole(&media, content).await? == bytes,
        "the whole content differs"
    );
    const MIB: i64 = 1024 * 1024;
    for (offset, limit) in [(0, 4096), (5 * MIB + 8192, 65536), (12 * MIB, 1024 * 1024)] {
        let chunk = media
            .get_file(Request::new(GetFileRequest {
                owner_id: 1,
                request: Some(types::GetFileRequest {
                    id: file.id,
                    offset,
                    limit,
                }),
            }))
            .await?
            .into_inner();
        let end = (offset + i64::from(limit)).min(bytes.len() as i64) as usize;
        assert!(
            chunk.bytes == bytes[offset as usize..end],
            "offset {offset}, limit {limit}"
        );
    }
    // A re-sent part replaces the first: the upload resumes.
    let first = pattern(512 * 1024, 8);
    let second = pattern(1000, 9);
    let resends = [
        (0, pattern(512 * 1024, 10)),
        (1, second.clone()),
        (0, first.clone()),
    ];
    save_parts(&media, 1, 2, resends).await?;
    let resumed = media
        .complete_upload(Request::new(CompleteUploadRequest {
            owner_id: 1,
            request: Some(types::CompleteUploadRequest {
                file_id: 2,
                parts: 2,
                name: "r".into(),
            }),
        }))
        .await?
        .into_inner();
    let expected = [first, second].concat();
    assert_eq!(resumed.sha256, hex::encode(Sha256::digest(&expected)));
    // The same file_id again after completion: the first content stays as it was.
    save_parts(
        &media,
        1,
        2,
        [(0, pattern(512 * 1024, 11)), (1, pattern(10, 12))],
    )
    .await?;
    let resumed_content: i64 = sqlx::query_scalar("SELECT file_id FROM file_refs WHERE id = $1")
        .bind(resumed.id)
        .fetch_one(&db.pool)
        .await?;
    assert!(read_whole(&media, resumed_content).await? == expected);
    // A duplicate of the big content, then the collector: the big content's blobs all go.
    let dup = upload(&media, 2, 5, &bytes, "dup.bin").await?;
    assert_eq!(dup.sha256, file.sha256);
    let done = media
        .collect_garbage(Request::new(CollectGarbageRequest { grace_seconds: 0 }))
        .await?
        .into_inner();
    // The two parts of the second upload; the big content and the resumed one.
    assert_eq!((done.parts_deleted, done.contents_deleted), (2, 2));
    let blobs: i64 = sqlx::query_scalar("SELECT count(*) FROM content_blobs")
        .fetch_one(&db.pool)
        .await?;
    assert_eq!(blobs, 0);
    let err = media
        .read_content(Request::new(ReadContentRequest {
            file_id: content,
            offset: 0,
            limit: 4096,
        }))
        .await
        .err()
        .map(|e| code_of(&e));
    assert_eq!(err, Some(Some("FILE_ID_INVALID".to_owned())));
    Ok(())
}
