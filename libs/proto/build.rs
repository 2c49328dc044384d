//! Compiles every .proto under the repository's `proto/oxigram/` folder with a vendored protoc,
//! so a fresh machine needs no protobuf compiler installed. A file added there is compiled
//! without a change here; `tests/proto_lint.rs` checks its package and its field numbers.
use std::path::{Path, PathBuf};

use prost_build::{Service, ServiceGenerator};

/// The package of the client API, whose servers decode with [`CLIENT_API_SERVER_CODEC`].
const CLIENT_API_PACKAGE: &str = "oxigram.api.v1";
/// prost's codec answers a request body that does not decode with a bare `INTERNAL`; the
/// client API's servers answer it as the client's fault, with a stable code (see
/// `src/codec.rs`). Its clients and every internal service keep prost's codec: there a body
/// that does not decode is a fault of the server side, and `INTERNAL` says so.
const CLIENT_API_SERVER_CODEC: &str = "crate::codec::ClientApiCodec";

/// Generates each service with the codec its side calls for: tonic-prost-build takes one
/// codec for every service and both sides, so the client API's servers come from a
/// generator of their own.
struct CodecBySide {
    client_api_clients: Box<dyn ServiceGenerator>,
    client_api_servers: Box<dyn ServiceGenerator>,
    others: Box<dyn ServiceGenerator>,
}

impl ServiceGenerator for CodecBySide {
    fn generate(&mut self, service: Service, buf: &mut String) {
        if service.package == CLIENT_API_PACKAGE {
            self.client_api_clients.generate(service.clone(), buf);
            self.client_api_servers.generate(service, buf);
        } else {
            self.others.generate(service, buf);
        }
    }

    fn finalize(&mut self, buf: &mut String) {
        self.client_api_clients.finalize(buf);
        self.client_api_servers.finalize(buf);
        self.others.finalize(buf);
    }

    fn finalize_package(&mut self, package: &str, buf: &mut String) {
        self.client_api_clients.finalize_package(package, buf);
        self.client_api_servers.finalize_package(package, buf);
        self.others.finalize_package(package, buf);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not when it was compiled: a target folder shared by two
    // checkouts must compile each one's own protos.
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?)
        .join("../../proto")
        .canonicalize()?;
    // The packages' folder, not `proto/` itself: the field lock beside it is no input.
    let packages = root.join("oxigram");
    // Relative to this package, so a target folder shared by two checkouts watches the files
    // of the checkout being built, not those of the one built last.
    println!("cargo:rerun-if-changed=../../proto/oxigram");
    let mut protos = Vec::new();
    find_protos(&packages, &mut protos)?;
    protos.sort();
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    // What tonic-prost-build's own compile step sets, since the generator is set here.
    config.out_dir(&out);
    config.type_attribute(".", "#[allow(clippy::all)]");
    // A message's file is large beside the rest of a message and absent from most: boxed, a
    // plain message stays small (updates and events carry many).
    config.boxed(".oxigram.types.v1.Message.media");
    // A file's bytes pass through the gateway and svc-media as `Bytes`: decoded without a copy
    // (a slice of the received buffer) and handed on to the next hop or the blob store as is.
    config.bytes([
        ".oxigram.types.v1.SaveFilePartRequest.bytes",
        ".oxigram.types.v1.FileChunk.bytes",
    ]);
    config.file_descriptor_set_path(out.join("oxigram_descriptor.bin"));
    config.service_generator(Box::new(CodecBySide {
        client_api_clients: tonic_prost_build::configure()
            .build_server(false)
            .service_generator(),
        client_api_servers: tonic_prost_build::configure()
            .build_client(false)
            .codec_path(CLIENT_API_SERVER_CODEC)
            .service_generator(),
        others: tonic_prost_build::configure().service_generator(),
    }));
    config.compile_protos(&protos, &[root])?;
    Ok(())
}

/// Every `.proto` file under `dir`, at any depth.
fn find_protos(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            find_protos(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}
