//! The Rust client of oxigram: what an application uses to talk to the gateway.
//!
//! # Overview
//!
//! - **Connecting.** [`connect`] opens one HTTP/2 connection to the gateway; any number of
//!   devices may share it.
//! - **A device.** A [`Client`] is one device: its [`AuthKey`] travels with every call in the
//!   [`AUTH_KEY_HEADER`] metadata entry (`<auth_key_id>:<secret hex>`), and the gateway binds
//!   the key to the account the device signed in to, so no request names the acting user.
//!   [`Client::create`] asks the gateway for a new key (save it: it is the device's login);
//!   [`Client::new`] uses a saved one. [`Client::with_deadline`] bounds every call in time.
//! - **Signing in.** [`Client::request_code`] sends a login code to the phone (in development
//!   it appears in the gateway's log, or is fixed by `gateway.fixed_login_code`), then
//!   [`Client::sign_in`], [`Client::sign_up`] or [`Client::sign_in_or_up`] with that code.
//! - **Calls.** One method per client RPC, each one round trip: [`Client::send_message`]
//!   (idempotent on its `random_id`), [`Client::get_history`], [`Client::read_history`],
//!   [`Client::get_dialogs`], [`Client::get_state`], [`Client::get_difference`], … Every
//!   error is an [`Error`] whose [`Error::code`] is stable (`PEER_ID_INVALID`, `TIMEOUT`, …).
//!   The generated clients stay reachable ([`Client::messages`], [`Client::channel`], …) for
//!   the rest of the API.
//! - **Updates.** Everything that happens to an account is an update with a place in its log:
//!   it moves the account's pts from `pts - pts_count` to `pts`. A device applies an update
//!   iff `pts - pts_count` equals its local pts, skips one it already has, and treats anything
//!   else as a gap: it waits a moment for the missing ones, then fetches them with
//!   getDifference, slice after slice ([`Sequencer`], [`Client::catch_up`]).
//!   [`UpdateStream`] does all of it on the gateway's live stream: it yields [`Event`]s with
//!   the updates in pts order, fills gaps, follows `DifferenceNeeded`, and reopens a lost
//!   stream with backoff from the local state. Save [`UpdateStream::state`] with the device
//!   to resume after a restart; hand the answers to the device's own sends to the stream
//!   ([`UpdateStream::sent`]) so they are applied in order too.
//! - **Local state.** A [`Mirror`] is what the device knows of its account, built from the
//!   updates alone: per dialog the messages (in the account's box ids), the top message, the
//!   read and delivered watermarks and the unread count, by the rules the server keeps them.
//!   Hand it every event the stream yields ([`Mirror::follow`]), or every update a
//!   [`Sequencer`]/[`Client::catch_up`] applies ([`Mirror::apply`]); save it with the stream's
//!   state, and reopen the stream from that state. After `too_long` it is stale
//!   ([`Mirror::is_stale`]): [`Mirror::reload`] rebuilds it from `GetDialogs` and
//!   `GetHistory`. [`Mirror::dialogs`] and [`Mirror::history`] answer as those calls do.
//! - **Typing and presence.** [`Client::set_typing`] tells a peer's online devices what the
//!   user is doing in the chat; [`Client::update_status`] says she went away or came back.
//!   Both arrive on the stream as transient events, outside the pts order and never in
//!   getDifference: [`Event::Typing`] (show it until its `expires_at`) and [`Event::Status`];
//!   so does [`Event::User`], a profile change of a user the account shows.
//! - **Pending sends.** The sender's own new-message update carries the send's `random_id`
//!   ([`echo`]), on every device of hers and whatever way it arrives, and so does the send's
//!   answer: [`PendingSends`] matches a device's waiting sends by it, so a send whose answer
//!   was lost becomes its message once, from the stream or getDifference.
//!
//! # Example
//!
//! `examples/chat.rs` signs in two users and has them exchange a message. Start the system
//! with a fixed login code, then run the example against it:
//!
//! ```sh
//! OXIGRAM_GATEWAY__FIXED_LOGIN_CODE=24680 cargo run -p oxigram -- up
//! cargo run -p oxigram-client --example chat -- --code 24680
//! ```
//!
//! The core of it:
//!
//! ```no_run
//! use oxigram_client::{Client, Event, Mirror, StreamOptions, UpdateStream, connect};
//! use oxigram_proto::{api::v1::SendMessageRequest, types::v1::InputPeer};
//!
//! # async fn chat() -> Result<(), oxigram_client::Error> {
//! let channel = connect("http://127.0.0.1:7710").await?;
//! let alice = Client::create(channel.clone(), "example").await?;
//! let login = alice.request_code("15550001").await?;
//! alice.sign_in_or_up(&login, "24680", "Alice").await?;
//!
//! let bob = Client::create(channel, "example").await?;
//! let login = bob.request_code("15550002").await?;
//! let bob_user = bob.sign_in_or_up(&login, "24680", "Bob").await?;
//! let state = bob.get_state().await?.into();
//! let mut bob_updates = UpdateStream::open(bob, state, StreamOptions::default()).await?;
//!
//! alice
//!     .send_message(SendMessageRequest {
//!         peer: Some(InputPeer::user(bob_user.id)),
//!         random_id: 7,
//!         text: "hello Bob".into(),
//!         ..Default::default()
//!     })
//!     .await?;
//! let mut bob_mirror = Mirror::new();
//! let event = bob_updates.next().await;
//! bob_mirror.follow(&event);
//! if let Event::Update(applied) = event {
//!     println!("Bob got {:?} at pts {}", applied.update.update, applied.update.pts);
//! }
//! println!("Bob's dialogs: {:?}", bob_mirror.dialogs());
//! # Ok(())
//! # }
//! ```

mod auth_key;
mod client;
mod deadline;
mod error;
mod mirror;
mod pending;
mod sequencer;
mod stream;
mod transient;

pub use auth_key::{AUTH_KEY_HEADER, AuthKey, SignWithKey};
pub use client::{Client, DIFFERENCE_LIMIT, LoginCode, Signed, connect};
pub use deadline::Deadline;
pub use error::Error;
pub use mirror::{LocalDialog, Mirror, MirrorStats};
pub use pending::{PendingSends, echo};
pub use sequencer::{
    CatchUp, Sequencer, Slice, Source, State, Verdict, deleted_update, edited_update, sent_update,
};
pub use stream::{Applied, During, Event, SentUpdates, StreamOptions, StreamStats, UpdateStream};
pub use transient::{StatusChange, Typing};
