//! Layered configuration: built-in defaults, then an optional TOML file, then environment
//! variables prefixed `OXIGRAM_` (nested keys separated by `__`, e.g.
//! `OXIGRAM_SERVICES__MESSAGES__LISTEN=0.0.0.0:7711`).

use std::{net::SocketAddr, path::Path, time::Duration};

use figment::{
    Figment,
    providers::{Env, Format, Serialized, Toml},
};
use oxigram_telemetry::TelemetryConfig;
use serde::{Deserialize, Serialize};

/// Where one service listens and how the others reach it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServiceAddr {
    pub listen: SocketAddr,
    /// The URL other services dial, e.g. `http://svc-messages:7711`.
    pub endpoint: String,
    /// This service's own Postgres; falls back to the top-level `database_url`.
    #[serde(default)]
    pub database_url: Option<String>,
}

impl ServiceAddr {
    fn local(port: u16) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], port)),
            endpoint: format!("http://127.0.0.1:{port}"),
            database_url: None,
        }
    }
}

/// The six services' addresses.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Services {
    pub gateway: ServiceAddr,
    pub messages: ServiceAddr,
    pub updates: ServiceAddr,
    pub dialogs: ServiceAddr,
    pub dispatch: ServiceAddr,
    pub media: ServiceAddr,
}

impl Default for Services {
    fn default() -> Self {
        Self {
            gateway: ServiceAddr::local(7710),
            messages: ServiceAddr::local(7711),
            updates: ServiceAddr::local(7712),
            dialogs: ServiceAddr::local(7713),
            dispatch: ServiceAddr::local(7714),
            media: ServiceAddr::local(7715),
        }
    }
}

/// Relay tuning shared by every outbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct OutboxConfig {
    pub batch_size: u32,
    /// How long a claimed row stays invisible to other relays; the relay renews it while the
    /// delivery is in flight, so a relay that died (its process killed) delays its rows by
    /// at most this.
    pub lease_ms: u64,
    pub poll_ms: u64,
    /// Attempts after which a row its destination refuses as malformed is kept as failed.
    /// Rows that fail for any other reason (the destination is down) are retried, every
    /// `backoff_max_ms` at the slowest, until they are delivered.
    pub max_attempts: u32,
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    /// How long the relay leaves a fresh row to the producer's own post-commit hand-off.
    pub fast_path_grace_ms: u64,
    /// How long a receiver remembers event ids it got (far beyond the relay's last retry).
    pub inbox_retention_hours: u64,
}

impl Default for OutboxConfig {
    fn default() -> Self {
        Self {
            batch_size: 200,
            lease_ms: 2_000,
            poll_ms: 500,
            max_attempts: 25,
            backoff_base_ms: 100,
            backoff_max_ms: 30_000,
            fast_path_grace_ms: 2_000,
            inbox_retention_hours: 168,
        }
    }
}

/// How long a service waits on Redis, and when it stops asking: Redis holds only what can be
/// rebuilt, so no request waits on it longer than the call budget.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct RedisConfig {
    /// Longest one Redis call (connecting included) may take before the caller goes on
    /// without it, in ms.
    pub call_timeout_ms: u64,
    /// Failed calls in a row after which the breaker opens: calls then fail at once, without
    /// touching Redis, until a background probe gets an answer.
    pub breaker_failures: u32,
    /// How often an open breaker probes Redis (one PING within the call budget), in ms.
    pub breaker_probe_ms: u64,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            call_timeout_ms: 250,
            breaker_failures: 3,
            breaker_probe_ms: 500,
        }
    }
}

/// Rate limits of the gateway's costly calls beyond sends and lookups (those are under
/// `[gateway]`), each per minute, answered FLOOD_WAIT_X past the limit.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct LimitsConfig {
    /// Gateway instances to assume until Redis has told how many are live: while Redis fails,
    /// each instance enforces `ceil(limit / instances)`.
    pub expected_instances: u32,
    /// Login codes sent to one phone.
    pub send_code_per_phone: u32,
    /// Sign-in and sign-up attempts with one phone.
    pub sign_in_per_phone: u32,
    /// Login calls (SendCode, SignIn, SignUp) from one auth key, whatever the phone.
    pub login_per_key: u32,
    /// getDifference calls of one device (auth key).
    pub difference_per_device: u32,
    /// Update streams one device (auth key) opens.
    pub stream_opens_per_device: u32,
    /// File parts one user uploads (SaveFilePart; an UploadByHash counts as one).
    pub upload_parts_per_user: u32,
    /// How often each gateway checks whether the operator's limit overrides and ban list
    /// changed (one single-row read), in ms: a change made through any instance is in force
    /// on every instance within this.
    pub reload_ms: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            expected_instances: 1,
            send_code_per_phone: 5,
            sign_in_per_phone: 10,
            login_per_key: 20,
            difference_per_device: 600,
            stream_opens_per_device: 30,
            upload_parts_per_user: 6000,
            reload_ms: 2000,
        }
    }
}

/// Admission control of every service: past its concurrency limit a service sheds the least
/// urgent requests first (transient signals, then sync, then writes) with FLOOD_WAIT_X.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct AdmissionConfig {
    /// Requests one service of this process handles at once (0: no limit). Update streams
    /// count only while they are being opened.
    pub max_in_flight: usize,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self { max_in_flight: 512 }
    }
}

/// The gateway's update streams.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamsConfig {
    /// A stream that sent nothing for this long ends (0: never); its client reopens it from
    /// its pts, which registers its route afresh. Bounds what a forgotten stream holds.
    pub idle_timeout_secs: u64,
    /// Catch-ups (a resumed stream's replay, a GetDifference call) one gateway instance runs
    /// at once (0: no cap). Past it a catch-up waits in line (`catch_up_line`); past the line
    /// a resumed stream is told to come back later (`StreamEvent.retry_after`) and a
    /// GetDifference answers FLOOD_WAIT_X, so a reconnect storm is served in turns instead of
    /// all at once. A catch-up keeps about one core of
    /// the backend busy while it runs, so the cap is roughly the cores a storm may take from
    /// the sends: small by default, raised where the backend has cores to spare.
    pub max_concurrent_catch_up: usize,
    /// Catch-ups one gateway instance starts a second at most (0: as fast as the cap's slots
    /// free up). A storm paced by the cap alone runs as fast as the machine allows and takes
    /// the cores that sends need; a rate below what the machine can serve keeps some for them,
    /// at the price of a longer storm.
    pub catch_ups_per_second: u32,
    /// Resumed streams one gateway instance keeps waiting in line for a catch-up slot (0:
    /// none). A stream in line is open and served as soon as a slot is free, in the order
    /// they came, so a storm keeps every slot busy without devices asking again; past the line
    /// a device is told to come back. A waiting stream costs what an open idle stream costs.
    pub catch_up_line: usize,
    /// The least wait given to a device turned away by the cap, in ms; each is given a wait
    /// drawn evenly between this and twice this, or its turn in the queue when that is later.
    pub retry_after_ms: u64,
}

impl Default for StreamsConfig {
    fn default() -> Self {
        Self {
            idle_timeout_secs: 900,
            max_concurrent_catch_up: 2,
            catch_ups_per_second: 0,
            catch_up_line: 16_384,
            retry_after_ms: 1_000,
        }
    }
}

/// Gateway-only settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct GatewayConfig {
    /// When set, every login code is this value (tests, demos). Otherwise codes are random
    /// and written to the log by the development code sender.
    #[serde(deserialize_with = "code_text")]
    pub fixed_login_code: Option<String>,
    /// The URL dispatch uses to push to this gateway instance (defaults to its endpoint).
    pub advertise_push: Option<String>,
    /// How long a device route lives in Redis without a refresh.
    pub route_ttl_secs: u64,
    /// Messages one user may send per minute before FLOOD_WAIT_X (Telegram's is 30).
    pub sends_per_minute: u32,
    /// Lookups of other users one user may make per minute before FLOOD_WAIT_X: each
    /// ResolvePhone and ResolveUsername, and each phone of an ImportContacts.
    pub lookups_per_minute: u32,
    /// How long a user stays online after her last stream closed, so a reconnecting device
    /// does not show her offline and online again.
    pub offline_grace_ms: u64,
    /// How long a call (or UpdateStatus(offline = false)) keeps a user online without a stream.
    pub online_after_call_secs: u64,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            fixed_login_code: None,
            advertise_push: None,
            route_ttl_secs: 60,
            sends_per_minute: 30,
            lookups_per_minute: 100,
            offline_grace_ms: 5_000,
            online_after_call_secs: 60,
        }
    }
}

/// A login code is text, but an environment variable such as `…=24680` reads as a number.
fn code_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Code {
        Text(String),
        Number(u64),
    }
    Ok(Option::<Code>::deserialize(d)?.map(|c| match c {
        Code::Text(t) => t,
        Code::Number(n) => n.to_string(),
    }))
}

/// Update-log settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct UpdatesConfig {
    /// Updates kept per user; a client older than that gets "difference too long".
    pub retain_per_user: u32,
    /// Append transactions that may run at once, each for its share of the users; each takes
    /// every append of its users queued meanwhile. One is fastest on a small machine: an
    /// append of a send spans both its users, so it waits for every worker it touches.
    pub append_workers: usize,
    /// How long the hand-off of push jobs to svc-dispatch waits to gather more, in ms. It
    /// adds up to that to an idle system's push latency; under load, fewer and larger
    /// dispatch transactions leave the CPU to sends, and pushes end up no slower: a push
    /// waits for a dispatch transaction either way.
    pub dispatch_linger_ms: u64,
    /// How long the hand-off of logged events to svc-dialogs waits to gather more, in ms
    /// (0: at once). svc-dialogs then runs fewer, larger transactions, and that CPU goes to
    /// sends. A read that finds svc-dialogs behind the log waits for it, so this delays a read
    /// racing a send by at most as much.
    pub dialogs_linger_ms: u64,
}

impl Default for UpdatesConfig {
    fn default() -> Self {
        Self {
            retain_per_user: 100_000,
            append_workers: 1,
            dispatch_linger_ms: 10,
            dialogs_linger_ms: 20,
        }
    }
}

/// Message settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct MessagesConfig {
    /// Send transactions that may run at once; each takes every send queued meanwhile. One
    /// is fastest on a small machine: a second one mostly waits on the first one's box-id
    /// row locks (two groups share owners), and makes each group smaller.
    pub send_workers: usize,
}

impl Default for MessagesConfig {
    fn default() -> Self {
        Self { send_workers: 1 }
    }
}

/// Media-only settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct MediaConfig {
    /// Folder of the local blob store (used when no S3 bucket is set).
    pub blob_dir: String,
    /// The key svc-messages signs file references with (every messages instance the same).
    pub file_reference_secret: String,
    /// How long a file reference a message read gave stays good, in seconds.
    pub file_reference_ttl_seconds: i64,
    /// Uploads no message took, and unfinished uploads, are collected after this many seconds.
    pub gc_grace_seconds: i64,
    /// Time between two collections, in seconds (0: never).
    pub gc_interval_seconds: u64,
    /// An S3-compatible blob store instead of local files.
    pub s3: S3Config,
}

impl Default for MediaConfig {
    fn default() -> Self {
        Self {
            blob_dir: ".oxigram/media".into(),
            file_reference_secret: "oxigram-development-file-reference-key".into(),
            file_reference_ttl_seconds: 7200,
            gc_grace_seconds: 86400,
            gc_interval_seconds: 3600,
            s3: S3Config::default(),
        }
    }
}

/// An S3-compatible store for svc-media's blobs. Credentials come from the environment
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), never from here.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct S3Config {
    /// The bucket; empty: blobs are local files under `blob_dir`.
    pub bucket: String,
    /// The store's URL (empty: AWS's own for the region).
    pub endpoint: String,
    pub region: String,
    /// Whether the endpoint may be plain HTTP.
    pub allow_http: bool,
    /// Size of one part of a multipart upload, in MiB (at least 5).
    pub multipart_chunk_mib: u32,
}

impl Default for S3Config {
    fn default() -> Self {
        Self {
            bucket: String::new(),
            endpoint: String::new(),
            region: "us-east-1".into(),
            allow_http: false,
            multipart_chunk_mib: 8,
        }
    }
}

/// The gateway's MTProto front door, for stock Telegram clients.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MtprotoConfig {
    /// The TCP address the door listens on (every transport, obfuscated or not); the door is
    /// closed when unset.
    pub listen: Option<SocketAddr>,
    /// The server's 2048-bit RSA private key (PKCS#1 or PKCS#8 PEM). Clients are given the
    /// public half; `oxigram up` creates one in its data folder.
    pub rsa_key_file: Option<String>,
    /// The host clients are told to connect to (the address of this DC in `help.getConfig`):
    /// where they reach the door, such as a load balancer's address. Unset: the listen
    /// address, which then must name one interface.
    pub public_host: Option<String>,
    /// The port clients are told to connect to; unset: the listen port.
    pub public_port: Option<u16>,
}

/// Default of [`BalancingConfig::endpoint_refresh_ms`].
pub const DEFAULT_ENDPOINT_REFRESH_MS: u64 = 2_000;

/// How callers spread calls over a service's replicas ([`crate::balance`]) and how a
/// replica leaves them when it stops.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct BalancingConfig {
    /// Time between two resolutions of a callee's name (and health checks of its addresses).
    pub endpoint_refresh_ms: u64,
    /// A hosts file (`address name…` lines) consulted before DNS at every resolution.
    pub hosts_file: Option<std::path::PathBuf>,
    /// On shutdown, how long a service keeps serving after it turned NOT_SERVING, so that
    /// callers (at their next refresh) and Kubernetes endpoints drop it before it stops
    /// taking calls. Longer than `endpoint_refresh_ms` where replicas come and go.
    pub shutdown_drain_ms: u64,
}

impl Default for BalancingConfig {
    fn default() -> Self {
        Self {
            endpoint_refresh_ms: DEFAULT_ENDPOINT_REFRESH_MS,
            hosts_file: None,
            shutdown_drain_ms: 0,
        }
    }
}

impl BalancingConfig {
    pub fn discovery(&self) -> crate::balance::Discovery {
        crate::balance::Discovery {
            refresh: Duration::from_millis(self.endpoint_refresh_ms.max(50)),
            hosts_file: self.hosts_file.clone(),
        }
    }

    pub fn shutdown_drain(&self) -> Duration {
        Duration::from_millis(self.shutdown_drain_ms)
    }
}

/// The operator's admin API (the outbox's failed rows, see `oxigram_outbox::AdminService`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AdminConfig {
    /// The bearer token every admin call must carry; empty turns the admin API off.
    pub token: String,
}

/// The whole configuration of an oxigram process.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    pub telemetry: TelemetryConfig,
    /// Prometheus endpoint of this process; none when unset.
    pub metrics_addr: Option<SocketAddr>,
    /// The Postgres every service uses unless its own `database_url` is set.
    pub database_url: Option<String>,
    pub redis_url: Option<String>,
    /// Prefix of every Redis key, so several installations can share one Redis.
    pub redis_key_prefix: String,
    /// The Redis call budget and circuit breaker.
    pub redis: RedisConfig,
    pub db_pool_size: u32,
    /// Deadline of every internal gRPC call.
    pub rpc_timeout_ms: u64,
    pub services: Services,
    pub outbox: OutboxConfig,
    pub gateway: GatewayConfig,
    pub limits: LimitsConfig,
    pub admission: AdmissionConfig,
    pub streams: StreamsConfig,
    pub messages: MessagesConfig,
    pub updates: UpdatesConfig,
    pub media: MediaConfig,
    pub mtproto: MtprotoConfig,
    pub balancing: BalancingConfig,
    pub admin: AdminConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            telemetry: TelemetryConfig::default(),
            metrics_addr: None,
            database_url: None,
            redis_url: None,
            redis_key_prefix: "oxigram:".into(),
            redis: RedisConfig::default(),
            db_pool_size: 16,
            rpc_timeout_ms: 5_000,
            services: Services::default(),
            outbox: OutboxConfig::default(),
            gateway: GatewayConfig::default(),
            limits: LimitsConfig::default(),
            admission: AdmissionConfig::default(),
            streams: StreamsConfig::default(),
            messages: MessagesConfig::default(),
            updates: UpdatesConfig::default(),
            media: MediaConfig::default(),
            mtproto: MtprotoConfig::default(),
            balancing: BalancingConfig::default(),
            admin: AdminConfig::default(),
        }
    }
}

impl Config {
    /// Defaults, then `file` (when given), then `OXIGRAM_*` environment variables.
    pub fn load(file: Option<&Path>) -> anyhow::Result<Self> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            anyhow::ensure!(file.exists(), "config file {} not found", file.display());
            figment = figment.merge(Toml::file(file));
        }
        Ok(figment
            .merge(Env::prefixed("OXIGRAM_").split("__"))
            .extract()?)
    }

    /// The Postgres URL a service uses.
    pub fn database_url_for(&self, service: &ServiceAddr) -> anyhow::Result<String> {
        service
            .database_url
            .clone()
            .or_else(|| self.database_url.clone())
            .ok_or_else(|| anyhow::anyhow!("no database_url configured"))
    }

    pub fn redis_url(&self) -> anyhow::Result<&str> {
        self.redis_url
            .as_deref()
            .ok_or_else(|| anyhow::anyhow!("no redis_url configured"))
    }

    pub fn rpc_timeout(&self) -> Duration {
        Duration::from_millis(self.rpc_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure signature
    fn env_overrides_file_overrides_defaults() -> anyhow::Result<()> {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "oxigram.toml",
                "db_pool_size = 4\n[services.messages]\nlisten = \"0.0.0.0:9000\"\nendpoint = \"http://m:9000\"\n",
            )?;
            jail.set_env("OXIGRAM_DB_POOL_SIZE", "7");
            // A bare number is read as a number; quoting keeps leading zeros.
            jail.set_env("OXIGRAM_GATEWAY__FIXED_LOGIN_CODE", "\"02468\"");
            let config = Config::load(Some(Path::new("oxigram.toml")))
                .map_err(|e| figment::Error::from(e.to_string()))?;
            assert_eq!(config.db_pool_size, 7);
            assert_eq!(config.gateway.fixed_login_code.as_deref(), Some("02468"));
            assert_eq!(config.services.messages.endpoint, "http://m:9000");
            assert_eq!(config.services.updates.endpoint, "http://127.0.0.1:7712");
            Ok(())
        });
        Ok(())
    }

    /// The checked-in reference file, `oxigram.example.toml`.
    const EXAMPLE: &str = include_str!("../../../oxigram.example.toml");

    /// Every setting's dotted name, from the defaults' serialized form.
    fn keys(prefix: &str, value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    let name = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    keys(&name, v, out);
                }
            }
            _ => out.push(prefix.to_owned()),
        }
    }

    #[test]
    fn the_example_file_is_the_defaults() -> anyhow::Result<()> {
        let loaded: Config = Figment::from(Serialized::defaults(Config::default()))
            .merge(Toml::string(EXAMPLE))
            .extract()?;
        assert_eq!(
            serde_json::to_value(&loaded)?,
            serde_json::to_value(Config::default())?,
            "oxigram.example.toml must show the built-in defaults"
        );
        Ok(())
    }

    #[test]
    fn the_example_file_names_every_setting() -> anyhow::Result<()> {
        let mut all = Vec::new();
        keys("", &serde_json::to_value(Config::default())?, &mut all);
        // A setting is named by its table header and a line `key = …` (commented out when it
        // has no default) below it, before the next header.
        let mut named = Vec::new();
        let mut table = String::new();
        for line in EXAMPLE.lines() {
            let line = line.trim_start_matches('#').trim();
            if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                table = header.to_owned();
            } else if let Some((key, _)) = line.split_once(" = ")
                && key.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            {
                named.push(if table.is_empty() {
                    key.to_owned()
                } else {
                    format!("{table}.{key}")
                });
            }
        }
        let missing: Vec<&String> = all
            .iter()
            .filter(|k| {
                // A service's own database_url is shown once, for all of them.
                !named.contains(k) && !k.ends_with(".database_url")
            })
            .collect();
        assert!(
            missing.is_empty(),
            "settings missing from oxigram.example.toml: {missing:?}"
        );
        Ok(())
    }
}
