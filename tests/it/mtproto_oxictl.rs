//! Stock Telethon and the `oxictl` binary, as people run them, against one system: a Telethon
//! user chats both ways with an oxictl user (found by the username she set with oxictl,
//! through `contacts.resolveUsername`), and one user signed in on both at once gets every
//! message on both, her own from either included.

use std::time::Duration;

use anyhow::Context;
use oxigram_tests::{LOGIN_CODE, System};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

use crate::mtproto::{Telethon, system_with_door};
use crate::oxictl_files::Shell;

/// A running `oxictl watch` and the lines it prints.
struct Watch {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Watch {
    /// Starts `oxictl watch` on `device` and waits until it watches.
    async fn start(sh: &Shell, device: &str) -> anyhow::Result<Self> {
        let mut command =
            tokio::process::Command::from(sh.command(device, &["watch", "--timeout", "240"])?);
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut watch = Self {
            child,
            lines: BufReader::new(stdout).lines(),
        };
        watch
            .line_where(|l| l.starts_with("watching from pts"))
            .await?;
        Ok(watch)
    }

    /// The next line `pick` takes, within 60 s (other lines, such as presence, are passed over).
    async fn line_where(&mut self, pick: impl Fn(&str) -> bool) -> anyhow::Result<String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .context("oxictl watch printed no such line")??
                .context("oxictl watch ended")?;
            if pick(&line) {
                return Ok(line);
            }
        }
    }

    /// The next `n` new messages it prints, each as `show` prints a message.
    async fn new_messages(&mut self, n: usize) -> anyhow::Result<Vec<String>> {
        let mut got = Vec::with_capacity(n);
        while got.len() < n {
            let line = self.line_where(|l| new_message(l).is_some()).await?;
            got.extend(new_message(&line).map(str::to_owned));
        }
        Ok(got)
    }

    /// Stops it, so that the device's next command is the only one saving its state.
    async fn stop(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

/// The message of a line `oxictl watch` prints for a new message (`[pts N] new message …`).
fn new_message(line: &str) -> Option<&str> {
    line.strip_prefix("[pts ")?
        .split_once("] new message ")
        .map(|(_, message)| message)
}

/// What oxictl prints of a message after its id: direction, peer, sender and text.
fn shown(dir: &str, peer: i64, from: i64, text: &str) -> String {
    format!("{dir} peer {peer} from {from}: {text}")
}

/// Whether `line` shows a message as `shown` does (after `#<id> `; the sender's own message,
/// the send it settles, followed by its random_id).
fn shows(line: &str, message: &str) -> bool {
    line.split_once(' ').is_some_and(|(id, rest)| {
        id.starts_with('#')
            && rest
                .strip_prefix(message)
                .is_some_and(|tail| tail.is_empty() || tail.starts_with(" (random_id "))
    })
}

/// oxictl's history with `peer`, as `shown` lines, newest first.
fn history(sh: &Shell, device: &str, peer: i64) -> anyhow::Result<Vec<String>> {
    let printed = sh.ok(device, &["history", "--with", &peer.to_string()])?;
    Ok(printed
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(_, rest)| rest.to_owned()))
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telethon_user_and_an_oxictl_user_chat_both_ways() -> anyhow::Result<()> {
    let (system, key, port) = system_with_door().await?;
    let sh = Shell::new(&system);
    let olga = sh.sign_up("olga", "+15551101", "Olga")?;
    sh.ok("olga", &["username", "set", "olga_oxictl"])?;
    let mut watch = Watch::start(&sh, "olga").await?;

    let mut tom_script = Telethon::spawn(
        &key,
        port,
        "with_oxictl.py",
        &["+15551102", LOGIN_CODE, "olga_oxictl"],
    )?;
    let ready = tom_script.next("it is ready").await?;
    let tom = ready["ready"].as_i64().context("no Telethon user id")?;
    // Telethon found her by the username she set with oxictl; nobody has the other one, which
    // the door answers 400 USERNAME_NOT_OCCUPIED (Telethon's class for that name).
    assert_eq!(ready["peer"].as_i64(), Some(olga));
    assert_eq!(ready["peer_username"], "olga_oxictl");
    assert_eq!(
        ready["unknown"],
        serde_json::json!([400, "UsernameNotOccupiedError"])
    );

    // Telethon → oxictl: her watch prints his message as it comes.
    let from_tom = watch.new_messages(1).await?;
    assert!(
        from_tom
            .iter()
            .all(|m| shows(m, &shown("←", tom, tom, "hello from telethon"))),
        "{from_tom:?}"
    );
    watch.stop().await?;

    // oxictl → Telethon: his event handler gets her answer.
    sh.ok(
        "olga",
        &[
            "send",
            "--to",
            &tom.to_string(),
            "--text",
            "hello from oxictl",
        ],
    )?;
    let seen = tom_script.next("what it saw").await?;
    tom_script.finish().await?;
    assert_eq!(
        seen["got"],
        serde_json::json!([["hello from oxictl", olga]])
    );
    assert_eq!(
        seen["history"],
        serde_json::json!(["hello from oxictl", "hello from telethon"])
    );
    // Both sides see the same chat.
    assert_eq!(
        history(&sh, "olga", tom)?,
        vec![
            shown("→", tom, olga, "hello from oxictl"),
            shown("←", tom, tom, "hello from telethon"),
        ]
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_on_telethon_and_oxictl_at_once_gets_every_message_on_both() -> anyhow::Result<()>
{
    let (system, key, port) = system_with_door().await?;
    // The third user, on a gRPC device of the harness.
    let [sam] = system.users([("15551201", "Sam")]).await?;
    let sam_id = sam.user_id()?;
    // Vera signs up with oxictl, then signs in on Telethon with the same login code.
    let sh = Shell::new(&system);
    let vera = sh.sign_up("vera", "+15551202", "Vera")?;
    let mut watch = Watch::start(&sh, "vera").await?;
    let mut vera_telethon = Telethon::spawn(
        &key,
        port,
        "same_user.py",
        &["+15551202", LOGIN_CODE, "+15551201"],
    )?;
    let ready = vera_telethon.next("it is ready").await?;
    assert_eq!(ready["ready"].as_i64(), Some(vera));
    assert_eq!(ready["peer"].as_i64(), Some(sam_id));
    assert_signed_in_on_both(&system, vera).await?;

    // Sam's messages reach both; what she sends on Telethon reaches oxictl.
    sam.send(vera, 1, "first from sam").await?;
    sam.send(vera, 2, "second from sam").await?;
    let sent = vera_telethon.next("that it sent its message").await?;
    assert!(sent["sent"].as_i64().is_some(), "{sent}");
    let on_oxictl = watch.new_messages(3).await?;
    let expected = [
        shown("←", sam_id, sam_id, "first from sam"),
        shown("←", sam_id, sam_id, "second from sam"),
        shown("→", sam_id, vera, "from vera on telethon"),
    ];
    for (line, message) in on_oxictl.iter().zip(&expected) {
        assert!(shows(line, message), "{on_oxictl:?}");
    }
    watch.stop().await?;

    // What she sends with oxictl reaches Telethon, as her own outgoing message.
    sh.ok(
        "vera",
        &[
            "send",
            "--to",
            &sam_id.to_string(),
            "--text",
            "from vera on oxictl",
        ],
    )?;
    let seen = vera_telethon.next("what it saw").await?;
    vera_telethon.finish().await?;
    assert_eq!(
        seen["incoming"],
        serde_json::json!([["first from sam", sam_id], ["second from sam", sam_id]])
    );
    assert_eq!(
        seen["from_oxictl"],
        serde_json::json!(["from vera on oxictl", true, sam_id])
    );
    let both_ways = [
        "from vera on oxictl",
        "from vera on telethon",
        "second from sam",
        "first from sam",
    ];
    assert_eq!(seen["history"], serde_json::json!(both_ways));
    assert_eq!(
        history(&sh, "vera", sam_id)?,
        vec![
            shown("→", sam_id, vera, "from vera on oxictl"),
            shown("→", sam_id, vera, "from vera on telethon"),
            shown("←", sam_id, sam_id, "second from sam"),
            shown("←", sam_id, sam_id, "first from sam"),
        ]
    );
    Ok(())
}

/// Vera's account has two devices now: the oxictl key and Telethon's MTProto key.
async fn assert_signed_in_on_both(system: &System, vera: i64) -> anyhow::Result<()> {
    let mut grpc = system.device().await?;
    assert_eq!(grpc.sign_in("15551202").await?.id, vera);
    let listed = grpc
        .auth()
        .get_authorizations(oxigram_proto::api::v1::GetAuthorizationsRequest {})
        .await?
        .into_inner()
        .authorizations;
    // The harness device just made, the oxictl key and Telethon's.
    assert_eq!(listed.len(), 3, "{listed:?}");
    grpc.auth()
        .log_out(oxigram_proto::api::v1::LogOutRequest {})
        .await?;
    Ok(())
}
