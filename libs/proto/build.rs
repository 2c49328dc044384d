//! Compiles every .proto under the repository's `proto/` folder with a vendored protoc,
//! so a fresh machine needs no protobuf compiler installed.
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../proto")
        .canonicalize()?;
    println!("cargo:rerun-if-changed={}", root.display());
    let protos: Vec<PathBuf> = [
        "oxigram/types/v1/types.proto",
        "oxigram/api/v1/client.proto",
        "oxigram/internal/v1/messages.proto",
        "oxigram/internal/v1/updates.proto",
        "oxigram/internal/v1/dialogs.proto",
        "oxigram/internal/v1/dispatch.proto",
        "oxigram/internal/v1/gateway.proto",
        "oxigram/internal/v1/media.proto",
    ]
    .iter()
    .map(|p| root.join(p))
    .collect();
    for p in &protos {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("oxigram_descriptor.bin"))
        .compile_with_config(config, &protos, &[root])?;
    Ok(())
}
