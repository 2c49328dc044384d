//! svc-media through the gateway: chunked upload, dedupe by content hash, ranged download,
//! the owner check, and the error codes of bad parts.

use oxigram_proto::api::v1::{
    CompleteUploadRequest, GetFileRequest, SaveFilePartRequest, media_client::MediaClient,
};
use oxigram_tests::{Mode, System, client::code};
use sqlx::Row;

fn part(file_id: i64, part: i32, bytes: &[u8]) -> SaveFilePartRequest {
    SaveFilePartRequest {
        file_id,
        part,
        bytes: bytes.to_vec().into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_dedupe_and_ranged_download() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let mut alice = system.device().await?;
    alice.sign_up("15556001", "Alice").await?;
    let mut bob = system.device().await?;
    bob.sign_up("15556002", "Bob").await?;
    let mut media = MediaClient::new(alice.channel());

    let first = vec![7u8; 512 * 1024];
    let second = b"the end".to_vec();
    media.save_file_part(part(42, 0, &first)).await?;
    media.save_file_part(part(42, 1, &second)).await?;
    let file = media
        .complete_upload(CompleteUploadRequest {
            file_id: 42,
            parts: 2,
            name: "blob.bin".into(),
        })
        .await?
        .into_inner();
    assert_eq!(file.size, (first.len() + second.len()) as i64);

    let tail = media
        .get_file(GetFileRequest {
            id: file.id,
            offset: first.len() as i64,
            limit: 4096,
        })
        .await?
        .into_inner();
    assert_eq!(
        tail.bytes, second,
        "a ranged read returns exactly the range"
    );
    assert_eq!(tail.size, file.size);

    // The same content uploaded again (by Bob) is stored once, under the same hash.
    let mut bobs = MediaClient::new(bob.channel());
    bobs.save_file_part(part(7, 0, &first)).await?;
    bobs.save_file_part(part(7, 1, &second)).await?;
    let again = bobs
        .complete_upload(CompleteUploadRequest {
            file_id: 7,
            parts: 2,
            name: "copy.bin".into(),
        })
        .await?
        .into_inner();
    assert_eq!(again.sha256, file.sha256);
    assert_ne!(again.id, file.id, "each owner has its own reference");
    let stored: i64 = sqlx::query("SELECT count(*) AS n FROM media.files")
        .fetch_one(&mut system.db().await?)
        .await?
        .try_get("n")?;
    assert_eq!(stored, 1);

    // Bob cannot read Alice's reference.
    let stolen = bobs
        .get_file(GetFileRequest {
            id: file.id,
            offset: 0,
            limit: 4096,
        })
        .await;
    assert_eq!(
        stolen.err().and_then(|s| code(&s)).as_deref(),
        Some("FILE_ID_INVALID")
    );

    // Bad parts.
    let refused_parts = [
        (part(43, 0, &vec![0u8; 512 * 1024 + 1]), "FILE_PART_TOO_BIG"),
        (part(43, -1, b"x"), "FILE_PART_INVALID"),
    ];
    for (request, expected) in refused_parts {
        let refused = media.save_file_part(request).await;
        assert_eq!(
            refused.err().and_then(|s| code(&s)).as_deref(),
            Some(expected)
        );
    }
    media
        .save_file_part(part(43, 1, b"only the second part"))
        .await?;
    let missing = media
        .complete_upload(CompleteUploadRequest {
            file_id: 43,
            parts: 2,
            name: "x".into(),
        })
        .await;
    assert_eq!(
        missing.err().and_then(|s| code(&s)).as_deref(),
        Some("FILE_PART_MISSING")
    );
    Ok(())
}
