//! Phase 3: the offline devices catch up by getDifference from pts 0; every message sent to
//! or by their user must be there, once, in a gap-free log.

use super::*;

#[derive(Default)]
pub(super) struct Offline {
    pub(super) devices: usize,
    pub(super) updates: u64,
    pub(super) lost: u64,
    pub(super) duplicates: u64,
    pub(super) missing_outgoing: u64,
    pub(super) discontinuities: u64,
}

/// Catches every offline device up; lost messages add to `lost_samples` (at most 10 in all).
pub(super) async fn catch_up(
    users: &[BenchUser],
    sends: &Sends,
    run: &str,
    lost_samples: &mut Vec<Value>,
    errors: &mut Errors,
    out: &Out,
) -> anyhow::Result<Offline> {
    let t_off = Instant::now();
    let mut to_user: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut from_user: HashMap<usize, Vec<u64>> = HashMap::new();
    for (seq, r) in sends.persisted() {
        to_user.entry(r.recipient).or_default().push(seq);
        from_user.entry(r.sender).or_default().push(seq);
    }
    let offline: Vec<(usize, &Client)> = users
        .iter()
        .enumerate()
        .filter_map(|(i, u)| u.offline.as_ref().map(|d| (i, d)))
        .collect();
    let mut o = Offline {
        devices: offline.len(),
        ..Offline::default()
    };
    let caught_up = tokio::time::timeout(
        Duration::from_secs(120),
        stream::iter(offline)
            .map(|(i, dev)| async move { (i, full_difference(dev, 0).await) })
            .buffer_unordered(SETUP_CONCURRENCY)
            .collect::<Vec<_>>(),
    )
    .await
    .map_err(|_| anyhow!("offline catch-up timed out"))?;
    for (i, outcome) in caught_up {
        let all = match outcome {
            Ok(all) => all,
            Err(code) => {
                errors.add("offline", &code);
                o.lost += to_user.get(&i).map_or(0, |v| v.len() as u64);
                continue;
            }
        };
        o.updates += all.len() as u64;
        let (incoming, outgoing) = o.read_log(&all, run);
        for seq in to_user.get(&i).into_iter().flatten() {
            if !incoming.contains_key(seq) {
                o.lost += 1;
                if lost_samples.len() < 10 {
                    lost_samples.push(
                        json!({"seq": seq, "recipient_user_id": users[i].id, "device": "offline"}),
                    );
                }
            }
        }
        for seq in from_user.get(&i).into_iter().flatten() {
            if !outgoing.contains(seq) {
                o.missing_outgoing += 1;
            }
        }
    }
    out.line(format!(
        "offline catch-up: {} devices, {} updates in {:.1}s, {} messages missing, {} pts discontinuities",
        o.devices,
        o.updates,
        t_off.elapsed().as_secs_f64(),
        o.lost,
        o.discontinuities,
    ));
    Ok(o)
}

impl Offline {
    /// The bench messages of one device's whole log: incoming (seq → pts) and outgoing;
    /// counts pts discontinuities and duplicates on the way.
    fn read_log(&mut self, all: &[PtsUpdate], run: &str) -> (HashMap<u64, i32>, HashSet<u64>) {
        let mut prev = 0;
        let mut incoming: HashMap<u64, i32> = HashMap::new();
        let mut outgoing: HashSet<u64> = HashSet::new();
        for u in all {
            if u.pts - u.pts_count != prev {
                self.discontinuities += 1;
            }
            prev = u.pts;
            let Some(m) = new_message_of(u) else { continue };
            let Some((seq, _)) = parse_text(run, &m.text) else {
                continue;
            };
            if m.out {
                outgoing.insert(seq);
                continue;
            }
            match incoming.get(&seq) {
                Some(&pts) if pts != u.pts => self.duplicates += 1,
                Some(_) => {}
                None => {
                    incoming.insert(seq, u.pts);
                }
            }
        }
        (incoming, outgoing)
    }
}
