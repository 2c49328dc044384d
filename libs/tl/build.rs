//! Generates the TL types from `tl/api.tl` (the API layer) and `tl/mtproto.tl` (the MTProto
//! service schema) with grammers' generator, so the layer is the schema file in this crate and
//! not the one bundled with `grammers-tl-types`.

use std::env;
use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::path::PathBuf;

use grammers_tl_gen::{Config, Outputs, generate_rust_code};
use grammers_tl_parser::parse_tl_file;
use grammers_tl_parser::tl::Definition;

fn load(path: &str) -> io::Result<Vec<Definition>> {
    println!("cargo:rerun-if-changed={path}");
    let text = fs::read_to_string(path)?;
    let mut definitions = Vec::new();
    for parsed in parse_tl_file(&text) {
        match parsed {
            Ok(definition) => definitions.push(definition),
            // The parser reports the core types (`int ? = Int;` and the like) it does not
            // turn into definitions; anything else is a broken schema and must stop the build.
            Err(grammers_tl_parser::errors::ParseError::NotImplemented) => {}
            Err(error) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{path}: {error:?}"),
                ));
            }
        }
    }
    Ok(definitions)
}

/// The layer is the number in the schema's `// LAYER n` comment.
fn layer(path: &str) -> io::Result<i32> {
    let text = fs::read_to_string(path)?;
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("//"))
        .filter_map(|comment| comment.trim().strip_prefix("LAYER"))
        .find_map(|rest| {
            rest.trim_start()
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|digits| digits.parse().ok())
        })
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no // LAYER n in api.tl"))
}

fn main() -> io::Result<()> {
    let layer = layer("tl/api.tl")?;
    let mut definitions = load("tl/api.tl")?;
    definitions.extend(load("tl/mtproto.tl")?);

    let out = PathBuf::from(env::var("OUT_DIR").map_err(io::Error::other)?);
    let create = |name: &str| File::create(out.join(name)).map(BufWriter::new);
    let mut outputs = Outputs {
        common: create("generated_common.rs")?,
        types: create("generated_types.rs")?,
        functions: create("generated_functions.rs")?,
        enums: create("generated_enums.rs")?,
    };
    let config = Config {
        gen_name_for_id: true,
        // The server reads requests, so functions must deserialize too.
        deserializable_functions: true,
        impl_debug: true,
        impl_from_enum: true,
        impl_from_type: true,
        impl_serde: false,
    };
    generate_rust_code(&mut outputs, &definitions, layer, &config)?;
    outputs.flush()
}
