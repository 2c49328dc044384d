//! The local update state machine: a device applies its account's updates in pts order, each
//! exactly once, and asks for the difference when one is missing.
//!
//! An update moves the account's pts from `pts - pts_count` to `pts`. With the local pts at
//! `p`, an update is applied iff `pts - pts_count == p`; one with `pts <= p` was applied
//! already; anything else means updates in between are missing (a gap). Updates beyond a gap
//! wait in a buffer: usually the missing ones arrive a moment later (pushes of one account may
//! overtake each other), and otherwise getDifference brings them, slice after slice.

use std::collections::BTreeMap;

use oxigram_proto::{
    api::v1::{AffectedMessages, Difference, EditMessageResponse, SendMessageResponse},
    types::v1::{
        PtsUpdate, Update, UpdateDeleteMessages, UpdateEditMessage, UpdateNewMessage, UpdatesState,
        update,
    },
};
use tokio::time::Instant;

use crate::{Client, Error};

/// A device's position in its account's update log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// The last pts applied.
    pub pts: i32,
    /// Unix seconds of the last update applied (or of the state a difference returned).
    pub date: i64,
}

impl From<UpdatesState> for State {
    fn from(s: UpdatesState) -> Self {
        Self {
            pts: s.pts,
            date: s.date,
        }
    }
}

/// What an update is to a device at a given state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It continues the state: apply it.
    Apply,
    /// The state already includes it.
    Duplicate,
    /// Updates between the state and it are missing.
    Gap,
}

impl State {
    /// The one rule: apply iff `pts - pts_count == local pts`.
    pub fn verdict(&self, pts: i32, pts_count: i32) -> Verdict {
        if pts <= self.pts {
            Verdict::Duplicate
        } else if pts - pts_count == self.pts {
            Verdict::Apply
        } else {
            Verdict::Gap
        }
    }
}

/// Where an update reached the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Pushed on the update stream.
    Stream,
    /// The answer to this device's own send.
    Sent,
    /// A getDifference.
    Difference,
}

/// This device's own update, from the answer to its send, with the send's random_id like the
/// update the log holds; `None` when the answer carries no pts yet (the update then arrives by
/// push or difference).
pub fn sent_update(response: SendMessageResponse) -> Option<PtsUpdate> {
    (response.pts > 0).then(|| PtsUpdate {
        pts: response.pts,
        pts_count: response.pts_count,
        date: response.message.as_ref().map_or(0, |m| m.date),
        update: Some(Update {
            kind: Some(update::Kind::NewMessage(UpdateNewMessage {
                message: response.message,
                random_id: response.random_id,
            })),
        }),
    })
}

/// This device's own edit update, from the answer to its edit; `None` when the answer carries
/// no pts yet.
pub fn edited_update(response: EditMessageResponse) -> Option<PtsUpdate> {
    (response.pts > 0).then(|| PtsUpdate {
        pts: response.pts,
        pts_count: response.pts_count,
        date: response.message.as_ref().map_or(0, |m| m.edit_date),
        update: Some(Update {
            kind: Some(update::Kind::EditMessage(UpdateEditMessage {
                message: response.message,
            })),
        }),
    })
}

/// This device's own delete update, from its request's ids and the answer; `None` when the
/// answer carries no pts yet, or deleted fewer messages than the request named (some were
/// gone already, and only the update itself says which): that update then comes by
/// getDifference, as the gap it leaves asks.
pub fn deleted_update(requested: &[i64], response: AffectedMessages) -> Option<PtsUpdate> {
    let mut ids: Vec<i64> = requested.iter().copied().filter(|id| *id > 0).collect();
    ids.sort_unstable();
    ids.dedup();
    if response.pts <= 0 || response.pts_count <= 0 || response.pts_count as usize != ids.len() {
        return None;
    }
    Some(PtsUpdate {
        pts: response.pts,
        pts_count: response.pts_count,
        date: 0,
        update: Some(Update {
            kind: Some(update::Kind::DeleteMessages(UpdateDeleteMessages { ids })),
        }),
    })
}

/// How a difference slice left the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slice {
    /// More slices follow.
    More,
    /// The state is caught up with the log.
    Done,
    /// The log no longer holds the updates after the local pts: the state jumped to `pts`;
    /// reload dialogs and history.
    TooLong { pts: i32 },
}

/// The state, and the updates waiting beyond a gap. Applied updates are handed, in pts order,
/// to the `apply` callback of each method.
#[derive(Debug, Default)]
pub struct Sequencer {
    state: State,
    pending: BTreeMap<i32, (PtsUpdate, Source)>,
    gap_since: Option<Instant>,
    discontinuities: u64,
}

impl Sequencer {
    pub fn new(state: State) -> Self {
        Self {
            state,
            ..Self::default()
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// Since when a gap (or a catch-up that failed) has been waiting for getDifference;
    /// `None` when nothing is missing.
    pub fn gap_since(&self) -> Option<Instant> {
        self.gap_since
    }

    /// After a catch-up that failed: it is due again after another gap wait, gap or not (the
    /// gateway may have said too much was missing).
    pub fn restart_gap_wait(&mut self) {
        self.gap_since = Some(Instant::now());
    }

    /// Updates waiting beyond a gap.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Updates a difference carried that did not continue the state: the log itself has a
    /// hole, which must never happen.
    pub fn discontinuities(&self) -> u64 {
        self.discontinuities
    }

    /// Applies `update` if it continues the state (then whatever waited behind it), skips it
    /// if applied already, else keeps it until the gap before it is filled.
    pub fn offer(
        &mut self,
        update: PtsUpdate,
        source: Source,
        mut apply: impl FnMut(PtsUpdate, Source),
    ) -> Verdict {
        let verdict = self.state.verdict(update.pts, update.pts_count);
        match verdict {
            Verdict::Duplicate => {}
            Verdict::Apply => {
                self.advance(&update);
                apply(update, source);
                self.drain_pending(&mut apply);
            }
            Verdict::Gap => {
                self.pending.insert(update.pts, (update, source));
                if self.gap_since.is_none() {
                    self.gap_since = Some(Instant::now());
                }
            }
        }
        verdict
    }

    /// Applies one slice of a difference. The difference is the log itself, so its updates
    /// are applied in its order even where they do not continue the state (counted as
    /// discontinuities), and the state moves to the slice's; a new message comes in its
    /// current state (the slice's `new_messages`).
    pub fn apply_difference(
        &mut self,
        mut slice: Difference,
        mut apply: impl FnMut(PtsUpdate, Source),
    ) -> Result<Slice, Error> {
        let state = slice.state.take().ok_or(Error::Missing("state"))?;
        if slice.too_long {
            self.state = state.into();
            self.drain_pending(&mut apply);
            return Ok(Slice::TooLong { pts: state.pts });
        }
        for mut u in std::mem::take(&mut slice.updates) {
            if u.pts <= self.state.pts {
                continue;
            }
            if u.pts - u.pts_count != self.state.pts {
                self.discontinuities += 1;
            }
            current_message(&mut u, &mut slice.new_messages);
            self.advance(&u);
            apply(u, Source::Difference);
        }
        self.state.pts = self.state.pts.max(state.pts);
        self.state.date = self.state.date.max(state.date);
        if slice.is_slice {
            return Ok(Slice::More);
        }
        self.drain_pending(&mut apply);
        Ok(Slice::Done)
    }

    fn advance(&mut self, u: &PtsUpdate) {
        self.state.pts = u.pts;
        self.state.date = self.state.date.max(u.date);
    }

    /// Applies the waiting updates the state now reaches; drops those it passed.
    fn drain_pending(&mut self, apply: &mut impl FnMut(PtsUpdate, Source)) {
        let mut progressed = false;
        while let Some(entry) = self.pending.first_entry() {
            let (u, _) = entry.get();
            match self.state.verdict(u.pts, u.pts_count) {
                Verdict::Duplicate => {
                    entry.remove();
                }
                Verdict::Apply => {
                    let (u, source) = entry.remove();
                    self.advance(&u);
                    apply(u, source);
                    progressed = true;
                }
                Verdict::Gap => break,
            }
        }
        if self.pending.is_empty() {
            self.gap_since = None;
        } else if progressed || self.gap_since.is_none() {
            // What is still missing is a new gap: it gets its own wait.
            self.gap_since = Some(Instant::now());
        }
    }
}

/// Puts the current state of a new message (from the difference's `new_messages`) into its
/// update.
fn current_message(u: &mut PtsUpdate, messages: &mut [oxigram_proto::types::v1::Message]) {
    let Some(update::Kind::NewMessage(n)) = u.update.as_mut().and_then(|u| u.kind.as_mut()) else {
        return;
    };
    let Some(id) = n.message.as_ref().map(|m| m.id) else {
        return;
    };
    if let Some(current) = messages.iter_mut().find(|m| m.id == id) {
        n.message = Some(std::mem::take(current));
    }
}

/// How a catch-up ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CatchUp {
    /// The state is the log's.
    Done,
    /// The state jumped to `pts`: reload dialogs and history.
    TooLong { pts: i32 },
}

impl Client {
    /// getDifference from the sequencer's state, slice after slice, until caught up; hands
    /// every update applied to `apply`, in pts order. On an error the state keeps what the
    /// slices before it brought.
    pub async fn catch_up(
        &self,
        seq: &mut Sequencer,
        mut apply: impl FnMut(PtsUpdate, Source),
    ) -> Result<CatchUp, Error> {
        let mut outcome = CatchUp::Done;
        self.each_slice(seq.state().pts, |slice| {
            if let Slice::TooLong { pts } = seq.apply_difference(slice, &mut apply)? {
                outcome = CatchUp::TooLong { pts };
            }
            Ok(seq.state().pts)
        })
        .await?;
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use oxigram_proto::types::v1::Message;

    use super::*;

    #[test]
    fn the_rule() {
        let at = State { pts: 5, date: 0 };
        let cases = [
            ((6, 1), Verdict::Apply),
            ((7, 2), Verdict::Apply),
            ((5, 1), Verdict::Duplicate),
            ((3, 1), Verdict::Duplicate),
            ((5, 0), Verdict::Duplicate),
            ((7, 1), Verdict::Gap),
            ((6, 2), Verdict::Gap),
        ];
        for ((pts, count), verdict) in cases {
            assert_eq!(at.verdict(pts, count), verdict, "pts {pts} count {count}");
        }
    }

    fn update(pts: i32, pts_count: i32) -> PtsUpdate {
        PtsUpdate {
            pts,
            pts_count,
            date: 1000 + i64::from(pts),
            update: None,
        }
    }

    enum Step {
        /// An update pushed on the stream (pts, pts_count).
        Push(i32, i32),
        /// The answer to an own send.
        Sent(i32, i32),
        /// A difference slice: its updates (each of pts_count 1), its state, is_slice, too_long.
        Diff(&'static [i32], i32, bool, bool),
    }
    use Step::*;

    struct Case {
        name: &'static str,
        start: i32,
        steps: Vec<Step>,
        /// Every update applied, in order, with how it came.
        applied: Vec<(i32, Source)>,
        pts: i32,
        pending: usize,
        /// The last difference step's outcome.
        slice: Option<Slice>,
        discontinuities: u64,
    }

    const S: Source = Source::Stream;
    const D: Source = Source::Difference;
    const O: Source = Source::Sent;

    fn cases() -> Vec<Case> {
        let case = |name, start, steps, applied: &[(i32, Source)], pts, pending| Case {
            name,
            start,
            steps,
            applied: applied.to_vec(),
            pts,
            pending,
            slice: None,
            discontinuities: 0,
        };
        vec![
            case(
                "in order",
                0,
                vec![Push(1, 1), Sent(2, 1), Push(3, 1)],
                &[(1, S), (2, O), (3, S)],
                3,
                0,
            ),
            case(
                "an update of several pts",
                4,
                vec![Push(6, 2), Push(7, 1)],
                &[(6, S), (7, S)],
                7,
                0,
            ),
            case(
                "duplicates are skipped",
                0,
                vec![Push(1, 1), Push(1, 1), Sent(2, 1), Push(2, 1), Push(1, 1)],
                &[(1, S), (2, O)],
                2,
                0,
            ),
            case(
                "a saved state skips what it has",
                5,
                vec![Push(4, 1), Push(5, 1), Push(6, 1)],
                &[(6, S)],
                6,
                0,
            ),
            case(
                "a gap waits, then the missing update fills it",
                0,
                vec![Push(1, 1), Push(3, 1), Sent(4, 1)],
                &[(1, S)],
                1,
                2,
            ),
            case(
                "a filled gap applies what waited, in order, with its source",
                0,
                vec![Push(1, 1), Push(3, 1), Sent(4, 1), Push(2, 1)],
                &[(1, S), (2, S), (3, S), (4, O)],
                4,
                0,
            ),
            case(
                "a difference fills the gap; what waited is dropped or applied",
                0,
                vec![
                    Push(1, 1),
                    Push(3, 1),
                    Push(5, 1),
                    Diff(&[2, 3, 4], 4, false, false),
                ],
                &[(1, S), (2, D), (3, D), (4, D), (5, S)],
                5,
                0,
            ),
            case(
                "a difference skips what the state has",
                2,
                vec![Diff(&[1, 2, 3], 3, false, false)],
                &[(3, D)],
                3,
                0,
            ),
            case(
                "an empty difference moves the state to the log's",
                0,
                vec![Diff(&[], 0, false, false)],
                &[],
                0,
                0,
            ),
            Case {
                slice: Some(Slice::More),
                ..case(
                    "a slice leaves what waits until the last slice",
                    0,
                    vec![Push(4, 1), Diff(&[1, 2], 2, true, false)],
                    &[(1, D), (2, D)],
                    2,
                    1,
                )
            },
            Case {
                slice: Some(Slice::Done),
                ..case(
                    "slices until one is not a slice",
                    0,
                    vec![
                        Push(4, 1),
                        Diff(&[1, 2], 2, true, false),
                        Diff(&[3], 3, false, false),
                    ],
                    &[(1, D), (2, D), (3, D), (4, S)],
                    4,
                    0,
                )
            },
            Case {
                slice: Some(Slice::Done),
                discontinuities: 1,
                ..case(
                    "a hole in the difference is applied and counted",
                    0,
                    vec![Diff(&[1, 3], 3, false, false)],
                    &[(1, D), (3, D)],
                    3,
                    0,
                )
            },
            Case {
                slice: Some(Slice::TooLong { pts: 40 }),
                ..case(
                    "too long: the state jumps; what it passed is dropped",
                    0,
                    vec![
                        Push(5, 1),
                        Push(41, 1),
                        Push(43, 1),
                        Diff(&[], 40, false, true),
                    ],
                    &[(41, S)],
                    41,
                    1,
                )
            },
        ]
    }

    #[test]
    fn applies_in_pts_order_exactly_once() -> Result<(), Error> {
        for case in cases() {
            let mut seq = Sequencer::new(State {
                pts: case.start,
                date: 0,
            });
            let mut applied = Vec::new();
            let mut record = |u: PtsUpdate, s: Source| applied.push((u.pts, s));
            let mut slice = None;
            for step in case.steps {
                match step {
                    Push(pts, count) => {
                        seq.offer(update(pts, count), Source::Stream, &mut record);
                    }
                    Sent(pts, count) => {
                        seq.offer(update(pts, count), Source::Sent, &mut record);
                    }
                    Diff(updates, state, is_slice, too_long) => {
                        let d = Difference {
                            updates: updates.iter().map(|&pts| update(pts, 1)).collect(),
                            state: Some(UpdatesState {
                                pts: state,
                                date: 0,
                            }),
                            is_slice,
                            too_long,
                            new_messages: Vec::new(),
                            users: Vec::new(),
                        };
                        slice = Some(seq.apply_difference(d, &mut record)?);
                    }
                }
            }
            let name = case.name;
            assert_eq!(applied, case.applied, "{name}: applied");
            assert_eq!(seq.state().pts, case.pts, "{name}: pts");
            assert_eq!(seq.pending(), case.pending, "{name}: pending");
            assert_eq!(
                seq.gap_since().is_some(),
                case.pending > 0,
                "{name}: gap wait"
            );
            if case.slice.is_some() {
                assert_eq!(slice, case.slice, "{name}: slice");
            }
            assert_eq!(
                seq.discontinuities(),
                case.discontinuities,
                "{name}: discontinuities"
            );
        }
        Ok(())
    }

    #[test]
    fn a_difference_without_state_is_refused() {
        let mut seq = Sequencer::default();
        let outcome = seq.apply_difference(Difference::default(), |_, _| {});
        assert!(matches!(outcome, Err(Error::Missing("state"))));
    }

    fn new_message(pts: i32, id: i64, text: &str) -> PtsUpdate {
        PtsUpdate {
            update: Some(Update {
                kind: Some(update::Kind::NewMessage(UpdateNewMessage {
                    message: Some(Message {
                        id,
                        text: text.into(),
                        ..Default::default()
                    }),
                    random_id: 0,
                })),
            }),
            ..update(pts, 1)
        }
    }

    fn text_of(u: &PtsUpdate) -> Option<&str> {
        match u.update.as_ref()?.kind.as_ref()? {
            update::Kind::NewMessage(n) => n.message.as_ref().map(|m| m.text.as_str()),
            _ => None,
        }
    }

    #[test]
    fn a_difference_gives_messages_in_their_current_state() -> Result<(), Error> {
        let mut seq = Sequencer::default();
        let d = Difference {
            updates: vec![new_message(1, 10, "first"), new_message(2, 11, "second")],
            new_messages: vec![Message {
                id: 11,
                text: "second, edited".into(),
                ..Default::default()
            }],
            state: Some(UpdatesState { pts: 2, date: 0 }),
            ..Default::default()
        };
        let mut texts = Vec::new();
        seq.apply_difference(d, |u, _| texts.push(text_of(&u).map(str::to_owned)))?;
        assert_eq!(
            texts,
            [Some("first".to_owned()), Some("second, edited".to_owned())]
        );
        Ok(())
    }

    #[test]
    fn a_send_answer_is_the_senders_update() {
        let answer = |pts, pts_count| SendMessageResponse {
            message: Some(Message {
                id: 3,
                date: 77,
                text: "hi".into(),
                ..Default::default()
            }),
            pts,
            pts_count,
            random_id: 5,
        };
        let u = sent_update(answer(9, 1));
        assert_eq!(
            u.as_ref().map(|u| (u.pts, u.pts_count, u.date)),
            Some((9, 1, 77))
        );
        assert_eq!(u.as_ref().and_then(text_of), Some("hi"));
        // Like the update the log holds: the send's random_id with it.
        assert_eq!(
            u.as_ref()
                .and_then(crate::echo)
                .map(|(random_id, m)| (random_id, m.id)),
            Some((5, 3))
        );
        // pts 0: the log has no place for it yet; it comes by push or difference.
        assert!(sent_update(answer(0, 0)).is_none());
    }

    #[test]
    fn a_delete_answer_is_the_deleters_update_when_it_names_every_id() {
        let answer = |pts, pts_count| AffectedMessages { pts, pts_count };
        let ids = |u: Option<PtsUpdate>| {
            u.and_then(|u| match u.update?.kind? {
                update::Kind::DeleteMessages(d) => Some((u.pts, u.pts_count, d.ids)),
                _ => None,
            })
        };
        // (ids asked, answer, the update)
        let cases = [
            (vec![5, 3, 5, 0], answer(9, 2), Some((9, 2, vec![3, 5]))),
            // One of them was gone already: which one, only the logged update says.
            (vec![5, 3], answer(8, 1), None),
            (vec![5], answer(0, 0), None),
        ];
        for (asked, response, expected) in cases {
            assert_eq!(ids(deleted_update(&asked, response)), expected, "{asked:?}");
        }
    }

    #[test]
    fn an_edit_answer_is_the_editors_update() {
        let answer = |pts, pts_count| EditMessageResponse {
            message: Some(Message {
                id: 3,
                date: 77,
                edit_date: 80,
                text: "hi, edited".into(),
                ..Default::default()
            }),
            pts,
            pts_count,
        };
        let u = edited_update(answer(10, 1));
        assert_eq!(
            u.as_ref().map(|u| (u.pts, u.pts_count, u.date)),
            Some((10, 1, 80))
        );
        let edited = u
            .and_then(|u| u.update)
            .and_then(|u| u.kind)
            .and_then(|k| match k {
                update::Kind::EditMessage(e) => e.message,
                _ => None,
            });
        assert_eq!(edited.map(|m| m.text).as_deref(), Some("hi, edited"));
        assert!(edited_update(answer(0, 0)).is_none());
    }
}
