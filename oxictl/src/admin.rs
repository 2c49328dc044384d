//! `oxictl admin`: the outbox rows a service's relay kept as failed (its destination refused
//! them as malformed `max_attempts` times), listed page by page, and requeued. It calls the
//! admin API (`oxigram.admin.v1.OutboxAdmin`) each outbox-owning service serves on its own
//! port when `[admin] token` is set, at the endpoints of the services' own configuration.

use std::{io::Write, path::PathBuf, time::Duration};

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use oxigram_kit::Config;
use oxigram_outbox::MAX_ADMIN_IDS;
use oxigram_proto::admin::v1::{
    FailedOutboxRow, ListFailedOutboxRequest, RequeueOutboxRequest,
    outbox_admin_client::OutboxAdminClient,
};
use tonic::{
    Code, Request, Status,
    transport::{Channel, Endpoint},
};

#[derive(Args)]
pub struct AdminArgs {
    /// The operator token; else OXIGRAM_ADMIN_TOKEN, else the configuration's `[admin] token`.
    #[arg(
        long,
        global = true,
        env = "OXIGRAM_ADMIN_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    /// The services' configuration file, read as `oxigram --config` reads it (defaults, then
    /// the file, then OXIGRAM_* variables): each service's `endpoint` and `[admin] token`.
    #[arg(long, global = true, env = "OXIGRAM_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Subcommand)]
pub enum AdminCommand {
    /// Lists the failed outbox rows of one service or of every one, ascending by id.
    Failed {
        /// A service, or `all`.
        #[arg(long, default_value = "all", value_parser = parse_scope)]
        service: Scope,
        /// Only the rows bound for this destination (a service's name, e.g. `updates`).
        #[arg(long)]
        destination: Option<String>,
        /// At most this many rows of each service (default: every row).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        limit: Option<u32>,
    },
    /// Makes failed rows of one service pending again, with no attempts, due at once: named by
    /// id, or every failed row of a destination.
    Requeue {
        #[arg(long, value_enum)]
        service: Service,
        /// The rows' ids, comma-separated (as `admin failed` prints them).
        #[arg(
            long,
            value_delimiter = ',',
            required_unless_present = "destination",
            conflicts_with = "destination"
        )]
        ids: Vec<i64>,
        /// Every failed row bound for this destination.
        #[arg(long)]
        destination: Option<String>,
    },
    /// The gateway's rate limits and ban list, changed at run time on every instance.
    #[command(subcommand)]
    Limits(crate::admin_limits::LimitsCommand),
}

/// A service that owns an outbox (each of the six does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Service {
    Messages,
    Updates,
    Dialogs,
    Dispatch,
    Gateway,
    Media,
}

impl Service {
    const EACH: [Service; 6] = [
        Service::Messages,
        Service::Updates,
        Service::Dialogs,
        Service::Dispatch,
        Service::Gateway,
        Service::Media,
    ];

    fn name(self) -> &'static str {
        match self {
            Service::Messages => "messages",
            Service::Updates => "updates",
            Service::Dialogs => "dialogs",
            Service::Dispatch => "dispatch",
            Service::Gateway => "gateway",
            Service::Media => "media",
        }
    }

    /// Where the configuration says the service is dialled.
    fn target(self, config: &Config) -> Target {
        let s = &config.services;
        let addr = match self {
            Service::Messages => &s.messages,
            Service::Updates => &s.updates,
            Service::Dialogs => &s.dialogs,
            Service::Dispatch => &s.dispatch,
            Service::Gateway => &s.gateway,
            Service::Media => &s.media,
        };
        Target {
            name: self.name(),
            endpoint: addr.endpoint.clone(),
        }
    }
}

/// The services `admin failed` asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    All,
    One(Service),
}

impl Scope {
    fn services(self) -> Vec<Service> {
        match self {
            Scope::All => Service::EACH.to_vec(),
            Scope::One(service) => vec![service],
        }
    }
}

fn parse_scope(s: &str) -> Result<Scope, String> {
    if s == "all" {
        return Ok(Scope::All);
    }
    Service::from_str(s, false).map(Scope::One).map_err(|_| {
        format!("expected all, messages, updates, dialogs, dispatch, gateway or media, not {s:?}")
    })
}

/// One service's admin API: its name and the URL it is dialled at.
#[derive(Clone, Debug)]
pub struct Target {
    pub name: &'static str,
    pub endpoint: String,
}

/// A connection to one service's admin API, every call carrying the operator token.
pub struct Admin {
    target: Target,
    channel: Channel,
    client: OutboxAdminClient<Channel>,
    bearer: tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
}

impl Admin {
    /// Connects at once, so that a service that is not there is told apart from one that
    /// refuses the call.
    pub async fn connect(target: Target, token: &str) -> anyhow::Result<Self> {
        let bearer = format!("Bearer {token}")
            .parse()
            .context("the admin token must be printable ASCII")?;
        let channel = Endpoint::from_shared(target.endpoint.clone())
            .with_context(|| format!("{}: bad endpoint {:?}", target.name, target.endpoint))?
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(30))
            .connect()
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "{} is unreachable at {}: {e} (is it running? is [services.{}] endpoint right?)",
                    target.name,
                    target.endpoint,
                    target.name
                )
            })?;
        Ok(Self {
            target,
            client: OutboxAdminClient::new(channel.clone()),
            channel,
            bearer,
        })
    }

    /// The connection, for the service's other admin APIs (the gateway's `LimitsAdmin`).
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// `message` with the operator token.
    pub fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request
            .metadata_mut()
            .insert("authorization", self.bearer.clone());
        request
    }

    /// Every failed row (or the first `limit`), bound for `destination` (empty: for any),
    /// page after page by the seek key; `each` gets every page as it comes.
    pub async fn failed(
        &mut self,
        destination: &str,
        limit: Option<usize>,
        mut each: impl FnMut(&[FailedOutboxRow]) -> anyhow::Result<()>,
    ) -> anyhow::Result<usize> {
        let mut listed = 0usize;
        let mut after_id = 0;
        loop {
            let want = limit.map_or(MAX_ADMIN_IDS, |l| {
                l.saturating_sub(listed).min(MAX_ADMIN_IDS)
            });
            if want == 0 {
                return Ok(listed);
            }
            let request = self.request(ListFailedOutboxRequest {
                destination: destination.to_owned(),
                after_id,
                limit: i32::try_from(want)?,
            });
            let page = self
                .client
                .list_failed_outbox(request)
                .await
                .map_err(|s| self.refused(s))?
                .into_inner();
            each(&page.rows)?;
            listed += page.rows.len();
            if page.next_after_id == 0 {
                return Ok(listed);
            }
            after_id = page.next_after_id;
        }
    }

    /// Requeues the failed rows `ids` (in calls of at most the API's most), or, when `ids` is
    /// empty, every failed row bound for `destination`; returns how many were made pending.
    pub async fn requeue(&mut self, ids: &[i64], destination: &str) -> anyhow::Result<i64> {
        let calls: Vec<RequeueOutboxRequest> = if ids.is_empty() {
            vec![RequeueOutboxRequest {
                ids: Vec::new(),
                destination: destination.to_owned(),
            }]
        } else {
            ids.chunks(MAX_ADMIN_IDS)
                .map(|chunk| RequeueOutboxRequest {
                    ids: chunk.to_vec(),
                    destination: String::new(),
                })
                .collect()
        };
        let mut requeued = 0;
        for call in calls {
            let request = self.request(call);
            requeued += self
                .client
                .requeue_outbox(request)
                .await
                .map_err(|s| self.refused(s))?
                .into_inner()
                .requeued;
        }
        Ok(requeued)
    }

    /// What a refused call means to the operator.
    pub fn refused(&self, status: Status) -> anyhow::Error {
        let Target { name, endpoint } = &self.target;
        let code = oxigram_errors::code_of(&status);
        match (code.as_deref(), status.code()) {
            (Some("ADMIN_TOKEN_INVALID"), _) => anyhow::anyhow!(
                "{name} refused the admin token (ADMIN_TOKEN_INVALID: {}): it must equal the \
                 service's [admin] token",
                status.message()
            ),
            (None, Code::Unimplemented) => anyhow::anyhow!(
                "{name} at {endpoint} serves no admin API: its [admin] token \
                 (OXIGRAM_ADMIN__TOKEN) is not set"
            ),
            (None, Code::Unavailable | Code::DeadlineExceeded) => {
                anyhow::anyhow!("{name} is unreachable at {endpoint}: {}", status.message())
            }
            (Some(code), _) => {
                anyhow::anyhow!("{name} refused the call ({code}): {}", status.message())
            }
            (None, _) => anyhow::anyhow!("{name} failed the call: {status}"),
        }
    }
}

/// The token: the flag (or OXIGRAM_ADMIN_TOKEN, which clap reads into it), else the
/// configuration's.
fn token(flag: Option<String>, config: &Config) -> anyhow::Result<String> {
    flag.filter(|t| !t.is_empty())
        .or_else(|| Some(config.admin.token.clone()).filter(|t| !t.is_empty()))
        .context(
            "no admin token: pass --token, set OXIGRAM_ADMIN_TOKEN, or point --config (or \
             OXIGRAM_CONFIG) at the services' configuration with its [admin] token",
        )
}

pub async fn run(args: AdminArgs) -> anyhow::Result<()> {
    if let Some(file) = &args.config {
        anyhow::ensure!(file.exists(), "no configuration at {}", file.display());
    }
    let config = Config::load(args.config.as_deref())?;
    let token = token(args.token, &config)?;
    let mut out = std::io::stdout().lock();
    match args.command {
        AdminCommand::Failed {
            service,
            destination,
            limit,
        } => {
            let targets: Vec<Target> = service
                .services()
                .into_iter()
                .map(|s| s.target(&config))
                .collect();
            let limit = limit.map(|l| l as usize);
            let now = chrono::Utc::now().timestamp();
            list_failed(
                &targets,
                &token,
                destination.as_deref().unwrap_or(""),
                limit,
                now,
                &mut out,
            )
            .await
        }
        AdminCommand::Limits(command) => {
            let admin = Admin::connect(Service::Gateway.target(&config), &token).await?;
            crate::admin_limits::run(&admin, command, &mut out).await
        }
        AdminCommand::Requeue {
            service,
            ids,
            destination,
        } => {
            let target = service.target(&config);
            let destination = destination.unwrap_or_default();
            let mut admin = Admin::connect(target, &token).await?;
            let requeued = admin.requeue(&ids, &destination).await?;
            writeln!(
                out,
                "{}",
                requeued_line(service.name(), &ids, &destination, requeued)
            )?;
            Ok(())
        }
    }
}

/// Prints the failed rows of every target as one table, then how many each has. A target
/// that cannot be asked is reported on stderr and the others are still listed; the answer
/// is an error when any could not be.
pub async fn list_failed(
    targets: &[Target],
    token: &str,
    destination: &str,
    limit: Option<usize>,
    now: i64,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    writeln!(out, "{}", header())?;
    let mut counts = Vec::with_capacity(targets.len());
    let mut failures = Vec::new();
    for target in targets {
        let listed = async {
            let mut admin = Admin::connect(target.clone(), token).await?;
            admin
                .failed(destination, limit, |rows| {
                    for row in rows {
                        writeln!(out, "{}", table_row(target.name, row, now))?;
                    }
                    Ok(())
                })
                .await
        }
        .await;
        match listed {
            Ok(n) => counts.push(format!("{} {n}", target.name)),
            Err(e) => {
                eprintln!("oxictl: {e:#}");
                counts.push(format!("{} ?", target.name));
                failures.push(target.name);
            }
        }
    }
    writeln!(out, "failed rows: {}", counts.join(", "))?;
    anyhow::ensure!(
        failures.is_empty(),
        "could not list the failed rows of {}",
        failures.join(", ")
    );
    Ok(())
}

fn requeued_line(service: &str, ids: &[i64], destination: &str, requeued: i64) -> String {
    if ids.is_empty() {
        format!("{service}: requeued {requeued} failed row(s) bound for {destination}")
    } else {
        let skipped = ids.len() as i64 - requeued;
        let note = if skipped > 0 {
            format!(" ({skipped} named no failed row)")
        } else {
            String::new()
        };
        format!(
            "{service}: requeued {requeued} of {} row(s){note}",
            ids.len()
        )
    }
}

fn header() -> String {
    format!(
        "{:<9} {:>10} {:<12} {:>6} {:>8} {:>7}  LAST ERROR",
        "SERVICE", "ID", "DESTINATION", "EVENTS", "ATTEMPTS", "AGE"
    )
}

fn table_row(service: &str, row: &FailedOutboxRow, now: i64) -> String {
    // One row, one line: an error's own line breaks would break the table.
    let error: String = row
        .last_error
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!(
        "{service:<9} {:>10} {:<12} {:>6} {:>8} {:>7}  {error}",
        row.id,
        row.destination,
        row.events,
        row.attempts,
        age(now - row.created_at)
    )
}

/// An age in its two largest units: `42s`, `5m07s`, `3h05m`, `12d04h`.
fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86400, s % 86400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use oxigram_outbox::AdminService;
    use oxigram_testkit::{free_port, store};

    use super::*;

    const TOKEN: &str = "operator-token";

    /// Serves the admin API of `pool`'s outbox on a free port, as a service does.
    async fn serve(pool: sqlx::PgPool) -> anyhow::Result<Target> {
        let admin = AdminService::server(pool, TOKEN).context("admin API off")?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(admin)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        Ok(Target {
            name: "messages",
            endpoint: format!("http://{addr}"),
        })
    }

    /// A service up without the admin API: only its health service.
    async fn serve_without_admin() -> anyhow::Result<Target> {
        let (_, health) = tonic_health::server::health_reporter();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(health)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        Ok(Target {
            name: "dialogs",
            endpoint: format!("http://{addr}"),
        })
    }

    async fn listed(
        targets: &[Target],
        token: &str,
        destination: &str,
        limit: Option<usize>,
    ) -> (String, anyhow::Result<()>) {
        let mut out = Vec::new();
        let outcome = list_failed(targets, token, destination, limit, 10_000, &mut out).await;
        (String::from_utf8_lossy(&out).into_owned(), outcome)
    }

    /// The ids of the table's rows, in the order printed.
    fn ids(table: &str) -> Vec<i64> {
        table
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
            .collect()
    }

    /// More failed rows than one page holds, across two destinations, listed over every page
    /// in id order, filtered, cut at a limit, and requeued by id and by destination; a pending
    /// row is never listed.
    #[tokio::test]
    async fn lists_every_page_and_requeues() -> anyhow::Result<()> {
        let db = store::migrated("oxictl_admin_test", &[&oxigram_outbox::MIGRATOR]).await?;
        let rows = MAX_ADMIN_IDS as i64 + 3;
        sqlx::query(
            "INSERT INTO outbox (destination, event_id, payload, status, attempts, last_error, \
             created_at) \
             SELECT CASE WHEN g % 2 = 0 THEN 'updates' ELSE 'dialogs' END, gen_random_uuid(), \
                    '\\x00', 2, 25, E'refused:\\nmalformed', to_timestamp(10000 - g) \
             FROM generate_series(1, $1) g",
        )
        .bind(rows)
        .execute(&db.pool)
        .await?;
        let pending: i64 = sqlx::query_scalar(
            "INSERT INTO outbox (destination, event_id, payload) \
             VALUES ('updates', gen_random_uuid(), '\\x00') RETURNING id",
        )
        .fetch_one(&db.pool)
        .await?;
        let target = serve(db.pool.clone()).await?;

        let (table, outcome) = listed(std::slice::from_ref(&target), TOKEN, "", None).await;
        outcome?;
        let all = ids(&table);
        assert_eq!(all.len() as i64, rows, "every row of every page, once");
        assert!(all.windows(2).all(|w| w[0] < w[1]), "ascending by id");
        assert!(!all.contains(&pending));
        let mut lines = table.lines();
        assert_eq!(lines.next(), Some(header().as_str()));
        assert_eq!(
            lines
                .next()
                .map(|l| l.split_whitespace().collect::<Vec<_>>()),
            Some(vec![
                "messages",
                all[0].to_string().as_str(),
                "dialogs",
                "1",
                "25",
                "1s",
                "refused:",
                "malformed"
            ]),
        );
        assert_eq!(
            table.lines().last(),
            Some(format!("failed rows: messages {rows}").as_str())
        );

        let (table, outcome) = listed(std::slice::from_ref(&target), TOKEN, "updates", None).await;
        outcome?;
        assert_eq!(ids(&table).len() as i64, rows / 2);
        assert!(
            table
                .lines()
                .skip(1)
                .all(|l| l.contains(" updates ") || l.starts_with("failed rows"))
        );
        let (table, outcome) = listed(std::slice::from_ref(&target), TOKEN, "", Some(5)).await;
        outcome?;
        assert_eq!(ids(&table), all[..5]);

        let mut admin = Admin::connect(target.clone(), TOKEN).await?;
        assert_eq!(
            admin
                .requeue(&[all[0], all[2], pending, 999_999_999], "")
                .await?,
            2
        );
        let dialogs = (rows + 1) / 2 - 2;
        assert_eq!(admin.requeue(&[], "dialogs").await?, dialogs);
        let (table, outcome) = listed(std::slice::from_ref(&target), TOKEN, "", None).await;
        outcome?;
        assert_eq!(ids(&table).len() as i64, rows / 2);
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE status = 0")
            .fetch_one(&db.pool)
            .await?;
        assert_eq!(left, 1 + 2 + dialogs, "requeued rows are pending again");
        Ok(())
    }

    /// A wrong token, a service without the admin API and one that is not there: each a clear
    /// error, while the services that answer are still listed.
    #[tokio::test]
    async fn refusals_are_told_apart() -> anyhow::Result<()> {
        let db = store::migrated("oxictl_admin_refusals", &[&oxigram_outbox::MIGRATOR]).await?;
        let good = serve(db.pool.clone()).await?;
        let off = serve_without_admin().await?;
        let gone = Target {
            name: "media",
            endpoint: format!("http://127.0.0.1:{}", free_port()?),
        };
        let cases: [(&[Target], &str, &str); 4] = [
            (
                std::slice::from_ref(&good),
                "wrong",
                "messages refused the admin token (ADMIN_TOKEN_INVALID",
            ),
            (std::slice::from_ref(&off), TOKEN, "dialogs at http"),
            (
                std::slice::from_ref(&gone),
                TOKEN,
                "media is unreachable at http",
            ),
            (
                &[gone.clone(), good.clone()],
                TOKEN,
                "media is unreachable at http",
            ),
        ];
        for (targets, token, expected) in cases {
            let mut admin = Admin::connect(targets[0].clone(), token).await;
            let error = match &mut admin {
                Ok(admin) => admin.failed("", None, |_| Ok(())).await.err(),
                Err(e) => Some(anyhow::anyhow!("{e:#}")),
            };
            let error = error.map(|e| format!("{e:#}")).unwrap_or_default();
            assert!(error.contains(expected), "{expected:?} not in {error:?}");
            let (table, outcome) = listed(targets, token, "", None).await;
            assert!(outcome.is_err(), "{expected}: a failure exits non-zero");
            let answered: Vec<String> = targets
                .iter()
                .filter(|t| t.name == "messages" && token == TOKEN)
                .map(|t| format!("{} 0", t.name))
                .collect();
            for count in answered {
                assert!(table.contains(&count), "{count:?} in {table:?}");
            }
        }
        assert!(
            format!(
                "{:#}",
                Admin::connect(good.clone(), "bad\ntoken")
                    .await
                    .err()
                    .context("accepted")?
            )
            .contains("printable ASCII")
        );
        Ok(())
    }

    #[test]
    fn ages_scopes_tokens_and_lines() -> anyhow::Result<()> {
        for (seconds, shown) in [
            (-5, "0s"),
            (0, "0s"),
            (59, "59s"),
            (60, "1m00s"),
            (307, "5m07s"),
            (3600, "1h00m"),
            (11_100, "3h05m"),
            (86_400, "1d00h"),
            (1_051_200, "12d04h"),
        ] {
            assert_eq!(age(seconds), shown, "{seconds}");
        }
        for (given, scope) in [
            ("all", Some(Scope::All)),
            ("messages", Some(Scope::One(Service::Messages))),
            ("media", Some(Scope::One(Service::Media))),
            ("gateway", Some(Scope::One(Service::Gateway))),
            ("Messages", None),
            ("svc-messages", None),
            ("", None),
        ] {
            assert_eq!(parse_scope(given).ok(), scope, "{given:?}");
        }
        assert_eq!(Scope::All.services(), Service::EACH);

        let mut config = Config::default();
        assert!(token(None, &config).is_err(), "no token anywhere");
        assert!(token(Some(String::new()), &config).is_err());
        config.admin.token = "from-config".into();
        for (flag, expected) in [
            (None, "from-config"),
            (Some(""), "from-config"),
            (Some("from-flag"), "from-flag"),
        ] {
            assert_eq!(token(flag.map(str::to_owned), &config)?, expected);
        }
        config.services.media.endpoint = "http://media-0.media:7715".into();
        assert_eq!(
            Service::Media.target(&config).endpoint,
            "http://media-0.media:7715"
        );

        for ((ids, destination, requeued), line) in [
            (
                (&[][..], "updates", 4),
                "dialogs: requeued 4 failed row(s) bound for updates",
            ),
            ((&[1, 2][..], "", 2), "dialogs: requeued 2 of 2 row(s)"),
            (
                (&[1, 2, 3][..], "", 1),
                "dialogs: requeued 1 of 3 row(s) (2 named no failed row)",
            ),
        ] {
            assert_eq!(requeued_line("dialogs", ids, destination, requeued), line);
        }
        Ok(())
    }
}
