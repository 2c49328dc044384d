//! MTProto's symmetric cryptography: AES-256-IGE, the MTProto 2.0 message key and the AES key
//! and IV derived from it, the temporary AES key of auth key creation, and MTProto 1.0's message
//! key and key derivation, which only `auth.bindTempAuthKey`'s binding message still uses.

use aes::Aes256;
use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit, block_padding::NoPadding};
use sha1::Sha1;
use sha2::{Digest, Sha256};

type IgeEncryptor = ige::Encryptor<Aes256>;
type IgeDecryptor = ige::Decryptor<Aes256>;

/// A 2048-bit auth key and the two values derived from it.
#[derive(Clone)]
pub struct AuthKey {
    key: [u8; 256],
    id: i64,
    aux_hash: [u8; 8],
}

impl std::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl AuthKey {
    pub fn from_bytes(key: [u8; 256]) -> AuthKey {
        let digest = Sha1::digest(key);
        let mut id = [0u8; 8];
        id.copy_from_slice(&digest[12..20]);
        let mut aux_hash = [0u8; 8];
        aux_hash.copy_from_slice(&digest[..8]);
        AuthKey {
            key,
            id: i64::from_le_bytes(id),
            aux_hash,
        }
    }

    /// The key's id: the low 64 bits of its SHA-1, as every message names it.
    pub fn id(&self) -> i64 {
        self.id
    }

    pub fn bytes(&self) -> &[u8; 256] {
        &self.key
    }

    /// `new_nonce_hash1..3` of `dh_gen_ok/retry/fail`.
    pub fn new_nonce_hash(&self, new_nonce: &[u8; 32], number: u8) -> [u8; 16] {
        let mut hasher = Sha1::new();
        hasher.update(new_nonce);
        hasher.update([number]);
        hasher.update(self.aux_hash);
        let digest = hasher.finalize();
        let mut hash = [0u8; 16];
        hash.copy_from_slice(&digest[4..20]);
        hash
    }
}

/// Which way a message travels: the key derivation differs (`x` = 0 or 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    ClientToServer,
    ServerToClient,
}

impl Direction {
    fn x(self) -> usize {
        match self {
            Direction::ClientToServer => 0,
            Direction::ServerToClient => 8,
        }
    }
}

/// MTProto 2.0 `msg_key`: the middle 128 bits of SHA-256 over part of the key and the
/// padded plaintext.
pub fn msg_key(key: &AuthKey, direction: Direction, plaintext: &[u8]) -> [u8; 16] {
    let x = direction.x();
    let mut hasher = Sha256::new();
    hasher.update(&key.key[88 + x..120 + x]);
    hasher.update(plaintext);
    let large = hasher.finalize();
    let mut msg_key = [0u8; 16];
    msg_key.copy_from_slice(&large[8..24]);
    msg_key
}

/// The AES key and IV a `msg_key` selects.
pub fn message_aes(
    key: &AuthKey,
    direction: Direction,
    msg_key: &[u8; 16],
) -> ([u8; 32], [u8; 32]) {
    let x = direction.x();
    let a = Sha256::new()
        .chain_update(msg_key)
        .chain_update(&key.key[x..x + 36])
        .finalize();
    let b = Sha256::new()
        .chain_update(&key.key[40 + x..76 + x])
        .chain_update(msg_key)
        .finalize();
    let mut aes_key = [0u8; 32];
    aes_key[..8].copy_from_slice(&a[..8]);
    aes_key[8..24].copy_from_slice(&b[8..24]);
    aes_key[24..].copy_from_slice(&a[24..32]);
    let mut aes_iv = [0u8; 32];
    aes_iv[..8].copy_from_slice(&b[..8]);
    aes_iv[8..24].copy_from_slice(&a[8..24]);
    aes_iv[24..].copy_from_slice(&b[24..32]);
    (aes_key, aes_iv)
}

/// MTProto 1.0 `msg_key`: bits 32..160 of SHA-1 over the plaintext *without* its padding.
pub fn msg_key_v1(unpadded: &[u8]) -> [u8; 16] {
    let digest = Sha1::digest(unpadded);
    let mut msg_key = [0u8; 16];
    msg_key.copy_from_slice(&digest[4..20]);
    msg_key
}

/// MTProto 1.0's AES key and IV for a `msg_key`: four SHA-1s over the message key and slices of
/// the auth key (offset by `x` as in 2.0).
pub fn message_aes_v1(
    key: &AuthKey,
    direction: Direction,
    msg_key: &[u8; 16],
) -> ([u8; 32], [u8; 32]) {
    let x = direction.x();
    let k = &key.key;
    let a = sha1(&[msg_key, &k[x..x + 32]]);
    let b = sha1(&[&k[32 + x..48 + x], msg_key, &k[48 + x..64 + x]]);
    let c = sha1(&[&k[64 + x..96 + x], msg_key]);
    let d = sha1(&[msg_key, &k[96 + x..128 + x]]);
    let mut aes_key = [0u8; 32];
    aes_key[..8].copy_from_slice(&a[..8]);
    aes_key[8..20].copy_from_slice(&b[8..20]);
    aes_key[20..].copy_from_slice(&c[4..16]);
    let mut aes_iv = [0u8; 32];
    aes_iv[..12].copy_from_slice(&a[8..20]);
    aes_iv[12..20].copy_from_slice(&b[..8]);
    aes_iv[20..24].copy_from_slice(&c[16..20]);
    aes_iv[24..].copy_from_slice(&d[..8]);
    (aes_key, aes_iv)
}

/// Encrypts `data` (a multiple of 16 bytes) in place with AES-256-IGE.
pub fn ige_encrypt(data: &mut [u8], key: &[u8; 32], iv: &[u8; 32]) {
    let length = data.len() - data.len() % 16;
    let _ = IgeEncryptor::new(key.into(), iv.into())
        .encrypt_padded_mut::<NoPadding>(&mut data[..length], length);
}

/// Decrypts `data` (a multiple of 16 bytes) in place with AES-256-IGE.
pub fn ige_decrypt(data: &mut [u8], key: &[u8; 32], iv: &[u8; 32]) {
    let length = data.len() - data.len() % 16;
    let _ = IgeDecryptor::new(key.into(), iv.into())
        .decrypt_padded_mut::<NoPadding>(&mut data[..length]);
}

/// The temporary AES key and IV that protect `server_DH_inner_data` and
/// `client_DH_inner_data` during auth key creation.
pub fn handshake_aes(server_nonce: &[u8; 16], new_nonce: &[u8; 32]) -> ([u8; 32], [u8; 32]) {
    let new_server = Sha1::new()
        .chain_update(new_nonce)
        .chain_update(server_nonce)
        .finalize();
    let server_new = Sha1::new()
        .chain_update(server_nonce)
        .chain_update(new_nonce)
        .finalize();
    let new_new = Sha1::new()
        .chain_update(new_nonce)
        .chain_update(new_nonce)
        .finalize();
    let mut key = [0u8; 32];
    key[..20].copy_from_slice(&new_server);
    key[20..].copy_from_slice(&server_new[..12]);
    let mut iv = [0u8; 32];
    iv[..8].copy_from_slice(&server_new[12..20]);
    iv[8..28].copy_from_slice(&new_new);
    iv[28..].copy_from_slice(&new_nonce[..4]);
    (key, iv)
}

pub fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut hasher = Sha1::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

pub fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ige_round_trips() {
        let key = [7u8; 32];
        let iv = [9u8; 32];
        let plain: Vec<u8> = (0..64u8).collect();
        let mut data = plain.clone();
        ige_encrypt(&mut data, &key, &iv);
        assert_ne!(data, plain);
        ige_decrypt(&mut data, &key, &iv);
        assert_eq!(data, plain);
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Vectors computed with Telethon 1.45's own implementation (the client the tests use).
    #[test]
    fn matches_a_stock_client() {
        let key: [u8; 32] = std::array::from_fn(|i| i as u8);
        let iv: [u8; 32] = std::array::from_fn(|i| 32 + i as u8);
        let mut data: Vec<u8> = (0..64u8).collect();
        ige_encrypt(&mut data, &key, &iv);
        assert_eq!(
            hex(&data),
            "42e66e1a756cccf5b27acc47523ad074ee39bf54e3db37bbdf415df6b400fca9\
             77f708327c9e9341cc3dc8efd31e76463daa65b1f0d0252f790d77f1824a662c"
        );

        let server_nonce: [u8; 16] = std::array::from_fn(|i| i as u8);
        let new_nonce: [u8; 32] = std::array::from_fn(|i| 100 + i as u8);
        let (k, i) = handshake_aes(&server_nonce, &new_nonce);
        assert_eq!(
            hex(&k),
            "e95c7c3ec6aeeae100f21acfd4a819230989731d44b134a83a2e9ca0ce56c585"
        );
        assert_eq!(
            hex(&i),
            "da23077ca3f27dec3969124214fdeeacbd8c9de3143ab8ba9423116e64656667"
        );

        let auth_key = AuthKey::from_bytes(std::array::from_fn(|j| ((j * 13 + 5) % 256) as u8));
        assert_eq!(auth_key.id(), 4601064698885918460);
        assert_eq!(
            i128::from_le_bytes(auth_key.new_nonce_hash(&new_nonce, 1)),
            77415969000008835833940455408169482485
        );
        let msg_key: [u8; 16] = std::array::from_fn(|i| 200 + i as u8);
        let (k, i) = message_aes(&auth_key, Direction::ClientToServer, &msg_key);
        assert_eq!(
            hex(&k),
            "ae2bfbb4d75e5a73b362b8f721e03cc86f303259297a31ae2ddd2483aed4079e"
        );
        assert_eq!(
            hex(&i),
            "a306c43843f344bfa01250a75d68d3b31b53df6bcaba29260f868dbb5d60bdcd"
        );
        let (k, i) = message_aes(&auth_key, Direction::ServerToClient, &msg_key);
        assert_eq!(
            hex(&k),
            "41a2179575fa4756fd83e29165d499399367d8c2d9e97077a0b5cb1438529fa2"
        );
        assert_eq!(
            hex(&i),
            "9c8504da016210530988fc34d7a2cfb7d8f93ac8ecd5421b04a76faf0e1ec1e0"
        );
    }

    /// MTProto 1.0's key derivation against an independent implementation of it (hashlib's
    /// SHA-1, computed outside this crate), for the same key and message key as above.
    #[test]
    fn v1_key_derivation_matches_an_independent_implementation() {
        let auth_key = AuthKey::from_bytes(std::array::from_fn(|j| ((j * 13 + 5) % 256) as u8));
        let msg_key: [u8; 16] = std::array::from_fn(|i| 200 + i as u8);
        let (k, i) = message_aes_v1(&auth_key, Direction::ClientToServer, &msg_key);
        assert_eq!(
            hex(&k),
            "6a1dabe15e68e2fc9caa08414777e2bc758b9dd4065416d13e7c83bd988fe091"
        );
        assert_eq!(
            hex(&i),
            "a2bdfac81a79ee088abef3621ff3606c0b070df8f39feb291e5b69b0e0927b21"
        );
        // 1.0's message key hashes the unpadded plaintext with SHA-1, unlike 2.0's.
        assert_eq!(msg_key_v1(b"abc")[..4], [0x47, 0x06, 0x81, 0x6a]);
    }
}
