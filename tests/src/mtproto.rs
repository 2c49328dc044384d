//! What the MTProto suites and the door's bench ask of a signed-out MTProto client: a sign-up
//! of a new phone with the harness's login code, and a plain text send.

use oxigram_mtproto::client::Client;
use oxigram_tl::{enums, functions, types};

use crate::LOGIN_CODE;

/// Signs `client` up as a new account for `phone` (sendCode, signIn answering that a sign-up
/// is needed, signUp) and returns the new self user.
pub async fn sign_up(
    client: &mut Client,
    phone: &str,
    first_name: &str,
) -> anyhow::Result<types::User> {
    let enums::auth::SentCode::Code(sent) = client
        .invoke(&functions::auth::SendCode {
            phone_number: phone.into(),
            api_id: 1,
            api_hash: "x".into(),
            settings: enums::CodeSettings::Settings(types::CodeSettings {
                allow_flashcall: false,
                current_number: false,
                allow_app_hash: false,
                allow_missed_call: false,
                allow_firebase: false,
                unknown_number: false,
                logout_tokens: None,
                token: None,
                app_sandbox: None,
            }),
        })
        .await?
    else {
        anyhow::bail!("no code sent");
    };
    let signed_in = client
        .invoke(&functions::auth::SignIn {
            phone_number: phone.into(),
            phone_code_hash: sent.phone_code_hash.clone(),
            phone_code: Some(LOGIN_CODE.into()),
            email_verification: None,
        })
        .await?;
    anyhow::ensure!(
        matches!(signed_in, enums::auth::Authorization::SignUpRequired(_)),
        "a new phone must need a sign-up: {signed_in:?}"
    );
    let enums::auth::Authorization::Authorization(done) = client
        .invoke(&functions::auth::SignUp {
            no_joined_notifications: false,
            phone_number: phone.into(),
            phone_code_hash: sent.phone_code_hash,
            first_name: first_name.into(),
            last_name: String::new(),
        })
        .await?
    else {
        anyhow::bail!("sign-up did not authorize");
    };
    let enums::User::User(user) = done.user else {
        anyhow::bail!("empty user");
    };
    Ok(user)
}

/// `messages.sendMessage` of a plain `text` to `peer`, every option off.
pub fn send_text(
    peer: enums::InputPeer,
    text: &str,
    random_id: i64,
) -> functions::messages::SendMessage {
    functions::messages::SendMessage {
        no_webpage: false,
        silent: false,
        background: false,
        clear_draft: false,
        noforwards: false,
        update_stickersets_order: false,
        invert_media: false,
        allow_paid_floodskip: false,
        peer,
        reply_to: None,
        message: text.into(),
        random_id,
        reply_markup: None,
        entities: None,
        schedule_date: None,
        schedule_repeat_period: None,
        send_as: None,
        quick_reply_shortcut: None,
        effect: None,
        allow_paid_stars: None,
        suggested_post: None,
        rich_message: None,
    }
}
