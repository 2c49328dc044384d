//! `sqlx::migrate!` embeds the migrations folder at compile time, but stable Rust cannot tell
//! Cargo that it read it: without this, a new migration leaves an old build in place.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
