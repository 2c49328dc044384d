//! The auth key: a device's identity, sent with every call in one metadata entry.

use tonic::{
    Request, Status,
    metadata::{Ascii, MetadataValue},
    service::Interceptor,
};

use crate::Error;

pub use oxigram_proto::AUTH_KEY_HEADER;

/// A device's auth key, as `CreateAuthKey` returned it. Keep it with the device: it is the
/// device's login.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthKey {
    pub id: i64,
    /// Hex, as the gateway gave it.
    pub secret: String,
}

/// Adds the auth key to every call of a channel.
#[derive(Clone)]
pub struct SignWithKey(MetadataValue<Ascii>);

impl SignWithKey {
    pub fn new(key: &AuthKey) -> Result<Self, Error> {
        MetadataValue::try_from(format!("{}:{}", key.id, key.secret))
            .map(Self)
            .map_err(|_| Error::BadAuthKey)
    }
}

impl Interceptor for SignWithKey {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert(AUTH_KEY_HEADER, self.0.clone());
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_carries_id_and_secret() -> Result<(), Box<dyn std::error::Error>> {
        let key = AuthKey {
            id: 42,
            secret: "00ff".into(),
        };
        let request = SignWithKey::new(&key)?.call(Request::new(()))?;
        let value = request.metadata().get(AUTH_KEY_HEADER).ok_or("no header")?;
        assert_eq!(value.to_str()?, "42:00ff");
        let bad = AuthKey {
            id: 1,
            secret: "line\nbreak".into(),
        };
        assert!(matches!(SignWithKey::new(&bad), Err(Error::BadAuthKey)));
        Ok(())
    }
}
