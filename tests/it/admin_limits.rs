//! The operator's run-time limits and ban list (`oxigram.admin.v1.LimitsAdmin`) across two
//! gateway instances on one database: a limit overridden or a user banned through one
//! instance is in force on the other within its reload period, a banned user's streams end
//! and her calls are refused until the ban is lifted, and bad admin calls get their codes.

use std::time::{Duration, Instant};

use oxigram_errors::code_of;
use oxigram_proto::admin::v1::{
    BanRequest, ClearLimitRequest, ListBansRequest, ListLimitsRequest, SetLimitRequest,
    UnbanRequest, limits_admin_client::LimitsAdminClient,
};
use oxigram_tests::{Mode, System, eventually};
use tonic::{Request, Status, transport::Channel};

const TOKEN: &str = "operator-secret";
/// How often each gateway reloads the rules in this test.
const RELOAD_MS: u64 = 200;
/// What "within seconds" means here: well past a reload, far below a limit's period.
const IN_FORCE_WITHIN: Duration = Duration::from_secs(5);

fn admin<T>(body: T, token: &str) -> Request<T> {
    let mut request = Request::new(body);
    if let Ok(value) = format!("Bearer {token}").parse() {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

async fn admin_client(endpoint: &str) -> anyhow::Result<LimitsAdminClient<Channel>> {
    Ok(LimitsAdminClient::connect(endpoint.to_owned()).await?)
}

fn code<T: std::fmt::Debug>(answer: Result<T, Status>) -> String {
    match answer {
        Ok(ok) => format!("OK {ok:?}"),
        Err(status) => code_of(&status).unwrap_or_else(|| format!("{status:?}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_bans_set_on_one_gateway_hold_on_every_gateway() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    config.admin.token = TOKEN.into();
    config.limits.reload_ms = RELOAD_MS;
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    let other = system.start_extra_gateway().await?;
    let mut on_a = admin_client(&system.gateway()).await?;
    let mut on_b = admin_client(&other.endpoint).await?;

    let mut alice = oxigram_tests::TestClient::new(&other.endpoint).await?;
    alice.sign_up("15559301", "Alice").await?;
    let mut bob = oxigram_tests::TestClient::new(&other.endpoint).await?;
    bob.sign_up("15559302", "Bob").await?;
    let bob_id = bob.user_id()?;
    let mut bob_on_a = system.device().await?;
    bob_on_a.sign_in("15559302").await?;

    // Every rule is listed with its configured limit, none overridden.
    let listed = on_a.list_limits(admin(ListLimitsRequest {}, TOKEN)).await?;
    let difference = listed
        .get_ref()
        .rules
        .iter()
        .find(|r| r.rule == "difference_device")
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no difference_device rule: {listed:?}"))?;
    assert_eq!((difference.limit, difference.overridden), (100_000, false));
    assert!(
        listed
            .get_ref()
            .rules
            .iter()
            .any(|r| r.rule == "upload_part_user"),
        "uploads are limited too"
    );

    // One getDifference a minute per device, set through gateway A: alice's calls through
    // gateway B are refused once B has reloaded.
    alice.difference(0).await?;
    let set_at = Instant::now();
    let set = on_a
        .set_limit(admin(
            SetLimitRequest {
                rule: "difference_device".into(),
                limit: 1,
                period_secs: 0,
            },
            TOKEN,
        ))
        .await?;
    let now = set
        .get_ref()
        .rules
        .iter()
        .find(|r| r.rule == "difference_device")
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no difference_device rule"))?;
    assert_eq!(
        (
            now.limit,
            now.period_secs,
            now.overridden,
            now.configured_limit
        ),
        (1, 60, true, 100_000)
    );
    eventually(
        IN_FORCE_WITHIN,
        "gateway B to enforce the override",
        || async {
            Ok(code(alice.difference(0).await)
                .starts_with("FLOOD_WAIT_")
                .then_some(()))
        },
    )
    .await?;
    assert!(set_at.elapsed() < IN_FORCE_WITHIN);
    on_b.clear_limit(admin(
        ClearLimitRequest {
            rule: "difference_device".into(),
        },
        TOKEN,
    ))
    .await?;

    // A limit of 0 refuses every call of its rule on every instance.
    on_b.set_limit(admin(
        SetLimitRequest {
            rule: "send".into(),
            limit: 0,
            period_secs: 30,
        },
        TOKEN,
    ))
    .await?;
    eventually(
        IN_FORCE_WITHIN,
        "gateway A to refuse every send",
        || async {
            let sent = bob_on_a.send(alice.user_id()?, 7_001, "hi").await;
            Ok(match sent {
                Err(status) if code_of(&status).as_deref() == Some("FLOOD_WAIT_30") => Some(()),
                Err(status) if code_of(&status).is_some_and(|c| c.starts_with("FLOOD_WAIT_")) => {
                    anyhow::bail!("waits the wrong time: {status:?}")
                }
                _ => None,
            })
        },
    )
    .await?;
    on_a.clear_limit(admin(
        ClearLimitRequest {
            rule: "send".into(),
        },
        TOKEN,
    ))
    .await?;
    // Cleared: sends go through again on both (a random_id not used before).
    eventually(IN_FORCE_WITHIN, "sends to be let through again", || async {
        Ok(alice.send(bob_id, 7_002, "back").await.ok())
    })
    .await?;

    // Bob is banned through gateway A: his stream on gateway B ends and his calls there and
    // on A are refused; alice goes on.
    let mut bob_stream = bob.stream(0).await?;
    let banned = on_a
        .ban(admin(
            BanRequest {
                user_id: bob_id,
                reason: "spam".into(),
            },
            TOKEN,
        ))
        .await?;
    assert!(banned.get_ref().changed);
    assert_eq!(code(bob_on_a.difference(0).await), "USER_DEACTIVATED_BAN");
    let ended = tokio::time::timeout(IN_FORCE_WITHIN, async {
        loop {
            match bob_stream.message().await {
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => return,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "bob's stream on gateway B did not end");
    assert_eq!(code(bob.difference(0).await), "USER_DEACTIVATED_BAN");
    assert_eq!(code(bob.stream(0).await), "USER_DEACTIVATED_BAN");
    // Signing in again does not get round it.
    let mut again = system.device().await?;
    let refused = again.sign_in("15559302").await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| format!("{e:#}").contains("USER_DEACTIVATED_BAN")),
        "sign-in of a banned user: {refused:?}"
    );
    alice.difference(0).await?;
    let bans = on_b
        .list_bans(admin(ListBansRequest::default(), TOKEN))
        .await?;
    let listed: Vec<(i64, &str)> = bans
        .get_ref()
        .bans
        .iter()
        .map(|b| (b.user_id, b.reason.as_str()))
        .collect();
    assert_eq!(listed, vec![(bob_id, "spam")]);
    assert_eq!(bans.get_ref().next_after_user_id, 0);

    // Lifted through gateway B: gateway A lets him in again within its reload period.
    let lifted = on_b
        .unban(admin(UnbanRequest { user_id: bob_id }, TOKEN))
        .await?;
    assert!(lifted.get_ref().changed);
    eventually(IN_FORCE_WITHIN, "gateway A to lift the ban", || async {
        Ok(bob_on_a.difference(0).await.ok())
    })
    .await?;
    let lifted = on_b
        .unban(admin(UnbanRequest { user_id: bob_id }, TOKEN))
        .await?;
    assert!(!lifted.get_ref().changed, "not banned any more");
    other.stop();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_admin_calls_get_their_codes() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    config.admin.token = TOKEN.into();
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    let mut admin_api = admin_client(&system.gateway()).await?;
    let set = |rule: &str, limit, period_secs| SetLimitRequest {
        rule: rule.into(),
        limit,
        period_secs,
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "unknown rule",
            code(admin_api.set_limit(admin(set("nope", 1, 60), TOKEN)).await),
            "LIMIT_RULE_INVALID",
        ),
        (
            "period over a day",
            code(
                admin_api
                    .set_limit(admin(set("send", 1, 86_401), TOKEN))
                    .await,
            ),
            "LIMIT_RULE_INVALID",
        ),
        (
            "clear of an unknown rule",
            code(
                admin_api
                    .clear_limit(admin(ClearLimitRequest { rule: "x".into() }, TOKEN))
                    .await,
            ),
            "LIMIT_RULE_INVALID",
        ),
        (
            "NUL in a rule",
            code(
                admin_api
                    .set_limit(admin(set("se\0nd", 1, 60), TOKEN))
                    .await,
            ),
            "INPUT_TEXT_INVALID",
        ),
        (
            "ban of user 0",
            code(
                admin_api
                    .ban(admin(
                        BanRequest {
                            user_id: 0,
                            reason: String::new(),
                        },
                        TOKEN,
                    ))
                    .await,
            ),
            "USER_ID_INVALID",
        ),
        (
            "ban reason too long",
            code(
                admin_api
                    .ban(admin(
                        BanRequest {
                            user_id: 5,
                            reason: "x".repeat(257),
                        },
                        TOKEN,
                    ))
                    .await,
            ),
            "INPUT_TEXT_INVALID",
        ),
        (
            "unban of a negative id",
            code(
                admin_api
                    .unban(admin(UnbanRequest { user_id: -1 }, TOKEN))
                    .await,
            ),
            "USER_ID_INVALID",
        ),
        (
            "bans page too big",
            code(
                admin_api
                    .list_bans(admin(
                        ListBansRequest {
                            after_user_id: 0,
                            limit: 1001,
                        },
                        TOKEN,
                    ))
                    .await,
            ),
            "LIMIT_INVALID",
        ),
        (
            "bans after a negative id",
            code(
                admin_api
                    .list_bans(admin(
                        ListBansRequest {
                            after_user_id: -5,
                            limit: 0,
                        },
                        TOKEN,
                    ))
                    .await,
            ),
            "OFFSET_INVALID",
        ),
        (
            "wrong token",
            code(
                admin_api
                    .list_limits(admin(ListLimitsRequest {}, "guess"))
                    .await,
            ),
            "ADMIN_TOKEN_INVALID",
        ),
        (
            "no token",
            code(
                admin_api
                    .list_limits(Request::new(ListLimitsRequest {}))
                    .await,
            ),
            "ADMIN_TOKEN_INVALID",
        ),
        (
            "ban with a wrong token",
            code(
                admin_api
                    .ban(admin(
                        BanRequest {
                            user_id: 5,
                            reason: String::new(),
                        },
                        "guess",
                    ))
                    .await,
            ),
            "ADMIN_TOKEN_INVALID",
        ),
    ];
    for (case, got, want) in &cases {
        assert_eq!(got, want, "{case}");
    }
    // Nothing was changed by the refused calls.
    let bans = admin_api
        .list_bans(admin(ListBansRequest::default(), TOKEN))
        .await?;
    assert!(bans.get_ref().bans.is_empty());
    let limits = admin_api
        .list_limits(admin(ListLimitsRequest {}, TOKEN))
        .await?;
    assert!(limits.get_ref().rules.iter().all(|r| !r.overridden));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_there_is_no_limits_admin() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let mut admin_api = admin_client(&system.gateway()).await?;
    let answer = admin_api.list_limits(admin(ListLimitsRequest {}, "")).await;
    assert!(
        answer
            .as_ref()
            .is_err_and(|s| s.code() == tonic::Code::Unimplemented),
        "{answer:?}"
    );
    Ok(())
}
