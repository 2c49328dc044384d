//! Generated gRPC code: the client API (`api::v1`), the internal service APIs
//! (`internal::v1`) and the domain types they share (`types::v1`), and the codec of the
//! client API's servers (`codec`).

pub mod codec;

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod types {
    pub mod v1 {
        tonic::include_proto!("oxigram.types.v1");
    }
}

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod api {
    pub mod v1 {
        tonic::include_proto!("oxigram.api.v1");
    }
}

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod internal {
    pub mod v1 {
        tonic::include_proto!("oxigram.internal.v1");
    }
}

/// Encoded file descriptors of every package, for the gRPC reflection service.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("oxigram_descriptor");
