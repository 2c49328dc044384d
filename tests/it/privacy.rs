//! People and privacy across the services: what a viewer sees of another user's phone,
//! photo and last seen in every call that returns users, for each rule and relationship (the privacy
//! matrix); who finds a user by phone; usernames, profiles and contacts with their
//! refusals; the lookup limit; and each change as an update on the user's other devices.

use std::collections::BTreeMap;

use oxigram_proto::{
    api::v1::{
        BlockRequest, CompleteUploadRequest, GetContactsRequest, GetMessagesRequest,
        GetProfilePhotoRequest, SaveFilePartRequest, SearchRequest, UpdateProfilePhotoRequest,
        UpdateProfileRequest, media_client::MediaClient,
    },
    types::v1::{PrivacyRule, User, privacy_rule, update, user_status},
};
use oxigram_tests::{Mode, System, TestClient, client::code};
use tonic::Status;

/// `Key` and `Value` as numbers, the way requests carry them.
const PHONE: i32 = privacy_rule::Key::PhoneNumber as i32;
const LAST_SEEN: i32 = privacy_rule::Key::LastSeen as i32;
const PHOTO: i32 = privacy_rule::Key::ProfilePhoto as i32;
const FIND_BY_PHONE: i32 = privacy_rule::Key::FindByPhone as i32;
const EVERYBODY: i32 = privacy_rule::Value::Everybody as i32;
const CONTACTS: i32 = privacy_rule::Value::Contacts as i32;
const NOBODY: i32 = privacy_rule::Value::Nobody as i32;

fn err_code<T>(r: Result<T, impl Into<Status>>) -> Option<String> {
    r.err().map(Into::into).as_ref().and_then(code)
}

/// Uploads a small file as `device`'s and makes it her profile photo; its file reference.
async fn set_photo(device: &TestClient) -> anyhow::Result<i64> {
    let mut media = MediaClient::new(device.channel());
    media
        .save_file_part(SaveFilePartRequest {
            file_id: 9,
            part: 0,
            bytes: b"a tiny portrait".to_vec().into(),
        })
        .await?;
    let file = media
        .complete_upload(CompleteUploadRequest {
            file_id: 9,
            parts: 1,
            name: "me.jpg".into(),
        })
        .await?
        .into_inner();
    device
        .users()
        .update_profile_photo(UpdateProfilePhotoRequest { file_id: file.id })
        .await?;
    Ok(file.id)
}

/// Every call of the client API that returns users, made by `viewer`, and how each shows
/// `owner_id`: (call, the user as it came). `owner` sent the viewer one message ("hello
/// viewer"), so history, messages, search, dialogs (the main list, the viewer's filter
/// [`FILTER_ALL`] made by [`make_filter_all`], the peer's) and
/// the difference all name her; a
/// viewer who keeps her as a contact (under her own name) also finds her in her contacts.
async fn every_view(
    viewer: &TestClient,
    owner_id: i64,
    owner_phone: &str,
    owner_username: &str,
) -> anyhow::Result<Vec<(&'static str, Result<User, String>)>> {
    let mut views = views_of_messages(viewer, owner_id, owner_phone, owner_username).await?;
    let contacts = viewer.get_contacts(GetContactsRequest::default()).await?;
    if contacts.count > 0 {
        let pick = contacts.users.iter().find(|u| u.id == owner_id).cloned();
        views.push(("GetContacts", pick.ok_or_else(|| "not a contact".into())));
        let again = viewer.import_contacts(&[(owner_phone, "Olga", "")]).await?;
        let pick = again.users.iter().find(|u| u.id == owner_id).cloned();
        views.push(("ImportContacts", pick.ok_or_else(|| "not found".into())));
    }
    Ok(views)
}

/// The dialog filter each viewer of the matrix makes: every private chat.
const FILTER_ALL: i32 = 2;

/// Makes `viewer`'s filter [`FILTER_ALL`], which [`every_view`] pages through.
async fn make_filter_all(viewer: &TestClient) -> anyhow::Result<()> {
    viewer
        .update_dialog_filter(
            FILTER_ALL,
            Some(oxigram_proto::types::v1::DialogFilter {
                id: FILTER_ALL,
                title: "all".into(),
                contacts: true,
                non_contacts: true,
                ..Default::default()
            }),
        )
        .await?;
    Ok(())
}

async fn views_of_messages(
    viewer: &TestClient,
    owner_id: i64,
    owner_phone: &str,
    owner_username: &str,
) -> anyhow::Result<Vec<(&'static str, Result<User, String>)>> {
    let pick = |users: &[User]| {
        users
            .iter()
            .find(|u| u.id == owner_id)
            .cloned()
            .ok_or_else(|| "not in the answer".to_owned())
    };
    let mut views = vec![];
    let by_phone = viewer.resolve_phone(owner_phone).await;
    views.push(("ResolvePhone", by_phone.map_err(|e| e.code())));
    let by_username = viewer.resolve_username(owner_username).await;
    views.push(("ResolveUsername", by_username.map_err(|e| e.code())));
    let history = viewer
        .get_history(oxigram_proto::api::v1::GetHistoryRequest {
            peer: Some(oxigram_proto::types::v1::InputPeer::user(owner_id)),
            ..Default::default()
        })
        .await?;
    views.push(("GetHistory", pick(&history.users)));
    let ids = history.messages.iter().map(|m| m.id).collect();
    let messages = viewer
        .messages()
        .get_messages(GetMessagesRequest { ids })
        .await?
        .into_inner();
    views.push(("GetMessages", pick(&messages.users)));
    let found = viewer
        .messages()
        .search(SearchRequest {
            q: "hello viewer".into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    views.push(("Search", pick(&found.users)));
    let dialogs = viewer.dialogs_page().await?;
    views.push(("GetDialogs", pick(&dialogs.users)));
    // The viewer's filter of every private chat (`FILTER_ALL`), made before.
    let filtered = viewer
        .get_dialogs(oxigram_proto::types::v1::GetDialogsRequest {
            limit: 100,
            filter_id: FILTER_ALL,
            ..Default::default()
        })
        .await?;
    views.push(("GetDialogs of a filter", pick(&filtered.users)));
    let peer_dialogs = viewer
        .get_peer_dialogs(vec![oxigram_proto::types::v1::InputPeer::user(owner_id)])
        .await?;
    views.push(("GetPeerDialogs", pick(&peer_dialogs.users)));
    let difference = viewer.difference(0).await?;
    views.push(("GetDifference", pick(&difference.users)));
    Ok(views)
}

/// The privacy matrix: for the phone-number, profile-photo and last-seen rules, each value
/// with an exception, what a contact (the owner keeps him), a non-contact, a blocked user,
/// the exception, and a user who keeps the owner as her contact (one way: she gave the
/// phone, so she sees it) see of the owner in every call that returns users. The owner is
/// online throughout (her calls keep her so): whoever her last-seen rule allows sees her
/// online until a time, anyone else "recently", and a user she blocked nothing at all ("a
/// long time ago").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_privacy_matrix() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [olga, carl, sam, ben, eve, cora] = system
        .users([
            ("15557100", "Olga"),
            ("15557101", "Carl"),
            ("15557102", "Sam"),
            ("15557103", "Ben"),
            ("15557104", "Eve"),
            ("15557105", "Cora"),
        ])
        .await?;
    let olga_id = olga.user_id()?;
    olga.update_username("olga_k").await?;
    let photo = set_photo(&olga).await?;
    // Olga keeps Carl and Ben as contacts; she blocked Ben.
    olga.import_contacts(&[("15557101", "Carl", ""), ("+15557103", "Ben", "")])
        .await?;
    olga.messages()
        .block(BlockRequest {
            user_id: ben.user_id()?,
        })
        .await?;
    cora.import_contacts(&[("15557100", "Olga", "")]).await?;
    for (i, viewer) in [&carl, &sam, &ben, &eve, &cora].into_iter().enumerate() {
        olga.send(viewer.user_id()?, 1 + i as i64, "hello viewer")
            .await?;
    }
    for viewer in [&carl, &sam, &ben, &eve, &cora] {
        make_filter_all(viewer).await?;
    }
    let eve_id = eve.user_id()?;
    let viewers = [
        ("contact", &carl),
        ("non-contact", &sam),
        ("blocked", &ben),
        ("exception", &eve),
        ("keeps her", &cora),
    ];
    // (value, its exception: (allow, deny), who sees: contact, non-contact, blocked,
    // exception, keeps her) for the photo; the phone likewise, but whoever keeps her sees it.
    let values = [
        (
            EVERYBODY,
            (vec![], vec![eve_id]),
            [true, true, false, false, true],
        ),
        (
            CONTACTS,
            (vec![eve_id], vec![]),
            [true, false, false, true, false],
        ),
        (
            NOBODY,
            (vec![eve_id], vec![]),
            [false, false, false, true, false],
        ),
    ];
    for key in [PHONE, PHOTO, LAST_SEEN] {
        for (value, (allow, deny), sees) in &values {
            let mut sees = *sees;
            if key == PHONE {
                sees[4] = true;
            }
            let rule = PrivacyRule {
                key,
                value: *value,
                allow_user_ids: allow.clone(),
                deny_user_ids: deny.clone(),
            };
            let set = olga.set_privacy(rule.clone()).await?;
            assert_eq!(set.rule.as_ref(), Some(&rule));
            assert_eq!(olga.get_privacy(key).await?, rule);
            assert_eq!(viewers.len(), sees.len());
            for ((relation, viewer), sees) in viewers.iter().zip(sees) {
                let views = every_view(viewer, olga_id, "15557100", "olga_k").await?;
                let expected_calls = if *relation == "keeps her" { 11 } else { 9 };
                assert_eq!(views.len(), expected_calls, "{relation}");
                for (call, seen) in views {
                    let what = format!("key {key} value {value}, {relation} in {call}");
                    // A blocked viewer does not find her by phone (nor by any rule).
                    if *relation == "blocked" && call == "ResolvePhone" {
                        assert_eq!(seen.err().as_deref(), Some("PHONE_NOT_OCCUPIED"), "{what}");
                        continue;
                    }
                    let seen = seen.map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
                    assert_eq!(
                        (seen.first_name.as_str(), seen.username.as_str()),
                        ("Olga", "olga_k"),
                        "{what}"
                    );
                    if key == PHONE {
                        let phone = if sees { "15557100" } else { "" };
                        assert_eq!(seen.phone, phone, "{what}");
                    } else if key == LAST_SEEN {
                        let status = seen.status.and_then(|s| s.kind);
                        match (*relation, sees) {
                            ("blocked", _) => assert_eq!(status, None, "{what}"),
                            (_, true) => assert!(
                                matches!(status, Some(user_status::Kind::Online(_))),
                                "{what}: {status:?}"
                            ),
                            (_, false) => assert!(
                                matches!(status, Some(user_status::Kind::Recently(_))),
                                "{what}: {status:?}"
                            ),
                        }
                    } else {
                        let photo_id = if sees { photo } else { 0 };
                        assert_eq!(seen.photo_id, photo_id, "{what}");
                    }
                }
                // The photo's bytes follow the same rule.
                if key == PHOTO {
                    let bytes = viewer
                        .users()
                        .get_profile_photo(GetProfilePhotoRequest {
                            user_id: olga_id,
                            offset: 0,
                            limit: 4096,
                        })
                        .await;
                    match sees {
                        true => assert_eq!(bytes?.into_inner().bytes, b"a tiny portrait"[..]),
                        false => assert_eq!(
                            err_code(bytes).as_deref(),
                            Some("PHOTO_INVALID"),
                            "{relation}"
                        ),
                    }
                }
            }
        }
    }
    // The last-seen rule is kept as set, exceptions included.
    let last_seen = PrivacyRule {
        key: LAST_SEEN,
        value: NOBODY,
        allow_user_ids: vec![eve_id],
        deny_user_ids: vec![],
    };
    olga.set_privacy(last_seen.clone()).await?;
    assert_eq!(olga.get_privacy(LAST_SEEN).await?, last_seen);
    // Olga sees all of herself, everywhere.
    let me = olga.get_me().await?;
    assert_eq!((me.phone.as_str(), me.photo_id), ("15557100", photo));
    Ok(())
}

/// Before any rule is set (the defaults), a stranger sees no phone anywhere: the leak that
/// any signed-in user saw every peer's phone is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_nobody_but_her_contacts_sees_her_phone() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [olga, sam, carl] = system
        .users([
            ("15557200", "Olga"),
            ("15557201", "Sam"),
            ("15557202", "Carl"),
        ])
        .await?;
    olga.update_username("olga_d").await?;
    olga.import_contacts(&[("15557202", "Carl", "")]).await?;
    olga.send(sam.user_id()?, 1, "hello viewer").await?;
    olga.send(carl.user_id()?, 2, "hello viewer").await?;
    for (viewer, phone) in [(&sam, ""), (&carl, "15557200")] {
        make_filter_all(viewer).await?;
        for (call, seen) in every_view(viewer, olga.user_id()?, "15557200", "olga_d").await? {
            assert_eq!(seen.map_err(anyhow::Error::msg)?.phone, phone, "{call}");
        }
    }
    // Olga's own answers carry her peers' phones by the same rules.
    let dialogs = olga.dialogs_page().await?;
    let phones: BTreeMap<i64, String> = dialogs
        .users
        .iter()
        .map(|u| (u.id, u.phone.clone()))
        .collect();
    assert_eq!(phones.get(&sam.user_id()?).map(String::as_str), Some(""));
    Ok(())
}

/// FIND_BY_PHONE: a user whose rule refuses the caller is not found by ResolvePhone nor by
/// an import, exactly as a phone nobody has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn who_may_find_her_by_phone() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [olga, carl, sam, eve] = system
        .users([
            ("15557300", "Olga"),
            ("15557301", "Carl"),
            ("15557302", "Sam"),
            ("15557303", "Eve"),
        ])
        .await?;
    olga.import_contacts(&[("15557301", "Carl", "")]).await?;
    let rule = |value, allow: Vec<i64>| PrivacyRule {
        key: FIND_BY_PHONE,
        value,
        allow_user_ids: allow,
        deny_user_ids: vec![],
    };
    // (rule, who finds her: Carl (her contact), Sam, Eve)
    let cases = [
        (rule(EVERYBODY, vec![]), [true, true, true]),
        (rule(CONTACTS, vec![]), [true, false, false]),
        (rule(NOBODY, vec![eve.user_id()?]), [false, false, true]),
    ];
    for (rule, finds) in cases {
        olga.set_privacy(rule.clone()).await?;
        for (viewer, finds) in [&carl, &sam, &eve].into_iter().zip(finds) {
            let resolved = viewer.resolve_phone("+15557300").await;
            let imported = viewer.import_contacts(&[("15557300", "O", "")]).await?;
            if finds {
                assert_eq!(resolved?.id, olga.user_id()?);
                assert_eq!(imported.imported.len(), 1);
            } else {
                assert_eq!(
                    resolved.err().map(|e| e.code()).as_deref(),
                    Some("PHONE_NOT_OCCUPIED"),
                    "value {}",
                    rule.value
                );
                assert_eq!(imported.not_found, ["15557300"]);
                assert!(imported.users.is_empty());
            }
        }
    }
    // A phone nobody has answers the same.
    let nobody = sam.resolve_phone("15557399").await;
    assert_eq!(
        nobody.err().map(|e| e.code()).as_deref(),
        Some("PHONE_NOT_OCCUPIED")
    );
    Ok(())
}

/// The lookups (resolving phones and usernames, each imported phone) share one per-user
/// limit per minute, answered FLOOD_WAIT_X, found or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_are_limited_per_user() -> anyhow::Result<()> {
    let (mut config, dir) = System::config().await?;
    config.gateway.lookups_per_minute = 4;
    let system = System::start_with(config, dir, Mode::OneProcess).await?;
    let [olga, sam, carl] = system
        .users([
            ("15557400", "Olga"),
            ("15557401", "Sam"),
            ("15557402", "Carl"),
        ])
        .await?;
    olga.update_username("olga_l").await?;
    oxigram_tests::avoid_minute_edge().await?;
    sam.resolve_phone("15557400").await?;
    sam.resolve_username("olga_l").await?;
    let unknown = sam.resolve_phone("15557499").await;
    assert_eq!(
        unknown.err().map(|e| e.code()).as_deref(),
        Some("PHONE_NOT_OCCUPIED")
    );
    sam.import_contacts(&[("15557400", "Olga", "")]).await?;
    for (call, refused) in [
        (
            "ResolvePhone",
            err_code(sam.resolve_phone("15557400").await),
        ),
        (
            "ResolveUsername",
            err_code(sam.resolve_username("olga_l").await),
        ),
        (
            "ImportContacts",
            err_code(sam.import_contacts(&[("15557402", "C", "")]).await),
        ),
    ] {
        let refused = refused.unwrap_or_default();
        assert!(refused.starts_with("FLOOD_WAIT_"), "{call}: {refused}");
        let wait: u32 = refused["FLOOD_WAIT_".len()..].parse()?;
        assert!((1..=60).contains(&wait), "{call}: {refused}");
    }
    // An import of more phones than are left is refused whole.
    let many = carl
        .import_contacts(&[
            ("1", "A", ""),
            ("2", "B", ""),
            ("3", "C", ""),
            ("4", "D", ""),
            ("5", "E", ""),
        ])
        .await;
    assert!(
        err_code(many)
            .unwrap_or_default()
            .starts_with("FLOOD_WAIT_")
    );
    // Another user's limit is her own.
    assert_eq!(olga.resolve_username("olga_l").await?.id, olga.user_id()?);
    Ok(())
}

/// Usernames: the rules, uniqueness whatever the case, and what resolves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usernames_and_their_refusals() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [olga, sam] = system
        .users([("15557500", "Olga"), ("15557501", "Sam")])
        .await?;
    let set = olga.update_username("Olga_K1").await?;
    assert_eq!(set.user.map(|u| u.username).as_deref(), Some("Olga_K1"));
    assert_eq!(set.pts_count, 1);
    // Resolved whatever the case, with or without `@`.
    for name in ["olga_k1", "@OLGA_K1", "Olga_K1"] {
        assert_eq!(
            sam.resolve_username(name).await?.id,
            olga.user_id()?,
            "{name}"
        );
    }
    let too_long = "a".repeat(33);
    // (username, code)
    let refusals = [
        ("abcd", "USERNAME_INVALID"),
        (too_long.as_str(), "USERNAME_INVALID"),
        ("1olga", "USERNAME_INVALID"),
        ("olga_", "USERNAME_INVALID"),
        ("ol__ga", "USERNAME_INVALID"),
        ("olga-k", "USERNAME_INVALID"),
        ("olga_k1", "USERNAME_OCCUPIED"),
        ("OLGA_K1", "USERNAME_OCCUPIED"),
        ("ol\0ga", "INPUT_TEXT_INVALID"),
    ];
    for (name, expected) in refusals {
        let refused = sam.update_username(name).await;
        assert_eq!(err_code(refused).as_deref(), Some(expected), "{name:?}");
    }
    let same = olga.update_username("Olga_K1").await;
    assert_eq!(err_code(same).as_deref(), Some("USERNAME_NOT_MODIFIED"));
    // A new case of her own username is hers to take.
    olga.update_username("olga_k1").await?;
    // (lookup, code)
    for (name, expected) in [
        ("nobody_here", "USERNAME_NOT_OCCUPIED"),
        ("ab", "USERNAME_INVALID"),
    ] {
        let refused = sam.resolve_username(name).await;
        assert_eq!(err_code(refused).as_deref(), Some(expected), "{name}");
    }
    // Removed: free for another user, and resolves to nobody.
    olga.update_username("").await?;
    let again = olga.update_username("").await;
    assert_eq!(err_code(again).as_deref(), Some("USERNAME_NOT_MODIFIED"));
    let gone = sam.resolve_username("olga_k1").await;
    assert_eq!(err_code(gone).as_deref(), Some("USERNAME_NOT_OCCUPIED"));
    sam.update_username("olga_k1").await?;
    Ok(())
}

/// Profiles: names and about, each set only when given, with their refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_and_their_refusals() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [olga, sam] = system
        .users([("15557600", "Olga"), ("15557601", "Sam")])
        .await?;
    let changed = olga
        .update_profile(UpdateProfileRequest {
            last_name: Some(" Petrova ".into()),
            about: Some("I make maps".into()),
            ..Default::default()
        })
        .await?;
    let me = changed.user.unwrap_or_default();
    assert_eq!(
        (
            me.first_name.as_str(),
            me.last_name.as_str(),
            me.about.as_str()
        ),
        ("Olga", "Petrova", "I make maps")
    );
    // Nothing changed: no update.
    let same = olga
        .update_profile(UpdateProfileRequest {
            first_name: Some("Olga".into()),
            ..Default::default()
        })
        .await?;
    assert_eq!((same.pts_count, same.pts), (0, changed.pts));
    // (request, code)
    let refusals = [
        (
            UpdateProfileRequest {
                first_name: Some("  ".into()),
                ..Default::default()
            },
            "FIRSTNAME_INVALID",
        ),
        (
            UpdateProfileRequest {
                last_name: Some("x".repeat(65)),
                ..Default::default()
            },
            "LASTNAME_INVALID",
        ),
        (
            UpdateProfileRequest {
                about: Some("x".repeat(71)),
                ..Default::default()
            },
            "ABOUT_TOO_LONG",
        ),
        (
            UpdateProfileRequest {
                about: Some("a\0b".into()),
                ..Default::default()
            },
            "INPUT_TEXT_INVALID",
        ),
    ];
    for (request, expected) in refusals {
        let refused = olga.update_profile(request).await;
        assert_eq!(err_code(refused).as_deref(), Some(expected));
    }
    // Others see the names and the about text.
    let seen = sam.resolve_phone("15557600").await?;
    assert_eq!(
        (seen.last_name.as_str(), seen.about.as_str()),
        ("Petrova", "I make maps")
    );
    // A photo must be one of her own files.
    let foreign = sam
        .users()
        .update_profile_photo(UpdateProfilePhotoRequest { file_id: 123_456 })
        .await;
    assert_eq!(err_code(foreign).as_deref(), Some("FILE_ID_INVALID"));
    // Privacy rules' refusals: (key, value, allow, code)
    let privacy_refusals = [
        (0, EVERYBODY, vec![], "PRIVACY_KEY_INVALID"),
        (9, EVERYBODY, vec![], "PRIVACY_KEY_INVALID"),
        (PHONE, 0, vec![], "PRIVACY_VALUE_INVALID"),
        (PHONE, 7, vec![], "PRIVACY_VALUE_INVALID"),
        (PHONE, NOBODY, vec![0], "USER_ID_INVALID"),
        (PHONE, NOBODY, vec![5; 1001], "LIMIT_INVALID"),
    ];
    for (key, value, allow_user_ids, expected) in privacy_refusals {
        let refused = olga
            .set_privacy(PrivacyRule {
                key,
                value,
                allow_user_ids,
                deny_user_ids: vec![],
            })
            .await;
        assert_eq!(
            err_code(refused).as_deref(),
            Some(expected),
            "{key} {value}"
        );
    }
    assert_eq!(
        err_code(olga.get_privacy(0).await).as_deref(),
        Some("PRIVACY_KEY_INVALID")
    );
    Ok(())
}

/// Contacts: imported by phone under the caller's names, listed by seek with a hash, mutual
/// when both keep each other, deleted; with their refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contacts_import_list_delete() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [olga, carl, sam] = system
        .users([
            ("15557700", "Olga"),
            ("15557701", "Carl"),
            ("15557702", "Sam"),
        ])
        .await?;
    let (carl_id, sam_id) = (carl.user_id()?, sam.user_id()?);
    let imported = olga
        .import_contacts(&[
            ("+15557701", "Carlos", "Brother"),
            ("15557702", "Sam", ""),
            ("15557799", "Nobody", ""),
            ("15557700", "Myself", ""),
        ])
        .await?;
    let ids: Vec<i64> = imported.imported.iter().map(|i| i.user_id).collect();
    assert_eq!(ids, [carl_id, sam_id]);
    assert_eq!(imported.not_found, ["15557799", "15557700"]);
    assert_eq!(imported.pts_count, 2);
    // Her names, the phone she gave, not mutual yet.
    let carl_seen = &imported.users[0];
    assert_eq!(
        (
            carl_seen.first_name.as_str(),
            carl_seen.last_name.as_str(),
            carl_seen.phone.as_str()
        ),
        ("Carlos", "Brother", "15557701")
    );
    assert_eq!((carl_seen.contact, carl_seen.mutual_contact), (true, false));
    // Carl keeps her too: mutual, and he sees her phone (he is her contact).
    carl.import_contacts(&[("15557700", "Olga", "")]).await?;
    let page = olga
        .get_contacts(GetContactsRequest {
            limit: 1,
            ..Default::default()
        })
        .await?;
    assert_eq!((page.count, page.users.len()), (2, 1));
    assert!(page.users[0].mutual_contact);
    let next = olga
        .get_contacts(GetContactsRequest {
            offset_user_id: page.users[0].id,
            limit: 1,
            ..Default::default()
        })
        .await?;
    assert_eq!(
        next.users.iter().map(|u| u.id).collect::<Vec<_>>(),
        [sam_id]
    );
    // The same list: not modified.
    let unchanged = olga
        .get_contacts(GetContactsRequest {
            hash: page.hash,
            ..Default::default()
        })
        .await?;
    assert!(unchanged.not_modified && unchanged.users.is_empty());
    // Renaming changes the list; importing the same names again changes nothing.
    let renamed = olga.import_contacts(&[("15557702", "Samuel", "")]).await?;
    assert_eq!(renamed.pts_count, 1);
    let again = olga.import_contacts(&[("15557702", "Samuel", "")]).await?;
    assert_eq!(again.pts_count, 0);
    let changed = olga
        .get_contacts(GetContactsRequest {
            hash: page.hash,
            ..Default::default()
        })
        .await?;
    assert!(!changed.not_modified);
    assert_eq!(changed.users[1].first_name, "Samuel");
    // Names come back to his own once deleted.
    let deleted = olga.delete_contacts(&[sam_id, 999_999]).await?;
    assert_eq!(deleted.pts_count, 1);
    let sam_now = olga.resolve_phone("15557702").await?;
    assert_eq!(
        (
            sam_now.first_name.as_str(),
            sam_now.contact,
            sam_now.phone.as_str()
        ),
        ("Sam", false, "")
    );
    // Refusals: (what, code)
    let too_many: Vec<(&str, &str, &str)> = vec![("1555", "A", ""); 1001];
    let long = "x".repeat(65);
    let refusals = [
        (
            "1001 imports",
            err_code(olga.import_contacts(&too_many).await),
        ),
        (
            "a name of spaces",
            err_code(olga.import_contacts(&[("15557701", " ", "")]).await),
        ),
        (
            "a long last name",
            err_code(
                olga.import_contacts(&[("15557701", "C", long.as_str())])
                    .await,
            ),
        ),
        ("id 0", err_code(olga.delete_contacts(&[0]).await)),
        (
            "a page of 101",
            err_code(
                olga.get_contacts(GetContactsRequest {
                    limit: 101,
                    ..Default::default()
                })
                .await,
            ),
        ),
        (
            "a negative offset",
            err_code(
                olga.get_contacts(GetContactsRequest {
                    offset_user_id: -1,
                    ..Default::default()
                })
                .await,
            ),
        ),
    ];
    let expected = [
        "LIMIT_INVALID",
        "FIRSTNAME_INVALID",
        "LASTNAME_INVALID",
        "USER_ID_INVALID",
        "LIMIT_INVALID",
        "OFFSET_INVALID",
    ];
    for ((what, got), expected) in refusals.into_iter().zip(expected) {
        assert_eq!(got.as_deref(), Some(expected), "{what}");
    }
    Ok(())
}

/// Profile, username, privacy and contact changes are updates in the user's log: her other
/// device gets them pushed and by getDifference, and its local copy converges on them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_reach_her_other_devices() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let (phone, laptop, olga_id) = system.user_on_two_devices("15557800", "Olga").await?;
    let [carl] = system.users([("15557801", "Carl")]).await?;
    let mut live = laptop.stream(0).await?;
    let named = phone.update_username("olga_m").await?;
    assert!(named.pts > 0 && named.pts_count == 1);
    let rule = PrivacyRule {
        key: PHONE,
        value: NOBODY,
        allow_user_ids: vec![carl.user_id()?],
        deny_user_ids: vec![],
    };
    phone.set_privacy(rule.clone()).await?;
    phone.import_contacts(&[("15557801", "Carl", "C.")]).await?;
    phone.delete_contacts(&[carl.user_id()?]).await?;
    // Pushed, each once; pushes of one account may overtake each other, so they are put in
    // pts order as a client's sequencer does.
    let mut pushed = vec![];
    for _ in 0..4 {
        pushed.push(oxigram_tests::client::next_update(&mut live).await?);
    }
    pushed.sort_by_key(|u| u.pts);
    let kinds: Vec<_> = pushed
        .into_iter()
        .map(|u| u.update.and_then(|u| u.kind))
        .collect();
    assert!(
        matches!(&kinds[0], Some(update::Kind::Profile(p)) if p.user.as_ref().is_some_and(|u| u.username == "olga_m" && u.id == olga_id))
    );
    assert!(matches!(&kinds[1], Some(update::Kind::Privacy(p)) if p.rule.as_ref() == Some(&rule)));
    assert!(
        matches!(&kinds[2], Some(update::Kind::Contact(c)) if c.first_name == "Carl" && !c.deleted)
    );
    assert!(matches!(&kinds[3], Some(update::Kind::Contact(c)) if c.deleted));
    // By getDifference, into the client's local copy.
    let mut mirror = oxigram_client::Mirror::new();
    let (slices, _) = laptop.full_difference(0).await?;
    for slice in &slices {
        for u in &slice.updates {
            mirror.apply(u);
        }
    }
    assert_eq!(
        mirror.profile().map(|u| u.username.as_str()),
        Some("olga_m")
    );
    assert_eq!(mirror.privacy().get(&PHONE), Some(&rule));
    assert!(mirror.contacts().is_empty());
    // The device that made a change has its pts in the answer: no gap.
    assert_eq!(phone.get_state().await?.pts, named.pts + 3);
    Ok(())
}

/// Follows `stream` into `mirror` until it has applied `pts` (a too-long gap reloads the
/// copy from the server, as an application does); how many times it reloaded.
async fn follow_to(
    stream: &mut oxigram_client::UpdateStream,
    mirror: &mut oxigram_client::Mirror,
    client: &oxigram_client::Client,
    pts: i32,
) -> anyhow::Result<u32> {
    let mut reloads = 0;
    use oxigram_client::Event;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while stream.state().pts < pts {
        let event = tokio::time::timeout_at(deadline, stream.next()).await?;
        match event {
            Event::Update(applied) => mirror.apply(&applied.update),
            Event::TooLong { .. } => {
                mirror.reload(client).await?;
                reloads += 1;
            }
            Event::Gap { .. }
            | Event::Resumed { .. }
            | Event::Paced { .. }
            | Event::Failed { .. }
            | Event::Typing(_)
            | Event::Status(_)
            | Event::User(_) => {}
        }
    }
    Ok(reloads)
}

/// What a copy holds of the account's people settings.
fn people_of(mirror: &oxigram_client::Mirror) -> (Option<User>, String, String) {
    (
        mirror.profile().cloned(),
        format!("{:?}", mirror.privacy()),
        format!("{:?}", mirror.contacts()),
    )
}

/// Three devices of one user converge on her profile, privacy rules and contacts through the
/// client library: one makes the changes; one follows its live stream, cut and reopened from
/// its saved state every few changes (once so far behind that the log no longer holds what it
/// missed: `too_long`, and it reloads); one was offline throughout and catches up at the end.
/// Every copy then equals a fresh load from the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_converge_on_three_devices_under_cut_streams() -> anyhow::Result<()> {
    use oxigram_client::{Mirror, StreamOptions, UpdateStream};

    let (mut config, dir) = System::config().await?;
    config.updates.retain_per_user = 6;
    let system = System::start_with(config, dir, Mode::OneProcess).await?;
    let ([maker, follower, sleeper], _) = system.user_on_devices::<3>("15557900", "Olga").await?;
    let others = system
        .users([
            ("15557901", "Carl"),
            ("15557902", "Sam"),
            ("15557903", "Eve"),
        ])
        .await?;
    let ids: Vec<i64> = others
        .iter()
        .map(|o| o.user_id())
        .collect::<Result<_, _>>()?;
    let options = StreamOptions {
        gap_wait: std::time::Duration::ZERO,
        ..StreamOptions::default()
    };
    let follower_client: oxigram_client::Client = (*follower).clone();
    let mut follower_mirror = Mirror::new();
    let mut stream = UpdateStream::open(
        follower_client.clone(),
        follower.get_state().await?.into(),
        options,
    )
    .await?;
    let rule = |key, value, allow: Vec<i64>| PrivacyRule {
        key,
        value,
        allow_user_ids: allow,
        deny_user_ids: vec![],
    };
    // Each change, and the pts it moved the maker's log to.
    let mut last_pts = 0;
    let mut reloads = 0;
    for step in 0..16 {
        let pts = match step {
            0 => maker.update_username("olga_c").await?.pts,
            1 => {
                let names = UpdateProfileRequest {
                    last_name: Some("Cole".into()),
                    about: Some("hello".into()),
                    ..Default::default()
                };
                maker.update_profile(names).await?.pts
            }
            2 => {
                maker
                    .set_privacy(rule(PHONE, NOBODY, vec![ids[0]]))
                    .await?
                    .pts
            }
            3 => {
                maker
                    .set_privacy(rule(LAST_SEEN, CONTACTS, vec![]))
                    .await?
                    .pts
            }
            4 => {
                maker
                    .set_privacy(rule(PHOTO, CONTACTS, vec![ids[2]]))
                    .await?
                    .pts
            }
            5 => {
                maker
                    .set_privacy(rule(FIND_BY_PHONE, EVERYBODY, vec![]))
                    .await?
                    .pts
            }
            6 => {
                maker
                    .import_contacts(&[
                        ("15557901", "Carl", ""),
                        ("15557902", "Sam", "S"),
                        ("15557903", "Eve", ""),
                    ])
                    .await?
                    .pts
            }
            7 => {
                maker
                    .import_contacts(&[("15557902", "Samuel", "")])
                    .await?
                    .pts
            }
            8 => maker.delete_contacts(&[ids[2]]).await?.pts,
            9 => maker.update_username("olga_cole").await?.pts,
            10 => maker.set_privacy(rule(PHONE, CONTACTS, vec![])).await?.pts,
            11 => {
                let about = UpdateProfileRequest {
                    about: Some("back soon".into()),
                    ..Default::default()
                };
                maker.update_profile(about).await?.pts
            }
            12 => {
                maker
                    .import_contacts(&[("15557903", "Evie", "")])
                    .await?
                    .pts
            }
            13 => {
                maker
                    .set_privacy(rule(LAST_SEEN, NOBODY, vec![ids[1]]))
                    .await?
                    .pts
            }
            14 => maker.delete_contacts(&[ids[0]]).await?.pts,
            _ => maker.update_username("olga_final").await?.pts,
        };
        anyhow::ensure!(pts > last_pts, "step {step}: pts {pts} after {last_pts}");
        last_pts = pts;
        match step {
            // Cut: the stream is dropped and reopened from the state the copy reached.
            3 | 9 => {
                let state = stream.state();
                drop(stream);
                stream = UpdateStream::open(follower_client.clone(), state, options).await?;
            }
            // Cut and stay away while the maker goes on, beyond what the log retains.
            5 => {
                let state = stream.state();
                drop(stream);
                for extra in 0..8 {
                    let names = UpdateProfileRequest {
                        first_name: Some(format!("Olga{extra}")),
                        ..Default::default()
                    };
                    last_pts = maker.update_profile(names).await?.pts;
                }
                stream = UpdateStream::open(follower_client.clone(), state, options).await?;
            }
            _ => {}
        }
        reloads += follow_to(
            &mut stream,
            &mut follower_mirror,
            &follower_client,
            last_pts,
        )
        .await?;
    }
    assert_eq!(reloads, 1, "the long cut outlived the retained log");
    // The sleeper comes online long after: its whole log is no longer retained.
    let sleeper_client: oxigram_client::Client = (*sleeper).clone();
    let mut sleeper_mirror = Mirror::new();
    let old = sleeper.difference(0).await?;
    assert!(old.too_long, "the log retains only the last updates");
    sleeper_mirror.reload(&sleeper_client).await?;
    let truth = Mirror::load(&maker).await?;
    assert_eq!(
        truth
            .profile()
            .map(|u| (u.username.as_str(), u.about.as_str())),
        Some(("olga_final", "back soon"))
    );
    assert_eq!(truth.contacts().len(), 2);
    for (device, mirror) in [("follower", &follower_mirror), ("sleeper", &sleeper_mirror)] {
        assert_eq!(people_of(mirror), people_of(&truth), "{device}");
    }
    Ok(())
}

/// The next profile push of `user_id` on a stream, within `within` (`None` when none came).
async fn next_user(
    stream: &mut oxigram_client::UpdateStream,
    user_id: i64,
    within: std::time::Duration,
) -> Option<User> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) => return None,
            Ok(oxigram_client::Event::User(u)) if u.id == user_id => return Some(u),
            Ok(_) => {}
        }
    }
}

/// A profile change reaches at once, as a transient push, the online users who show her:
/// whom she keeps as a contact, who keeps her (under his own names for her), the peers of her
/// dialogs; a stranger hears nothing. The contacts hash of whoever keeps her moves with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_change_reaches_her_contacts_and_peers_online() -> anyhow::Result<()> {
    use oxigram_client::{StreamOptions, UpdateStream};
    use std::time::Duration;
    let system = System::start(Mode::OneProcess).await?;
    let [olga, carl, cora, sam, eve] = system
        .users([
            ("15557200", "Olga"),
            ("15557201", "Carl"),
            ("15557202", "Cora"),
            ("15557203", "Sam"),
            ("15557204", "Eve"),
        ])
        .await?;
    let olga_id = olga.user_id()?;
    olga.import_contacts(&[("15557201", "Carl", "")]).await?;
    cora.import_contacts(&[("15557200", "Auntie", "O")]).await?;
    sam.send(olga_id, 1, "hello Olga").await?;
    oxigram_tests::eventually(Duration::from_secs(10), "Olga's dialog", || async {
        Ok((!olga.dialogs_page().await?.dialogs.is_empty()).then_some(()))
    })
    .await?;
    let before = cora.get_contacts(GetContactsRequest::default()).await?;
    let mut streams = Vec::new();
    for viewer in [&carl, &cora, &sam, &eve] {
        let state = viewer.get_state().await?.into();
        streams
            .push(UpdateStream::open((**viewer).clone(), state, StreamOptions::default()).await?);
    }
    // The streams' routes are written as they open.
    tokio::time::sleep(Duration::from_millis(300)).await;

    olga.update_username("olga_new").await?;
    let mut seen = Vec::new();
    for (who, stream) in ["Carl", "Cora", "Sam"].iter().zip(&mut streams) {
        let user = next_user(stream, olga_id, Duration::from_secs(5)).await;
        let user = user.ok_or_else(|| anyhow::anyhow!("{who} heard nothing"))?;
        seen.push((
            user.first_name,
            user.username,
            user.phone,
            user.status.is_none(),
        ));
    }
    // Each as he may see her: Carl, whom she keeps, and Cora, who gave her phone, see it (her
    // phone rule is the default, contacts); Cora sees her own names for her.
    let olga_as = |first: &str, phone: &str| {
        (
            first.to_owned(),
            "olga_new".to_owned(),
            phone.to_owned(),
            true,
        )
    };
    assert_eq!(
        seen,
        [
            olga_as("Olga", "15557200"),
            olga_as("Auntie", "15557200"),
            olga_as("Olga", "")
        ]
    );
    assert!(
        next_user(&mut streams[3], olga_id, Duration::from_millis(500))
            .await
            .is_none(),
        "Eve shows nothing of her"
    );

    // Cora's list moved: her old hash gets the list again, with the new username.
    let again = cora
        .get_contacts(GetContactsRequest {
            hash: before.hash,
            ..Default::default()
        })
        .await?;
    assert!(!again.not_modified, "the hash moved");
    assert_ne!(again.hash, before.hash);
    assert_eq!(
        again.users.first().map(|u| u.username.as_str()),
        Some("olga_new")
    );
    let same = cora
        .get_contacts(GetContactsRequest {
            hash: again.hash,
            ..Default::default()
        })
        .await?;
    assert!(same.not_modified);
    Ok(())
}

/// A burst of profile changes reaches an online viewer as few pushes, the last with the
/// latest state: the first change goes out at once, the rest of the burst in one more push at
/// the end of the coalescing window. Without coalescing each change would be a push.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_profile_changes_reaches_a_viewer_as_few_pushes() -> anyhow::Result<()> {
    use oxigram_client::{StreamOptions, UpdateStream};
    use std::time::Duration;
    let system = System::start(Mode::OneProcess).await?;
    let [olga, carl] = system
        .users([("15557300", "Olga"), ("15557301", "Carl")])
        .await?;
    let olga_id = olga.user_id()?;
    olga.import_contacts(&[("15557301", "Carl", "")]).await?;
    let state = carl.get_state().await?.into();
    let mut stream = UpdateStream::open((*carl).clone(), state, StreamOptions::default()).await?;
    // The stream's route is written as it opens.
    tokio::time::sleep(Duration::from_millis(300)).await;

    const CHANGES: usize = 10;
    // The gateway's coalescing window for profile pushes.
    const WINDOW: Duration = Duration::from_secs(1);
    let burst_started = std::time::Instant::now();
    for i in 0..CHANGES {
        olga.update_username(&format!("olga_burst_{i}")).await?;
    }
    let burst = burst_started.elapsed();
    let last = format!("olga_burst_{}", CHANGES - 1);
    // Every push of the burst arrives within the coalescing window and a margin.
    let mut pushes = Vec::new();
    while let Some(user) = next_user(&mut stream, olga_id, Duration::from_secs(3)).await {
        pushes.push(user.username);
    }
    // The first change at once, then at most one push a window while the burst lasts (one
    // more in all on a quiet machine, where ten changes take well under a window), and the
    // last at its end: always fewer than the changes.
    let most = (2 + (burst.as_secs_f64() / WINDOW.as_secs_f64()) as usize).min(CHANGES - 1);
    assert!(
        (1..=most).contains(&pushes.len()),
        "{CHANGES} changes in {burst:?} made {} pushes: {pushes:?}",
        pushes.len()
    );
    assert_eq!(pushes.last(), Some(&last), "the latest state wins");
    // A change after the window has passed goes out at once again.
    olga.update_username("olga_after").await?;
    let user = next_user(&mut stream, olga_id, Duration::from_millis(800)).await;
    assert_eq!(
        user.map(|u| u.username).as_deref(),
        Some("olga_after"),
        "a change after a quiet window is pushed at once"
    );
    Ok(())
}

/// The contacts list's hash follows what the viewer may see of each contact, not only the
/// list and the contacts' profiles: a contact's privacy rule that changes what she sees (his
/// photo, his last seen), his keeping her as a contact and his blocking her each move it, so a
/// client's cached list is not served stale; a rule no contact list shows leaves it alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contacts_hash_follows_what_she_may_see_of_them() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [olga, cora] = system
        .users([("15557400", "Olga"), ("15557401", "Cora")])
        .await?;
    let (olga_id, cora_id) = (olga.user_id()?, cora.user_id()?);
    let photo = set_photo(&olga).await?;
    cora.import_contacts(&[("15557400", "Olga", "")]).await?;
    let list = |hash: i64| {
        let cora = &cora;
        async move {
            cora.get_contacts(GetContactsRequest {
                hash,
                ..Default::default()
            })
            .await
        }
    };
    let first = list(0).await?;
    let olga_in =
        |l: &oxigram_proto::api::v1::ContactList| l.users.iter().find(|u| u.id == olga_id).cloned();
    let seen = olga_in(&first).ok_or_else(|| anyhow::anyhow!("Olga listed"))?;
    assert_eq!((seen.photo_id, seen.mutual_contact), (photo, false));
    assert!(list(first.hash).await?.not_modified);

    // Each change, and what Cora then sees of Olga in the list her old hash gets again.
    let mut hash = first.hash;
    let rule = |key, value| PrivacyRule {
        key,
        value,
        allow_user_ids: vec![],
        deny_user_ids: vec![],
    };
    // Not a contact list's: her hash stays.
    olga.set_privacy(rule(FIND_BY_PHONE, NOBODY)).await?;
    assert!(list(hash).await?.not_modified, "a find-by-phone rule");

    olga.set_privacy(rule(PHOTO, NOBODY)).await?;
    let after = list(hash).await?;
    assert!(!after.not_modified, "the photo hidden");
    assert_ne!(after.hash, hash);
    assert_eq!(olga_in(&after).map(|u| u.photo_id), Some(0));
    hash = after.hash;
    assert!(list(hash).await?.not_modified);

    olga.set_privacy(rule(LAST_SEEN, NOBODY)).await?;
    let after = list(hash).await?;
    assert!(!after.not_modified, "the last seen hidden");
    hash = after.hash;

    // Olga keeps Cora: a mutual contact now, and the photo rule's contacts see it.
    olga.set_privacy(rule(PHOTO, CONTACTS)).await?;
    let after = list(hash).await?;
    assert!(!after.not_modified, "the photo for her contacts");
    hash = after.hash;
    assert_eq!(olga_in(&after).map(|u| u.photo_id), Some(0));
    olga.import_contacts(&[("15557401", "Cora", "")]).await?;
    let after = list(hash).await?;
    assert!(!after.not_modified, "kept by her");
    let seen = olga_in(&after).ok_or_else(|| anyhow::anyhow!("Olga listed"))?;
    assert_eq!((seen.photo_id, seen.mutual_contact), (photo, true));
    hash = after.hash;

    // Olga blocks Cora: nothing private of hers any more.
    olga.messages()
        .block(BlockRequest { user_id: cora_id })
        .await?;
    let after = list(hash).await?;
    assert!(!after.not_modified, "blocked by her");
    assert_eq!(olga_in(&after).map(|u| u.photo_id), Some(0));
    assert!(list(after.hash).await?.not_modified);
    Ok(())
}
