//! The server's RSA key: loaded from a PEM (PKCS#1 or PKCS#8), its Telegram fingerprint, and
//! the raw RSA of auth key creation in both forms clients use: the legacy
//! `SHA1(data) + data + padding` and RSA_PAD (AES-wrapped, SHA-256 checked).

use oxigram_tl::Serializable;
use rand::RngCore;
use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey, EncodeRsaPublicKey, LineEnding};
use rsa::pkcs8::DecodePrivateKey;
use rsa::traits::{PrivateKeyParts, PublicKeyParts};
use rsa::{BigUint, RsaPrivateKey, RsaPublicKey};

use crate::crypto::{ige_decrypt, ige_encrypt, sha1, sha256};

/// Why a key or a ciphertext was refused.
#[derive(Debug, thiserror::Error)]
pub enum RsaError {
    #[error("not an RSA private key PEM: {0}")]
    Pem(String),
    #[error("RSA key must be 2048 bits, this one is {0}")]
    Size(usize),
    #[error("ciphertext is not a valid RSA block for this key")]
    Ciphertext,
    #[error("data too long for RSA_PAD")]
    TooLong,
}

/// What RSA decryption of `encrypted_data` gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Plaintext {
    /// RSA_PAD: the 192-byte padded data, its SHA-256 already checked.
    Padded(Vec<u8>),
    /// Legacy: `SHA1(data)` and `data + padding`; the caller checks the hash over the bytes the
    /// TL object really occupies.
    Legacy { sha1: [u8; 20], data: Vec<u8> },
}

/// The server's 2048-bit RSA private key.
#[derive(Clone)]
pub struct ServerKey {
    private: RsaPrivateKey,
    fingerprint: i64,
}

impl std::fmt::Debug for ServerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerKey")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl ServerKey {
    /// A new random key (what `oxigram up` writes on first start).
    pub fn generate() -> Result<ServerKey, RsaError> {
        let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048)
            .map_err(|e| RsaError::Pem(e.to_string()))?;
        Ok(Self::from_private(private))
    }

    /// A key from a PKCS#1 (`BEGIN RSA PRIVATE KEY`) or PKCS#8 (`BEGIN PRIVATE KEY`) PEM.
    pub fn from_pem(pem: &str) -> Result<ServerKey, RsaError> {
        let private = RsaPrivateKey::from_pkcs1_pem(pem)
            .or_else(|_| RsaPrivateKey::from_pkcs8_pem(pem))
            .map_err(|e| RsaError::Pem(e.to_string()))?;
        let bits = private.n().bits();
        if bits != 2048 {
            return Err(RsaError::Size(bits));
        }
        Ok(Self::from_private(private))
    }

    fn from_private(private: RsaPrivateKey) -> ServerKey {
        let fingerprint = fingerprint(&private.to_public_key());
        ServerKey {
            private,
            fingerprint,
        }
    }

    /// The private key as a PKCS#1 PEM.
    pub fn private_pem(&self) -> Result<String, RsaError> {
        self.private
            .to_pkcs1_pem(LineEnding::LF)
            .map(|pem| pem.to_string())
            .map_err(|e| RsaError::Pem(e.to_string()))
    }

    /// The public key as a PKCS#1 PEM (`BEGIN RSA PUBLIC KEY`), the form clients are given.
    pub fn public_pem(&self) -> Result<String, RsaError> {
        self.private
            .to_public_key()
            .to_pkcs1_pem(LineEnding::LF)
            .map_err(|e| RsaError::Pem(e.to_string()))
    }

    pub fn public(&self) -> ClientKey {
        ClientKey {
            public: self.private.to_public_key(),
            fingerprint: self.fingerprint,
        }
    }

    /// Telegram's fingerprint: the low 64 bits of SHA-1 over the TL-serialised `n` and `e`.
    pub fn fingerprint(&self) -> i64 {
        self.fingerprint
    }

    /// Raw RSA decryption of a 256-byte `encrypted_data`, then whichever padding it carries.
    pub fn decrypt(&self, encrypted: &[u8]) -> Result<Plaintext, RsaError> {
        if encrypted.len() != 256 {
            return Err(RsaError::Ciphertext);
        }
        let c = BigUint::from_bytes_be(encrypted);
        let n = self.private.n();
        if &c >= n {
            return Err(RsaError::Ciphertext);
        }
        let m = c.modpow(self.private.d(), n);
        let block = left_pad_256(&m.to_bytes_be());
        if let Some(data) = unwrap_rsa_pad(&block) {
            return Ok(Plaintext::Padded(data));
        }
        if block[0] != 0 {
            return Err(RsaError::Ciphertext);
        }
        let mut hash = [0u8; 20];
        hash.copy_from_slice(&block[1..21]);
        Ok(Plaintext::Legacy {
            sha1: hash,
            data: block[21..].to_vec(),
        })
    }
}

/// A server's public key as a client holds it.
#[derive(Clone)]
pub struct ClientKey {
    public: RsaPublicKey,
    fingerprint: i64,
}

impl ClientKey {
    pub fn fingerprint(&self) -> i64 {
        self.fingerprint
    }

    /// The legacy encryption stock clients use: `SHA1(data) + data + random`, 255 bytes.
    pub fn encrypt_legacy(&self, data: &[u8]) -> Result<Vec<u8>, RsaError> {
        if data.len() > 235 {
            return Err(RsaError::TooLong);
        }
        let mut block = Vec::with_capacity(255);
        block.extend_from_slice(&sha1(&[data]));
        block.extend_from_slice(data);
        let mut padding = vec![0u8; 235 - data.len()];
        rand::rng().fill_bytes(&mut padding);
        block.extend_from_slice(&padding);
        Ok(self.raw(&block))
    }

    /// RSA_PAD: data padded to 192 bytes, reversed, hashed with a temporary key, AES-IGE
    /// under that key, the key masked by the ciphertext's hash, then raw RSA.
    pub fn encrypt_pad(&self, data: &[u8]) -> Result<Vec<u8>, RsaError> {
        if data.len() > 144 {
            return Err(RsaError::TooLong);
        }
        let mut rng = rand::rng();
        let mut with_padding = data.to_vec();
        with_padding.resize(192, 0);
        rng.fill_bytes(&mut with_padding[data.len()..]);
        let mut reversed = with_padding.clone();
        reversed.reverse();
        loop {
            let mut temp_key = [0u8; 32];
            rng.fill_bytes(&mut temp_key);
            let mut with_hash = reversed.clone();
            with_hash.extend_from_slice(&sha256(&[&temp_key, &with_padding]));
            ige_encrypt(&mut with_hash, &temp_key, &[0u8; 32]);
            let mask = sha256(&[&with_hash]);
            let mut block = Vec::with_capacity(256);
            block.extend(temp_key.iter().zip(mask).map(|(k, m)| k ^ m));
            block.extend_from_slice(&with_hash);
            if &BigUint::from_bytes_be(&block) < self.public.n() {
                return Ok(self.raw(&block));
            }
        }
    }

    fn raw(&self, block: &[u8]) -> Vec<u8> {
        let m = BigUint::from_bytes_be(block);
        left_pad_256(&m.modpow(self.public.e(), self.public.n()).to_bytes_be()).to_vec()
    }
}

/// RSA_PAD's inverse; `None` if the SHA-256 inside does not match (then it is legacy RSA).
fn unwrap_rsa_pad(block: &[u8; 256]) -> Option<Vec<u8>> {
    let mask = sha256(&[&block[32..]]);
    let temp_key: [u8; 32] = std::array::from_fn(|i| block[i] ^ mask[i]);
    let mut with_hash = block[32..].to_vec();
    ige_decrypt(&mut with_hash, &temp_key, &[0u8; 32]);
    let mut with_padding = with_hash[..192].to_vec();
    with_padding.reverse();
    (sha256(&[&temp_key, &with_padding])[..] == with_hash[192..]).then_some(with_padding)
}

fn left_pad_256(bytes: &[u8]) -> [u8; 256] {
    let mut block = [0u8; 256];
    let take = bytes.len().min(256);
    block[256 - take..].copy_from_slice(&bytes[bytes.len() - take..]);
    block
}

fn fingerprint(public: &RsaPublicKey) -> i64 {
    let mut tl = public.n().to_bytes_be().to_bytes();
    tl.extend(public.e().to_bytes_be().to_bytes());
    let digest = sha1(&[&tl]);
    let mut low = [0u8; 8];
    low.copy_from_slice(&digest[12..20]);
    i64::from_le_bytes(low)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_paddings_decrypt() -> Result<(), RsaError> {
        let server = ServerKey::generate()?;
        let again = ServerKey::from_pem(&server.private_pem()?)?;
        assert_eq!(again.fingerprint(), server.fingerprint());
        let client = server.public();
        let data: Vec<u8> = (0..100u8).collect();

        let padded = server.decrypt(&client.encrypt_pad(&data)?)?;
        assert!(matches!(padded, Plaintext::Padded(ref d) if d[..100] == data[..]));

        let Plaintext::Legacy {
            sha1: hash,
            data: got,
        } = server.decrypt(&client.encrypt_legacy(&data)?)?
        else {
            panic!("legacy RSA read as RSA_PAD");
        };
        assert_eq!(&got[..100], &data[..]);
        assert_eq!(hash, sha1(&[&data]));
        Ok(())
    }

    #[test]
    fn garbage_is_refused() -> Result<(), RsaError> {
        let server = ServerKey::generate()?;
        assert!(server.decrypt(&[0xff; 256]).is_err());
        assert!(server.decrypt(&[1; 10]).is_err());
        assert!(ServerKey::from_pem("not a pem").is_err());
        Ok(())
    }
}
