//! Phase 1: users with an online device each (streaming from the start) and a share with a
//! second device that stays offline until the catch-up phase.

use oxigram_client::SentUpdates;

use super::*;

/// The bench's users and their online devices' tasks.
pub(super) struct Fleet {
    pub(super) users: Arc<Vec<BenchUser>>,
    pub(super) shared: Arc<Shared>,
    /// Per user: where its online device takes the answers to its sends.
    pub(super) own: Vec<SentUpdates>,
    pub(super) stop: watch::Sender<bool>,
    pub(super) devices: Vec<JoinHandle<DeviceReport>>,
}

pub(super) async fn setup(
    gateway: &str,
    args: &BenchArgs,
    run: &str,
    phone_prefix: u32,
    out: &Out,
) -> anyhow::Result<Fleet> {
    let t_setup = Instant::now();
    let devices = args.users + args.offline_devices();
    let channels = connect_channels(
        gateway,
        devices.div_ceil(DEVICES_PER_CHANNEL).clamp(1, MAX_CHANNELS),
    )
    .await?;
    let users = tokio::time::timeout(
        Duration::from_secs(60 + args.users as u64 / 5),
        setup_users(&channels, args, run, phone_prefix),
    )
    .await
    .map_err(|_| anyhow!("setup timed out"))??;
    let users = Arc::new(users);
    let shared = Arc::new(Shared {
        run: run.to_owned(),
        t0: Instant::now(),
        wall0: chrono::Utc::now(),
        received: Mutex::new(HashSet::new()),
    });
    let (stop, stop_rx) = watch::channel(false);
    let mut tasks: Vec<JoinHandle<DeviceReport>> = Vec::with_capacity(users.len());
    let mut readies = Vec::with_capacity(users.len());
    for (i, u) in users.iter().enumerate() {
        let (ready_tx, ready_rx) = oneshot::channel();
        readies.push(ready_rx);
        tasks.push(tokio::spawn(device_task(
            i,
            u.online.clone(),
            shared.clone(),
            stop_rx.clone(),
            ready_tx,
        )));
    }
    let mut own = Vec::with_capacity(users.len());
    for ready in readies {
        match tokio::time::timeout(RPC_DEADLINE * 2, ready).await {
            Ok(Ok(Ok(sent))) => own.push(sent),
            Ok(Ok(Err(code))) => bail!("cannot open an update stream: {code}"),
            _ => bail!("an update stream did not open in time"),
        }
    }
    out.line(format!(
        "setup: {} users, {} offline devices, {} connections, streams open in {:.1}s",
        users.len(),
        users.iter().filter(|u| u.offline.is_some()).count(),
        channels.len(),
        t_setup.elapsed().as_secs_f64()
    ));
    Ok(Fleet {
        users,
        shared,
        own,
        stop,
        devices: tasks,
    })
}

async fn connect_channels(gateway: &str, n: usize) -> anyhow::Result<Vec<Channel>> {
    let mut channels = Vec::with_capacity(n);
    for _ in 0..n {
        channels.push(oxigram_client::connect(gateway).await?);
    }
    Ok(channels)
}

async fn setup_users(
    channels: &[Channel],
    args: &BenchArgs,
    run: &str,
    phone_prefix: u32,
) -> anyhow::Result<Vec<BenchUser>> {
    let offline = args.offline_devices();
    let made = stream::iter(0..args.users)
        .map(|i| {
            let online_ch = channels[(2 * i) % channels.len()].clone();
            let offline_ch = channels[(2 * i + 1) % channels.len()].clone();
            let phone = format!("9{phone_prefix:06}{i:05}");
            async move {
                let online = new_device(online_ch, &format!("bench/{run}/online")).await?;
                let id = login(&online, &phone, true).await?;
                let offline = if i < offline {
                    let dev = new_device(offline_ch, &format!("bench/{run}/offline")).await?;
                    let same = login(&dev, &phone, false).await?;
                    anyhow::ensure!(same == id, "signing in gave another user");
                    Some(dev)
                } else {
                    None
                };
                anyhow::Ok(BenchUser {
                    id,
                    online,
                    offline,
                })
            }
        })
        .buffered(SETUP_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    made.into_iter().collect()
}
