//! Finding the PostgreSQL and Redis programs, and installing them from
//! Debian's packages when they are missing.

use std::cmp::Ordering;
use std::env;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::InfraError;
use crate::util::{find_in_path, is_executable, run_visible};

/// Where Debian's `postgresql-<ver>` packages put the server programs.
const DEBIAN_PG_ROOT: &str = "/usr/lib/postgresql";

/// Where Debian's `redis-server` package puts the server.
const DEBIAN_REDIS_SERVER: &str = "/usr/bin/redis-server";

/// Server programs a PostgreSQL bin directory must contain to be usable.
const PG_SERVER_PROGRAMS: [&str; 3] = ["initdb", "pg_ctl", "postgres"];

/// One installed PostgreSQL server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PgInstall {
    /// Directory holding initdb, pg_ctl, postgres, pg_isready, psql, createdb.
    pub(crate) bin_dir: PathBuf,
    /// Major version ("15"), when known from Debian's directory layout.
    pub(crate) version: Option<String>,
}

/// The located server programs.
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    /// Installed PostgreSQL servers, highest version first (never empty).
    pub(crate) postgres: Vec<PgInstall>,
    /// The `redis-server` executable.
    pub(crate) redis_server: PathBuf,
}

/// Finds the programs; installs the missing ones when allowed.
pub(crate) fn locate(install_missing: bool, euid: u32) -> Result<Binaries, InfraError> {
    if let Some(found) = find_binaries() {
        return Ok(found);
    }
    let (pg_missing, redis_missing) = missing_now();
    let what = describe_missing(pg_missing, redis_missing);
    let manual = "run `sudo scripts/install-infra.sh` from the oxigram repository \
                  (or `sudo apt-get install postgresql redis-server`)";
    if !install_missing {
        return Err(InfraError::MissingBinaries {
            missing: what,
            hint: format!("{manual}; automatic installation is turned off (install_missing=false)"),
        });
    }
    if find_in_path("apt-get").is_none() {
        return Err(InfraError::MissingBinaries {
            missing: what,
            hint: "automatic installation needs Debian's apt-get, which is not available here; \
                   install PostgreSQL (initdb, pg_ctl, postgres) and Redis (redis-server) with \
                   your system's package manager and make sure they are on PATH"
                .to_owned(),
        });
    }
    if euid != 0 {
        return Err(InfraError::MissingBinaries {
            missing: what,
            hint: format!("installing them needs root: {manual}, then try again"),
        });
    }

    // Several processes (e.g. tests under cargo-nextest using different data
    // folders) may get here at once; apt-get must run only once at a time.
    let lock_path = env::temp_dir().join("oxigram-devinfra-install.lock");
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| InfraError::io(format!("opening {}", lock_path.display()), e))?;
    lock.lock()
        .map_err(|e| InfraError::io(format!("locking {}", lock_path.display()), e))?;

    // Someone else may have installed them while we waited for the lock.
    let (pg_missing, redis_missing) = missing_now();
    if pg_missing || redis_missing {
        install(pg_missing, redis_missing)?;
    }
    drop(lock);

    find_binaries().ok_or_else(|| {
        let (pg_missing, redis_missing) = missing_now();
        InfraError::MissingBinaries {
            missing: describe_missing(pg_missing, redis_missing),
            hint: format!(
                "they are still missing after `apt-get install`; check the apt output above, then {manual}"
            ),
        }
    })
}

/// Runs `apt-get update` and `apt-get install` for the missing packages.
fn install(pg_missing: bool, redis_missing: bool) -> Result<(), InfraError> {
    let mut packages = Vec::new();
    if pg_missing {
        packages.push("postgresql");
    }
    if redis_missing {
        packages.push("redis-server");
    }
    let names = match (pg_missing, redis_missing) {
        (true, true) => "PostgreSQL and Redis",
        (true, false) => "PostgreSQL",
        _ => "Redis",
    };
    eprintln!("oxigram: installing {names} from Debian's packages…");
    eprintln!("oxigram: running apt-get update");
    let hint = "check the network connection and the apt sources in /etc/apt, \
                or install the packages by hand: `apt-get install postgresql redis-server`";
    run_visible(
        apt_get().args(["-q", "-o", "DPkg::Lock::Timeout=300", "update"]),
        hint,
    )?;
    eprintln!(
        "oxigram: running apt-get install -y --no-install-recommends {}",
        packages.join(" ")
    );
    run_visible(
        apt_get()
            .args(["-q", "-o", "DPkg::Lock::Timeout=300", "install", "-y"])
            .arg("--no-install-recommends")
            .args(&packages),
        hint,
    )?;
    eprintln!("oxigram: {names} installed");
    Ok(())
}

fn apt_get() -> Command {
    let mut cmd = Command::new("apt-get");
    cmd.env("DEBIAN_FRONTEND", "noninteractive");
    cmd
}

fn describe_missing(pg_missing: bool, redis_missing: bool) -> String {
    match (pg_missing, redis_missing) {
        (true, true) => {
            "the PostgreSQL server (initdb, pg_ctl, postgres) and Redis (redis-server) are"
        }
        (true, false) => "the PostgreSQL server (initdb, pg_ctl, postgres) is",
        _ => "Redis (redis-server) is",
    }
    .to_owned()
}

/// Which of the two is missing right now.
fn missing_now() -> (bool, bool) {
    (find_postgres().is_empty(), find_redis_server().is_none())
}

fn find_binaries() -> Option<Binaries> {
    let postgres = find_postgres();
    let redis_server = find_redis_server()?;
    if postgres.is_empty() {
        return None;
    }
    Some(Binaries {
        postgres,
        redis_server,
    })
}

/// `redis-server` at Debian's location, else on PATH.
fn find_redis_server() -> Option<PathBuf> {
    let debian = Path::new(DEBIAN_REDIS_SERVER);
    if is_executable(debian) {
        Some(debian.to_path_buf())
    } else {
        find_in_path("redis-server")
    }
}

/// Installed PostgreSQL servers, highest version first: Debian's
/// /usr/lib/postgresql/<ver>/bin, or else the directory of `initdb` on PATH.
pub(crate) fn find_postgres() -> Vec<PgInstall> {
    let mut found: Vec<PgInstall> = fs::read_dir(DEBIAN_PG_ROOT)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.to_owned();
            version_key(&version)?;
            let bin_dir = entry.path().join("bin");
            has_server_programs(&bin_dir).then_some(PgInstall {
                bin_dir,
                version: Some(version),
            })
        })
        .collect();
    found.sort_by(|a, b| compare_versions(b.version.as_deref(), a.version.as_deref()));
    if found.is_empty()
        && let Some(bin_dir) =
            find_in_path("initdb").and_then(|p| p.parent().map(Path::to_path_buf))
        && has_server_programs(&bin_dir)
    {
        found.push(PgInstall {
            bin_dir,
            version: None,
        });
    }
    found
}

fn has_server_programs(bin_dir: &Path) -> bool {
    PG_SERVER_PROGRAMS
        .iter()
        .all(|p| is_executable(&bin_dir.join(p)))
}

/// "9.6" -> [9, 6]; "15" -> [15]; anything else -> None.
pub(crate) fn version_key(version: &str) -> Option<Vec<u64>> {
    version.split('.').map(|part| part.parse().ok()).collect()
}

fn compare_versions(a: Option<&str>, b: Option<&str>) -> Ordering {
    a.and_then(version_key).cmp(&b.and_then(version_key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_numerically() {
        let mut versions = vec!["9.6", "15", "10", "16"];
        versions.sort_by(|a, b| compare_versions(Some(b), Some(a)));
        assert_eq!(versions, ["16", "15", "10", "9.6"]);
        assert_eq!(version_key("main"), None);
    }
}
