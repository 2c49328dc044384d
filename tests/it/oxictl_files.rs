//! `oxictl send-file` and `oxictl download` run as a person runs them, against a started
//! system: a multi-part file goes from Alice to Bob byte for byte, a third user is refused,
//! the same file sent again goes up instantly (by its SHA-256), and bad input exits non-zero
//! with a clear message.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use oxigram_tests::{LOGIN_CODE, Mode, System, oxictl_command};
use rand::{RngCore, SeedableRng};

/// The devices' files of one test, and the gateway they talk to.
pub(crate) struct Shell {
    gateway: String,
    state_dir: PathBuf,
    /// Where oxictl runs: where a download without `-o` lands.
    cwd: PathBuf,
}

impl Shell {
    pub(crate) fn new(system: &System) -> Self {
        Self {
            gateway: system.gateway(),
            state_dir: system.dir.join("oxictl"),
            cwd: system.dir.clone(),
        }
    }

    /// `oxictl --device <device> <args…>`, to run.
    pub(crate) fn command(&self, device: &str, args: &[&str]) -> anyhow::Result<Command> {
        let mut command = oxictl_command()?;
        command
            .current_dir(&self.cwd)
            .arg("--gateway")
            .arg(&self.gateway)
            .arg("--state-dir")
            .arg(&self.state_dir)
            .args(["--device", device])
            .args(args);
        Ok(command)
    }

    /// Runs `oxictl --device <device> <args…>`.
    fn run(&self, device: &str, args: &[&str]) -> anyhow::Result<Output> {
        Ok(self.command(device, args)?.output()?)
    }

    /// The same, which must succeed: its stdout.
    pub(crate) fn ok(&self, device: &str, args: &[&str]) -> anyhow::Result<String> {
        let output = self.run(device, args)?;
        anyhow::ensure!(
            output.status.success(),
            "oxictl {args:?} failed: {}",
            text(&output.stderr)
        );
        Ok(text(&output.stdout))
    }

    /// The same, which must fail: its stderr.
    fn fails(&self, device: &str, args: &[&str]) -> anyhow::Result<String> {
        let output = self.run(device, args)?;
        anyhow::ensure!(
            !output.status.success(),
            "oxictl {args:?} succeeded: {}",
            text(&output.stdout)
        );
        Ok(text(&output.stderr))
    }

    /// A new device signed up as a user with this phone (or signed in, when the phone has an
    /// account): the user's id.
    pub(crate) fn sign_up(&self, device: &str, phone: &str, name: &str) -> anyhow::Result<i64> {
        self.ok(device, &["keygen"])?;
        let signed = self.ok(
            device,
            &[
                "login", "--phone", phone, "--code", LOGIN_CODE, "--name", name,
            ],
        )?;
        signed
            .lines()
            .find_map(|l| l.strip_prefix("signed in as user "))
            .and_then(|rest| rest.split(' ').next())
            .and_then(|id| id.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("no user id in {signed:?}"))
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The message id of oxictl's first line starting `prefix #<id>`.
fn message_id(stdout: &str, prefix: &str) -> anyhow::Result<String> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| rest.strip_prefix('#'))
        .and_then(|rest| rest.split(' ').next())
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no {prefix:?} line with a message id in {stdout:?}"))
}

fn write_random(path: &Path, len: usize, seed: u64) -> anyhow::Result<Vec<u8>> {
    let mut bytes = vec![0u8; len];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut bytes);
    std::fs::write(path, &bytes)?;
    Ok(bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_goes_from_alice_to_bob_through_oxictl() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let sh = Shell::new(&system);
    sh.sign_up("alice", "+15558001", "Alice")?;
    sh.sign_up("bob", "+15558002", "Bob")?;
    sh.sign_up("carol", "+15558003", "Carol")?;
    // Seven parts of 512 KiB, the last one short.
    let len = 3 * 1024 * 1024 + 1234;
    let source = system.dir.join("data.bin");
    let bytes = write_random(&source, len, 17)?;
    let source_arg = source.to_string_lossy().into_owned();

    let sent = sh.ok(
        "alice",
        &[
            "send-file",
            "+15558002",
            &source_arg,
            "--caption",
            "the data",
        ],
    )?;
    assert!(
        sent.contains(&format!("uploaded {len} bytes in 7 part(s)")),
        "{sent}"
    );
    assert!(!sent.contains("instant upload"), "{sent}");
    message_id(&sent, "sent ")?;

    // Bob's id of the message is in his box: his history's newest line.
    let history = sh.ok("bob", &["history", "--with", "+15558001", "--limit", "1"])?;
    assert!(
        history.contains(&format!("[document \"data.bin\", {len} bytes]: the data")),
        "{history}"
    );
    let bobs_id = message_id(&history, "")?;
    let out = system.dir.join("bob-got.bin");
    let out_arg = out.to_string_lossy().into_owned();
    let saved = sh.ok("bob", &["download", "+15558001", &bobs_id, "-o", &out_arg])?;
    assert!(
        saved.contains(&format!("saved {out_arg} ({len} bytes, sha256 checked)")),
        "{saved}"
    );
    assert!(std::fs::read(&out)? == bytes, "Bob's copy differs");

    // Carol holds no such message, under either dialog's name.
    for peer in ["+15558001", "+15558002"] {
        let refused = sh.fails("carol", &["download", peer, &bobs_id])?;
        assert!(refused.contains("MESSAGE_ID_INVALID"), "{refused}");
    }

    // The same content again: the server holds it, so no part travels.
    let again = sh.ok("alice", &["send-file", "+15558002", &source_arg])?;
    assert!(again.contains("instant upload"), "{again}");
    assert!(!again.contains("uploaded"), "{again}");
    let history = sh.ok("bob", &["history", "--with", "+15558001", "--limit", "1"])?;
    let second = message_id(&history, "")?;
    assert_ne!(second, bobs_id);
    // Into a folder: the file keeps the sender's name there.
    let folder = system.dir.join("downloads");
    std::fs::create_dir_all(&folder)?;
    let folder_arg = folder.to_string_lossy().into_owned();
    sh.ok(
        "bob",
        &["download", "+15558001", &second, "-o", &folder_arg],
    )?;
    assert!(std::fs::read(folder.join("data.bin"))? == bytes);

    // Bad input: a missing file, a message without a file, an id that is no message, a kind
    // that does not exist.
    let missing = system.dir.join("nothing-here.bin");
    let missing_arg = missing.to_string_lossy().into_owned();
    let refused = sh.fails("alice", &["send-file", "+15558002", &missing_arg])?;
    assert!(
        refused.contains(&format!("cannot read {missing_arg}")),
        "{refused}"
    );
    sh.ok(
        "alice",
        &["send", "--to", "+15558002", "--text", "just words"],
    )?;
    let history = sh.ok("bob", &["history", "--with", "+15558001", "--limit", "1"])?;
    let words = message_id(&history, "")?;
    let refused = sh.fails("bob", &["download", "+15558001", &words])?;
    assert!(
        refused.contains(&format!("message #{words} carries no file")),
        "{refused}"
    );
    let refused = sh.fails("bob", &["download", "+15558001", "999999"])?;
    assert!(refused.contains("MESSAGE_ID_INVALID"), "{refused}");
    let refused = sh.fails(
        "alice",
        &["send-file", "+15558002", &source_arg, "--as", "sticker"],
    )?;
    assert!(refused.contains("invalid value 'sticker'"), "{refused}");
    // A photo that is no image: the server's own code.
    let refused = sh.fails(
        "alice",
        &["send-file", "+15558002", &source_arg, "--as", "photo"],
    )?;
    assert!(refused.contains("MEDIA_INVALID"), "{refused}");
    // Nothing was left half-written beside Bob's downloads.
    let partials = std::fs::read_dir(&system.dir)?
        .chain(std::fs::read_dir(&folder)?)
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".part"))
        .count();
    assert_eq!(partials, 0);
    Ok(())
}
